//! Builds the Home Assistant adapter from `[platforms.homeassistant]` and the environment, and
//! the `homeassistant` tools over its connection. The adapter itself lives in
//! `platforms/homeassistant` (crate `hermesd-homeassistant`).
//!
//! The token comes from `HASS_TOKEN`, and `HASS_URL` may replace `url`. `daemon::build_all`
//! registers the tools only when the platform is enabled. Watched changes arrive on the
//! `homeassistant_watch` pseudo-platform (`Origin::HASS_WATCH`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hermesd_homeassistant::{HassClient, HassPlatform, HassSettings, WatchRules};
use serde_json::Value;

use crate::agent::tools::homeassistant::{HassLink, HassTools, resolve::Sensitivity};
use crate::config::{Env, HomeAssistantConfig};

/// The adapter for `config`, with its token from `HASS_TOKEN` (and `HASS_URL` over `url`), and
/// the tools that use its connection.
pub fn build(
    config: &HomeAssistantConfig,
    env: &Env,
    approval_timeout: Duration,
) -> Result<(Arc<HassPlatform>, HassTools), String> {
    let settings = HassSettings {
        url: config.url_in(env),
        token: env.required_secret("HASS_TOKEN")?,
        watch: WatchRules {
            domains: config.watch_domains.clone(),
            entities: config.watch_entities.clone(),
            ignore: config.ignore_entities.clone(),
            all: config.watch_all,
            cooldown: Duration::from_secs(config.cooldown_seconds),
        },
        watch_prompt: config.watch_prompt.clone(),
        notify_title: config.notify_title.clone(),
        ping_interval: config.ping_interval.get(),
        request_timeout: config.request_timeout.get(),
        ..HassSettings::default()
    };
    let platform = Arc::new(HassPlatform::new(settings));
    let sensitivity = Sensitivity {
        domains: config.sensitive_domains.clone(),
        entities: config.sensitive_entities.clone(),
        harmless_domains: config.harmless_domains.clone(),
    };
    let tools = HassTools::new(Arc::new(Link(platform.client())), sensitivity, approval_timeout);
    Ok((platform, tools))
}

struct Link(HassClient);

#[async_trait]
impl HassLink for Link {
    async fn command(&self, command: Value) -> Result<Value, String> {
        self.0.command(command).await.map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_watch_pseudo_platform_and_default_prompt_are_the_adapters() {
        assert_eq!(crate::vocab::origin::Origin::HASS_WATCH, hermesd_homeassistant::WATCH_PLATFORM);
        let config = crate::config::HomeAssistantConfig::default();
        assert_eq!(config.watch_prompt, hermesd_homeassistant::config::DEFAULT_WATCH_PROMPT);
    }
}
