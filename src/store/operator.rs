//! What an operator sees and does about work that did not go through: failed and set-aside
//! deliveries (retried or dropped), set-aside and failed inbound events (replayed after a fix).
//! `hermesd deliveries …` and `hermesd events …` read the lists; retrying and replaying go
//! through the running daemon (`/admin/…`), which sends or runs the row at once.

use async_trait::async_trait;
use hermesd_platform::InboundEvent;

use super::{PendingOutbound, StoreResult};

/// One outbound row as `deliveries list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRow {
    /// Row id (what `retry` and `drop` take).
    pub id: i64,
    /// The adapter it goes out on.
    pub platform: String,
    /// The turn (or notice) it belongs to.
    pub turn_id: String,
    /// `pending`, `sent`, `failed` or `quarantined`.
    pub state: String,
    /// Attempts so far.
    pub attempts: u32,
    /// Why it failed or was set aside.
    pub error: Option<String>,
    /// Written, Unix ms.
    pub created_at: i64,
}

/// One inbound row as `events list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// Sequence number (what `replay` takes).
    pub seq: i64,
    /// The adapter it came from.
    pub platform: String,
    /// The platform's id of the event.
    pub event_id: String,
    /// `accepted`, `running`, `done`, `failed`, `expired` or `quarantined`.
    pub state: String,
    /// Why it failed or was set aside.
    pub error: Option<String>,
    /// Received, Unix ms.
    pub received_at: i64,
}

/// What asking for a row again found.
#[derive(Debug)]
pub enum Again<T> {
    /// Back in the queue, decoded: send or run it.
    Ready(T),
    /// No such row.
    NotFound,
    /// The row is in a state that is not taken again (sent, done, still pending…).
    Not(String),
    /// Its stored payload still does not decode: it stays set aside.
    Unreadable(String),
}

/// Listing, retrying, dropping and replaying.
#[async_trait]
pub trait OperatorStore: Send + Sync {
    /// Outbound rows, newest first: only `failed` and `quarantined` ones when `troubled`.
    async fn list_deliveries(&self, troubled: bool, limit: u32) -> StoreResult<Vec<DeliveryRow>>;
    /// A `failed` or `quarantined` row back to `pending` with no attempts, decoded.
    async fn requeue_delivery(&self, id: i64) -> StoreResult<Again<PendingOutbound>>;
    /// Removes a `failed` or `quarantined` row; whether one was removed.
    async fn drop_delivery(&self, id: i64) -> StoreResult<Again<()>>;
    /// Inbound rows, newest first: only `quarantined` and `failed` ones when `troubled`.
    async fn list_events(&self, troubled: bool, limit: u32) -> StoreResult<Vec<EventRow>>;
    /// A `quarantined` event (set aside, never run) back to `accepted` with no attempts, decoded.
    async fn reopen_event(&self, seq: i64) -> StoreResult<Again<InboundEvent>>;
    /// How many outbound rows are `failed` and `quarantined`, and inbound rows `quarantined`.
    async fn trouble_counts(&self) -> StoreResult<(u64, u64, u64)>;
}
