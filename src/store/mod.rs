//! The `Store` boundary: durable state in domain words (accept an event, begin and finish a turn,
//! queue a reply, load a transcript). Callers never see SQL; only implementations write it.
//!
//! The trait is split by concern so each backend file stays small; `Store` is all of them.
//! A PostgreSQL backend for scale-out is a second implementation of the same traits.
//!
//! The capabilities: `InboundStore` (events, dedup, cursors), `SessionStore` (routes, transcripts,
//! turns), `OutboxStore`, `AccessStore`, `ExtrasStore` (titles, the per-session model, `/undo`,
//! home channels, a turn's receipts), `CronStore`, `UsageStore`, `PersonStore`, `ReceiptStore`,
//! `IdempotencyStore`, `SearchStore`, `LifecycleStore`, `PreviewStore`, `RetentionStore`,
//! `HealthStore`, `LeaseStore`, `OperatorStore`, `GrantStore` and `ResponseStore` (the Responses
//! API's kept responses), most in a file of their own beside this one; `ImportStore` (what
//! `hermesd import` writes) is `SqliteStore`'s alone.
//!
//! `Outlive` is what a write on the durable path must survive: `Crash` (the WAL has it) or
//! `PowerCut` (its commit is synced). The caller picks by what its acknowledgement promised.

mod cron;
pub mod grants;
pub mod health;
mod idempotency;
pub mod import;
mod lease;
mod lifecycle;
mod operator;
mod people;
mod preview;
mod receipts;
pub mod responses;
mod retention;
pub mod search;
mod sqlite;
mod usage;

use async_trait::async_trait;
use hermesd_platform::{ChatRef, ChatType, InboundEvent, OutboundMessage};
use serde::Serialize;

use crate::vocab::message::Message;

pub use sqlite::SqliteStore;
pub use sqlite::backup::{BackupReport, VacuumReport, backup};
pub use sqlite::checkup::Checkup;

/// Errors from the store; callers act on the kind.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database schema is newer than this binary understands.
    #[error("database schema version {found} is newer than this hermesd knows ({known}); upgrade hermesd")]
    SchemaTooNew {
        /// Version in the database.
        found: i64,
        /// Newest version this binary has.
        known: i64,
    },
    /// A row that must exist does not.
    #[error("not found: {0}")]
    NotFound(String),
    /// Stored JSON no longer parses (schema drift or corruption).
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// The database itself failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// Migrations failed.
    #[error("migrate: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

/// Result alias for store calls.
pub type StoreResult<T> = Result<T, StoreError>;

/// What a write on the durable path (an accepted event, a send receipt) must outlive before it
/// returns. The caller picks it by what its acknowledgement promises: a platform told "taken"
/// before the turn runs (an update offset, a webhook's 202) was promised the event outlives a
/// power cut; a caller whose acknowledgement is the answer itself (`Capabilities::request_response`:
/// the API, Home Assistant requests) holds its request open until then, and after a power cut
/// sees a failed request it retries, whatever the disk kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outlive {
    /// A crash of the process: the write-ahead log has it, unsynced (`synchronous = NORMAL`).
    Crash,
    /// A power cut too: its commit is synced to disk (`synchronous = FULL`).
    PowerCut,
}

/// What `accept_inbound` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptOutcome {
    /// First time seen; `seq` is its durable position.
    New {
        /// The event's sequence number.
        seq: i64,
    },
    /// Seen before.
    Duplicate,
}

/// Where an inbound event is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventState {
    /// Stored, not yet started.
    Accepted,
    /// A turn for it started (and may have been cut off by a crash).
    Running,
    /// Answered.
    Done,
    /// Ended with an error reply.
    Failed,
    /// Too old to run after downtime; answered with a notice.
    Expired,
    /// Its stored payload could not be decoded; set aside at start, never run or retried.
    Quarantined,
}

