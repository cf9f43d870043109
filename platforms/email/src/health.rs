//! Health by receive progress: a completed IDLE or poll cycle is progress; a connection that is
//! up but whose cycles stopped completing is not healthy. The facts are
//! `hermesd_platform::health`'s.

use std::ops::Deref;
use std::time::Duration;

use hermesd_platform::PlatformHealth;
use hermesd_platform::health::Health;

/// What the receive loop reports.
#[derive(Debug)]
pub(crate) struct HealthTracker {
    health: Health,
    /// Longest gap between cycles that is still healthy.
    allowed_gap: Duration,
}

impl Deref for HealthTracker {
    type Target = Health;

    fn deref(&self) -> &Health {
        &self.health
    }
}

impl HealthTracker {
    /// A tracker for a loop whose cycles end at least every `cycle` (IDLE timeout or poll).
    pub(crate) fn new(cycle: Duration) -> Self {
        Self { health: Health::default(), allowed_gap: cycle * 2 + Duration::from_secs(60) }
    }

    /// A poll or IDLE cycle completed.
    pub(crate) fn cycle(&self) {
        self.health.progressed();
    }

    /// The report for `/readyz`; `None` before `run`.
    pub(crate) fn report(&self) -> Option<PlatformHealth> {
        self.health.report(|state| match (state.since(), &state.failing) {
            (_, Some(problem)) => (false, problem.clone()),
            (None, None) => (false, "waiting for the first mailbox check".to_owned()),
            (Some(gap), None) if gap > self.allowed_gap => {
                (false, format!("no completed mailbox check for {}s", gap.as_secs()))
            }
            (Some(_), None) => (true, "mailbox checks completing".to_owned()),
        })
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
