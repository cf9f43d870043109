//! The background sweep: every `[sessions] sweep_interval`, sessions the reset policy expired
//! are archived — memory flushed first, then the key's route dropped with the reason kept — so
//! the key's next message starts a fresh session at once and is told why.
//!
//! It never runs beside a turn of the same key: a key whose actor is busy waits for the next
//! sweep, a flush holds the key's place in the flush gate (the key's next turn waits for it),
//! and the archive is conditional on the session not having moved meanwhile.

use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::Router;
use crate::clock::now_ms;
use crate::store::{StaleRoute, StoreError};
use crate::turn::flush::FlushCause;
use crate::turn::lifecycle::conversational;
use crate::turn::session_key::{expired_by, stale_bound};

/// Stale routes read per store call.
const BATCH: u32 = 100;
/// Routes one sweep looks at; the rest wait for the next.
const MAX_PER_SWEEP: usize = 1_000;

impl Router {
    /// Sweep every `every` (the first sweep at once, catching what expired while the daemon was
    /// down) until `cancel`.
    pub async fn sweep_sessions(self, every: Duration, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(every.max(Duration::from_secs(1)));
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            match self.sweep_once(&cancel).await {
                Ok(0) => {}
                Ok(archived) => tracing::info!(archived, "expired sessions archived"),
                Err(e) => tracing::warn!(error = %e, "session sweep"),
            }
        }
    }

    /// One sweep; returns how many sessions it archived.
    pub(crate) async fn sweep_once(&self, cancel: &CancellationToken) -> Result<usize, StoreError> {
        let runner = &self.inner.runner;
        let now = now_ms();
        let Some(before) = stale_bound(runner.reset_policies(), now) else { return Ok(0) };
        let store = runner.store();
        let (mut after, mut seen, mut archived) = (None, 0, 0);
        loop {
            let batch = store.stale_routes(before, after.take(), BATCH).await?;
            let full = batch.len() == BATCH as usize;
            for stale in &batch {
                if cancel.is_cancelled() {
                    return Ok(archived);
                }
                if self.archive_if_expired(stale, now).await {
                    archived += 1;
                }
            }
            seen += batch.len();
            after = batch.last().map(|last| (last.updated_at, last.session_id.clone()));
            if !full || seen >= MAX_PER_SWEEP {
                return Ok(archived);
            }
        }
    }

    /// Flush and archive `stale` when its policy says it expired and no turn of its key runs.
    async fn archive_if_expired(&self, stale: &StaleRoute, now: i64) -> bool {
        let runner = &self.inner.runner;
        if !conversational(&stale.key.platform) {
            return false;
        }
        let Some(reason) = expired_by(runner.reset_policy(&stale.key), stale.updated_at, now) else { return false };
        if self.busy(&stale.key.key) {
            return false;
        }
        let Some(_guard) = runner.flusher().gate.begin(&stale.key.key) else { return false };
        let target = runner.flush_target(&stale.session_id, &stale.key).await;
        runner.flusher().flush(&target, FlushCause::Reset).await;
        let store = runner.store();
        match store.archive_route(&stale.key.key, &stale.session_id, stale.updated_at, reason, now_ms()).await {
            Ok(archived) => {
                if archived {
                    runner.count_reset(reason, "sweep");
                }
                archived
            }
            Err(e) => {
                tracing::warn!(error = %e, session = %stale.session_id, "archive an expired session");
                false
            }
        }
    }

    /// Whether a turn of `key` runs or waits in its mailbox.
    fn busy(&self, key: &str) -> bool {
        let actors = self.inner.actors.lock().expect("router lock poisoned");
        actors
            .get(key)
            .is_some_and(|a| a.state.is_running() || a.state.waiting.load(std::sync::atomic::Ordering::SeqCst) > 0)
    }
}
