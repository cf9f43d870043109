//! One agent turn, gateway side: resolve the session, record the user message, build or reuse
//! the session's system prompt, compact between turns when needed, run the agent loop with
//! heartbeats, then store the turn's messages and reply chunks in one transaction and hand them
//! to the outbox.
//!
//! Invariant: every turn ends with a reply the user sees — the answer, a summary, "stopped", or
//! a clear error. Only a shutdown leaves a turn unanswered; its event then runs at the next start.

mod accounts;
pub mod agents;
pub mod approvals;
pub mod flush;
pub mod heartbeat;
pub mod lifecycle;
mod run;
pub mod session_key;
mod signals;
mod slot;

pub use signals::{SteerBox, StopSignal};
pub use slot::{WorkerPool, WorkerSlot};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use hermesd_platform::{ChatRef, InboundMessage, OutboundKind};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use self::agents::{Agents, ProfileAgent};
use self::approvals::Approvals;
use self::flush::{FlushBeforeCompaction, FlushSettings, Flusher};
use self::heartbeat::HeartbeatSettings;
use crate::agent::context::SessionFacts;
use crate::agent::media::Media;
use crate::agent::runtime::compress::Compressor;
use crate::agent::runtime::prompt::PromptBuilder;
use crate::agent::tools::ToolPolicy;
use crate::agent::tools::place::{Whose, turn_whose};
use crate::clock::now_ms;
use crate::config::{RecoveryConfig, RouteConfig, SessionsConfig, ToolsConfig};
use crate::delivery::turns::{NOT_FOR_CRON, Routing, TurnOrigin};
use crate::metrics::{ERRORS_TOTAL, Metrics, TURNS_TOTAL};
use crate::outbox::Outbox;
use crate::store::{EventState, PendingOutbound, SessionInfo, SessionKey, Store, StoreError, TokenTotals, TurnEnd};
use crate::usage::Payer;
use crate::vocab::live::Live;
use crate::vocab::message::Message;

/// A message waiting for its turn.
#[derive(Debug, Clone)]
pub struct TurnJob {
    /// The inbound event's sequence number.
    pub seq: i64,
    /// The message.
    pub message: InboundMessage,
    /// Its session key.
    pub key: SessionKey,
    /// When the host accepted it.
    pub accepted_at: Instant,
    /// Whether the sender is an admin (decided by the router from `Access`).
    pub admin: bool,
    /// Events of quick messages merged into this one before the turn started (`agent.batch_window`);
    /// closed with this turn, in the same transaction as its reply.
    pub batched: Vec<i64>,
}

/// Why a running turn was asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// `/stop`.
    Stopped,
    /// A newer message under `busy_policy = "interrupt"`.
    Interrupted,
    /// No step for `agent.inactivity_timeout`.
    Inactive,
}

/// Everything turns need that does not change between them.
pub struct RunnerParts {
    /// The store.
    pub store: Arc<dyn Store>,
    /// Each profile's agent: models, prompts, tools, limits.
    pub agents: Arc<Agents>,
    /// `[[routes]]`, in order: the first matching a chat binds it to a profile and overrides its
    /// model, prompt, toolsets and mention rule.
    pub routes: Arc<[RouteConfig]>,
    /// The outbox.
    pub outbox: Outbox,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// The approval broker.
    pub approvals: Arc<Approvals>,
    /// `HERMESD_HOME`.
    pub data_dir: PathBuf,
    /// What the model is given for attachments (images, audio, documents).
    pub media: Arc<Media>,
    /// The summary model (`[auxiliary.summary]`): session titles, search summaries.
    pub summary: Option<Arc<crate::agent::auxiliary::Summarizer>>,
    /// Where replies of cron runs and webhook deliveries go.
    pub routing: Routing,
    /// Usage per session, user and chat, and the `[limits]` caps.
    pub accounting: Arc<crate::usage::Accounting>,
}

/// Turn limits and policies.
#[derive(Debug, Clone)]
pub struct RunnerSettings {
    /// Reset policies.
    pub sessions: SessionsConfig,
    /// Recovery limits.
    pub recovery: RecoveryConfig,
    /// Toolsets per platform and tool timeouts.
    pub tools: ToolsConfig,
    /// Compression threshold (fraction of the context window).
    pub compression_threshold: f64,
    /// Heartbeat timings.
    pub heartbeat: HeartbeatSettings,
    /// The memory-only flush turn (`[memory]`).
    pub flush: FlushSettings,
}

