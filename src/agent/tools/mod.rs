//! The `Tool` boundary: a registered tool has a JSON schema, a handler, a toolset, a
//! parallel-safety flag and a result size cap. `executor.rs` runs a batch of calls; built-in
//! tools live in the files beside this one.
//!
//! Tools never talk to platforms directly: anything that needs a human goes through `Human`.
//!
//! `Tool::call` returns text; `call_output` a `ToolOutput`, which may carry images. The `Registry`
//! holds the toolsets; each `ToolEntry` keeps its spec, its provider schema (shared JSON) and its
//! token estimate, built once at registration, so a turn copies no schemas. `Registry::allowed`
//! takes a `ToolPolicy` and merges the run-time `ToolSource`s (MCP) into a per-turn snapshot,
//! sorted by name: a turn's tool list is fixed when it starts and changes between turns only when a
//! server's tools change. `builtin.rs` assembles the built-ins; `place.rs` says whose folder a turn
//! works in.
//!
//! The images of a `ToolOutput` stay with the tool result and are loaded at once for a model with
//! vision (the agent loop's `media`).

mod builtin;
pub mod clarify;
pub mod cronjob;
pub mod delegate;
mod executor;
pub mod files;
pub mod homeassistant;
pub mod mcp;
pub mod memory;
pub mod place;
pub mod policy;
pub mod send_file;
pub mod send_message;
pub mod session_search;
pub mod skills;
pub mod terminal;
#[cfg(test)]
mod test_support;
pub mod todo;
pub mod web_fetch;
pub mod web_search;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hermesd_platform::ChatRef;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::agent::provider::ToolSchema;
use crate::agent::runtime::tokens::schema_tokens;
use crate::redact::Redaction;
use crate::store::Store;

pub use builtin::{ExtraTools, builtin};
pub use executor::{CallOutcome, ExecutorLimits, run_calls};
pub use policy::ToolPolicy;

/// What a tool is, as the model and the runtime see it.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The name the model calls.
    pub name: Cow<'static, str>,
    /// What it does, for the model.
    pub description: Cow<'static, str>,
    /// JSON schema of the arguments object.
    pub parameters: Value,
    /// The toolset it belongs to (configuration enables toolsets per platform; see
    /// `toolset_admits`).
    pub toolset: Cow<'static, str>,
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
    /// Ask to approve running `command` (`action` says why it needs approval). A person may
    /// approve it once, for the rest of the session or for good, and the operator may have
    /// approved it in the config; without such a memory this is `approve`.
    async fn approve_command(&self, action: &str, command: &str, timeout: Duration) -> Approval {
        let _ = command;
        self.approve(action, timeout).await
    }
    /// Ask a question, optionally with choices; `None` when nobody answered.
    async fn clarify(&self, question: &str, choices: &[String], timeout: Duration) -> Option<String>;
    /// Called after a batch of tool calls, before the turn goes on: a turn whose wait for this
    /// person was cut off while it was parked (a tool timeout) takes its worker permit again.
    async fn rejoin(&self) {}
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
    /// The directory file and terminal tools work in: the turn's own folder beneath the tools'
    /// workdir (`place::Whose::workdir`), created on first use.
    pub workdir: PathBuf,
    /// `HERMESD_HOME` (memory files live under it).
    pub data_dir: PathBuf,
    /// The store (session search).
    pub store: Arc<dyn Store>,
    /// Who can approve or answer.
    pub human: Arc<dyn Human>,
    /// Fires when the turn is stopped; long tools must honour it.
    pub cancel: CancellationToken,
    /// The toolsets this turn may use; anything that starts more agent work (a delegated
    /// child, a cron job) gets at most these.
    pub policy: ToolPolicy,
    /// Whether the user who asked is an admin (`<PLATFORM>_ADMIN_USERS`; see `access.rs`).
    pub admin: bool,
}

/// A registered tool.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Its description.
    fn spec(&self) -> ToolSpec;
    /// Run with parsed JSON arguments; the result text enters the context.
    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError>;
    /// Run, for a result that may carry images (the executor calls this). Tools that return
    /// only text keep the default.
    async fn call_output(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        self.call(ctx, args).await.map(ToolOutput::text)
    }
}

