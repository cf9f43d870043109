//! The adapter's own view of its health: connected, and answering heartbeat pings.
//!
//! Judged by progress (an event, a result or a `pong` within the ping deadline), never by the
//! socket merely being open: a half-dead TCP connection keeps a socket "open" for minutes.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use hermesd_platform::PlatformHealth;

#[derive(Debug, Default)]
struct State {
    started: bool,
    connected: bool,
    last_progress: Option<Instant>,
    failing: Option<String>,
}

/// Written by the receive loop, read by `health()`.
#[derive(Debug)]
pub(crate) struct HealthTracker {
    stale_after: Duration,
    state: Mutex<State>,
}

impl HealthTracker {
    pub(crate) fn new(stale_after: Duration) -> Self {
        Self { stale_after, state: Mutex::default() }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn started(&self) {
        self.lock().started = true;
    }

    /// Authenticated and subscribed.
    pub(crate) fn connected(&self) {
        let mut state = self.lock();
        state.connected = true;
        state.last_progress = Some(Instant::now());
        state.failing = None;
    }

    /// A frame proving the connection works (a `pong`, a result, an event).
    pub(crate) fn progressed(&self) {
        self.lock().last_progress = Some(Instant::now());
    }

    pub(crate) fn disconnected(&self, why: String) {
        let mut state = self.lock();
        state.connected = false;
        state.failing = Some(why);
    }

    pub(crate) fn report(&self) -> Option<PlatformHealth> {
        let state = self.lock();
        if !state.started {
            return None;
        }
        let since = state.last_progress.map(|at| at.elapsed().as_secs_f64());
        let fresh = state.last_progress.is_some_and(|at| at.elapsed() <= self.stale_after);
        let healthy = state.connected && fresh;
        let detail = match (&state.failing, state.connected, fresh) {
            (Some(why), false, _) => why.clone(),
            (_, false, _) => "connecting to home assistant".to_owned(),
            (_, true, false) => format!("no answer from home assistant for over {:?}", self.stale_after),
            (_, true, true) => "connected; heartbeats answered".to_owned(),
        };
        Some(PlatformHealth { healthy, seconds_since_progress: since, detail })
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
        health.progressed();
        assert!(health.report().expect("report").healthy);
        health.disconnected("socket closed".into());
        let down = health.report().expect("report");
        assert!(!down.healthy && down.detail == "socket closed", "{down:?}");
    }
}
