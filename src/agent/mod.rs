//! The agent runtime: the internal message format, LLM providers, tools, the loop, and the
//! gateway-side turn runner with approvals and heartbeats.

pub mod auxiliary;
pub mod context;
pub mod media;
pub mod provider;
pub mod reasoning;
pub mod runtime;
pub mod skills;
pub mod tools;
