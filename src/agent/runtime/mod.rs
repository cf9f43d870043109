//! The agent loop and its parts: the provider chain (retries, fallback, deadline), the
//! transcript sanitiser, prompt tiers and compression.

pub mod chain;
pub mod sanitize;
