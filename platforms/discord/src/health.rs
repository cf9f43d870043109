//! The adapter's own view of its health: when a dispatch or heartbeat acknowledgement last
//! arrived, and what is failing.
//!
//! Judged by what the gateway delivers, never by whether a socket happens to be open.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use hermesd_platform::PlatformHealth;

/// Progress and failures, written by the gateway loop and read by `health()`.
#[derive(Debug)]
pub(crate) struct HealthTracker {
    /// Without a dispatch or an acknowledged heartbeat for this long, the adapter is unhealthy.
    stale_after: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    started: bool,
    last_dispatch: Option<Instant>,
    last_heartbeat: Option<Instant>,
    failing: Option<String>,
}

impl HealthTracker {
    pub(crate) fn new(stale_after: Duration) -> Self {
        Self { stale_after, state: Mutex::default() }
    }

    /// `run` began.
    pub(crate) fn started(&self) {
        self.lock().started = true;
    }

    /// A dispatch (READY, RESUMED, a message...) arrived.
    pub(crate) fn dispatched(&self) {
        let mut state = self.lock();
        state.last_dispatch = Some(Instant::now());
        state.failing = None;
    }

    /// The shard is connected and its heartbeats are acknowledged.
    pub(crate) fn heartbeat(&self) {
        self.lock().last_heartbeat = Some(Instant::now());
    }

    /// Something the operator should see is failing (e.g. `gateway: connection refused`).
    pub(crate) fn failing(&self, detail: String) {
        self.lock().failing = Some(detail);
    }

    pub(crate) fn report(&self) -> Option<PlatformHealth> {
        let state = self.lock();
        if !state.started {
            return None;
        }
        let latest = state.last_dispatch.max(state.last_heartbeat);
        let since = latest.map(|at| at.elapsed().as_secs_f64());
        let healthy = latest.is_some_and(|at| at.elapsed() < self.stale_after);
        let detail = match (&state.failing, state.last_dispatch) {
            (Some(failing), _) => failing.clone(),
            (None, Some(at)) => format!("last dispatch {:.1} s ago", at.elapsed().as_secs_f64()),
            (None, None) => "connecting to the gateway".to_owned(),
        };
        Some(PlatformHealth { healthy, seconds_since_progress: since, detail })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
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
