//! Platforms hosted inside the `hermesd` crate because they are not separate services: the
//! OpenAI-compatible API (routes of the one HTTP server) and the terminal (`hermesd chat`).
//! Chat-service adapters live in `platforms/*` crates, each owning its config table; the host
//! registers them in `config/platforms.rs`. `hass.rs` gives the agent's tools that
//! adapter's connection.

pub mod api;
pub mod hass;
pub mod terminal;
