//! One agent turn: resolve the session, record the user message, call the model, store the
//! reply and its outbound chunks in one transaction, hand them to the outbox.
//!
//! Invariant: every turn ends with a reply the user sees — the answer, "stopped", or a clear
//! error. A shutdown instead leaves the event to run again at the next start.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Instant;

use hermesd_platform::{InboundMessage, OutboundKind};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::message::{Message, Role};
use super::provider::{ChatRequest, Provider, ProviderError};
use crate::clock::now_ms;
use crate::config::{RecoveryConfig, SessionsConfig};
use crate::metrics::{ERRORS_TOTAL, Metrics, TURNS_TOTAL};
use crate::outbox::Outbox;
use crate::router::session_key::is_expired;
use crate::store::{EventState, SessionInfo, SessionKey, Store, StoreError, TurnEnd};

/// The identity prompt used when `agent.system_prompt` is not set.
const DEFAULT_SYSTEM_PROMPT: &str = "You are Hermes, a helpful assistant reached through the hermesd gateway. \
Answer clearly and concisely. The user may be on a phone: prefer short paragraphs and lists.";

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
}

/// Why a running turn was asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// `/stop`.
    Stopped,
    /// A newer message under `busy_policy = "interrupt"`.
    Interrupted,
}

/// A running turn's stop switch.
#[derive(Debug, Default)]
pub struct StopSignal {
    token: CancellationToken,
    reason: Mutex<Option<StopReason>>,
}

impl StopSignal {
    /// Ask the turn to stop at its next safe point.
    pub fn stop(&self, reason: StopReason) {
        self.reason.lock().expect("stop lock poisoned").get_or_insert(reason);
        self.token.cancel();
    }

    fn reason(&self) -> Option<StopReason> {
        *self.reason.lock().expect("stop lock poisoned")
    }
}

/// Runs turns; shared by every session actor.
pub struct TurnRunner {
    store: Arc<dyn Store>,
    provider: Arc<dyn Provider>,
    outbox: Outbox,
    metrics: Arc<Metrics>,
    system_prompt: String,
    sessions: SessionsConfig,
    recovery: RecoveryConfig,
}

enum Outcome {
    Answered(Message),
    Hint(String),
    Failed(String),
    Stopped(StopReason),
    Persist,
}

impl TurnRunner {
    /// A runner.
    pub fn new(
        store: Arc<dyn Store>,
        provider: Arc<dyn Provider>,
        outbox: Outbox,
        metrics: Arc<Metrics>,
        system_prompt: Option<String>,
        sessions: SessionsConfig,
        recovery: RecoveryConfig,
    ) -> Self {
        let system_prompt = system_prompt.unwrap_or_else(|| DEFAULT_SYSTEM_PROMPT.to_owned());
        Self { store, provider, outbox, metrics, system_prompt, sessions, recovery }
    }

    /// The model name (for `/status`).
    pub fn model(&self) -> &str {
        self.provider.model()
    }

    /// The outbox.
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The session `key` points at now, starting one when there is none or the reset policy
    /// says the old one expired.
    pub async fn resolve_session(&self, key: &SessionKey) -> Result<SessionInfo, StoreError> {
        let now = now_ms();
        let policy = self.sessions.policy_for(&key.platform, key.chat_type);
        match self.store.route(&key.key).await? {
            Some(session) if !is_expired(policy, session.updated_at, now) => Ok(session),
            _ => self.store.start_session(key, now).await,
        }
    }

    /// Run one turn to its end. Store failures are logged and reported to the user when the
    /// store still works; the event stays unfinished otherwise and recovery picks it up.
    pub async fn run(&self, job: &TurnJob, stop: &StopSignal, shutdown: &CancellationToken) {
        let span = tracing::debug_span!("turn", platform = %job.key.platform, seq = job.seq);
        if let Err(e) = self.try_run(job, stop, shutdown).instrument(span).await {
            self.metrics.inc(ERRORS_TOTAL, &[("kind", "store")]);
            tracing::error!(error = %e, seq = job.seq, "turn failed in the store");
            self.fail(job, "hermesd could not save this conversation; the operator has been told in the logs").await;
        }
    }

    /// End an event with an error reply (panicked turn, store trouble).
    pub async fn fail(&self, job: &TurnJob, text: &str) {
        let reply = self.outbox.compose(&job.message.chat, text, OutboundKind::Error, Some(&job.message.message_id));
        let turn_id = format!("evt:{}", job.seq);
        match self.store.close_event(job.seq, EventState::Failed, Some(text), &reply, &turn_id, now_ms()).await {
            Ok(()) => self.outbox.deliver(&job.message.chat, &turn_id),
            Err(e) => tracing::error!(error = %e, seq = job.seq, "could not record failed turn"),
        }
        self.metrics.inc(TURNS_TOTAL, &[("outcome", "error")]);
    }

