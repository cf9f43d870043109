//! The adapter's own view of its health: when it last received, and what is failing.
//!
//! Judged by inbound progress (a completed long poll, a webhook request), never by socket state.
//! The facts are `hermesd_platform::health`'s, plus whether the webhook is registered.

use std::ops::Deref;
use std::time::Duration;

use hermesd_platform::PlatformHealth;
use hermesd_platform::health::Health;

/// Progress and failures, written by the receive loop and read by `health()`.
#[derive(Debug)]
pub(crate) struct HealthTracker {
    webhook: bool,
    /// A poll older than this makes the adapter unhealthy.
    stale_after: Duration,
    /// The shared facts; `own` is whether the webhook is registered.
    health: Health<bool>,
}

impl Deref for HealthTracker {
    type Target = Health<bool>;

    fn deref(&self) -> &Health<bool> {
        &self.health
    }
}

impl HealthTracker {
    pub(crate) fn new(webhook: bool, poll_timeout: Duration) -> Self {
        Self { webhook, stale_after: poll_timeout * 3 + Duration::from_secs(30), health: Health::default() }
    }

    /// Webhook mode: the bot is known and the webhook registered; requests can be served.
    pub(crate) fn ready(&self) {
        self.health.with(|state| {
            state.own = true;
            state.failing = None;
        });
    }

    pub(crate) fn report(&self) -> Option<PlatformHealth> {
        self.health.report(|state| {
            let since = state.since().map(|s| s.as_secs_f64());
            if self.webhook {
                let detail = match (&state.failing, since) {
                    (Some(failing), _) => failing.clone(),
                    (None, Some(secs)) => format!("last webhook request {secs:.1} s ago"),
                    (None, None) if state.own => "webhook ready; no request yet".to_owned(),
                    (None, None) => "registering webhook".to_owned(),
                };
                return (state.own, detail);
            }
            let detail = match (&state.failing, since) {
                (Some(failing), _) => failing.clone(),
                (None, Some(secs)) => format!("last poll {secs:.1} s ago"),
                (None, None) => "waiting for the first poll".to_owned(),
            };
            (state.fresh(self.stale_after), detail)
        })
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
