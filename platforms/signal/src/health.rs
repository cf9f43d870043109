//! The adapter's own view of its health: when the stream (or a `receive` call) was last alive.
//!
//! Alive means bytes or a keepalive comment arrived, or a `receive` call completed, never that a
//! socket is open: a stream that wedges while its connection stays up turns unhealthy once the
//! deadline passes, and `/readyz` and `hermesd_platform_seconds_since_progress` say how long ago.
//!
//! It also counts the streams replaced for silence.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use hermesd_platform::PlatformHealth;

/// Liveness, written by the receive loop and read by `health()`.
#[derive(Debug)]
pub(crate) struct HealthTracker {
    deadline: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    started: bool,
    connected: bool,
    last_alive: Option<Instant>,
    /// Streams replaced because they went quiet past the deadline.
    wedged: u64,
    failing: Option<String>,
}

impl HealthTracker {
    pub(crate) fn new(deadline: Duration) -> Self {
        Self { deadline, state: Mutex::default() }
    }

    pub(crate) fn started(&self) {
        self.lock().started = true;
    }

    /// A stream was opened (or a `receive` call answered).
    pub(crate) fn connected(&self) {
        let mut state = self.lock();
        state.connected = true;
        state.last_alive = Some(Instant::now());
        state.failing = None;
    }

    /// Bytes or a keepalive arrived.
    pub(crate) fn alive(&self) {
        self.lock().last_alive = Some(Instant::now());
    }

    /// The stream ended or could not be opened.
    pub(crate) fn disconnected(&self, why: String) {
        let mut state = self.lock();
        state.connected = false;
        state.failing = Some(why);
    }

    /// The stream went quiet past the deadline and is being replaced.
    pub(crate) fn wedged(&self) {
        let mut state = self.lock();
        state.wedged += 1;
        state.connected = false;
        state.failing = Some(format!("stream silent for over {:.0}s; replacing it", self.deadline.as_secs_f64()));
    }

    /// How many streams were replaced for silence.
    pub(crate) fn wedged_count(&self) -> u64 {
        self.lock().wedged
    }

    pub(crate) fn report(&self) -> Option<PlatformHealth> {
        let state = self.lock();
        if !state.started {
            return None;
        }
        let since = state.last_alive.map(|at| at.elapsed());
        let fresh = since.is_some_and(|s| s < self.deadline);
        let secs = since.map(|s| s.as_secs_f64());
        let replaced =
            if state.wedged > 0 { format!("; {} silent stream(s) replaced", state.wedged) } else { String::new() };
        let detail = match (&state.failing, secs) {
            (Some(failing), _) => format!("{failing}{replaced}"),
            (None, _) if !state.connected => "connecting to signal-cli".to_owned(),
            (None, Some(secs)) if fresh => format!("signal-cli stream alive {secs:.1} s ago{replaced}"),
            (None, Some(secs)) => format!(
                "signal-cli stream silent for {secs:.1} s (deadline {:.0} s){replaced}",
                self.deadline.as_secs_f64()
            ),
            (None, None) => "waiting for signal-cli".to_owned(),
        };
        Some(PlatformHealth { healthy: state.connected && fresh, seconds_since_progress: secs, detail })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_follows_liveness_not_the_connection() {
        let health = HealthTracker::new(Duration::from_secs(60));
        assert_eq!(health.report(), None, "nothing before run");
        health.started();
        assert!(health.report().is_some_and(|r| !r.healthy && r.detail == "connecting to signal-cli"));
        health.connected();
        let report = health.report().expect("started");
        assert!(report.healthy && report.detail.starts_with("signal-cli stream alive"), "{report:?}");
        health.wedged();
        let report = health.report().expect("started");
        assert!(!report.healthy && report.detail.contains("silent for over 60s"), "{report:?}");
        assert_eq!(health.wedged_count(), 1);
        health.connected();
        let report = health.report().expect("started");
        assert!(report.healthy && report.detail.contains("1 silent stream(s) replaced"), "{report:?}");
    }

    #[test]
    fn a_connected_stream_past_its_deadline_is_unhealthy() {
        let health = HealthTracker::new(Duration::ZERO);
        health.started();
        health.connected();
        let report = health.report().expect("started");
        assert!(!report.healthy && report.detail.contains("silent for"), "{report:?}");
        assert!(report.seconds_since_progress.is_some());
    }
}