/// A tool's result: its text, and images it returned (saved under the data dir, named in the
/// text). A model with vision is shown the images; any other model reads the text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolOutput {
    /// What the model reads.
    pub text: String,
    /// Images, by reference (loaded for the model call that shows them).
    pub images: Vec<crate::vocab::message::ImageRef>,
}

impl ToolOutput {
    /// A text-only result.
    pub fn text(text: String) -> Self {
        Self { text, images: Vec::new() }
    }
}

/// Whether a configured toolset name admits a tool's toolset: equal names, and `mcp` admits
/// every `mcp:<server>` (so `mcp` in a platform's `toolsets` allows all MCP servers).
pub fn toolset_admits(configured: &str, toolset: &str) -> bool {
    policy::entry_admits(configured, toolset)
}

/// A tool with what is built once from it: its spec, the schema providers advertise (its JSON
/// shared, never copied, per turn) and that schema's token estimate.
#[derive(Clone)]
pub struct ToolEntry {
    /// The tool.
    pub tool: Arc<dyn Tool>,
    /// Its spec.
    pub spec: Arc<ToolSpec>,
    /// The schema as providers advertise it.
    pub schema: ToolSchema,
    /// Estimated tokens the schema adds to a request (`tokens::schema_tokens`).
    pub tokens: u64,
}

impl ToolEntry {
    /// Build the entry of `tool` from its spec.
    pub fn new(tool: Arc<dyn Tool>) -> Self {
        let spec = tool.spec();
        Self::with_spec(tool, spec)
    }

    /// Build the entry of `tool` from a spec already at hand.
    pub fn with_spec(tool: Arc<dyn Tool>, spec: ToolSpec) -> Self {
        let schema = ToolSchema {
            name: spec.name.to_string(),
            description: spec.description.to_string(),
            parameters: Arc::new(spec.parameters.clone()),
        };
        let tokens = schema_tokens(std::slice::from_ref(&schema));
        Self { tool, spec: Arc::new(spec), schema, tokens }
    }
}

/// Tools that come and go while the daemon runs (MCP servers). A turn takes one snapshot, so its
/// tool list is fixed for the whole turn.
pub trait ToolSource: Send + Sync {
    /// The tools available now, in name order.
    fn snapshot(&self) -> Arc<[ToolEntry]>;
}

/// All tools by name, each with its spec built once (specs hold JSON schemas; building them
/// on every turn was a measurable share of a turn's CPU), plus the sources of run-time tools.
#[derive(Default, Clone)]
pub struct Registry {
    tools: BTreeMap<Cow<'static, str>, ToolEntry>,
    sources: Vec<Arc<dyn ToolSource>>,
    /// Applied by the executor to every result before it enters the transcript.
    redaction: Redaction,
}

