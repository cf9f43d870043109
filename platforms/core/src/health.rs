//! What every adapter's health tracker shares: whether `run` began, when the adapter last made
//! progress (received, or proved its connection answers), and what is failing, plus the
//! adapter's own facts (`Progress::own`). Each adapter judges these in its own words; the
//! judgement is by progress, never by a socket merely being open.
//!
//! Time is tokio's clock, so tests can pause and advance it.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::PlatformHealth;

/// The facts an adapter's health is judged from.
#[derive(Debug, Default)]
pub struct Progress<E> {
    /// `run` began.
    pub started: bool,
    /// The last progress.
    pub last_progress: Option<Instant>,
    /// What the operator should see is failing; cleared by progress.
    pub failing: Option<String>,
    /// The adapter's own facts (connected, a token check, counters, ...).
    pub own: E,
}

impl<E> Progress<E> {
    /// How long ago the last progress was.
    pub fn since(&self) -> Option<Duration> {
        self.last_progress.map(|at| at.elapsed())
    }

    /// Whether progress came less than `window` ago.
    pub fn fresh(&self, window: Duration) -> bool {
        self.since().is_some_and(|since| since < window)
    }
}

/// One adapter's health: written by its receive loop, read by `Platform::health`.
#[derive(Debug, Default)]
pub struct Health<E = ()> {
    state: Mutex<Progress<E>>,
}

impl<E> Health<E> {
    /// `run` began.
    pub fn started(&self) {
        self.lock().started = true;
    }

    /// Progress now; whatever was failing has passed.
    pub fn progressed(&self) {
        let mut state = self.lock();
        state.last_progress = Some(Instant::now());
        state.failing = None;
    }

    /// Progress now, and nothing else changes (a keepalive while an error is still shown).
    pub fn alive(&self) {
        self.lock().last_progress = Some(Instant::now());
    }

    /// Something the operator should see is failing (e.g. `getUpdates failing: ...`).
    pub fn failing(&self, detail: String) {
        self.lock().failing = Some(detail);
    }

    /// Read or change the facts under the lock.
    pub fn with<R>(&self, f: impl FnOnce(&mut Progress<E>) -> R) -> R {
        f(&mut self.lock())
    }

    /// The report: `None` before `run`; else `judge`'s verdict (healthy, the operator's line)
    /// with the seconds since progress.
    pub fn report(&self, judge: impl FnOnce(&Progress<E>) -> (bool, String)) -> Option<PlatformHealth> {
        let state = self.lock();
        if !state.started {
            return None;
        }
        let (healthy, detail) = judge(&state);
        Some(PlatformHealth { healthy, seconds_since_progress: state.since().map(|s| s.as_secs_f64()), detail })
    }

    fn lock(&self) -> MutexGuard<'_, Progress<E>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn nothing_is_reported_before_run_and_progress_clears_failures() {
        let health: Health<u32> = Health::default();
        let judge = |p: &Progress<u32>| (p.fresh(Duration::from_secs(10)), p.failing.clone().unwrap_or_default());
        assert!(health.report(judge).is_none(), "not started");
        health.started();
        health.failing("down".into());
        let report = health.report(judge).unwrap();
        assert!(!report.healthy && report.detail == "down" && report.seconds_since_progress.is_none());
        health.progressed();
        health.with(|p| p.own += 1);
        tokio::time::advance(Duration::from_secs(4)).await;
        let report = health.report(judge).unwrap();
        assert!(report.healthy && report.detail.is_empty());
        assert_eq!(report.seconds_since_progress, Some(4.0));
        health.failing("flaky".into());
        health.alive();
        assert_eq!(health.report(judge).unwrap().detail, "flaky", "a keepalive does not clear a failure");
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(!health.report(judge).unwrap().healthy, "stale");
        assert_eq!(health.with(|p| p.own), 1);
    }
}