impl EventState {
    fn as_str(self) -> &'static str {
        match self {
            EventState::Accepted => "accepted",
            EventState::Running => "running",
            EventState::Done => "done",
            EventState::Failed => "failed",
            EventState::Expired => "expired",
            EventState::Quarantined => "quarantined",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "accepted" => EventState::Accepted,
            "running" => EventState::Running,
            "done" => EventState::Done,
            "failed" => EventState::Failed,
            "expired" => EventState::Expired,
            "quarantined" => EventState::Quarantined,
            _ => return None,
        })
    }
}

/// An event that was accepted and not finished (for restart recovery).
#[derive(Debug, Clone)]
pub struct UnfinishedEvent {
    /// Its sequence number.
    pub seq: i64,
    /// The normalised event.
    pub event: InboundEvent,
    /// Accepted (never started) or running (cut off mid-turn).
    pub state: EventState,
    /// Turns started for it so far.
    pub attempts: u32,
    /// When it was accepted.
    pub received_at: i64,
    /// The session its turn ran in, when it started.
    pub session_id: Option<String>,
}

/// A stored row that could not be decoded: marked `quarantined` (kept for inspection, never run
/// or retried) instead of stopping the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuarantinedRow {
    /// Its sequence number (inbound) or id (outbound).
    pub id: i64,
    /// The platform it came from or was meant for.
    pub platform: String,
    /// Why it could not be read (the decoder's message; never the payload itself).
    pub reason: String,
}

/// What `unfinished_events` found: the events to resume, and rows it had to set aside.
#[derive(Debug, Clone, Default)]
pub struct UnfinishedEvents {
    /// Accepted or running events, oldest first.
    pub events: Vec<UnfinishedEvent>,
    /// Rows whose payload no longer decodes, now in state `quarantined`.
    pub quarantined: Vec<QuarantinedRow>,
}

/// The identity of a conversation, from which sessions are found or started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionKey {
    /// `agent:main:{platform}:{chat_type}:{chat_id}[:{thread_id}][:{user_id}]`.
    pub key: String,
    /// The platform.
    pub platform: String,
    /// The chat id.
    pub chat_id: String,
    /// The chat type.
    pub chat_type: ChatType,
    /// The thread, if any.
    pub thread_id: Option<String>,
    /// The user, when the session is per user.
    pub user_id: Option<String>,
}

/// A session row.
#[derive(Debug, Clone, Serialize)]
pub struct SessionInfo {
    /// Stable id (UUIDv7); compaction keeps it.
    pub id: String,
    /// The key it serves.
    pub key: String,
    /// Title, when set.
    pub title: Option<String>,
    /// Created, Unix ms.
    pub created_at: i64,
    /// Last activity, Unix ms.
    pub updated_at: i64,
    /// Turns in a row that crashed the daemon.
    pub restart_count: u32,
    /// Suspended after too many crashes, until `/new`.
    pub suspended: bool,
    /// Live (not archived) messages; -1 where the lookup did not count them (`route`).
    pub message_count: i64,
    /// The session's system prompt, once built.
    #[serde(skip)]
    pub system_prompt: Option<String>,
    /// Prompt tokens of the session's last model call.
    pub last_prompt_tokens: u64,
    /// The model `/model` chose for this session; `None`: the configured primary.
    pub model: Option<String>,
}

/// A stored transcript message.
#[derive(Debug, Clone, Serialize)]
pub struct StoredMessage {
    /// Row id.
    pub id: i64,
    /// Its place in the transcript (compaction summaries sort where their span began).
    pub position: f64,
    /// The message.
    #[serde(flatten)]
    pub message: Message,
    /// Written, Unix ms.
    pub created_at: i64,
    /// Soft-archived by compaction (still searchable).
    pub archived: bool,
}

