//! The store's own view of its health: whether writes are failing right now, why, and since
//! when. Writes record it as they go (a fault when an attempt fails, clear on the next success),
//! so `/readyz` can say "store: disk full for 12 s" without a probe of its own.
//!
//! It never blocks and never touches the database: reading it is a mutex and a clock.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Why writes are failing, in the words an operator acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteFault {
    /// Another process (or a long write) holds the database's write lock.
    Locked,
    /// The disk, or the database's page limit, is full (`SQLITE_FULL`).
    DiskFull,
    /// The file system reported an I/O error (`SQLITE_IOERR`).
    Io,
}

impl WriteFault {
    /// The operator's words for it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Locked => "locked by another process",
            Self::DiskFull => "disk full",
            Self::Io => "I/O error on commit",
        }
    }

    /// How long writes keep retrying through this fault before the caller gets the error: a
    /// lock another process holds is waited out for two minutes (a backup, an operator's
    /// sqlite3 shell), a full disk or an I/O error for 30 s (long enough for a transient
    /// fault; an adapter that gets the error leaves the event unacknowledged at the platform).
    pub fn patience(self) -> Duration {
        match self {
            Self::Locked => Duration::from_secs(120),
            Self::DiskFull | Self::Io => Duration::from_secs(30),
        }
    }
}

/// The wait before retry `attempt` (1-based): doubling from 50 ms to at most 2 s, then
/// `jitter` (0.0–1.0) takes up to half of it off, so writers of several processes spread out.
pub fn backoff(attempt: u32, jitter: f64) -> Duration {
    let base = Duration::from_millis(50).saturating_mul(1u32 << attempt.saturating_sub(1).min(6));
    let base = base.min(Duration::from_secs(2));
    base.mul_f64(1.0 - jitter.clamp(0.0, 1.0) / 2.0)
}

/// The wait before the next attempt of a write that failed with `fault` on `attempt` after
/// `elapsed` since its first try; `None` when it has waited long enough and must fail.
pub fn retry_after(fault: WriteFault, attempt: u32, elapsed: Duration, jitter: f64) -> Option<Duration> {
    (elapsed < fault.patience()).then(|| backoff(attempt, jitter))
}

/// What writes last saw; shared by every write of one store.
#[derive(Debug, Default)]
pub struct WriteHealth {
    fault: Mutex<Option<(WriteFault, Instant)>>,
}

impl WriteHealth {
    /// A write attempt that started at `started` failed with `fault`. Returns true when this
    /// begins a new episode (the caller logs it once).
    pub fn failed(&self, fault: WriteFault, started: Instant) -> bool {
        let mut current = self.fault.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match *current {
            Some((same, _)) if same == fault => false,
            _ => {
                *current = Some((fault, started));
                true
            }
        }
    }

    /// A write went through: the store is healthy again. Returns the fault that ended, if any.
    pub fn succeeded(&self) -> Option<(WriteFault, Duration)> {
        let mut current = self.fault.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        current.take().map(|(fault, since)| (fault, since.elapsed()))
    }

    /// The current fault and how long it has lasted.
    pub fn fault(&self) -> Option<(WriteFault, Duration)> {
        let current = self.fault.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        current.map(|(fault, since)| (fault, since.elapsed()))
    }
}

/// The store capability `/readyz` asks: why writes fail right now, if they do.
pub trait HealthStore: Send + Sync {
    /// "disk full for 12 s; writes wait and retry", or `None` while writes go through.
    fn write_problem(&self) -> Option<String>;
}

/// The sentence `/readyz` shows for a fault that has lasted `lasted`.
pub fn problem_text(fault: WriteFault, lasted: Duration) -> String {
    format!("{} for {} s; writes wait and retry", fault.describe(), lasted.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_cap_and_jitter_only_shortens() {
        assert_eq!(backoff(1, 0.0), Duration::from_millis(50));
        assert_eq!(backoff(2, 0.0), Duration::from_millis(100));
        assert_eq!(backoff(30, 0.0), Duration::from_secs(2));
        assert_eq!(backoff(30, 1.0), Duration::from_secs(1));
    }

    #[test]
    fn a_sixty_second_lock_is_waited_out_and_a_full_disk_is_not_forever() {
        let at = |s| Duration::from_secs(s);
        assert!(retry_after(WriteFault::Locked, 40, at(60), 0.5).is_some());
        assert!(retry_after(WriteFault::Locked, 80, at(121), 0.5).is_none());
        assert!(retry_after(WriteFault::DiskFull, 3, at(10), 0.5).is_some());
        assert!(retry_after(WriteFault::Io, 20, at(31), 0.5).is_none());
    }

    #[test]
    fn health_keeps_the_start_of_an_episode_and_clears_on_success() {
        let health = WriteHealth::default();
        let start = Instant::now();
        assert!(health.failed(WriteFault::DiskFull, start));
        assert!(!health.failed(WriteFault::DiskFull, Instant::now()), "same episode");
        assert_eq!(health.fault().map(|f| f.0), Some(WriteFault::DiskFull));
        assert!(health.failed(WriteFault::Io, Instant::now()), "another fault is another episode");
        assert_eq!(health.succeeded().map(|f| f.0), Some(WriteFault::Io));
        assert_eq!(health.fault(), None);
        assert_eq!(health.succeeded(), None);
    }
}
