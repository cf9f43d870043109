//! The memory-only flush turn: before a session's context is lost (`/new`, compression, an idle
//! or daily reset) the model gets one short turn over the session's transcript with only the
//! `memory` tool, to save what matters.
//!
//! It must never write to the transcript, never take longer than `[memory] flush_timeout`, and
//! never show the user anything but the optional "💾 memory updated". A session is flushed once
//! per new user message (`LifecycleStore::set_flushed`).
//!
//! `Flusher` gives the model the session's transcript and system prompt plus an instruction, and
//! only the `memory` tool, run through the registry, so per-person memory applies; at most
//! `MAX_CALLS` (3) model calls within `memory.flush_timeout`. It is skipped when flushing is off,
//! when the platform has no `memory` toolset, or when no user message came since the last flush
//! (`flushed_through`). `FlushGate` knows the flushes running per key, and the key's next turn
//! waits for its flush, so a flush and a turn of one key never overlap. Flushes are counted in
//! `hermesd_memory_flushes_total{outcome}`, resets in `hermesd_session_resets_total{reason,by}`.
//! `FlushBeforeCompaction` is what the runtime's compressor is told before it summarises stored
//! history (`BeforeCompaction`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermesd_platform::ChatRef;
use tokio_util::sync::CancellationToken;

use crate::agent::provider::{ChatRequest, ProviderError, ToolSchema};
use crate::agent::runtime::chain::{ChainError, ChainState, ProviderChain};
use crate::agent::runtime::sanitize::sanitize;
use crate::agent::tools::{CallOutcome, ExecutorLimits, Nobody, Registry, ToolContext, ToolPolicy, run_calls};
use crate::config::{MemoryConfig, ToolsConfig};
use crate::metrics::{MEMORY_FLUSHES_TOTAL, Metrics};
use crate::outbox::Outbox;
use crate::store::{SessionKey, Store, StoreError};
use crate::turn::agents::Agents;
use crate::usage::{Accounting, Payer};
use crate::vocab::message::{Message, Role, ToolCall};

/// Model calls a flush may make (each may save several entries).
const MAX_CALLS: usize = 3;
/// What the user is told when a flush saved something (with `flush_notice = true`).
pub const FLUSH_NOTICE: &str = "💾 memory updated";
/// Opens the instruction of every flush turn (and lets a test's fake model recognise one).
pub const FLUSH_MARK: &str = "[Memory flush]";
/// The toolset, and the tool, a flush may use.
const MEMORY: &str = "memory";

/// `[memory]` settings of the flush turn.
#[derive(Debug, Clone, Copy)]
pub struct FlushSettings {
    /// Whether flushes run at all.
    pub enabled: bool,
    /// Tell the user when one saved something.
    pub notice: bool,
    /// The longest one may take.
    pub timeout: Duration,
}

impl FlushSettings {
    /// The settings `[memory]` configures.
    pub fn from_config(memory: &MemoryConfig) -> Self {
        Self { enabled: memory.flush, notice: memory.flush_notice, timeout: memory.flush_timeout.get() }
    }
}

impl Default for FlushSettings {
    fn default() -> Self {
        Self::from_config(&MemoryConfig::default())
    }
}

/// What is about to happen to the session's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushCause {
    /// `/new`.
    New,
    /// Older history is about to be summarised.
    Compression,
    /// The reset policy archives the session.
    Reset,
}

impl FlushCause {
    fn what(self) -> &'static str {
        match self {
            FlushCause::New | FlushCause::Reset => "archived: the next conversation starts without it",
            FlushCause::Compression => "compressed: its older messages will be replaced by a short summary",
        }
    }
}

/// The session to flush and who it belongs to.
#[derive(Debug, Clone)]
pub struct FlushTarget {
    /// The session.
    pub session_id: String,
    /// Its key.
    pub key: SessionKey,
    /// The chat it talks in (for the notice).
    pub chat: ChatRef,
    /// The person whose memory the tool edits.
    pub user_id: String,
    /// Whether that person is an admin.
    pub admin: bool,
}

/// How a flush ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlushOutcome {
    /// Not run: flushes are off, the platform has no `memory` toolset, or nothing new was said.
    Skipped(&'static str),
    /// The model answered; `saved` when a memory call changed a file.
    Done {
        /// Whether memory changed.
        saved: bool,
    },
    /// The model failed or ran out of time; nothing is retried.
    Failed(String),
}

