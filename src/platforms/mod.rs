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
