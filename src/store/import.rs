//! What `hermesd import` writes into the store from another gateway's home: whole conversations
//! (the session, its messages in order, and the key that routes the chat's next message to it)
//! and people the other gateway approved, and the marks of everything an import brought (`imports`:
//! its source, such as `hermes:main:session:<id>`, and what it became), so importing the same home
//! again changes nothing, not even what was removed here since.

use async_trait::async_trait;

use super::{SessionKey, StoreResult};
use crate::vocab::message::Message;

/// A conversation brought from another gateway.
#[derive(Debug, Clone)]
pub struct ImportedSession {
    /// Where it came from, unique per source conversation (the idempotency key).
    pub source: String,
    /// The key its chat's messages are routed by.
    pub key: SessionKey,
    /// Its title, when the source had one.
    pub title: Option<String>,
    /// The person whose own conversation it is (direct chats and per-person group sessions).
    pub person: Option<String>,
    /// Its messages in order, each with when it was written (Unix ms).
    pub messages: Vec<(Message, i64)>,
    /// Started, Unix ms.
    pub created_at: i64,
    /// Last activity, Unix ms.
    pub updated_at: i64,
    /// Make it the conversation its key continues in (when the key has none yet).
    pub route: bool,
}

/// What `import_session` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionImport {
    /// Written now; `routed`: the chat's next message continues it.
    Imported {
        /// The new session's id.
        id: String,
        /// Whether its key now routes to it.
        routed: bool,
    },
    /// Imported before (the session may since have been pruned or erased); nothing written.
    Already {
        /// The session it became.
        id: String,
    },
}

/// Writes of `hermesd import`.
#[async_trait]
pub trait ImportStore: Send + Sync {
    /// What a source item became, if it was imported before (for a conversation, its session).
    async fn imported(&self, source: &str) -> StoreResult<Option<String>>;
    /// Mark a source item imported as `target` (a second mark of it changes nothing).
    async fn mark_imported(&self, source: &str, target: &str, now: i64) -> StoreResult<()>;
    /// Write a conversation in one transaction, unless its source was imported before. It is
    /// routed only when asked and its key routes nowhere yet: a chat that already talks to
    /// hermesd keeps its conversation, and the imported one is history (listed and searchable).
    async fn import_session(&self, session: &ImportedSession, now: i64) -> StoreResult<SessionImport>;
    /// Approve a person on a platform as DM pairing does; false when they were approved already.
    async fn approve_user(&self, platform: &str, user_id: &str, user_name: Option<&str>, now: i64)
    -> StoreResult<bool>;
}