/// Why a flush turn failed.
#[derive(Debug, thiserror::Error)]
enum FlushError {
    #[error("model: {0}")]
    Model(#[from] ChainError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no end within {0} s")]
    TimedOut(u64),
}

/// Flushes running now, by session key: the key's next turn waits (up to the deadline) for the
/// one that belongs to it, so its system prompt already holds what was saved.
#[derive(Debug, Clone, Default)]
pub struct FlushGate {
    running: Arc<Mutex<HashMap<String, CancellationToken>>>,
}

/// Holds a key's place in the gate; dropping it releases the waiters.
#[derive(Debug)]
pub struct FlushGuard {
    gate: FlushGate,
    key: String,
    done: CancellationToken,
}

impl Drop for FlushGuard {
    fn drop(&mut self) {
        self.gate.running.lock().expect("flush gate lock poisoned").remove(&self.key);
        self.done.cancel();
    }
}

impl FlushGate {
    /// Claim `key` for a flush; `None` while another flush of the key runs.
    pub fn begin(&self, key: &str) -> Option<FlushGuard> {
        let mut running = self.running.lock().expect("flush gate lock poisoned");
        if running.contains_key(key) {
            return None;
        }
        let done = CancellationToken::new();
        running.insert(key.to_owned(), done.clone());
        Some(FlushGuard { gate: self.clone(), key: key.to_owned(), done })
    }

    /// Whether a flush of `key` runs now.
    pub fn is_running(&self, key: &str) -> bool {
        self.running.lock().expect("flush gate lock poisoned").contains_key(key)
    }

    /// Wait up to `limit` for the flush of `key`, if one runs.
    pub async fn wait(&self, key: &str, limit: Duration) {
        let done = self.running.lock().expect("flush gate lock poisoned").get(key).cloned();
        if let Some(done) = done {
            let _ = tokio::time::timeout(limit, done.cancelled()).await;
        }
    }
}

/// Runs flush turns; one per daemon, shared by turns, `/new` and the sweep.
pub struct Flusher {
    /// The store.
    pub store: Arc<dyn Store>,
    /// Each profile's agent: a flush runs on the session's profile's providers (its `/model`
    /// choice first) and offers only its `memory` tool.
    pub agents: Arc<Agents>,
    /// Sends the notice.
    pub outbox: Outbox,
    /// Toolsets per platform: no flush where `memory` is not allowed.
    pub tools: Arc<crate::vocab::live::Live<ToolsConfig>>,
    /// `HERMESD_HOME`.
    pub data_dir: PathBuf,
    /// `[memory]` flush settings.
    pub settings: FlushSettings,
    /// Flushes running now.
    pub gate: FlushGate,
    /// Counts flushes by outcome.
    pub metrics: Arc<Metrics>,
    /// Charges the flush's model calls to the person (never counted as a turn).
    pub accounting: Arc<Accounting>,
}

/// The flush the turn runs when the runtime is about to compact a session's stored history.
pub struct FlushBeforeCompaction {
    /// The flush turn.
    pub flusher: Arc<Flusher>,
    /// The session whose memory it saves.
    pub target: FlushTarget,
}

#[async_trait::async_trait]
impl crate::agent::runtime::compress::BeforeCompaction for FlushBeforeCompaction {
    async fn history_compacting(&self) {
        self.flusher.flush(&self.target, FlushCause::Compression).await;
    }
}

impl Flusher {
    /// The longest a flush may take.
    pub fn timeout(&self) -> Duration {
        self.settings.timeout
    }

    /// Run the flush turn for `target` before `cause` happens. Logs its outcome; callers go on
    /// whatever it was.
    pub async fn flush(&self, target: &FlushTarget, cause: FlushCause) -> FlushOutcome {
        let outcome = self.try_flush(target, cause).await;
        let label = match &outcome {
            FlushOutcome::Skipped(_) => "skipped",
            FlushOutcome::Done { saved: true } => "saved",
            FlushOutcome::Done { saved: false } => "nothing_saved",
            FlushOutcome::Failed(_) => "failed",
        };
        self.metrics.inc(MEMORY_FLUSHES_TOTAL, &[("outcome", label)]);
        match &outcome {
            FlushOutcome::Skipped(why) => tracing::debug!(session = %target.session_id, why, "memory flush skipped"),
            FlushOutcome::Done { saved } => {
                tracing::info!(session = %target.session_id, saved, ?cause, "memory flush done");
            }
            FlushOutcome::Failed(error) => {
                tracing::warn!(session = %target.session_id, %error, ?cause, "memory flush failed; going on without it");
            }
        }
        outcome
    }

