//! The store capability behind `Idempotency-Key`: claiming a key in the same transaction that
//! accepts the request's event, storing the finished response, and pruning old records.
//!
//! Callers hash scopes and bodies before they get here; the store never sees an API key.
//!
//! Signed webhook deliveries claim a key here too, in scopes starting [`WEBHOOK_SCOPE`]: the
//! hash of what their signature covers. Those records are the webhook's replay guard, so they
//! live as long as the deliveries' inbound events (`retention.inbound_events`), not as long as
//! API responses.

use async_trait::async_trait;
use hermesd_platform::InboundEvent;

use super::{Outlive, StoreResult};

/// The scope prefix of webhook deliveries' replay records (`webhook:<route>`).
pub const WEBHOOK_SCOPE: &str = "webhook:";

/// A request's claim on an idempotency key.
#[derive(Debug, Clone, Copy)]
pub struct IdempotencyClaim<'a> {
    /// Hash of (API key, session or user, or the stateless scope): two clients never share one.
    pub scope: &'a str,
    /// The client's `Idempotency-Key`.
    pub key: &'a str,
    /// Hash of the canonical request body.
    pub fingerprint: &'a str,
    /// The request id whose reply completes the record.
    pub request_id: &'a str,
    /// Records created before this (Unix ms) are expired: treated as absent and replaced.
    pub expires_before: i64,
}

/// A response stored for replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body.
    pub body: String,
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotentAccept {
    /// The key was free: the record and the event were stored together.
    New {
        /// The event's sequence number.
        seq: i64,
    },
    /// The first request with this key is still running.
    InProgress,
    /// The first request finished; here is its response.
    Replay(StoredResponse),
    /// The key was used with a different body.
    Mismatch,
}

/// Idempotency records.
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// In one transaction: look the key up (expired records count as absent); when free, store
    /// the record (running) and accept `event` as `accept_inbound` would, surviving `outlive`.
    async fn accept_idempotent(
        &self,
        event: &InboundEvent,
        claim: &IdempotencyClaim<'_>,
        now: i64,
        outlive: Outlive,
    ) -> StoreResult<IdempotentAccept>;
    /// Store the response of `request_id`'s record; false when the request had no record (no
    /// key) or it was completed already.
    async fn complete_idempotent(&self, request_id: &str, response: &StoredResponse, now: i64) -> StoreResult<bool>;
    /// Delete up to `limit` records created before `before`; returns how many went.
    async fn prune_idempotency(&self, before: i64, limit: u32) -> StoreResult<u64>;
}