/// Runs turns; shared by every session actor.
pub struct TurnRunner {
    parts: RunnerParts,
    settings: RunnerSettings,
    /// `[[routes]]` in force (a reload replaces them; `parts.routes` is what the daemon started with).
    routes: Live<[RouteConfig]>,
    /// `[tools]` in force: the toolsets per platform (a reload replaces it).
    tools: Arc<Live<ToolsConfig>>,
    /// Memory flushes before context is lost (`lifecycle.rs`).
    flusher: Arc<Flusher>,
    /// Background work of turns (session titles).
    tasks: TaskTracker,
}

impl TurnRunner {
    /// A runner.
    pub fn new(parts: RunnerParts, settings: RunnerSettings) -> Self {
        let tools = Arc::new(Live::new(Arc::new(settings.tools.clone())));
        let flusher = Arc::new(Flusher {
            store: parts.store.clone(),
            agents: parts.agents.clone(),
            outbox: parts.outbox.clone(),
            tools: tools.clone(),
            data_dir: parts.data_dir.clone(),
            settings: settings.flush,
            gate: Default::default(),
            metrics: parts.metrics.clone(),
            accounting: parts.accounting.clone(),
        });
        let routes = Live::new(parts.routes.clone());
        Self { parts, settings, routes, tools, flusher, tasks: TaskTracker::new() }
    }

    /// Take a reloaded config's `[[routes]]` and `[tools]` for the turns that start from now;
    /// running turns finish on what they started with.
    pub fn reconfigure(&self, routes: Arc<[RouteConfig]>, tools: ToolsConfig) {
        self.parts.approvals.set_preapproved(&tools.approved_commands);
        self.routes.set(routes);
        self.tools.set(Arc::new(tools));
    }

    /// Each profile's agent.
    pub fn agents(&self) -> &Agents {
        &self.parts.agents
    }

    /// The route of a message in `chat` from `user` (the first that matches), with its index.
    pub fn route(&self, chat: &ChatRef, user: &str) -> Option<(usize, RouteConfig)> {
        let routes = self.routes.get();
        routes.iter().enumerate().find(|(_, route)| route.matches(chat, user)).map(|(i, route)| (i, route.clone()))
    }

    /// The agent of the profile `key` belongs to.
    pub fn agent(&self, key: &SessionKey) -> Arc<ProfileAgent> {
        self.parts.agents.of_key(&key.key)
    }

    /// The primary model's name of `key`'s profile (for `/status`).
    pub fn model(&self, key: &SessionKey) -> String {
        self.agent(key).chain.primary().model().to_owned()
    }

    /// The outbox.
    pub fn outbox(&self) -> &Outbox {
        &self.parts.outbox
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.parts.store
    }

    /// The approval broker.
    pub fn approvals(&self) -> &Arc<Approvals> {
        &self.parts.approvals
    }

    /// The skills of `key`'s profile, when configured (`/skills`, `/<skill-name>`).
    pub fn skills(&self, key: &SessionKey) -> Option<crate::agent::skills::Skills> {
        self.agent(key).prompts.skills().cloned()
    }

    /// Usage accounting and caps (`/usage`).
    pub fn accounting(&self) -> &crate::usage::Accounting {
        &self.parts.accounting
    }

    /// Reply routing and delivery targets.
    pub fn routing(&self) -> &Routing {
        &self.parts.routing
    }

    /// The context window of `model` (one of the profile's), else of `key`'s profile's primary.
    pub fn context_length(&self, key: &SessionKey, model: Option<&str>) -> u64 {
        let chain = &self.agent(key).chain;
        match model {
            Some(name) => chain.starting_with(name).primary().context_length(),
            None => chain.primary().context_length(),
        }
    }

    /// The names of the models of `key`'s profile, primary first.
    pub fn models(&self, key: &SessionKey) -> Vec<String> {
        self.agent(key).chain.models()
    }

    /// Limits for restart recovery.
    pub fn recovery(&self) -> &RecoveryConfig {
        &self.settings.recovery
    }

    /// The session `key` points at now, starting one when there is none or the reset policy
    /// says the old one expired (its memory flushed first, the chat told).
    pub async fn resolve_session(&self, key: &SessionKey) -> Result<SessionInfo, StoreError> {
        let (session, reset) = self.resolve_with_reset(key).await?;
        if let Some(reason) = reset {
            self.tell_reset_to_key(key, reason).await;
        }
        Ok(session)
    }

    /// Run one turn to its end. Store failures are logged and reported to the user when the
    /// store still works; the event stays unfinished otherwise and recovery picks it up.
    pub async fn run(&self, job: &TurnJob, stop: &Arc<StopSignal>, shutdown: &CancellationToken) {
        let span = tracing::debug_span!("turn", platform = %job.key.platform, seq = job.seq);
        if let Err(e) = self.try_run(job, stop, shutdown).instrument(span).await {
            self.parts.metrics.inc(ERRORS_TOTAL, &[("kind", "store")]);
            tracing::error!(error = %e, seq = job.seq, "turn failed in the store");
            self.fail(job, "hermesd could not save this conversation; the operator has been told in the logs").await;
        }
    }

