//! How SQLite writes ride out faults: a write that meets a lock held elsewhere, a full disk or
//! an I/O error is retried with jittered backoff for as long as the fault's patience allows,
//! and the store's `WriteHealth` says meanwhile what is wrong, for `/readyz`.
//!
//! A write that runs out of patience returns its error: nothing is acknowledged that was not
//! stored (adapters leave the event at the platform), and nothing stored is lost.
//!
//! Patience per fault: a lock held elsewhere up to 2 min; a full disk or I/O errors 30 s. Each
//! episode is recorded in the store's `WriteHealth` (`store/health.rs`), which `/readyz` reports
//! as, say, "store: disk full for 12 s; writes wait and retry"; the first write that goes through
//! clears it. A write that gives up fails, so the adapter leaves the event unacknowledged at the
//! platform: a store fault never loses an event.

use std::future::Future;
use std::time::Instant;

use rand::Rng;

use super::SqliteStore;
use super::lane::LaneOp;
use crate::store::health::{HealthStore, WriteFault, WriteHealth, problem_text, retry_after};
use crate::store::{StoreError, StoreResult};

/// The fault behind a failed write, when it is one worth waiting out.
pub(super) fn classify(error: &sqlx::Error) -> Option<WriteFault> {
    match error {
        sqlx::Error::Database(db) => {
            let code: i64 = db.code()?.parse().ok()?;
            // Extended result codes keep the primary code in their low byte.
            match code & 0xff {
                5 | 6 => Some(WriteFault::Locked),
                13 => Some(WriteFault::DiskFull),
                10 => Some(WriteFault::Io),
                _ => None,
            }
        }
        // The one writer connection stayed taken by a write waiting on a lock.
        sqlx::Error::PoolTimedOut => Some(WriteFault::Locked),
        sqlx::Error::Io(_) => Some(WriteFault::Io),
        _ => None,
    }
}

