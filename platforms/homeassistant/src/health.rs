//! The adapter's own view of its health: connected, and answering heartbeat pings.
//!
//! Judged by progress (an event, a result or a `pong` within the ping deadline), never by the
//! socket merely being open: a half-dead TCP connection keeps a socket "open" for minutes. The
//! facts are `hermesd_platform::health`'s, plus whether the socket is authenticated.

use std::ops::Deref;
use std::time::Duration;

use hermesd_platform::PlatformHealth;
use hermesd_platform::health::Health;

/// Written by the receive loop, read by `health()`.
#[derive(Debug)]
pub(crate) struct HealthTracker {
    stale_after: Duration,
    /// The shared facts; `own` is whether the socket is authenticated and subscribed.
    health: Health<bool>,
}

impl Deref for HealthTracker {
    type Target = Health<bool>;

    fn deref(&self) -> &Health<bool> {
        &self.health
    }
}

impl HealthTracker {
    pub(crate) fn new(stale_after: Duration) -> Self {
        Self { stale_after, health: Health::default() }
    }

    /// Authenticated and subscribed.
    pub(crate) fn connected(&self) {
        self.health.progressed();
        self.health.with(|state| state.own = true);
    }

    pub(crate) fn disconnected(&self, why: String) {
        self.health.with(|state| {
            state.own = false;
            state.failing = Some(why);
        });
    }

    pub(crate) fn report(&self) -> Option<PlatformHealth> {
        self.health.report(|state| {
            let fresh = state.since().is_some_and(|since| since <= self.stale_after);
            let detail = match (&state.failing, state.own, fresh) {
                (Some(why), false, _) => why.clone(),
                (_, false, _) => "connecting to home assistant".to_owned(),
                (_, true, false) => format!("no answer from home assistant for over {:?}", self.stale_after),
                (_, true, true) => "connected; heartbeats answered".to_owned(),
            };
            (state.own && fresh, detail)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn healthy_only_while_connected_and_answering() {
        let health = HealthTracker::new(Duration::from_secs(60));
        assert_eq!(health.report(), None);
        health.started();
        assert!(!health.report().expect("started").healthy);
        health.connected();
        assert!(health.report().expect("report").healthy);
        tokio::time::advance(Duration::from_secs(61)).await;
        let stale = health.report().expect("report");
        assert!(!stale.healthy && stale.detail.contains("no answer"), "{stale:?}");
        health.alive();
        assert!(health.report().expect("report").healthy);
        health.disconnected("socket closed".into());
        let down = health.report().expect("report");
        assert!(!down.healthy && down.detail == "socket closed", "{down:?}");
    }
}