    /// End an event with an error reply (panicked turn, store trouble).
    pub async fn fail(&self, job: &TurnJob, text: &str) {
        let outbox = &self.parts.outbox;
        let reply = outbox.compose(&job.message.chat, text, OutboundKind::Error, Some(&job.message.message_id));
        let turn_id = format!("evt:{}", job.seq);
        match self.parts.store.close_event(job.seq, EventState::Failed, Some(text), &reply, &turn_id, now_ms()).await {
            Ok(()) => outbox.deliver(&job.message.chat, &turn_id),
            Err(e) => tracing::error!(error = %e, seq = job.seq, "could not record failed turn"),
        }
        // Messages batched into the turn share its end; the one reply above answers them all.
        for &seq in &job.batched {
            if let Err(e) =
                self.parts.store.close_event(seq, EventState::Failed, Some(text), &[], &turn_id, now_ms()).await
            {
                tracing::error!(error = %e, seq, "could not record failed turn");
            }
        }
        self.count_turn(&job.key, "error");
    }

    /// Count a turn's end by outcome and profile (never by user or chat).
    fn count_turn(&self, key: &SessionKey, outcome: &str) {
        let agent = self.agent(key);
        self.parts.metrics.inc(TURNS_TOTAL, &[("outcome", outcome), ("profile", agent.name.as_str())]);
    }

    /// Compact a session now (`/compress`, sent as `message`); returns what happened, for the user.
    /// The session's actor runs it under a worker permit; `stop` (`/stop`) cancels the model call.
    pub async fn compress_now(&self, key: &SessionKey, message: &InboundMessage, stop: &StopSignal) -> String {
        let session = match self.parts.store.route(&key.key).await {
            Ok(Some(session)) => session,
            Ok(None) => return "There is no history to compress yet.".into(),
            Err(e) => return format!("Could not read the session: {e}"),
        };
        let agent = self.agent(key);
        let compressor = self.compressor(&agent, &session.id, key, message);
        let chain = &agent.chain;
        let mut state = chain.start_turn();
        let outcome = compressor.compact(chain, &mut state, &stop.token, true).await;
        // The summary call is charged like a turn's calls, without counting a turn.
        let payer = Payer::for_turn(message, &TurnOrigin::Chat).in_profile(&agent.name);
        let used = state.turn_usage();
        self.parts.accounting.record(&payer, &session.id, &used, &state.by_model, false, now_ms()).await;
        match outcome {
            Ok(Some(done)) => {
                format!("History summarised: {} earlier messages archived (still searchable).", done.archived)
            }
            Ok(None) => "The history is too short to compress.".into(),
            Err(e) => format!("Compression failed: {e}"),
        }
    }

    /// The tool policy of a turn: the platform's toolsets; for a cron run the job's own (else
    /// the `cron` platform's), never more than its creating chat's platform allows, and never
    /// the interactive or job-creating ones.
    fn policy(
        &self,
        agent: &ProfileAgent,
        origin: &TurnOrigin,
        key: &SessionKey,
        message: &InboundMessage,
    ) -> ToolPolicy {
        let tools = self.tools.get();
        let mut platform_policy = agent.narrow(ToolPolicy::new(tools.toolsets_for(&key.platform)));
        if let Some((_, route)) = self.route(&message.chat, &message.sender.id)
            && let Some(sets) = &route.toolsets
        {
            platform_policy = platform_policy.narrow(&ToolPolicy::new(sets));
        }
        if let TurnOrigin::HassWatch { .. } = origin {
            // A watched change runs like a cron job: nobody is there to answer questions.
            let sets = platform_policy.toolsets().iter().filter(|set| !NOT_FOR_CRON.contains(&set.as_str()));
            return ToolPolicy::new(sets);
        }
        let TurnOrigin::Cron(run) = origin else { return platform_policy };
        let job = &run.job;
        let mut policy = job.toolsets.as_ref().map_or(platform_policy, ToolPolicy::new);
        if let Some(creator) = &job.origin {
            policy = policy.narrow(&ToolPolicy::new(tools.toolsets_for(&creator.platform)));
        }
        ToolPolicy::new(policy.toolsets().iter().filter(|set| !NOT_FOR_CRON.contains(&set.as_str())))
    }

