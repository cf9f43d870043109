//! Platforms hosted inside the `hermesd` crate because they are not separate services: the
//! OpenAI-compatible API (routes of the one HTTP server) and the terminal (`hermesd chat`).
//! Chat-service adapters live in `platforms/*` crates.

pub mod api;
#[cfg(feature = "discord")]
pub mod discord;
#[cfg(feature = "email")]
pub mod email;
#[cfg(feature = "homeassistant")]
pub mod homeassistant;
#[cfg(feature = "signal")]
pub mod signal;
#[cfg(feature = "slack")]
pub mod slack;
#[cfg(feature = "telegram")]
pub mod telegram;
pub mod terminal;

#[cfg(feature = "whatsapp")]
pub mod whatsapp;

/// The access rules of the adapter named `platform`, for when no adapter runs (`hermesd
/// check`); a running adapter answers `Platform::access_rules` itself.
pub fn access_rules(platform: &str) -> hermesd_platform::AccessRules {
    match platform {
        #[cfg(feature = "homeassistant")]
        hermesd_homeassistant::NAME => hermesd_homeassistant::ACCESS_RULES,
        #[cfg(feature = "whatsapp")]
        hermesd_whatsapp::NAME => hermesd_whatsapp::ACCESS_RULES,
        _ => hermesd_platform::AccessRules::DEFAULT,
    }
}
