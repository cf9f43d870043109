//! The agent runtime: the internal message format, LLM providers and the turn runner.

pub mod message;
pub mod provider;
pub mod runtime;
pub mod tools;
pub mod turn;
