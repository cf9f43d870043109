//! The agent loop and its parts: the provider chain (retries, fallback, deadline), the
//! transcript sanitiser, prompt tiers and compression.

pub mod agent_loop;
pub mod chain;
pub mod compress;
pub mod prompt;
pub mod sanitize;
pub mod tokens;
