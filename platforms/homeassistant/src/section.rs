//! `[platforms.homeassistant]`: where Home Assistant is, which state changes become prompts and
//! where they go, and which entities count as sensitive for the host's `homeassistant` tools:
//! the table's keys and defaults, its checks for `hermesd check`, and the adapter built from it.
//! The token comes only from `HASS_TOKEN`; `HASS_URL` may replace `url`.

use std::sync::Arc;
use std::time::Duration;

use hermesd_platform::duration::HumanDuration;
use hermesd_platform::section::{BuildContext, Checks, Section};
use hermesd_platform::{AccessRules, Environment, Platform};
use serde::{Deserialize, Serialize};

use crate::config::DEFAULT_WATCH_PROMPT;
use crate::{ACCESS_RULES, HassPlatform, HassSettings, NAME, WatchRules};

/// Domains whose entities need a person's approval before a service call touches them.
pub const DEFAULT_SENSITIVE_DOMAINS: [&str; 4] = ["lock", "alarm_control_panel", "cover", "climate"];
/// Domains whose services may run with no entity target without asking: lights, switches, fans,
/// media players, helpers, timers and notifications. A call of any other domain that resolves to
/// no entity asks first (it may act on everything).
const DEFAULT_HARMLESS_DOMAINS: [&str; 16] = [
    "light",
    "switch",
    "fan",
    "media_player",
    "input_boolean",
    "input_button",
    "input_datetime",
    "input_number",
    "input_select",
    "input_text",
    "counter",
    "timer",
    "notify",
    "persistent_notification",
    "tts",
    "todo",
];

/// `[platforms.homeassistant]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HomeAssistantConfig {
    /// Run the adapter; the token comes from `HASS_TOKEN`, requests are allowed by HA user id
    /// (`HASS_ALLOWED_USERS`).
    pub enabled: bool,
    /// HA's base URL (`http://homeassistant.local:8123`) or its websocket URL; `HASS_URL` wins.
    pub url: String,
    /// Every entity of these domains is watched.
    pub watch_domains: Vec<String>,
    /// These entities are watched.
    pub watch_entities: Vec<String>,
    /// These entities are never watched.
    pub ignore_entities: Vec<String>,
    /// Watch every entity (minus `ignore_entities`).
    pub watch_all: bool,
    /// After a prompt for an entity, its changes within this many seconds are dropped.
    pub cooldown_seconds: u64,
    /// Where prompts about watched changes deliver (a delivery target, e.g.
    /// `homeassistant:notify.mobile_app_phone` or `telegram:123`); required when watching.
    pub watch_target: Option<String>,
    /// The prompt of a watched change; `{entity_id}`, `{domain}`, `{friendly_name}`,
    /// `{old_state}` and `{new_state}` are filled in.
    pub watch_prompt: String,
    /// `title` of notify service calls.
    pub notify_title: String,
    /// Domains whose entities need approval before a service call touches them (`script`,
    /// `scene`, `automation`, `shell_command` and `rest_command` always do).
    pub sensitive_domains: Vec<String>,
    /// Entities that need approval before a service call touches them.
    pub sensitive_entities: Vec<String>,
    /// Domains whose services may run without an entity target and without approval; a call of
    /// another domain whose target resolves to no entity asks first.
    pub harmless_domains: Vec<String>,
    /// How often a heartbeat `ping` goes out; no `pong` by the next one reconnects.
    pub ping_interval: HumanDuration,
    /// How long one HA command (a send, a tool's query or service call) may wait for its result.
    pub request_timeout: HumanDuration,
}

impl Default for HomeAssistantConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            url: "http://homeassistant.local:8123".into(),
            watch_domains: Vec::new(),
            watch_entities: Vec::new(),
            ignore_entities: Vec::new(),
            watch_all: false,
            cooldown_seconds: 30,
            watch_target: None,
            watch_prompt: DEFAULT_WATCH_PROMPT.into(),
            notify_title: "Hermes".into(),
            sensitive_domains: DEFAULT_SENSITIVE_DOMAINS.iter().map(|d| (*d).to_owned()).collect(),
            sensitive_entities: Vec::new(),
            harmless_domains: DEFAULT_HARMLESS_DOMAINS.iter().map(|d| (*d).to_owned()).collect(),
            ping_interval: HumanDuration::secs(30),
            request_timeout: HumanDuration::secs(15),
        }
    }
}

impl HomeAssistantConfig {
    /// Whether any state change can become a prompt.
    pub fn watching(&self) -> bool {
        self.watch_all || !self.watch_domains.is_empty() || !self.watch_entities.is_empty()
    }

    /// The URL in force: `HASS_URL`, else `url`.
    pub fn url_in(&self, env: &dyn Environment) -> String {
        env.var("HASS_URL").map(|u| u.trim().to_owned()).filter(|u| !u.is_empty()).unwrap_or_else(|| self.url.clone())
    }
}

