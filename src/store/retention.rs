//! The store capability behind `[retention]`: deleting what is past its age, a small batch at a
//! time, so the one writer connection is never held for long.

use async_trait::async_trait;

use super::StoreResult;

/// Age-based pruning, each call deleting at most `limit` rows older than `before` (Unix ms) and
/// returning how many it deleted; callers loop while a call returns `limit`.
#[async_trait]
pub trait RetentionStore: Send + Sync {
    /// Inbound events that are finished (done, failed, expired, quarantined) and were received
    /// before `before`. Unfinished events are never pruned. A platform's redelivery of a pruned
    /// event would be new again, so this age must exceed any platform's redelivery window.
    /// Webhook replay records (idempotency scope `webhook:`) of the same age go too.
    async fn prune_inbound(&self, before: i64, limit: u32) -> StoreResult<u64>;
    /// Outbound rows no longer pending (sent, failed, quarantined) created before `before`.
    async fn prune_outbound(&self, before: i64, limit: u32) -> StoreResult<u64>;
    /// Messages compaction archived (replaced by a summary) created before `before`, and
    /// copies of transcript rows set aside as undecodable before then.
    async fn prune_archived_messages(&self, before: i64, limit: u32) -> StoreResult<u64>;
    /// Sessions last active before `before`, with their messages and routes (the key's next
    /// message starts a fresh session); a session with an unfinished event is kept.
    async fn prune_sessions(&self, before: i64, limit: u32) -> StoreResult<u64>;
    /// Give up to `pages` free pages back to the file system (where the backend can).
    async fn reclaim_space(&self, pages: u32) -> StoreResult<()>;
}
