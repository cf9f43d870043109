//! The Home Assistant adapter's settings: where HA is, the token, the watch rules and timings.
//!
//! The host reads the environment; nothing here does IO, and `Debug` never shows the token.

use std::fmt;
use std::time::Duration;

/// The platform name requests and replies carry.
pub const NAME: &str = "homeassistant";
/// The pseudo-platform watched state changes arrive on: one session per change, answered to the
/// `watch_target` like a cron run, never to Home Assistant's event bus.
pub const WATCH_PLATFORM: &str = "homeassistant_watch";
/// The custom event an HA automation or script fires to ask the agent something.
pub const REQUEST_EVENT: &str = "hermesd_request";
/// The event hermesd fires with the answer.
pub const RESPONSE_EVENT: &str = "hermesd_response";
/// The sender id of a request whose context names no HA user (fired by an automation itself).
pub const NO_USER: &str = "automation";

/// Which state changes become prompts (Hermes' key names).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WatchRules {
    /// Every entity of these domains (`binary_sensor`, `lock`).
    pub domains: Vec<String>,
    /// These entities.
    pub entities: Vec<String>,
    /// Never these entities, whatever else matches.
    pub ignore: Vec<String>,
    /// Every entity (still minus `ignore`).
    pub all: bool,
    /// After a prompt for an entity, its changes within this time are dropped.
    pub cooldown: Duration,
}

impl WatchRules {
    /// Whether any state change can match, so `state_changed` is worth subscribing to.
    pub fn active(&self) -> bool {
        self.all || !self.domains.is_empty() || !self.entities.is_empty()
    }

    /// Whether a change of `entity_id` matches the rules (cooldown aside).
    pub fn matches(&self, entity_id: &str) -> bool {
        if self.ignore.iter().any(|e| e == entity_id) {
            return false;
        }
        let domain = entity_id.split_once('.').map_or("", |(d, _)| d);
        self.all || self.entities.iter().any(|e| e == entity_id) || self.domains.iter().any(|d| d == domain)
    }
}

/// Everything the adapter needs; the host fills it from config and the environment.
#[derive(Clone)]
pub struct HassSettings {
    /// HA's base URL (`http://homeassistant.local:8123`) or its websocket URL (`ws://…/api/websocket`).
    pub url: String,
    /// A long-lived access token (from `HASS_TOKEN`); never logged.
    pub token: String,
    /// Which state changes become prompts.
    pub watch: WatchRules,
    /// The prompt of a watched change; `{entity_id}`, `{domain}`, `{friendly_name}`,
    /// `{old_state}`, `{new_state}` are filled in.
    pub watch_prompt: String,
    /// `title` of notify service calls.
    pub notify_title: String,
    /// How often a `ping` goes out; a missing `pong` within this time drops the connection.
    pub ping_interval: Duration,
    /// How long a command waits for its `result`.
    pub request_timeout: Duration,
    /// Most commands waiting for a result at once (tools, sends); more are refused as busy.
    pub max_pending: usize,
}

impl fmt::Debug for HassSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HassSettings")
            .field("url", &self.url)
            .field("token", &"[redacted]")
            .field("watch", &self.watch)
            .field("ping_interval", &self.ping_interval)
            .finish_non_exhaustive()
    }
}

/// The default prompt of a watched change.
pub const DEFAULT_WATCH_PROMPT: &str = "[Home Assistant] {friendly_name} ({entity_id}) changed from \
     \"{old_state}\" to \"{new_state}\". Tell me if this needs attention.";

impl Default for HassSettings {
    fn default() -> Self {
        Self {
            url: "http://homeassistant.local:8123".into(),
            token: String::new(),
            watch: WatchRules { cooldown: Duration::from_secs(30), ..WatchRules::default() },
            watch_prompt: DEFAULT_WATCH_PROMPT.into(),
            notify_title: "Hermes".into(),
            ping_interval: Duration::from_secs(30),
            request_timeout: Duration::from_secs(15),
            max_pending: 256,
        }
    }
}

/// The websocket URL for `url`: `http(s)://host[:port][/]` becomes `ws(s)://host[:port]/api/websocket`;
/// a `ws(s)://` URL is taken as it is (with `/api/websocket` added when it has no path).
pub fn websocket_url(url: &str) -> Result<String, String> {
    let url = url.trim().trim_end_matches('/');
    let (scheme, rest) = url.split_once("://").ok_or_else(|| format!("{url:?} is not an http(s) or ws(s) URL"))?;
    let explicit_ws = matches!(scheme, "ws" | "wss");
    let scheme = match scheme {
        "http" | "ws" => "ws",
        "https" | "wss" => "wss",
        _ => return Err(format!("{url:?} is not an http(s) or ws(s) URL")),
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("{url:?} has no host"));
    }
    if rest.ends_with("/api/websocket") || (explicit_ws && rest.contains('/')) {
        return Ok(format!("{scheme}://{rest}"));
    }
    Ok(format!("{scheme}://{rest}/api/websocket"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn websocket_urls_from_every_form() {
        let table = [
            ("http://homeassistant.local:8123", "ws://homeassistant.local:8123/api/websocket"),
            ("https://ha.example.com/", "wss://ha.example.com/api/websocket"),
            ("ws://127.0.0.1:9/api/websocket", "ws://127.0.0.1:9/api/websocket"),
            ("wss://ha.example.com", "wss://ha.example.com/api/websocket"),
        ];
        for (input, want) in table {
            assert_eq!(websocket_url(input).as_deref(), Ok(want), "{input}");
        }
        for bad in ["homeassistant.local", "ftp://x", "http://", "http:///x"] {
            assert!(websocket_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn watch_rules_ignore_wins_and_domains_match_by_prefix() {
        let rules = WatchRules {
            domains: vec!["binary_sensor".into()],
            entities: vec!["lock.front_door".into()],
            ignore: vec!["binary_sensor.noisy".into()],
            all: false,
            cooldown: Duration::from_secs(30),
        };
        assert!(rules.active());
        assert!(rules.matches("binary_sensor.door"));
        assert!(rules.matches("lock.front_door"));
        assert!(!rules.matches("lock.back_door"));
        assert!(!rules.matches("binary_sensor.noisy"));
        assert!(!rules.matches("binary_sensorx.door"));
        let all = WatchRules { all: true, ignore: vec!["sun.sun".into()], ..WatchRules::default() };
        assert!(all.matches("light.kitchen") && !all.matches("sun.sun"));
        assert!(!WatchRules::default().active());
    }
}
