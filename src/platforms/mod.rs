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

/// The pseudo-platform of Home Assistant's watched state changes (one session per change,
/// answered to `platforms.homeassistant.watch_target`); the adapter crate's `WATCH_PLATFORM`.
pub const HASS_WATCH: &str = "homeassistant_watch";
#[cfg(feature = "whatsapp")]
pub mod whatsapp;
