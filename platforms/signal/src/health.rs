//! The adapter's own view of its health: when the stream (or a `receive` call) was last alive.
//!
//! Alive means bytes or a keepalive comment arrived, or a `receive` call completed, never that a
//! socket is open: a stream that wedges while its connection stays up turns unhealthy once the
//! deadline passes, and `/readyz` and `hermesd_platform_seconds_since_progress` say how long ago.
//! The facts are `hermesd_platform::health`'s, plus `Own`.
//!
//! It also counts the streams replaced for silence.

use std::ops::Deref;
use std::time::Duration;

use hermesd_platform::PlatformHealth;
use hermesd_platform::health::Health;

/// Liveness, written by the receive loop and read by `health()`.
#[derive(Debug)]
pub(crate) struct HealthTracker {
    deadline: Duration,
    health: Health<Own>,
}

/// Signal's own facts.
#[derive(Debug, Default)]
pub(crate) struct Own {
    connected: bool,
    /// Streams replaced because they went quiet past the deadline.
    wedged: u64,
}

impl Deref for HealthTracker {
    type Target = Health<Own>;

    fn deref(&self) -> &Health<Own> {
        &self.health
    }
}

impl HealthTracker {
    pub(crate) fn new(deadline: Duration) -> Self {
        Self { deadline, health: Health::default() }
    }

    /// A stream was opened (or a `receive` call answered).
    pub(crate) fn connected(&self) {
        self.health.progressed();
        self.health.with(|state| state.own.connected = true);
    }

    /// The stream ended or could not be opened.
    pub(crate) fn disconnected(&self, why: String) {
        self.health.with(|state| {
            state.own.connected = false;
            state.failing = Some(why);
        });
    }

    /// The stream went quiet past the deadline and is being replaced.
    pub(crate) fn wedged(&self) {
        let why = format!("stream silent for over {:.0}s; replacing it", self.deadline.as_secs_f64());
        self.health.with(|state| {
            state.own.wedged += 1;
            state.own.connected = false;
            state.failing = Some(why);
        });
    }

    /// How many streams were replaced for silence.
    pub(crate) fn wedged_count(&self) -> u64 {
        self.health.with(|state| state.own.wedged)
    }

    pub(crate) fn report(&self) -> Option<PlatformHealth> {
        self.health.report(|state| {
            let fresh = state.fresh(self.deadline);
            let secs = state.since().map(|s| s.as_secs_f64());
            let wedged = state.own.wedged;
            let replaced = if wedged > 0 { format!("; {wedged} silent stream(s) replaced") } else { String::new() };
            let detail = match (&state.failing, secs) {
                (Some(failing), _) => format!("{failing}{replaced}"),
                (None, _) if !state.own.connected => "connecting to signal-cli".to_owned(),
                (None, Some(secs)) if fresh => format!("signal-cli stream alive {secs:.1} s ago{replaced}"),
                (None, Some(secs)) => format!(
                    "signal-cli stream silent for {secs:.1} s (deadline {:.0} s){replaced}",
                    self.deadline.as_secs_f64()
                ),
                (None, None) => "waiting for signal-cli".to_owned(),
            };
            (state.own.connected && fresh, detail)
        })
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
