//! Streaming previews in the store: which chat message shows a turn's answer while the model
//! writes it, kept durably from its first send so a restart can still find it.
//!
//! Domain words only; no SQL leaves `sqlite/`.

use async_trait::async_trait;
use hermesd_platform::MessageRef;

use super::{Outlive, StoreResult};

/// A preview left behind by an earlier run, with whether its turn still has a reply to deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPreview {
    /// The turn (`evt:<seq>`) it belongs to.
    pub turn_id: String,
    /// The preview message.
    pub message: MessageRef,
    /// Whether chunks of the turn's reply are still pending (the outbox then puts the first one
    /// into the preview).
    pub reply_pending: bool,
}

/// Streaming previews.
#[async_trait]
pub trait PreviewStore: Send + Sync {
    /// Remember `message` as the preview of `turn_id` (replacing an earlier one of a rerun).
    async fn save_preview(&self, turn_id: &str, message: &MessageRef, now: i64) -> StoreResult<()>;
    /// The preview of `turn_id`, if one was sent and not yet replaced by the final reply.
    async fn preview(&self, turn_id: &str) -> StoreResult<Option<MessageRef>>;
    /// Every preview still recorded (restart), oldest first.
    async fn previews(&self) -> StoreResult<Vec<StoredPreview>>;
    /// Forget the preview of `turn_id` if it is still `message_id` (a rerun may have recorded a
    /// newer one meanwhile).
    async fn drop_preview(&self, turn_id: &str, message_id: &str) -> StoreResult<()>;
    /// The reply chunk `outbound_id` was delivered by editing the preview `message_id` of
    /// `turn_id`: record the receipt and forget the preview, in one transaction surviving
    /// `outlive`.
    async fn settle_preview(
        &self,
        outbound_id: i64,
        turn_id: &str,
        message_id: &str,
        now: i64,
        outlive: Outlive,
    ) -> StoreResult<()>;
}