    async fn try_flush(&self, target: &FlushTarget, cause: FlushCause) -> FlushOutcome {
        if !self.settings.enabled {
            return FlushOutcome::Skipped("flush is off");
        }
        let agent = self.agents.of_key(&target.key.key);
        let policy = agent.narrow(ToolPolicy::new(self.tools.get().toolsets_for(&target.key.platform)));
        let policy = policy.narrow(&ToolPolicy::new([MEMORY]));
        let tools = agent.registry.allowed(&policy);
        if tools.get(MEMORY).is_none() {
            return FlushOutcome::Skipped("no memory tool on this platform");
        }
        let through = match self.store.unflushed_through(&target.session_id).await {
            Ok(Some(id)) => id,
            Ok(None) => return FlushOutcome::Skipped("nothing new since the last flush"),
            Err(e) => return FlushOutcome::Failed(e.to_string()),
        };
        // The model calls end at the deadline (and are still charged); the rest is a backstop.
        let deadline = tokio::time::Instant::now() + self.settings.timeout;
        let turn = self.converse(target, cause, &tools, policy, deadline);
        let saved = match tokio::time::timeout_at(deadline + Duration::from_secs(1), turn).await {
            Ok(Ok(saved)) => saved,
            Ok(Err(FlushError::Model(ChainError::Provider(ProviderError::NotConfigured)))) => {
                return FlushOutcome::Skipped("no model configured");
            }
            Ok(Err(e)) => return FlushOutcome::Failed(e.to_string()),
            Err(_) => return FlushOutcome::Failed(format!("no end within {} s", self.settings.timeout.as_secs())),
        };
        if let Err(e) = self.store.set_flushed(&target.session_id, through).await {
            tracing::warn!(error = %e, session = %target.session_id, "could not mark the session flushed");
        }
        if saved && self.settings.notice {
            let turn_id = format!("flush:{}:{through}", target.session_id);
            self.outbox.notify(&target.chat, FLUSH_NOTICE, None, &turn_id).await;
        }
        FlushOutcome::Done { saved }
    }

    /// The turn itself: the transcript, the instruction, memory calls until the model answers
    /// (at most `MAX_CALLS` model calls). True when a memory call changed a file.
    async fn converse(
        &self,
        target: &FlushTarget,
        cause: FlushCause,
        tools: &Registry,
        policy: ToolPolicy,
        deadline: tokio::time::Instant,
    ) -> Result<bool, FlushError> {
        let agent = self.agents.of_key(&target.key.key);
        let session = self.store.session(&target.session_id).await?;
        let chain = match session.as_ref().and_then(|s| s.model.as_deref()) {
            Some(model) => agent.chain.starting_with(model),
            None => agent.chain.clone(),
        };
        let mut messages = Vec::new();
        if let Some(system) = session.and_then(|s| s.system_prompt) {
            messages.push(Message::text(Role::System, system));
        }
        for stored in self.store.load_transcript(&target.session_id).await? {
            let mut message = stored.message;
            // Images stay out: what matters for memory is in the words.
            message.images.clear();
            messages.push(message);
        }
        messages.push(Message::text(Role::User, instruction(cause)));
        let cancel = CancellationToken::new();
        let ctx = ToolContext {
            session_id: target.session_id.clone(),
            session_key: target.key.key.clone(),
            chat: target.chat.clone(),
            user_id: target.user_id.clone(),
            workdir: agent.workdir.clone(),
            data_dir: self.data_dir.clone(),
            store: self.store.clone(),
            human: Arc::new(Nobody),
            cancel: cancel.clone(),
            policy,
            admin: target.admin,
        };
        let schemas: Arc<[_]> = tools.schemas().into();
        let mut state = chain.start_turn();
        let calls = self.calls(&chain, &mut state, messages, &schemas, tools, &ctx);
        let result = tokio::time::timeout_at(deadline, calls)
            .await
            .unwrap_or(Err(FlushError::TimedOut(self.settings.timeout.as_secs())));
        // Its model calls are the person's spending, whatever became of the turn.
        let payer = Payer {
            platform: target.chat.platform.clone(),
            user: target.user_id.clone(),
            chat: target.chat.chat_id.clone(),
            capped: true,
            profile: crate::config::profile_of_session_key(&target.key.key).to_owned(),
        };
        let usage = state.turn_usage();
        let (session, now) = (&target.session_id, crate::clock::now_ms());
        self.accounting.record(&payer, session, &usage, &state.by_model, false, now).await;
        result
    }

