//! Whose sessions are whose: the person a direct conversation belongs to, and erasing one
//! person's sessions with everything stored about them (`hermesd sessions delete --user`).
//!
//! Domain words only; no SQL leaves `sqlite/`.
//!
//! `sessions.person_id` is noted on a person's turns. The erasure covers sessions with their
//! messages, routes, events, reply chunks, previews, stored API responses (`idempotency_keys` by
//! request id), their cron jobs and each run's session, in one transaction; the sent files' paths
//! and the jobs' ids come back so the caller removes the files.

use async_trait::async_trait;

use super::StoreResult;

/// A session that belongs to a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonSession {
    /// The session id.
    pub id: String,
    /// Its session key.
    pub key: String,
    /// Its chat (a DM's chat id is where the person's media is kept).
    pub chat_id: String,
    /// Whether it is a direct conversation.
    pub dm: bool,
}

/// What `delete_person` removed from the store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PersonDeletion {
    /// The sessions, before they were deleted.
    pub sessions: Vec<PersonSession>,
    /// Their messages (live and archived; full-text rows go with them).
    pub messages: u64,
    /// Inbound events of those sessions, and the person's events that never reached one.
    pub events: u64,
    /// Reply chunks of those events, with their stream previews.
    pub outbound: u64,
    /// Session routes pointing at them.
    pub routes: u64,
    /// Cron jobs the person created from a chat, with their run records.
    pub cron_jobs: u64,
    /// Days of the person's own usage record (`/usage`, `[limits]`).
    pub usage_days: u64,
    /// The ids of the cron jobs deleted, whose output files (`cron/output/<job>/`) go too.
    pub cron_job_ids: Vec<String>,
    /// The cron jobs' run sessions (each run is a session of its own, prompt and output).
    pub cron_sessions: u64,
    /// Files sent in the deleted replies: copies under `media/outbound/`, relative to the home.
    pub files: Vec<String>,
    /// Stored API responses (`Idempotency-Key` records) of the deleted requests.
    pub api_responses: u64,
}

/// People's sessions.
#[async_trait]
pub trait PersonStore: Send + Sync {
    /// Note that `session_id` is `user`'s (a DM, an API request with `user`); a session keeps
    /// the first person noted.
    async fn note_person(&self, session_id: &str, user: &str) -> StoreResult<()>;
    /// The sessions of `user` on `platform`: noted as theirs, isolated for them in a group, a DM
    /// whose chat id is their id, or an API session keyed by `user:<id>`.
    async fn person_sessions(&self, platform: &str, user: &str) -> StoreResult<Vec<PersonSession>>;
    /// Delete those sessions with their messages, routes, inbound events (and the person's
    /// events that never reached a session), reply chunks and previews, and the cron jobs the
    /// person created (with their runs), in one transaction.
    async fn delete_person(&self, platform: &str, user: &str) -> StoreResult<PersonDeletion>;
}