impl Section for HomeAssistantConfig {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn check(&self, checks: &mut Checks<'_>) {
        checks.secret("HASS_TOKEN");
        let url = self.url_in(checks.env());
        let scheme = url.split_once("://").map(|(s, _)| s);
        if !matches!(scheme, Some("http" | "https" | "ws" | "wss")) {
            checks.key("url", format_args!("{url:?} is not an http(s) or ws(s) URL"));
        }
        let is_entity = |e: &str| {
            e.split_once('.').is_some_and(|(d, o)| {
                !d.is_empty()
                    && !o.is_empty()
                    && e.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._".contains(c))
            })
        };
        let is_domain =
            |d: &str| !d.is_empty() && d.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        for (key, list) in [
            ("watch_entities", &self.watch_entities),
            ("ignore_entities", &self.ignore_entities),
            ("sensitive_entities", &self.sensitive_entities),
        ] {
            for bad in list.iter().filter(|e| !is_entity(e)) {
                checks.key(key, format_args!("{bad:?} is not an entity id such as \"lock.front_door\""));
            }
        }
        for (key, list) in [
            ("watch_domains", &self.watch_domains),
            ("sensitive_domains", &self.sensitive_domains),
            ("harmless_domains", &self.harmless_domains),
        ] {
            for bad in list.iter().filter(|d| !is_domain(d)) {
                checks.key(key, format_args!("{bad:?} is not a domain such as \"binary_sensor\""));
            }
        }
        match &self.watch_target {
            None if self.watching() => checks.key(
                "watch_target",
                "watching state changes needs a delivery target for their prompts \
                 (e.g. \"homeassistant:notify.mobile_app_phone\" or \"local\")",
            ),
            Some(target) => checks.target("watch_target", target),
            None => {}
        }
        if self.watch_prompt.trim().is_empty() {
            checks.key("watch_prompt", "must not be empty");
        }
        if self.ping_interval.get().as_secs() < 1 {
            checks.key("ping_interval", "must be at least 1s");
        }
        if self.request_timeout.get().as_secs() < 1 {
            checks.key("request_timeout", "must be at least 1s");
        }
    }

    fn build(&self, cx: &BuildContext<'_>) -> Result<Arc<dyn Platform>, String> {
        let settings = HassSettings {
            url: self.url_in(cx.env),
            token: cx.env.required_secret("HASS_TOKEN")?,
            watch: WatchRules {
                domains: self.watch_domains.clone(),
                entities: self.watch_entities.clone(),
                ignore: self.ignore_entities.clone(),
                all: self.watch_all,
                cooldown: Duration::from_secs(self.cooldown_seconds),
            },
            watch_prompt: self.watch_prompt.clone(),
            notify_title: self.notify_title.clone(),
            ping_interval: self.ping_interval.get(),
            request_timeout: self.request_timeout.get(),
            ..HassSettings::default()
        };
        Ok(Arc::new(HassPlatform::new(settings)))
    }

    fn access_rules(&self) -> AccessRules {
        ACCESS_RULES
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use hermesd_platform::section::Registered;

    use super::*;

    fn problems(config: &HomeAssistantConfig, env: &HashMap<String, String>) -> Vec<String> {
        let registered: &dyn Registered = config;
        registered
            .problems("platforms.homeassistant", env, &|t| if t == "local" { Ok(()) } else { Err(format!("{t}: no")) })
    }

    #[test]
    fn every_problem_is_listed_at_once() {
        let config = HomeAssistantConfig {
            enabled: true,
            url: "homeassistant.local".into(),
            watch_domains: vec!["Binary Sensor".into()],
            watch_entities: vec!["front_door".into()],
            sensitive_entities: vec!["lock.ok".into()],
            watch_prompt: " ".into(),
            ping_interval: HumanDuration::secs(0),
            ..HomeAssistantConfig::default()
        };
        let problems = problems(&config, &HashMap::new());
        let joined = problems.join("\n");
        for needle in [
            "platforms.homeassistant: HASS_TOKEN is not set",
            "platforms.homeassistant.url:",
            "watch_domains",
            "watch_entities",
            "watch_target",
            "watch_prompt",
            "ping_interval",
        ] {
            assert!(joined.contains(needle), "{needle} missing in:\n{joined}");
        }
        assert_eq!(problems.len(), 7, "{joined}");
    }

    #[test]
    fn hass_url_and_token_from_the_environment_pass_and_the_target_is_checked() {
        let env = HashMap::from([
            ("HASS_TOKEN".to_owned(), "token-value-123".to_owned()),
            ("HASS_URL".to_owned(), "ws://127.0.0.1:8123/api/websocket".to_owned()),
        ]);
        let config = HomeAssistantConfig { enabled: true, url: "bad".into(), ..HomeAssistantConfig::default() };
        assert_eq!(problems(&config, &env), Vec::<String>::new());
        assert_eq!(config.url_in(&env), "ws://127.0.0.1:8123/api/websocket");
        assert!(!config.watching());
        let watching = HomeAssistantConfig { watch_all: true, watch_target: Some("telegram:1".into()), ..config };
        assert_eq!(problems(&watching, &env), ["platforms.homeassistant.watch_target: telegram:1: no"]);
    }
}