    /// The flush turn's model calls: memory calls until the model answers.
    async fn calls(
        &self,
        chain: &ProviderChain,
        state: &mut ChainState,
        mut messages: Vec<Message>,
        schemas: &Arc<[ToolSchema]>,
        tools: &Registry,
        ctx: &ToolContext,
    ) -> Result<bool, FlushError> {
        let cancel = &ctx.cancel;
        let mut saved = false;
        for _ in 0..MAX_CALLS {
            let request = ChatRequest {
                messages: sanitize(messages.clone()),
                tools: schemas.clone(),
                stable_prefix: 1,
                ..ChatRequest::default()
            };
            let mut reply = chain.call(state, &request, None, cancel).await?.message;
            if reply.tool_calls.is_empty() {
                break;
            }
            let calls = std::mem::take(&mut reply.tool_calls);
            let outcomes = run_calls(tools, ctx, &calls, ExecutorLimits::default()).await;
            saved |= calls.iter().zip(&outcomes).any(|(call, outcome)| changed_memory(call, outcome));
            reply.tool_calls = calls;
            messages.push(reply);
            messages.extend(outcomes.into_iter().map(|outcome| Message {
                role: Role::Tool,
                content: Some(outcome.content),
                tool_calls: Vec::new(),
                tool_call_id: Some(outcome.call_id),
                reasoning: None,
                images: Vec::new(),
            }));
        }
        Ok(saved)
    }
}

/// The instruction that ends a flush turn's request.
pub fn instruction(cause: FlushCause) -> String {
    format!(
        "{FLUSH_MARK} This conversation is about to be {}. Save anything worth keeping for later \
         conversations — facts about the user, preferences, decisions, open tasks — with the memory \
         tool now, in short entries; skip what memory already holds. This is not a message from the \
         user: do not answer it, reply DONE when finished.",
        cause.what()
    )
}

/// Whether a memory call changed a file: an edit the tool carried out (not a read, not a
/// refusal, not a duplicate it left alone).
fn changed_memory(call: &ToolCall, outcome: &CallOutcome) -> bool {
    if call.name != MEMORY || outcome.error {
        return false;
    }
    let action = serde_json::from_str::<serde_json::Value>(&call.arguments)
        .ok()
        .and_then(|args| args["action"].as_str().map(str::to_owned));
    matches!(action.as_deref(), Some("add" | "replace" | "remove")) && !outcome.content.contains("nothing changed")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(arguments: &str) -> ToolCall {
        ToolCall { id: "c1".into(), name: MEMORY.into(), arguments: arguments.into() }
    }

    fn outcome(content: &str, error: bool) -> CallOutcome {
        CallOutcome {
            call_id: "c1".into(),
            name: MEMORY.into(),
            content: content.into(),
            error,
            images: Vec::new(),
            elapsed: Duration::ZERO,
        }
    }

    #[test]
    fn only_a_carried_out_edit_counts_as_saved() {
        let add = call(r#"{"action":"add","target":"user","content":"likes tea"}"#);
        assert!(changed_memory(&add, &outcome("added to USER.md", false)));
        assert!(!changed_memory(&add, &outcome("USER.md already has that entry; nothing changed", false)));
        assert!(!changed_memory(&add, &outcome("failed: over the cap", true)));
        assert!(!changed_memory(&call(r#"{"action":"read","target":"user"}"#), &outcome("USER.md ...", false)));
        assert!(!changed_memory(&call("not json"), &outcome("ok", false)));
        let other = ToolCall { name: "todo".into(), ..add };
        assert!(!changed_memory(&other, &outcome("added", false)));
    }

    #[test]
    fn the_instruction_is_marked_and_names_the_cause() {
        assert!(instruction(FlushCause::New).starts_with(FLUSH_MARK));
        assert!(instruction(FlushCause::Compression).contains("compressed"));
        assert!(instruction(FlushCause::Reset).contains("archived"));
    }

    #[tokio::test]
    async fn the_gate_admits_one_flush_per_key_and_releases_waiters() {
        tokio::time::pause();
        let gate = FlushGate::default();
        let guard = gate.begin("k").expect("free");
        assert!(gate.begin("k").is_none(), "one at a time");
        assert!(gate.begin("other").is_some());
        let waiter = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.wait("k", Duration::from_secs(30)).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(guard);
        tokio::time::timeout(Duration::from_millis(1), waiter).await.expect("released at once").unwrap();
        // Nobody waits for a flush that is not running, and a stuck one is waited for only
        // up to the limit.
        gate.wait("k", Duration::from_secs(30)).await;
        let _stuck = gate.begin("k").expect("free again");
        let started = tokio::time::Instant::now();
        gate.wait("k", Duration::from_secs(30)).await;
        let waited = started.elapsed();
        assert!(waited >= Duration::from_secs(30) && waited < Duration::from_secs(31), "{waited:?}");
    }
}