impl Registry {
    /// Add a tool (a later one with the same name replaces the earlier).
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        let entry = ToolEntry::new(tool);
        self.tools.insert(entry.spec.name.clone(), entry);
    }

    /// Add a source of run-time tools; `select` merges its snapshot (a registered tool of the
    /// same name wins).
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
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
        self.tools.get(name).map(|entry| &entry.tool)
    }

    /// A tool's spec by name (built once, unlike `Tool::spec`).
    pub fn spec(&self, name: &str) -> Option<&Arc<ToolSpec>> {
        self.tools.get(name).map(|entry| &entry.spec)
    }

    /// The tools whose toolset is in `toolsets` (matched as `ToolPolicy` does), in name order.
    pub fn select(&self, toolsets: &[String]) -> Registry {
        self.allowed(&ToolPolicy::new(toolsets))
    }

    /// The tools `policy` admits, in name order (stable across turns, so the tool list in the
    /// prompt prefix is byte-stable while the tools do not change). Every tool a turn is offered
    /// passes through here. Run-time sources contribute their current snapshot; the result has
    /// no sources, so it stays fixed.
    pub fn allowed(&self, policy: &ToolPolicy) -> Registry {
        let admitted = |spec: &ToolSpec| policy.admits(&spec.toolset);
        let mut tools: BTreeMap<Cow<'static, str>, ToolEntry> = BTreeMap::new();
        for source in &self.sources {
            for entry in source.snapshot().iter().filter(|entry| admitted(&entry.spec)) {
                tools.insert(entry.spec.name.clone(), entry.clone());
            }
        }
        for (name, entry) in self.tools.iter().filter(|(_, entry)| admitted(&entry.spec)) {
            tools.insert(name.clone(), entry.clone());
        }
        Registry { tools, sources: Vec::new(), redaction: self.redaction.clone() }
    }

    /// Every tool's spec, in name order.
    pub fn specs(&self) -> Vec<Arc<ToolSpec>> {
        self.tools.values().map(|entry| entry.spec.clone()).collect()
    }

    /// Every tool's toolset, in the tools' name order (what the system prompt lists). Run-time
    /// toolsets (`mcp:<server>`) are listed as their family, `mcp`.
    pub fn toolsets(&self) -> Vec<&'static str> {
        self.tools
            .values()
            .map(|entry| match &entry.spec.toolset {
                Cow::Borrowed(set) => *set,
                Cow::Owned(_) => "mcp",
            })
            .collect()
    }

    /// The tools as providers advertise them, in name order.
    pub fn schemas(&self) -> Vec<ToolSchema> {
        self.tools.values().map(|entry| entry.schema.clone()).collect()
    }

    /// The estimated tokens all the schemas add to a request (the sum of what each entry
    /// computed once).
    pub fn schema_tokens(&self) -> u64 {
        self.tools.values().map(|entry| entry.tokens).sum()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

#[cfg(test)]
mod registry_tests {
    use super::*;

    struct Named(&'static str, &'static str);

    #[async_trait]
    impl Tool for Named {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: self.0.into(),
                description: "test".into(),
                parameters: serde_json::json!({ "type": "object" }),
                // Built-ins name their toolset statically, run-time tools own theirs.
                toolset: if self.1.starts_with("mcp:") { Cow::Owned(self.1.to_owned()) } else { Cow::Borrowed(self.1) },
                parallel_safe: true,
                max_result_chars: 100,
                timeout: Duration::from_secs(1),
            }
        }

        async fn call(&self, _ctx: &ToolContext, _args: Value) -> Result<String, ToolError> {
            Ok(String::new())
        }
    }

    struct Source(std::sync::Mutex<Arc<[ToolEntry]>>);

    impl ToolSource for Source {
        fn snapshot(&self) -> Arc<[ToolEntry]> {
            self.0.lock().unwrap().clone()
        }
    }

    fn entry(name: &'static str, set: &'static str) -> ToolEntry {
        ToolEntry::new(Arc::new(Named(name, set)))
    }

    #[test]
    fn mcp_admits_every_server_and_a_server_set_only_itself() {
        assert!(toolset_admits("mcp", "mcp:time"));
        assert!(toolset_admits("mcp:time", "mcp:time"));
        assert!(!toolset_admits("mcp:time", "mcp:docs"));
        assert!(!toolset_admits("mcp", "memory"));
        assert!(!toolset_admits("memory", "mcp:time"));
    }

    #[test]
    fn a_selection_is_a_sorted_snapshot_that_later_changes_do_not_touch() {
        let source = Arc::new(Source(std::sync::Mutex::new(Arc::from(vec![entry("mcp_b_x", "mcp:b")]))));
        let mut registry = Registry::default();
        registry.register(Arc::new(Named("todo", "todo")));
        registry.add_source(source.clone());
        let turn = registry.select(&["todo".to_owned(), "mcp".to_owned()]);
        *source.0.lock().unwrap() = Arc::from(vec![entry("mcp_a_y", "mcp:a"), entry("mcp_b_x", "mcp:b")]);
        let names = |r: &Registry| r.specs().iter().map(|s| s.name.to_string()).collect::<Vec<_>>();
        assert_eq!(names(&turn), ["mcp_b_x", "todo"], "the turn keeps its snapshot");
        let next = registry.select(&["todo".to_owned(), "mcp:a".to_owned()]);
        assert_eq!(names(&next), ["mcp_a_y", "todo"]);
        assert_eq!(next.toolsets(), ["mcp", "todo"]);
    }
}
