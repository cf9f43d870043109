//! The adapter's own view of its health: when a dispatch or heartbeat acknowledgement last
//! arrived, and what is failing.
//!
//! Judged by what the gateway delivers, never by whether a socket happens to be open. Both a
//! dispatch and an acknowledged heartbeat are progress (`hermesd_platform::health`); the last
//! dispatch is kept for the operator's line.

use std::ops::Deref;
use std::time::Duration;

use hermesd_platform::PlatformHealth;
use hermesd_platform::health::Health;
use tokio::time::Instant;

/// Progress and failures, written by the gateway loop and read by `health()`.
#[derive(Debug)]
pub(crate) struct HealthTracker {
    /// Without a dispatch or an acknowledged heartbeat for this long, the adapter is unhealthy.
    stale_after: Duration,
    /// The shared facts; `own` is when the last dispatch arrived.
    health: Health<Option<Instant>>,
}

impl Deref for HealthTracker {
    type Target = Health<Option<Instant>>;

    fn deref(&self) -> &Health<Option<Instant>> {
        &self.health
    }
}

impl HealthTracker {
    pub(crate) fn new(stale_after: Duration) -> Self {
        Self { stale_after, health: Health::default() }
    }

    /// A dispatch (READY, RESUMED, a message...) arrived.
    pub(crate) fn dispatched(&self) {
        self.health.progressed();
        self.health.with(|state| state.own = state.last_progress);
    }

    /// The shard is connected and its heartbeats are acknowledged.
    pub(crate) fn heartbeat(&self) {
        self.health.alive();
    }

    pub(crate) fn report(&self) -> Option<PlatformHealth> {
        self.health.report(|state| {
            let detail = match (&state.failing, state.own) {
                (Some(failing), _) => failing.clone(),
                (None, Some(at)) => format!("last dispatch {:.1} s ago", at.elapsed().as_secs_f64()),
                (None, None) => "connecting to the gateway".to_owned(),
            };
            (state.fresh(self.stale_after), detail)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_follows_dispatches_heartbeats_and_failures() {
        let health = HealthTracker::new(Duration::from_secs(60));
        assert_eq!(health.report(), None, "nothing to report before run");
        health.started();
        let report = health.report().expect("started");
        assert!(!report.healthy && report.detail == "connecting to the gateway", "{report:?}");
        health.heartbeat();
        assert!(health.report().is_some_and(|r| r.healthy), "acknowledged heartbeats alone are progress");
        health.dispatched();
        let report = health.report().expect("started");
        assert!(report.healthy && report.detail.starts_with("last dispatch 0.0 s ago"), "{report:?}");
        health.failing("gateway: connection refused".into());
        assert_eq!(health.report().map(|r| r.detail).as_deref(), Some("gateway: connection refused"));
    }

    #[test]
    fn stale_progress_is_unhealthy() {
        let health = HealthTracker::new(Duration::ZERO);
        health.started();
        health.dispatched();
        assert!(health.report().is_some_and(|r| !r.healthy));
    }
}
