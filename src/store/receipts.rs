//! The store capability behind platforms' later reports on sent messages (delivered, read,
//! failed after acceptance) and the last inbound time of a chat (WhatsApp's 24-hour window).
//!
//! A report is found by the platform's message id; a `failed` report marks the outbound row failed.
//! Migration 0015 indexes both lookups.

use async_trait::async_trait;

use super::StoreResult;

/// Receipts the platform reports after `send` returned, and when a chat last wrote to us.
#[async_trait]
pub trait ReceiptStore: Send + Sync {
    /// Record `status` (`sent`, `delivered`, `read` or `failed`) for the sent message with
    /// `platform_message_id` on `platform`. `failed` (with `error`) marks the outbound row
    /// failed for good; the others only move its delivery status forward (never backward:
    /// a late `delivered` after `read` changes nothing, and nothing overrides `failed`).
    /// Returns whether a row was changed.
    async fn record_delivery_status(
        &self,
        platform: &str,
        platform_message_id: &str,
        status: &str,
        error: Option<&str>,
    ) -> StoreResult<bool>;

    /// When the newest stored event of `chat_id` on `platform` was received (Unix ms).
    async fn last_inbound_at(&self, platform: &str, chat_id: &str) -> StoreResult<Option<i64>>;
}
