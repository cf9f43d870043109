//! The `homeassistant` tools over the running Home Assistant adapter's connection. The adapter
//! itself, and its `[platforms.homeassistant]` table, live in `platforms/homeassistant` (crate
//! `hermesd-homeassistant`); the daemon registers the tools only when that adapter runs.
//!
//! Watched changes arrive on the `homeassistant_watch` pseudo-platform (`Origin::HASS_WATCH`) and
//! deliver to `watch_target`. A build without the adapter has neither.

#[cfg(feature = "homeassistant")]
pub use with_adapter::{tools, watch_target};
#[cfg(not(feature = "homeassistant"))]
pub use without_adapter::{tools, watch_target};

#[cfg(feature = "homeassistant")]
mod with_adapter {
    use std::sync::Arc;
    use std::time::Duration;

    use hermesd_homeassistant::{HassClient, HassPlatform, NAME};

    use crate::agent::tools::homeassistant::resolve::Sensitivity;
    use crate::agent::tools::homeassistant::{HassLink, HassTools};
    use crate::config::PlatformsConfig;
    use crate::outbox::PlatformRegistry;

    /// Where prompts about watched changes deliver (`watch_target` of the adapter's table).
    pub fn watch_target(config: &PlatformsConfig) -> Option<String> {
        config.homeassistant.watch_target.clone()
    }

    /// The tools over the Home Assistant adapter in `platforms`, with the sensitive entities of
    /// its table; `None` when that adapter does not run.
    pub fn tools(platforms: &PlatformRegistry, config: &PlatformsConfig, approval: Duration) -> Option<HassTools> {
        let config = &config.homeassistant;
        let platform: &dyn std::any::Any = platforms.get(NAME)?.as_ref();
        let hass = platform.downcast_ref::<HassPlatform>()?;
        let sensitivity = Sensitivity {
            domains: config.sensitive_domains.clone(),
            entities: config.sensitive_entities.clone(),
            harmless_domains: config.harmless_domains.clone(),
        };
        Some(HassTools::new(Arc::new(Link(hass.client())), sensitivity, approval))
    }

    struct Link(HassClient);

    #[async_trait::async_trait]
    impl HassLink for Link {
        async fn command(&self, command: serde_json::Value) -> Result<serde_json::Value, String> {
            self.0.command(command).await.map_err(|e| e.to_string())
        }
    }
}

/// A build without the adapter: nothing watched, no tools.
#[cfg(not(feature = "homeassistant"))]
mod without_adapter {
    use std::time::Duration;

    use crate::agent::tools::homeassistant::HassTools;
    use crate::config::PlatformsConfig;
    use crate::outbox::PlatformRegistry;

    /// Nothing is watched.
    pub fn watch_target(_: &PlatformsConfig) -> Option<String> {
        None
    }

    /// No adapter, no tools.
    pub fn tools(_: &PlatformRegistry, _: &PlatformsConfig, _: Duration) -> Option<HassTools> {
        None
    }
}

#[cfg(all(test, feature = "homeassistant"))]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use hermesd_homeassistant::{HassPlatform, HassSettings};

    use super::*;
    use crate::config::PlatformsConfig;
    use crate::outbox::PlatformRegistry;

    #[test]
    fn the_watch_pseudo_platform_is_the_adapters() {
        assert_eq!(crate::vocab::origin::Origin::HASS_WATCH, hermesd_homeassistant::WATCH_PLATFORM);
    }

    #[test]
    fn tools_come_only_with_a_running_adapter() {
        let config = PlatformsConfig::default();
        let mut platforms = PlatformRegistry::default();
        assert!(tools(&platforms, &config, Duration::from_secs(1)).is_none());
        platforms.insert(Arc::new(HassPlatform::new(HassSettings::default())));
        assert!(tools(&platforms, &config, Duration::from_secs(1)).is_some());
    }
}