/// A full-text search hit.
#[derive(Debug, Clone, Serialize)]
pub struct SearchHit {
    /// The session.
    pub session_id: String,
    /// The message row.
    pub message_id: i64,
    /// Its role.
    pub role: String,
    /// A snippet with the match marked by `[` `]`.
    pub snippet: String,
    /// Written, Unix ms.
    pub created_at: i64,
}

/// How a turn ended, written atomically by `finish_turn`.
#[derive(Debug, Clone, Copy)]
pub struct TurnEnd<'a> {
    /// Messages the turn adds to the transcript (none for failed or stopped turns).
    pub messages: &'a [Message],
    /// The reply chunks to queue.
    pub reply: &'a [OutboundMessage],
    /// The event's final state.
    pub state: EventState,
    /// What went wrong, if anything.
    pub error: Option<&'a str>,
    /// Prompt tokens of the turn's last model call, when reported.
    pub prompt_tokens: Option<u64>,
    /// Other events the turn answered (steering messages), closed as done with it.
    pub also_done: &'a [i64],
    /// Tokens of the turn's model calls, added to the session's totals.
    pub usage: TokenTotals,
}

/// Token counts summed over model calls, as the providers reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenTotals {
    /// Model calls counted.
    pub calls: u64,
    /// Prompt tokens, cached ones included.
    pub prompt: u64,
    /// Completion tokens.
    pub completion: u64,
    /// Prompt tokens read from the provider's prompt cache.
    pub cache_read: u64,
    /// Prompt tokens written to the provider's prompt cache.
    pub cache_write: u64,
}

/// A compaction: the span to archive and what replaces it, written in one transaction.
#[derive(Debug, Clone, Copy)]
pub struct Compaction<'a> {
    /// First position of the archived span.
    pub from: f64,
    /// Last position of the archived span.
    pub to: f64,
    /// The summary message that takes the span's place.
    pub summary: &'a Message,
    /// The rebuilt system prompt.
    pub system_prompt: &'a str,
}

/// An outbound chunk waiting for delivery.
#[derive(Debug, Clone)]
pub struct PendingOutbound {
    /// Row id.
    pub id: i64,
    /// The turn (or notice) it belongs to.
    pub turn_id: String,
    /// The message to send.
    pub message: OutboundMessage,
    /// Delivery attempts so far.
    pub attempts: u32,
}

/// Accepting events and tracking their turns.
#[async_trait]
pub trait InboundStore: Send + Sync {
    /// Whether the database answers (readiness).
    async fn ping(&self) -> StoreResult<()>;
    /// Store `event` unless (platform, event id) was seen; one transaction, returning once it
    /// would survive `outlive`.
    async fn accept_inbound(&self, event: &InboundEvent, now: i64, outlive: Outlive) -> StoreResult<AcceptOutcome>;
    /// Events accepted or running, oldest first. A row that no longer decodes is moved to
    /// `quarantined` in the same call and listed apart, so one bad row never blocks a start.
    async fn unfinished_events(&self) -> StoreResult<UnfinishedEvents>;
    /// End an event without a turn (expired, rejected, control command), queueing `reply`.
    async fn close_event(
        &self,
        seq: i64,
        state: EventState,
        error: Option<&str>,
        reply: &[OutboundMessage],
        turn_id: &str,
        now: i64,
    ) -> StoreResult<()>;
    /// A graceful shutdown interrupted the event's turn: run it again next start, not counted as
    /// a crash.
    async fn requeue_event(&self, seq: i64) -> StoreResult<()>;
    /// A platform's durable cursor.
    async fn load_cursor(&self, platform: &str) -> StoreResult<Option<String>>;
    /// Save a platform's cursor; with a `fence`, only while that lease is still held under its
    /// token (false, and nothing written, once it changed hands).
    async fn save_cursor(&self, platform: &str, cursor: &str, now: i64, fence: Option<&Fence>) -> StoreResult<bool>;
}