    async fn try_run(&self, job: &TurnJob, stop: &StopSignal, shutdown: &CancellationToken) -> Result<(), StoreError> {
        let session = self.resolve_session(&job.key).await?;
        if session.suspended {
            let text = format!(
                "This session is suspended: its turn stopped hermesd {} times in a row. Send /new to start a fresh session.",
                session.restart_count
            );
            self.finish(
                job,
                &session.id,
                &text,
                OutboundKind::Error,
                (&[], EventState::Failed, Some("session suspended")),
            )
            .await?;
            self.metrics.inc(TURNS_TOTAL, &[("outcome", "rejected")]);
            return Ok(());
        }
        let user = Message::text(Role::User, user_text(&job.message));
        self.store.begin_turn(job.seq, &session.id, &user, now_ms()).await?;
        let transcript = self.store.load_transcript(&session.id).await?;
        let request = self.request(&job.message, transcript.into_iter().map(|m| m.message));

        let outcome = tokio::select! {
            result = self.provider.complete(&request, None) => match result {
                Ok(response) => Outcome::Answered(response.message),
                // Not a failure of this turn but of the setup: answer plainly, store nothing.
                Err(e @ ProviderError::NotConfigured) => Outcome::Hint(e.to_string()),
                Err(e) => {
                    self.metrics.inc(ERRORS_TOTAL, &[("kind", "provider")]);
                    tracing::warn!(error = %e, "model call failed");
                    Outcome::Failed(format!("Sorry, this turn failed: {e}"))
                }
            },
            _ = stop.token.cancelled() => Outcome::Stopped(stop.reason().unwrap_or(StopReason::Stopped)),
            _ = shutdown.cancelled() => Outcome::Persist,
        };
        let message_id = job.message.message_id.as_str();
        match outcome {
            Outcome::Answered(answer) => {
                let text = answer.content.clone().unwrap_or_default();
                self.finish(job, &session.id, &text, OutboundKind::Reply, (&[answer], EventState::Done, None)).await?;
                self.metrics.inc(TURNS_TOTAL, &[("outcome", "ok")]);
            }
            Outcome::Hint(text) => {
                self.finish(job, &session.id, &text, OutboundKind::Reply, (&[], EventState::Done, None)).await?;
                self.metrics.inc(TURNS_TOTAL, &[("outcome", "unconfigured")]);
            }
            Outcome::Failed(text) => {
                self.finish(job, &session.id, &text, OutboundKind::Error, (&[], EventState::Failed, Some(&text)))
                    .await?;
                self.metrics.inc(TURNS_TOTAL, &[("outcome", "error")]);
            }
            Outcome::Stopped(reason) => {
                let (text, label) = match reason {
                    StopReason::Stopped => ("Stopped.", "stopped"),
                    StopReason::Interrupted => ("Interrupted by your newer message.", "interrupted"),
                };
                self.finish(job, &session.id, text, OutboundKind::Reply, (&[], EventState::Done, Some(label))).await?;
                self.metrics.inc(TURNS_TOTAL, &[("outcome", label)]);
            }
            Outcome::Persist => {
                tracing::info!(message = message_id, "shutdown: turn persisted for the next start");
                self.store.requeue_event(job.seq).await?;
                return Ok(());
            }
        }
        self.metrics.observe_turn(job.accepted_at.elapsed());
        Ok(())
    }

    fn request(&self, message: &InboundMessage, transcript: impl Iterator<Item = Message>) -> ChatRequest {
        let mut messages = vec![Message::text(Role::System, self.system_prompt.clone())];
        // Client-owned history (API stateless mode) comes before the stored transcript, which
        // then holds just this message.
        for past in &message.history {
            if let Some(role) = Role::parse(&past.role) {
                messages.push(Message::text(role, past.content.clone()));
            }
        }
        messages.extend(transcript);
        ChatRequest { messages, stable_prefix: 1, ..Default::default() }
    }

    /// Store the turn's end with `text` as its reply (of `kind`), then hand it to the outbox.
    async fn finish(
        &self,
        job: &TurnJob,
        session_id: &str,
        text: &str,
        kind: OutboundKind,
        end: (&[Message], EventState, Option<&str>),
    ) -> Result<(), StoreError> {
        let reply = self.outbox.compose(&job.message.chat, text, kind, Some(&job.message.message_id));
        let (messages, state, error) = end;
        let end = TurnEnd { messages, reply: &reply, state, error };
        self.store.finish_turn(job.seq, session_id, &end, now_ms()).await?;
        self.outbox.deliver(&job.message.chat, &format!("evt:{}", job.seq));
        Ok(())
    }

    /// Limits for restart recovery.
    pub fn recovery(&self) -> &RecoveryConfig {
        &self.recovery
    }
}

/// The text stored for a user message: its text plus a line per attachment.
fn user_text(message: &InboundMessage) -> String {
    let mut text = message.text.clone();
    for attachment in &message.attachments {
        text.push_str(&format!("\n[attached {:?}: {}]", attachment.kind, attachment.path));
    }
    text
}