    /// The session's prompt builder: its platform and its facts, taken from `message`.
    fn session_prompts(&self, agent: &ProfileAgent, key: &SessionKey, message: &InboundMessage) -> PromptBuilder {
        let route = self.route(&message.chat, &message.sender.id).and_then(|(_, r)| r.system_prompt.clone());
        agent
            .prompts
            .with_addendum(route)
            .for_session(SessionFacts::of(key, message))
            .for_whose(Whose::of(&message.chat, &message.sender.id))
    }

    /// The folder this turn's tools work in (`tools::place`: the person's in a DM, the chat's
    /// otherwise), after noting whose a person's session is, for `sessions delete --user`.
    async fn turn_workdir(
        &self,
        agent: &ProfileAgent,
        session_id: &str,
        job: &TurnJob,
        origin: &TurnOrigin,
    ) -> Result<PathBuf, StoreError> {
        // Only a person's own session is theirs: an API session several people speak in (a
        // shared `X-Hermes-Session-Id`) is nobody's, so one person's export or erasure never
        // takes another's words.
        if let Whose::Person { user, own_session: true, .. } = Whose::of(&job.message.chat, &job.message.sender.id) {
            self.parts.store.note_person(session_id, &user).await?;
        }
        Ok(turn_whose(&job.message, origin).workdir(&agent.workdir))
    }

    fn compressor(
        &self,
        agent: &ProfileAgent,
        session_id: &str,
        key: &SessionKey,
        message: &InboundMessage,
    ) -> Compressor {
        let policy = agent.narrow(ToolPolicy::new(self.tools.get().toolsets_for(&key.platform)));
        let tools = agent.registry.allowed(&policy);
        Compressor {
            store: self.parts.store.clone(),
            session_id: session_id.to_owned(),
            threshold: self.settings.compression_threshold,
            prompts: self.session_prompts(agent, key, message),
            toolsets: tools.toolsets(),
            before: Some(Arc::new(FlushBeforeCompaction {
                flusher: self.flusher.clone(),
                target: lifecycle::target_of(session_id, key, message, false),
            })),
        }
    }

    /// Store the turn's end with `text` as its reply (of `kind`), then hand it to the outbox.
    async fn finish(
        &self,
        at: &Finishing<'_>,
        text: &str,
        kind: OutboundKind,
        ending: Ending<'_>,
    ) -> Result<(), StoreError> {
        let Finishing { job, session_id, origin, stop } = *at;
        let outbox = &self.parts.outbox;
        let routed = self.route_with_media(job, origin, text, kind).await;
        let reply = &routed.messages;
        // Steering messages the turn took and quick messages batched into it close with it.
        let also_done: Vec<i64> = ending.steered.iter().chain(&job.batched).copied().collect();
        let end = TurnEnd {
            messages: ending.messages,
            reply,
            state: ending.state,
            error: ending.error,
            prompt_tokens: ending.prompt_tokens,
            also_done: &also_done,
            usage: ending.usage,
        };
        let ids = self.parts.store.finish_turn(job.seq, session_id, &end, now_ms()).await?;
        crate::failpoint!("turn.stored");
        stop.answered.store(true, std::sync::atomic::Ordering::SeqCst);
        self.parts.routing.record(&routed).await;
        let turn_id = format!("evt:{}", job.seq);
        if reply.is_empty() {
            return Ok(());
        }
        if ids.len() == reply.len() {
            let rows = ids
                .into_iter()
                .zip(routed.messages)
                .map(|(id, message)| PendingOutbound { id, turn_id: turn_id.clone(), message, attempts: 0 })
                .collect();
            outbox.deliver_rows(&routed.chat, &turn_id, rows);
        } else {
            // Some chunks were queued before (a retried write): read back what is still pending.
            outbox.deliver(&routed.chat, &turn_id);
        }
        Ok(())
    }
}

/// Which turn `finish` ends.
#[derive(Clone, Copy)]
struct Finishing<'a> {
    job: &'a TurnJob,
    session_id: &'a str,
    origin: &'a TurnOrigin,
    stop: &'a StopSignal,
}

/// How a turn ends, for `finish`.
struct Ending<'a> {
    messages: &'a [Message],
    state: EventState,
    error: Option<&'a str>,
    prompt_tokens: Option<u64>,
    /// Steering events folded into the turn, closed with it.
    steered: &'a [i64],
    /// Tokens the turn's model calls used.
    usage: TokenTotals,
}

impl Default for Ending<'_> {
    fn default() -> Self {
        Self {
            messages: &[],
            state: EventState::Done,
            error: None,
            prompt_tokens: None,
            steered: &[],
            usage: TokenTotals::default(),
        }
    }
}