/// Sessions, transcripts and turns.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// The session a key points at, if any.
    async fn route(&self, key: &str) -> StoreResult<Option<SessionInfo>>;
    /// Start a new session for `key` and point the key at it.
    async fn start_session(&self, key: &SessionKey, now: i64) -> StoreResult<SessionInfo>;
    /// A session by id.
    async fn session(&self, id: &str) -> StoreResult<Option<SessionInfo>>;
    /// Sessions, most recently active first.
    async fn list_sessions(&self, limit: u32) -> StoreResult<Vec<SessionInfo>> {
        self.list_sessions_with(None, limit).await
    }
    /// Sessions whose key starts with `key_prefix` (a profile's `agent:<key>:`; `None`: all),
    /// most recently active first.
    async fn list_sessions_with(&self, key_prefix: Option<&str>, limit: u32) -> StoreResult<Vec<SessionInfo>>;
    /// Live messages of a session, oldest first.
    async fn load_transcript(&self, session_id: &str) -> StoreResult<Vec<StoredMessage>>;
    /// Every message of a session, archived included.
    async fn full_history(&self, session_id: &str) -> StoreResult<Vec<StoredMessage>>;
    /// Mark the event running in `session_id` (attempts + 1) and write its user message: once
    /// per event, and on a rerun this attempt's text over the earlier attempt's (a rerun may
    /// carry quick messages batched into it that the first attempt did not). Returns the
    /// attempt number.
    async fn begin_turn(&self, seq: i64, session_id: &str, user: &Message, now: i64) -> StoreResult<u32>;
    /// Mark event `seq` running in `session_id` without a user message of its own (an API
    /// client's function outputs continue the last turn; they are stored with the turn's end);
    /// returns the attempt number.
    async fn begin_resumed_turn(&self, seq: i64, session_id: &str, now: i64) -> StoreResult<u32>;
    /// In one transaction: append the turn's messages, queue its reply chunks, close the event,
    /// and reset the session's crash counter. Returns the ids of the chunks queued, in order.
    async fn finish_turn(&self, seq: i64, session_id: &str, end: &TurnEnd<'_>, now: i64) -> StoreResult<Vec<i64>>;
    /// Store the session's system prompt (built on its first turn, rebuilt after compaction).
    async fn set_system_prompt(&self, session_id: &str, prompt: &str) -> StoreResult<()>;
    /// Compact in place: archive a span of live messages (still searchable), insert the summary
    /// where it began, replace the system prompt — atomically, same session id.
    async fn compact(&self, session_id: &str, compaction: &Compaction<'_>, now: i64) -> StoreResult<()>;
    /// Count a crashed turn against a session; suspends it at `max`. Returns the new count.
    async fn record_crash(&self, session_id: &str, max: u32) -> StoreResult<u32>;
    /// Full-text search over messages (archived included); trigram for short or CJK queries.
    async fn search(&self, query: &str, session_id: Option<&str>, limit: u32) -> StoreResult<Vec<SearchHit>> {
        self.search_with(query, session_id, None, limit).await
    }
    /// `search`, only in sessions whose key starts with `key_prefix` (`None`: all).
    async fn search_with(
        &self,
        query: &str,
        session_id: Option<&str>,
        key_prefix: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<SearchHit>>;
}

/// The durable outbox.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Queue messages (notices, acks) outside a turn. Returns their row ids.
    async fn enqueue_outbound(&self, turn_id: &str, messages: &[OutboundMessage], now: i64) -> StoreResult<Vec<i64>>;
    /// Chunks of one turn still pending, in order.
    async fn pending_for_turn(&self, turn_id: &str) -> StoreResult<Vec<PendingOutbound>>;
    /// Every pending chunk, oldest first (restart).
    async fn pending_outbound(&self) -> StoreResult<Vec<PendingOutbound>>;
    /// Replies waiting to be sent, counted by platform (the control panel's queue depth).
    async fn pending_by_platform(&self) -> StoreResult<Vec<(String, u64)>>;
    /// Record a delivery receipt, returning once it would survive `outlive`.
    async fn mark_sent(&self, id: i64, platform_message_id: &str, now: i64, outlive: Outlive) -> StoreResult<()>;
    /// Record a failed attempt; `give_up` ends the row as failed.
    async fn mark_attempt_failed(&self, id: i64, error: &str, give_up: bool) -> StoreResult<()>;
}

/// The unknown user asking to pair.
#[derive(Debug, Clone, Copy)]
pub struct PairingSubject<'a> {
    /// The platform.
    pub platform: &'a str,
    /// Their id there.
    pub user_id: &'a str,
    /// Their display name, when known.
    pub user_name: Option<&'a str>,
    /// The DM they wrote from.
    pub chat_id: &'a str,
}

