//! The store capability behind `session_search`: full-text search restricted, inside the query,
//! to one person's own sessions, and the few messages around a hit that a summary needs.
//!
//! The scope is part of the SQL, never a filter applied to a global result: on a busy gateway a
//! global "best N" would be filled by other people's messages and the caller's own hit lost.
//!
//! A `SearchScope` is every session of one session key plus, in a private chat only, the person's
//! own per-user group sessions on that platform. `search_scoped` tries words, then trigram
//! substrings, and for one- or two-character queries a plain substring test over the scope; ranking
//! is bounded (bm25 over the newest 200 matches in scope, snippets only for the best).
//! `messages_around` gives a summary its context. Indexing is batched off the write path
//! (`sqlite/fts.rs`): `index_in_background` runs `index_pending` every `INDEX_INTERVAL` (500 ms).

use async_trait::async_trait;
use serde::Serialize;

use super::StoreResult;

/// Whose sessions a scoped search reads. A session is in scope when its key is `session_key`
/// (every session that key ever had: the current one and those before each `/new` or reset), or,
/// when `person` is set, when it is that person's own per-user session on that platform (their
/// isolated session in a group). Nothing else: never a session of another key or person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchScope<'a> {
    /// The conversation's session key.
    pub session_key: &'a str,
    /// `(platform, user id)`: also that person's per-user sessions. Callers set it only in a
    /// private chat, so what someone said in private never surfaces where others read along.
    pub person: Option<(&'a str, &'a str)>,
}

/// A hit of a scoped search, with what a reader needs to place it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScopedHit {
    /// The session.
    pub session_id: String,
    /// The session's title, when it has one.
    pub session_title: Option<String>,
    /// When the session started, Unix ms.
    pub session_started: i64,
    /// The message row.
    pub message_id: i64,
    /// Its role (`user` or `assistant`).
    pub role: String,
    /// A snippet with the match marked by `[` `]`.
    pub snippet: String,
    /// Written, Unix ms.
    pub created_at: i64,
}

/// A message near a hit, for context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextMessage {
    /// The message row.
    pub id: i64,
    /// Its role (`user` or `assistant`).
    pub role: String,
    /// Its text.
    pub content: String,
    /// Written, Unix ms.
    pub created_at: i64,
}

/// Scoped full-text search.
#[async_trait]
pub trait SearchStore: Send + Sync {
    /// The best `limit` user and assistant messages (archived ones included) in `scope` that
    /// match `query`: whole words first, then, when no word matches and the query has at least
    /// three characters, substrings (trigram). Tool results are left out: they repeat earlier
    /// searches and file dumps rather than what was said.
    async fn search_scoped(&self, query: &str, scope: &SearchScope<'_>, limit: u32) -> StoreResult<Vec<ScopedHit>>;
    /// The message `message_id` and up to `radius` user or assistant messages with text on each
    /// side of it in its session (archived ones included), oldest first.
    async fn messages_around(&self, message_id: i64, radius: u32) -> StoreResult<Vec<ContextMessage>>;
    /// Move up to `max` messages written since the last call into the full-text index, in one
    /// write; returns how many. Writes never index on the turn's path: a background task calls
    /// this every `INDEX_INTERVAL`, and every search drains what is left first, so a search
    /// always sees every message written before it.
    async fn index_pending(&self, max: u32) -> StoreResult<u64>;
}

/// How often the background task indexes new messages.
pub const INDEX_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);
/// Messages indexed per write of that task (the writer is released between batches).
pub const INDEX_BATCH: u32 = 2_000;

/// The background half of indexing: every `INDEX_INTERVAL`, index what was written since, in
/// batches of `INDEX_BATCH`, until the queue is empty or `cancel` fires. A failure is logged and
/// retried next round (searches drain the queue themselves, so none is ever wrong).
pub async fn index_in_background(store: std::sync::Arc<dyn super::Store>, cancel: tokio_util::sync::CancellationToken) {
    let mut tick = tokio::time::interval(INDEX_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        loop {
            match store.index_pending(INDEX_BATCH).await {
                Ok(n) if n < u64::from(INDEX_BATCH) => break,
                Ok(_) => tokio::task::yield_now().await,
                Err(e) => {
                    tracing::warn!(error = %e, "indexing new messages for search failed; retrying");
                    break;
                }
            }
        }
    }
}
