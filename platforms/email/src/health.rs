//! Health by receive progress: a completed IDLE or poll cycle is progress; a connection that is
//! up but whose cycles stopped completing is not healthy.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use hermesd_platform::PlatformHealth;

#[derive(Debug)]
struct State {
    started: Option<Instant>,
    last_cycle: Option<Instant>,
    problem: Option<String>,
}

/// What the receive loop reports.
#[derive(Debug)]
pub(crate) struct HealthTracker {
    state: Mutex<State>,
    /// Longest gap between cycles that is still healthy.
    allowed_gap: Duration,
}

impl HealthTracker {
    /// A tracker for a loop whose cycles end at least every `cycle` (IDLE timeout or poll).
    pub(crate) fn new(cycle: Duration) -> Self {
        let state = State { started: None, last_cycle: None, problem: None };
        Self { state: Mutex::new(state), allowed_gap: cycle * 2 + Duration::from_secs(60) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `run` started.
    pub(crate) fn started(&self) {
        self.lock().started.get_or_insert_with(Instant::now);
    }

    /// A poll or IDLE cycle completed.
    pub(crate) fn cycle(&self) {
        let mut state = self.lock();
        state.last_cycle = Some(Instant::now());
        state.problem = None;
    }

    /// Something failed; the loop retries with backoff.
    pub(crate) fn failing(&self, problem: String) {
        self.lock().problem = Some(problem);
    }

    /// The report for `/readyz`; `None` before `run`.
    pub(crate) fn report(&self) -> Option<PlatformHealth> {
        let state = self.lock();
        state.started?;
        let since = state.last_cycle.map(|t| t.elapsed());
        let (healthy, detail) = match (since, &state.problem) {
            (_, Some(problem)) => (false, problem.clone()),
            (None, None) => (false, "waiting for the first mailbox check".to_owned()),
            (Some(gap), None) if gap > self.allowed_gap => {
                (false, format!("no completed mailbox check for {}s", gap.as_secs()))
            }
            (Some(_), None) => (true, "mailbox checks completing".to_owned()),
        };
        Some(PlatformHealth { healthy, seconds_since_progress: since.map(|d| d.as_secs_f64()), detail })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthy_only_after_a_cycle_and_while_nothing_fails() {
        let health = HealthTracker::new(Duration::from_secs(1));
        assert_eq!(health.report(), None);
        health.started();
        assert!(!health.report().unwrap().healthy);
        health.cycle();
        assert!(health.report().unwrap().healthy);
        health.failing("imap login refused".into());
        let report = health.report().unwrap();
        assert!(!report.healthy && report.detail.contains("login"));
        health.cycle();
        assert!(health.report().unwrap().healthy);
    }
}