/// A request to pair an unknown user, as the store decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairingRequest {
    /// A new code was stored.
    Created,
    /// This user asked too recently; no new code.
    TooSoon,
    /// The platform has too many codes waiting.
    TooManyPending,
}

/// Limits on pairing requests.
#[derive(Debug, Clone, Copy)]
pub struct PairingLimits {
    /// How long a code is valid, ms.
    pub ttl_ms: i64,
    /// Codes waiting per platform.
    pub max_pending: i64,
    /// Least time between two requests of one user, ms.
    pub min_interval_ms: i64,
    /// Failed approvals before the platform's approvals lock.
    pub max_failures: i64,
    /// How long a lockout lasts, ms.
    pub lockout_ms: i64,
}

/// The result of an approval attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairingApproval {
    /// The code matched: this user is now approved.
    Approved {
        /// The user id.
        user_id: String,
        /// The user's name, when known.
        user_name: Option<String>,
    },
    /// No waiting code matches.
    NoSuchCode,
    /// Too many failed attempts: approvals for this platform are locked until then (Unix ms).
    Locked {
        /// When the lock ends.
        until: i64,
    },
}

/// A pending code or an approved user, for `hermesd pairing list`.
#[derive(Debug, Clone, Serialize)]
pub struct AccessEntry {
    /// The platform.
    pub platform: String,
    /// The user id.
    pub user_id: String,
    /// The user's name, when known.
    pub user_name: Option<String>,
    /// Approved (true) or waiting with a code (false).
    pub approved: bool,
    /// Approval time, or the code's expiry, Unix ms.
    pub at: i64,
}

/// Approved users and pairing codes.
#[async_trait]
pub trait AccessStore: Send + Sync {
    /// Whether `user_id` was approved on `platform`.
    async fn is_approved(&self, platform: &str, user_id: &str) -> StoreResult<bool>;
    /// Store a pairing code (hashed) for a user, within the limits.
    async fn request_pairing(
        &self,
        who: &PairingSubject<'_>,
        code_hash: &str,
        limits: &PairingLimits,
        now: i64,
    ) -> StoreResult<PairingRequest>;
    /// Approve the user whose code hashes to `code_hash`.
    async fn approve_pairing(
        &self,
        platform: &str,
        code_hash: &str,
        limits: &PairingLimits,
        now: i64,
    ) -> StoreResult<PairingApproval>;
    /// Waiting codes and approved users.
    async fn access_entries(&self, now: i64) -> StoreResult<Vec<AccessEntry>>;
    /// Remove an approved user; true when there was one.
    async fn revoke_user(&self, platform: &str, user_id: &str) -> StoreResult<bool>;
    /// Approve the user a live code was given to, as its code would (the control panel's
    /// Approve); false when no live code waits for them.
    async fn approve_waiting(&self, platform: &str, user_id: &str, now: i64) -> StoreResult<bool>;
    /// Drop the codes waiting for a user (the control panel's Deny); false when there were none.
    async fn deny_waiting(&self, platform: &str, user_id: &str) -> StoreResult<bool>;
}

