//! The agent runtime: LLM providers, tools, skills, media understanding, what the model is told
//! about a message's context, and the loop (`runtime`) that runs one turn's model calls and tool
//! batches. The internal message format is the vocabulary floor's (`crate::vocab::message`); the
//! gateway side of a turn (its session, approvals, heartbeats, the reply) is the turn floor's
//! (`crate::turn`), which stands above this one. `people` is one person's data, exported or
//! erased whole.

pub mod auxiliary;
pub mod context;
pub mod media;
pub mod people;
pub mod provider;
pub mod reasoning;
pub mod runtime;
pub mod skills;
pub mod tools;
