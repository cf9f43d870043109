//! `[platforms.*]`: which platforms run and how, and the host's one registration table of
//! platform crates.
//!
//! Each chat platform's table is its crate's own type (keys, defaults, checks and the adapter
//! built from it, behind `hermesd_platform::section::Section`); the host asks every registered
//! table the same questions through `PlatformsConfig::sections`. Adding a platform is its crate,
//! its Cargo feature, and one line of `platforms!` below. Tokens never live in the file, only in
//! the environment (see `secrets.rs`).

use hermesd_platform::section::Registered;
use serde::{Deserialize, Serialize};

/// The host's table of platform crates: each line is the `[platforms.<field>]` key, the Cargo
/// feature that builds the crate, and the crate's table type. A platform whose feature is off
/// still parses (`NotBuilt`), so a config naming it gets a clear problem, not a syntax error.
macro_rules! platforms {
    ($($field:ident: $feature:literal => $section:ty,)+) => {
        /// `[platforms]`.
        #[derive(Debug, Clone, Default, Serialize, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct PlatformsConfig {
            /// The OpenAI-compatible API.
            pub api: ApiPlatformConfig,
            $(
                #[cfg(feature = $feature)]
                #[doc = concat!("`[platforms.", stringify!($field), "]`.")]
                pub $field: $section,
                #[cfg(not(feature = $feature))]
                #[doc = concat!("`[platforms.", stringify!($field), "]`, whose adapter this build has not.")]
                pub $field: NotBuilt,
            )+
        }

        impl PlatformsConfig {
            /// Every registered platform's table whose adapter this build has, in table order.
            #[allow(clippy::vec_init_then_push)] // one push per registered crate, each behind its feature
            pub fn sections(&self) -> Vec<&dyn Registered> {
                #[allow(unused_mut)]
                let mut sections: Vec<&dyn Registered> = Vec::new();
                $(
                    #[cfg(feature = $feature)]
                    sections.push(&self.$field);
                )+
                sections
            }

            /// The registered platforms this build has no adapter for, each with whether the
            /// config enables it anyway.
            pub fn not_built(&self) -> Vec<(&'static str, bool)> {
                #[allow(unused_mut)]
                let mut missing = Vec::new();
                $(
                    #[cfg(not(feature = $feature))]
                    missing.push((stringify!($field), self.$field.enabled));
                )+
                missing
            }
        }

        #[cfg(test)]
        mod registration {
            /// Each line's key is the crate's own name for its platform.
            #[test]
            fn each_key_is_its_platforms_name() {
                let config = super::PlatformsConfig::default();
                let names: Vec<&str> = config.sections().iter().map(|s| s.name()).collect();
                let mut keys = vec![$(stringify!($field)),+];
                keys.retain(|key| !config.not_built().iter().any(|(missing, _)| missing == key));
                assert_eq!(names, keys);
            }
        }
    };
}

platforms! {
    telegram: "telegram" => hermesd_telegram::TelegramConfig,
    discord: "discord" => hermesd_discord::DiscordConfig,
    slack: "slack" => hermesd_slack::SlackConfig,
    homeassistant: "homeassistant" => hermesd_homeassistant::HomeAssistantConfig,
    whatsapp: "whatsapp" => hermesd_whatsapp::WhatsAppConfig,
    signal: "signal" => hermesd_signal::SignalConfig,
    email: "email" => hermesd_email::EmailConfig,
}

/// `[platforms.api]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiPlatformConfig {
    /// Serve `/v1/*`. The bearer key comes from `API_SERVER_KEY`.
    pub enabled: bool,
    /// The model id advertised by `/v1/models`.
    pub model_id: String,
}

impl Default for ApiPlatformConfig {
    fn default() -> Self {
        Self { enabled: true, model_id: "hermes-agent".into() }
    }
}

/// The table of a platform this build has no adapter for: any keys, `enabled` read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NotBuilt {
    /// Whether the config asks for it.
    #[serde(default)]
    pub enabled: bool,
}

impl PlatformsConfig {
    /// The adapters (accounts apart) that stream answers as previews (`streaming = true`).
    pub fn streaming(&self, env: &dyn hermesd_platform::Environment) -> Vec<String> {
        let mut names = Vec::new();
        for section in self.sections() {
            let instances = section.instances(env).unwrap_or_default();
            let streams = instances.iter().filter(|i| i.section.enabled() && i.section.streaming());
            names.extend(streams.map(hermesd_platform::section::Instance::name));
        }
        names
    }

    /// Whether the platform named `name` is registered and enabled.
    pub fn enabled(&self, name: &str) -> bool {
        let (platform, account) = name.split_once('@').map_or((name, None), |(p, a)| (p, Some(a)));
        self.sections()
            .iter()
            .any(|s| s.name() == platform && s.enabled() && account.is_none_or(|a| s.accounts().contains_key(a)))
    }

    /// The profile each adapter's chats belong to, for the adapters (accounts included) whose
    /// table names one.
    pub fn profiles(&self, env: &dyn hermesd_platform::Environment) -> std::collections::HashMap<String, String> {
        let mut profiles = std::collections::HashMap::new();
        for section in self.sections() {
            for instance in section.instances(env).unwrap_or_default() {
                if let Some(profile) = instance.section.profile().filter(|_| instance.section.enabled()) {
                    profiles.insert(instance.name(), profile.to_owned());
                }
            }
        }
        profiles
    }
}

#[cfg(test)]
mod account_tests {
    use crate::config::Config;

    #[test]
    fn an_account_has_its_platforms_toolsets_unless_it_has_its_own() {
        let text = "[tools]\ntoolsets = [\"memory\", \"web\"]\n\n[tools.platforms]\ntelegram = [\"memory\"]\n\
                    \"telegram@open\" = [\"web\"]\n";
        let tools = Config::parse(text).unwrap().tools;
        assert_eq!(tools.toolsets_for("telegram@work"), ["memory"], "narrowed with its platform");
        assert_eq!(tools.toolsets_for("telegram@open"), ["web"], "its own list");
        assert_eq!(tools.toolsets_for("discord@work"), ["memory", "web"]);
    }
}

#[cfg(test)]
mod streaming_tests {
    use std::collections::HashMap;

    use crate::config::Config;

    #[test]
    fn each_account_streams_as_its_own_table_says() {
        let text = "[platforms.telegram]\nenabled = true\nstreaming = true\n\n[platforms.telegram.accounts.quiet]\n\
                    token_env = \"TG_QUIET\"\nstreaming = false\n\n[platforms.telegram.accounts.loud]\ntoken_env = \"TG_LOUD\"\n";
        let config = Config::parse(text).unwrap();
        let env: HashMap<String, String> = HashMap::from([("TELEGRAM_BOT_TOKEN".to_owned(), "1:t".to_owned())]);
        assert_eq!(config.platforms.streaming(&env), ["telegram", "telegram@loud"]);
    }
}