pub use cron::{ClaimDecision, CronJob, CronRun, CronStore, JobState, JobUpdate, NewJob, RunStatus};
pub use grants::{Grant, GrantStore};
pub use health::HealthStore;
pub use idempotency::{IdempotencyClaim, IdempotencyStore, IdempotentAccept, StoredResponse, WEBHOOK_SCOPE};
pub use lease::{Fence, LeaseInfo, LeaseStore};
pub use lifecycle::{LifecycleStore, ResetReason, StaleRoute};
pub use operator::{Again, DeliveryRow, EventRow, OperatorStore};
pub use people::{PersonDeletion, PersonSession, PersonStore};
pub use preview::{PreviewStore, StoredPreview};
pub use receipts::ReceiptStore;
pub use responses::{ResponseStore, StoredApiResponse};
pub use retention::RetentionStore;
pub use search::{ContextMessage, ScopedHit, SearchScope, SearchStore};
pub use usage::{ModelDay, ModelUsage, PersonUsage, UsageDay, UsageRecord, UsageScope, UsageStore, UsageSum};

/// Per-session choices made by chat commands, and the platforms' home channels.
#[async_trait]
pub trait ExtrasStore: Send + Sync {
    /// Set (or clear) a session's title.
    async fn set_title(&self, session_id: &str, title: Option<&str>) -> StoreResult<()>;
    /// Set (or clear) the model a session starts its turns on.
    async fn set_session_model(&self, session_id: &str, model: Option<&str>) -> StoreResult<()>;
    /// Archive the session's last exchange (its last user message and everything after it);
    /// returns that user message's text, or `None` when there is nothing to undo. Archived rows
    /// stay searchable.
    async fn undo_last_exchange(&self, session_id: &str) -> StoreResult<Option<String>>;
    /// Make `chat` the platform's home channel (the `<platform>` delivery target).
    async fn set_home_channel(&self, chat: &ChatRef, now: i64) -> StoreResult<()>;
    /// The platform's home channel set by `/sethome`.
    async fn home_channel(&self, platform: &str) -> StoreResult<Option<ChatRef>>;
    /// Whether an outbound message of `turn_id` is still waiting for its platform; with the
    /// platform message ids of those that were delivered.
    async fn turn_receipts(&self, turn_id: &str) -> StoreResult<TurnReceipts>;
    /// `/reasoning on|off`: whether the session's replies show the model's reasoning.
    async fn set_show_reasoning(&self, session_id: &str, on: bool) -> StoreResult<()>;
    /// Whether the session's replies show the model's reasoning (off for unknown sessions).
    async fn show_reasoning(&self, session_id: &str) -> StoreResult<bool>;
    /// The session's token totals over all its model calls.
    async fn session_usage(&self, session_id: &str) -> StoreResult<TokenTotals>;
}

/// Delivery state of one turn's outbound messages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnReceipts {
    /// Platform message ids of delivered chunks, in chunk order.
    pub delivered: Vec<String>,
    /// Chunks still waiting.
    pub pending: usize,
    /// Chunks that failed for good, with the last error.
    pub failed: Vec<String>,
}

/// Everything the daemon keeps.
pub trait Store:
    InboundStore
    + SessionStore
    + OutboxStore
    + AccessStore
    + CronStore
    + ExtrasStore
    + IdempotencyStore
    + RetentionStore
    + ReceiptStore
    + SearchStore
    + PreviewStore
    + UsageStore
    + PersonStore
    + LifecycleStore
    + HealthStore
    + LeaseStore
    + OperatorStore
    + GrantStore
    + ResponseStore
{
}

impl<T> Store for T where
    T: InboundStore
        + SessionStore
        + OutboxStore
        + AccessStore
        + CronStore
        + ExtrasStore
        + IdempotencyStore
        + RetentionStore
        + ReceiptStore
        + SearchStore
        + PreviewStore
        + UsageStore
        + PersonStore
        + LifecycleStore
        + HealthStore
        + LeaseStore
        + OperatorStore
        + GrantStore
        + ResponseStore
{
}
