//! The store capability behind the session lifecycle: which sessions a key had (`/sessions`),
//! repointing a key at one of them (`/resume`), the background sweep's archiving of expired
//! sessions (with the reason kept for the key's next message), and the memory flush marker.
//! It never decides a policy: callers say what expired and why.

use async_trait::async_trait;
use hermesd_platform::InboundEvent;

use super::{SessionInfo, SessionKey, StoreResult};

/// Why a key's session was archived without the user asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetReason {
    /// No activity for the idle time of the reset policy.
    Idle,
    /// The daily reset hour passed since the last activity.
    Daily,
}

impl ResetReason {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            ResetReason::Idle => "idle",
            ResetReason::Daily => "daily",
        }
    }

    /// The reason a stored word names (unknown words read as idle: the user is still told).
    pub fn parse(text: &str) -> Self {
        match text {
            "daily" => ResetReason::Daily,
            _ => ResetReason::Idle,
        }
    }
}

/// A key whose current session was last active before the sweep's bound.
#[derive(Debug, Clone)]
pub struct StaleRoute {
    /// The key, rebuilt from the session row.
    pub key: SessionKey,
    /// The session the key points at.
    pub session_id: String,
    /// That session's last activity, Unix ms (the sweep archives only if it did not move).
    pub updated_at: i64,
}

/// Sessions per key, resets and flush markers.
#[async_trait]
pub trait LifecycleStore: Send + Sync {
    /// The key's sessions, most recently active first, with their message counts.
    async fn key_sessions(&self, key: &str, limit: u32) -> StoreResult<Vec<SessionInfo>>;
    /// Point `key` at its session `session_id` again and count it as active at `now` (so the
    /// reset policy does not archive it at once); a pending reset of the key is dropped.
    /// False when the session is not one of the key's.
    async fn resume_session(&self, key: &str, session_id: &str, now: i64) -> StoreResult<bool>;
    /// Routes whose session was last active before `before`, oldest first, after the
    /// `(updated_at, session id)` cursor `after`; at most `limit`.
    async fn stale_routes(&self, before: i64, after: Option<(i64, String)>, limit: u32)
    -> StoreResult<Vec<StaleRoute>>;
    /// Archive the key's session: drop its route and remember `reason` for the key's next
    /// message — only while the key still points at `session_id` and the session is still last
    /// active at `updated_at` (a turn that ran meanwhile wins). True when it was archived.
    async fn archive_route(
        &self,
        key: &str,
        session_id: &str,
        updated_at: i64,
        reason: ResetReason,
        now: i64,
    ) -> StoreResult<bool>;
    /// Take (and forget) the reason the sweep archived the key's last session.
    async fn take_reset(&self, key: &str) -> StoreResult<Option<ResetReason>>;
    /// The id of the session's newest user message (one that came from a person, not a
    /// summary) that no flush has seen yet.
    async fn unflushed_through(&self, session_id: &str) -> StoreResult<Option<i64>>;
    /// Record that a flush saw the session's user messages up to `message_id`.
    async fn set_flushed(&self, session_id: &str, message_id: i64) -> StoreResult<()>;
    /// Title the session unless it has a title already (`/title` wins over a generated one).
    /// True when this title was set.
    async fn set_title_if_none(&self, session_id: &str, title: &str) -> StoreResult<bool>;
    /// The newest inbound event that ran in the session (who spoke, from which chat).
    async fn last_event(&self, session_id: &str) -> StoreResult<Option<InboundEvent>>;
}