/// Run a write until it succeeds, fails for a reason waiting cannot fix, or its fault's
/// patience runs out; each failed attempt is recorded in `health` (when given), a success
/// clears it.
pub(super) async fn retry_write<T, F, Fut>(health: Option<&WriteHealth>, mut op: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, sqlx::Error>>,
{
    let first = tokio::time::Instant::now();
    let mut attempt = 0;
    loop {
        let started = Instant::now();
        let result = if crate::failpoint_error!("store.write") {
            Err(sqlx::Error::Io(std::io::Error::other("injected by failpoint store.write")))
        } else {
            op().await
        };
        let error = match result {
            Ok(value) => {
                if let Some((fault, lasted)) = health.and_then(WriteHealth::succeeded) {
                    tracing::warn!(
                        fault = fault.describe(),
                        lasted_s = lasted.as_secs(),
                        "store writes go through again"
                    );
                }
                return Ok(value);
            }
            Err(error) => error,
        };
        let Some(fault) = classify(&error) else { return Err(StoreError::from(error)) };
        if let Some(health) = health
            && health.failed(fault, started)
        {
            tracing::warn!(fault = fault.describe(), error = %error, "store write failed; waiting and retrying");
        }
        attempt += 1;
        let jitter = rand::rng().random_range(0.0..1.0);
        let Some(wait) = retry_after(fault, attempt, first.elapsed(), jitter) else {
            return Err(StoreError::from(error));
        };
        tracing::debug!(attempt, fault = fault.describe(), "store write failed, retrying");
        tokio::time::sleep(wait).await;
    }
}

impl SqliteStore {
    /// A write on the durable path: retried through faults, its health recorded for `/readyz`.
    pub(super) async fn write<T, F, Fut>(&self, mut op: F) -> StoreResult<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, sqlx::Error>>,
    {
        retry_write(Some(&self.health), || {
            let attempt = op();
            // Without failpoints the block only awaits `attempt`; with them it arms the cap first.
            #[cfg_attr(not(feature = "failpoints"), allow(clippy::redundant_async_block))]
            async move {
                // Test builds: a page cap armed or lifted since the last attempt applies now.
                #[cfg(feature = "failpoints")]
                self.apply_page_limit().await;
                attempt.await
            }
        })
        .await
    }

    /// A write on the durable path run on the write lane (`lane`), committed in the next batch
    /// with the writes queued beside it; retried through faults and recorded like `write`.
    pub(super) async fn write_lane<T: Send + 'static>(
        &self,
        op: impl Fn(&rusqlite::Connection) -> rusqlite::Result<T> + Send + Sync + 'static,
    ) -> StoreResult<T> {
        let op: std::sync::Arc<LaneOp<T>> = std::sync::Arc::new(op);
        self.write(|| self.lane.write(&self.writer, op.clone(), false)).await
    }

    /// `write_lane` for what must survive `outlive` before it returns (an accepted event, a send
    /// receipt): for `PowerCut` its batch commits with `synchronous = FULL`.
    pub(super) async fn write_lane_durable<T: Send + 'static>(
        &self,
        outlive: crate::store::Outlive,
        op: impl Fn(&rusqlite::Connection) -> rusqlite::Result<T> + Send + Sync + 'static,
    ) -> StoreResult<T> {
        let op: std::sync::Arc<LaneOp<T>> = std::sync::Arc::new(op);
        let synced = outlive == crate::store::Outlive::PowerCut;
        self.write(|| self.lane.write(&self.writer, op.clone(), synced)).await
    }

    /// `write_lane` without the health record (writes off the durable path), retried the same.
    pub(super) async fn retry_lane<T: Send + 'static>(
        &self,
        op: impl Fn(&rusqlite::Connection) -> rusqlite::Result<T> + Send + Sync + 'static,
    ) -> StoreResult<T> {
        let op: std::sync::Arc<LaneOp<T>> = std::sync::Arc::new(op);
        retry_write(None, || self.lane.write(&self.writer, op.clone(), false)).await
    }

    /// Test builds: `store.max_page_count=value(N)` caps the writer connection's database size
    /// at N pages (at least its current size), so the next write that needs a new page fails
    /// with `SQLITE_FULL` as on a full disk; disarming it lifts the cap. `max_page_count` is a
    /// per-connection setting, which is why this lives in the writer's own path, and why the
    /// write lane gets it too.
    #[cfg(feature = "failpoints")]
    async fn apply_page_limit(&self) {
        use std::sync::atomic::Ordering;
        const SQLITE_MAX: u64 = 4_294_967_294;
        let wanted = crate::failpoint::value("store.max_page_count").and_then(|v| v.parse::<u64>().ok());
        let applied = self.page_limit.load(Ordering::SeqCst);
        let target = match wanted {
            Some(limit) if limit != applied => limit,
            None if applied != 0 => SQLITE_MAX,
            _ => return,
        };
        let sql = sqlx::AssertSqlSafe(format!("PRAGMA max_page_count = {target}"));
        let applied = match self.writer.get().await {
            Ok(mut conn) => match sqlx::query(sql).execute(&mut *conn).await {
                Ok(_) => self.lane.set_page_limit(&mut conn, if target == SQLITE_MAX { 0 } else { target }),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        match applied {
            Ok(_) => self.page_limit.store(if target == SQLITE_MAX { 0 } else { target }, Ordering::SeqCst),
            Err(e) => tracing::warn!(error = %e, "failpoint store.max_page_count"),
        }
    }
}

impl HealthStore for SqliteStore {
    fn write_problem(&self) -> Option<String> {
        self.health.fault().map(|(fault, lasted)| problem_text(fault, lasted))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use super::*;

    fn busy() -> sqlx::Error {
        sqlx::Error::PoolTimedOut
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_waits_out_a_sixty_second_lock_and_reports_it_meanwhile() {
        let health = WriteHealth::default();
        let start = tokio::time::Instant::now();
        let tries = AtomicU32::new(0);
        let result = retry_write(Some(&health), || {
            tries.fetch_add(1, Ordering::SeqCst);
            let locked = start.elapsed() < Duration::from_secs(60);
            if locked {
                assert_eq!(
                    health.fault().map(|f| f.0),
                    if tries.load(Ordering::SeqCst) > 1 { Some(WriteFault::Locked) } else { None }
                );
            }
            async move { if locked { Err(busy()) } else { Ok(7) } }
        })
        .await;
        assert_eq!(result.unwrap(), 7, "the write went through once the lock was released");
        assert!(start.elapsed() >= Duration::from_secs(60));
        assert!(start.elapsed() < Duration::from_secs(63), "no long sleep after the release");
        assert_eq!(health.fault(), None, "healthy again");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lasting_fault_fails_the_write_after_its_patience_and_others_fail_at_once() {
        let start = tokio::time::Instant::now();
        let result: StoreResult<()> =
            retry_write(None, || async { Err(sqlx::Error::Io(std::io::Error::other("disk gone"))) }).await;
        assert!(result.is_err());
        let waited = start.elapsed();
        assert!(waited >= WriteFault::Io.patience() && waited < WriteFault::Io.patience() + Duration::from_secs(3));

        let start = tokio::time::Instant::now();
        let result: StoreResult<()> = retry_write(None, || async { Err(sqlx::Error::RowNotFound) }).await;
        assert!(result.is_err());
        assert_eq!(start.elapsed(), Duration::ZERO, "a plain error is not retried");
    }
}
