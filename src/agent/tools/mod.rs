//! The `Tool` boundary: a registered tool has a JSON schema, a handler, a toolset, a
//! parallel-safety flag and a result size cap. `executor.rs` runs a batch of calls; built-in
//! tools live in the files beside this one.
//!
//! Tools never talk to platforms directly: anything that needs a human goes through `Human`.

mod builtin;
pub mod clarify;
pub mod cronjob;
pub mod delegate;
mod executor;
pub mod files;
pub mod memory;
pub mod send_message;
pub mod session_search;
pub mod skills;
pub mod terminal;
#[cfg(test)]
mod test_support;
pub mod todo;
pub mod web_fetch;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hermesd_platform::ChatRef;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::agent::provider::ToolSchema;
use crate::redact::Redaction;
use crate::store::Store;

pub use builtin::{ExtraTools, builtin};
pub use executor::{ExecutorLimits, run_calls};

/// What a tool is, as the model and the runtime see it.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The name the model calls.
    pub name: &'static str,
    /// What it does, for the model.
    pub description: &'static str,
    /// JSON schema of the arguments object.
    pub parameters: Value,
    /// The toolset it belongs to (configuration enables toolsets per platform).
    pub toolset: &'static str,
    /// Whether calls may run concurrently with other parallel-safe calls.
    pub parallel_safe: bool,
    /// Longest result (in chars) that enters the context; longer results are cut with a note.
    pub max_result_chars: usize,
    /// Longest a call may run.
    pub timeout: Duration,
}

/// Why a tool call did not produce a result. The message is shown to the model, which should be
/// able to act on it; it must never contain a secret.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not match the schema or make no sense.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// A human (or the policy where none can answer) refused.
    #[error("denied: {0}")]
    Denied(String),
    /// The tool ran and failed.
    #[error("failed: {0}")]
    Failed(String),
}

/// A human's answer to an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Go ahead.
    Approved,
    /// Refused.
    Denied,
    /// Nobody answered in time (fail closed: treated as denied).
    TimedOut,
    /// Nobody can answer in this context (webhooks, API without a human, cron).
    Unavailable,
}

/// The person behind the conversation, when there is one.
#[async_trait]
pub trait Human: Send + Sync {
    /// Ask to approve `action`; waits up to `timeout`.
    async fn approve(&self, action: &str, timeout: Duration) -> Approval;
    /// Ask a question, optionally with choices; `None` when nobody answered.
    async fn clarify(&self, question: &str, choices: &[String], timeout: Duration) -> Option<String>;
}

/// A `Human` for contexts where nobody can answer: approvals are unavailable (denied at once),
/// questions go unanswered.
#[derive(Debug, Default)]
pub struct Nobody;

#[async_trait]
impl Human for Nobody {
    async fn approve(&self, _action: &str, _timeout: Duration) -> Approval {
        Approval::Unavailable
    }

    async fn clarify(&self, _question: &str, _choices: &[String], _timeout: Duration) -> Option<String> {
        None
    }
}

/// What a tool call may use.
#[derive(Clone)]
pub struct ToolContext {
    /// The session the call belongs to.
    pub session_id: String,
    /// The conversation's session key (stable across `/new`; scopes session search).
    pub session_key: String,
    /// The chat the turn answers.
    pub chat: ChatRef,
    /// The user who asked.
    pub user_id: String,
    /// The directory file and terminal tools work in.
    pub workdir: PathBuf,
    /// `HERMESD_HOME` (memory files live under it).
    pub data_dir: PathBuf,
    /// The store (session search).
    pub store: Arc<dyn Store>,
    /// Who can approve or answer.
    pub human: Arc<dyn Human>,
    /// Fires when the turn is stopped; long tools must honour it.
    pub cancel: CancellationToken,
}

/// A registered tool.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Its description.
    fn spec(&self) -> ToolSpec;
    /// Run with parsed JSON arguments; the result text enters the context.
    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError>;
}

/// All tools by name, each with its spec built once (specs hold JSON schemas; building them
/// on every turn was a measurable share of a turn's CPU).
#[derive(Default, Clone)]
pub struct Registry {
    tools: BTreeMap<&'static str, (Arc<dyn Tool>, Arc<ToolSpec>)>,
    /// Applied by the executor to every result before it enters the transcript.
    redaction: Redaction,
}

impl Registry {
    /// Add a tool (a later one with the same name replaces the earlier).
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        let spec = Arc::new(tool.spec());
        self.tools.insert(spec.name, (tool, spec));
    }

    /// Mask the daemon's secrets in every tool result (token shapes are masked without it too).
    pub fn set_redaction(&mut self, redaction: Redaction) {
        self.redaction = redaction;
    }

    /// The redaction tool results pass through.
    pub fn redaction(&self) -> &Redaction {
        &self.redaction
    }

    /// A tool by name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name).map(|(tool, _)| tool)
    }

    /// The tools whose toolset is in `toolsets`, in name order (stable across turns, so the
    /// tool list in the prompt prefix is byte-stable).
    pub fn select(&self, toolsets: &[String]) -> Registry {
        let tools = self
            .tools
            .iter()
            .filter(|(_, (_, spec))| toolsets.iter().any(|s| s == spec.toolset))
            .map(|(name, entry)| (*name, entry.clone()))
            .collect();
        Registry { tools, redaction: self.redaction.clone() }
    }

    /// Every tool's spec, in name order.
    pub fn specs(&self) -> Vec<Arc<ToolSpec>> {
        self.tools.values().map(|(_, spec)| spec.clone()).collect()
    }

    /// Every tool's toolset, in the tools' name order (what the system prompt lists).
    pub fn toolsets(&self) -> Vec<&'static str> {
        self.tools.values().map(|(_, spec)| spec.toolset).collect()
    }

    /// The tools as providers advertise them, in name order.
    pub fn schemas(&self) -> Vec<ToolSchema> {
        self.tools
            .values()
            .map(|(_, s)| ToolSchema {
                name: s.name.into(),
                description: s.description.into(),
                parameters: s.parameters.clone(),
            })
            .collect()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}
