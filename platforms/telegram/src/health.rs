//! The adapter's own view of its health: when it last received, and what is failing.
//!
//! Judged by inbound progress (a completed long poll, a webhook request), never by socket state.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use hermesd_platform::PlatformHealth;

/// Progress and failures, written by the receive loop and read by `health()`.
#[derive(Debug)]
pub(crate) struct HealthTracker {
    webhook: bool,
    /// A poll older than this makes the adapter unhealthy.
    stale_after: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    started: bool,
    ready: bool,
    last_progress: Option<Instant>,
    failing: Option<String>,
}

impl HealthTracker {
    pub(crate) fn new(webhook: bool, poll_timeout: Duration) -> Self {
        Self { webhook, stale_after: poll_timeout * 3 + Duration::from_secs(30), state: Mutex::default() }
    }

    /// `run` began.
    pub(crate) fn started(&self) {
        self.lock().started = true;
    }

    /// Webhook mode: the bot is known and the webhook registered; requests can be served.
    pub(crate) fn ready(&self) {
        let mut state = self.lock();
        state.ready = true;
        state.failing = None;
    }

    /// A long poll completed, or a webhook request arrived.
    pub(crate) fn progressed(&self) {
        let mut state = self.lock();
        state.last_progress = Some(Instant::now());
        state.failing = None;
    }

    /// Something the operator should see is failing (e.g. `getUpdates failing: ...`).
    pub(crate) fn failing(&self, detail: String) {
        self.lock().failing = Some(detail);
    }

    pub(crate) fn report(&self) -> Option<PlatformHealth> {
        let state = self.lock();
        if !state.started {
            return None;
        }
        let since = state.last_progress.map(|at| at.elapsed().as_secs_f64());
        let (healthy, detail) = if self.webhook {
            let detail = match (&state.failing, since) {
                (Some(failing), _) => failing.clone(),
                (None, Some(secs)) => format!("last webhook request {secs:.1} s ago"),
                (None, None) if state.ready => "webhook ready; no request yet".to_owned(),
                (None, None) => "registering webhook".to_owned(),
            };
            (state.ready, detail)
        } else {
            let fresh = state.last_progress.is_some_and(|at| at.elapsed() < self.stale_after);
            let detail = match (&state.failing, since) {
                (Some(failing), _) => failing.clone(),
                (None, Some(secs)) => format!("last poll {secs:.1} s ago"),
                (None, None) => "waiting for the first poll".to_owned(),
            };
            (fresh, detail)
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
    fn polling_health_follows_progress_and_failures() {
        let health = HealthTracker::new(false, Duration::from_secs(10));
        assert_eq!(health.report(), None, "nothing to report before run");
        health.started();
        let report = health.report().expect("started");
        assert!(!report.healthy && report.detail == "waiting for the first poll", "{report:?}");
        health.progressed();
        let report = health.report().expect("started");
        assert!(report.healthy && report.detail.starts_with("last poll 0.0 s ago"), "{report:?}");
        health.failing("getUpdates failing: network error".into());
        let report = health.report().expect("started");
        assert!(report.healthy, "one failure after a fresh poll is not yet unhealthy");
        assert_eq!(report.detail, "getUpdates failing: network error");
    }

    #[test]
    fn webhook_health_is_ready_once_registered() {
        let health = HealthTracker::new(true, Duration::from_secs(10));
        health.started();
        assert!(!health.report().is_some_and(|r| r.healthy));
        health.ready();
        let report = health.report().expect("started");
        assert!(report.healthy && report.detail == "webhook ready; no request yet", "{report:?}");
        health.progressed();
        assert!(health.report().is_some_and(|r| r.detail.starts_with("last webhook request")));
    }
}
