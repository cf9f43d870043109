//! The host's `Ingress`: every platform's events enter here. `admit` decides on the sender
//! first (default deny, through the router's `Access`), so a stranger's event is never stored
//! and their files never downloaded; admitted events are stored and deduplicated in one
//! transaction by `accept`, and only then handed to the router.
//!
//! Invariant: `accept` returns `New` only after the event is durable, so an adapter that acks
//! the platform afterwards can never lose it (a power cut included, unless the platform's
//! acknowledgement is the answer itself: `Outbox::outlive`); a replay answers `Duplicate` and
//! runs nothing.
//!
//! `HostIngress` is the implementation. A stranger in a DM gets one pairing reply per window, sent
//! through the outbox; nothing else of theirs is stored. `accept_idempotent` does what `accept`
//! does with an `Idempotency-Key` claim in the same transaction (the API, signed webhooks).
//! `delivery_status` and `last_inbound_at` reach the `ReceiptStore`. `with_fence` sets the home
//! lease's `Fence` that every cursor write is checked against.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use hermesd_platform::{Accepted, Admission, DeliveryStatus, InboundEvent, Ingress, IngressError};

use crate::clock::now_ms;
use crate::metrics::{INBOUND_TOTAL, Metrics};
use crate::router::Router;
use crate::store::{AcceptOutcome, Fence, IdempotencyClaim, IdempotentAccept, Store};

/// The ingress shared by every platform.
pub struct HostIngress {
    store: Arc<dyn Store>,
    router: Router,
    metrics: Arc<Metrics>,
    closed: AtomicBool,
    /// The lease this daemon consumes the platforms under, gating their cursor writes.
    fence: Option<Fence>,
}

impl HostIngress {
    /// An ingress storing into `store` and dispatching to `router`.
    pub fn new(store: Arc<dyn Store>, router: Router, metrics: Arc<Metrics>) -> Self {
        Self { store, router, metrics, closed: AtomicBool::new(false), fence: None }
    }

    /// Save platform cursors only while `fence`'s lease is still held under its token.
    pub fn with_fence(mut self, fence: Option<Fence>) -> Self {
        self.fence = fence;
        self
    }

    /// Refuse new events (shutdown); adapters then leave them unacknowledged at the platform.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Whether intake is closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Runs the set-aside event `seq` again (after a fix made it readable): back to `accepted`
    /// in the store, then to its session's actor like a freshly accepted one.
    pub async fn replay(&self, seq: i64) -> crate::store::StoreResult<crate::store::Again<()>> {
        use crate::store::Again;
        Ok(match self.store.reopen_event(seq).await? {
            Again::Ready(event) => {
                tracing::info!(seq, "a set-aside event replayed by the operator");
                self.router.dispatch(seq, event).await;
                Again::Ready(())
            }
            Again::NotFound => Again::NotFound,
            Again::Not(state) => Again::Not(state),
            Again::Unreadable(why) => Again::Unreadable(why),
        })
    }

    /// `accept` for a request carrying an `Idempotency-Key`: the key is claimed in the same
    /// transaction that stores the event, and only a new claim is dispatched. A retry finds the
    /// claim instead and runs nothing, across restarts.
    pub async fn accept_idempotent(
        &self,
        event: InboundEvent,
        claim: &IdempotencyClaim<'_>,
    ) -> Result<IdempotentAccept, IngressError> {
        let platform = event.platform().to_owned();
        if self.is_closed() {
            self.metrics.inc(INBOUND_TOTAL, &[("platform", &platform), ("outcome", "refused")]);
            return Err(IngressError("hermesd is shutting down".into()));
        }
        match self.store.accept_idempotent(&event, claim, now_ms(), self.router.outlive(&event)).await {
            Ok(IdempotentAccept::New { seq }) => {
                crate::failpoint!("ingress.accepted");
                self.metrics.inc(INBOUND_TOTAL, &[("platform", &platform), ("outcome", "new")]);
                self.router.dispatch(seq, event).await;
                Ok(IdempotentAccept::New { seq })
            }
            Ok(other) => {
                self.metrics.inc(INBOUND_TOTAL, &[("platform", &platform), ("outcome", "duplicate")]);
                Ok(other)
            }
            Err(e) => {
                self.metrics.inc(INBOUND_TOTAL, &[("platform", &platform), ("outcome", "refused")]);
                Err(IngressError(format!("store event: {e}")))
            }
        }
    }
}

