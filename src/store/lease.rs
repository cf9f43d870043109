//! Leases in the store: one holder at a time for a named piece of work, with an expiry the holder
//! keeps pushing forward and a fencing token that grows each time the lease changes hands. On
//! SQLite the one lease is `home` (a second daemon on the same home stands by); a shared store
//! gives each single-consumer account a lease of its own under the same contract.
//!
//! Domain words only; no SQL leaves `sqlite/`.
//!
//! `LeaseStore`: `acquire_lease`, `take_lease` (for a caller that knows the previous holder is
//! gone), `renew_lease`, `release_lease` and `lease` (who holds it). A `Fence` (a lease and its
//! token) gates `InboundStore::save_cursor`: one statement checks the token, so a holder whose
//! lease changed hands cannot move a cursor under the new holder.

use async_trait::async_trait;

use super::StoreResult;

/// Who holds a lease and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseInfo {
    /// The holder's unique id (a new one per process).
    pub holder: String,
    /// What an operator reads: `PID 1234 on host`.
    pub label: String,
    /// The fencing token of this holding.
    pub token: i64,
    /// When the holder took it (ms since the epoch).
    pub acquired_at: i64,
    /// When it lapses unless renewed (ms since the epoch).
    pub expires_at: i64,
}

/// A holding of a lease, shown to gate a write only the holder may make: the write is refused
/// once the lease changed hands (its token grew), so a holder that lost it without knowing (a
/// paused process, a partitioned machine) cannot move a platform's cursor under the new one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The lease's name (`home` on SQLite; an account's lease on a shared store).
    pub lease: String,
    /// The fencing token of the holding.
    pub token: i64,
}

/// Named leases with expiry and fencing.
#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Take `name` for `holder` until `now + ttl_ms` if it is free, lapsed or already
    /// `holder`'s, in one statement; returns the fencing token (the same while the holder keeps
    /// it, larger whenever it changed hands), or `None` while another holds it.
    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        label: &str,
        ttl_ms: i64,
        now: i64,
    ) -> StoreResult<Option<i64>>;
    /// Take `name` for `holder` whatever its state, for a caller that knows the previous holder
    /// is gone (on SQLite an OS lock on the home proves it); returns the new fencing token.
    async fn take_lease(&self, name: &str, holder: &str, label: &str, now: i64) -> StoreResult<i64>;
    /// Push the expiry of `holder`'s holding `token` to `now + ttl_ms`; false when the lease is
    /// no longer theirs (another took it after it lapsed).
    async fn renew_lease(&self, name: &str, holder: &str, token: i64, ttl_ms: i64, now: i64) -> StoreResult<bool>;
    /// Let the lease lapse at once, if `holder` still holds it under `token`.
    async fn release_lease(&self, name: &str, holder: &str, token: i64) -> StoreResult<()>;
    /// Who holds (or last held) `name`.
    async fn lease(&self, name: &str) -> StoreResult<Option<LeaseInfo>>;
}