#[async_trait]
impl Ingress for HostIngress {
    async fn admit(&self, event: &InboundEvent) -> Result<Admission, IngressError> {
        let platform = event.platform();
        if self.is_closed() {
            return Err(IngressError("hermesd is shutting down".into()));
        }
        let admission = self.router.admit(event).await.map_err(|e| IngressError(format!("check access: {e}")))?;
        match admission {
            Admission::Admit => {}
            Admission::Pairing => self.metrics.inc(INBOUND_TOTAL, &[("platform", platform), ("outcome", "pairing")]),
            Admission::Ignored => self.metrics.inc(INBOUND_TOTAL, &[("platform", platform), ("outcome", "stranger")]),
        }
        Ok(admission)
    }

    async fn accept(&self, event: InboundEvent) -> Result<Accepted, IngressError> {
        let platform = event.platform().to_owned();
        if self.is_closed() {
            self.metrics.inc(INBOUND_TOTAL, &[("platform", &platform), ("outcome", "refused")]);
            return Err(IngressError("hermesd is shutting down".into()));
        }
        match self.store.accept_inbound(&event, now_ms(), self.router.outlive(&event)).await {
            Ok(AcceptOutcome::New { seq }) => {
                crate::failpoint!("ingress.accepted");
                self.metrics.inc(INBOUND_TOTAL, &[("platform", &platform), ("outcome", "new")]);
                tracing::debug!(platform, seq, "event accepted");
                self.router.dispatch(seq, event).await;
                Ok(Accepted::New)
            }
            Ok(AcceptOutcome::Duplicate) => {
                self.metrics.inc(INBOUND_TOTAL, &[("platform", &platform), ("outcome", "duplicate")]);
                tracing::debug!(platform, event = event.event_id(), "duplicate event ignored");
                Ok(Accepted::Duplicate)
            }
            Err(e) => {
                self.metrics.inc(INBOUND_TOTAL, &[("platform", &platform), ("outcome", "refused")]);
                Err(IngressError(format!("store event: {e}")))
            }
        }
    }

    async fn load_cursor(&self, platform: &str) -> Result<Option<String>, IngressError> {
        self.store.load_cursor(platform).await.map_err(|e| IngressError(format!("load cursor: {e}")))
    }

    async fn save_cursor(&self, platform: &str, cursor: &str) -> Result<(), IngressError> {
        let saved = self
            .store
            .save_cursor(platform, cursor, now_ms(), self.fence.as_ref())
            .await
            .map_err(|e| IngressError(format!("save cursor: {e}")))?;
        match saved {
            true => Ok(()),
            false => Err(IngressError(format!(
                "save cursor: the {} lease changed hands; another consumer owns {platform} now",
                self.fence.as_ref().map_or("", |fence| fence.lease.as_str())
            ))),
        }
    }

    async fn delivery_status(
        &self,
        platform: &str,
        platform_message_id: &str,
        status: &DeliveryStatus,
    ) -> Result<bool, IngressError> {
        let error = match status {
            DeliveryStatus::Failed(error) => Some(error.as_str()),
            _ => None,
        };
        let found = self
            .store
            .record_delivery_status(platform, platform_message_id, status.as_str(), error)
            .await
            .map_err(|e| IngressError(format!("record delivery status: {e}")))?;
        if let (true, Some(error)) = (found, error) {
            // The reply was sent and counted as delivered; the user never got it.
            tracing::warn!(platform, %error, "a sent message failed later at the platform; receipt marked failed");
        }
        Ok(found)
    }

    async fn last_inbound_at(&self, platform: &str, chat_id: &str) -> Result<Option<i64>, IngressError> {
        self.store.last_inbound_at(platform, chat_id).await.map_err(|e| IngressError(format!("last inbound: {e}")))
    }
}
