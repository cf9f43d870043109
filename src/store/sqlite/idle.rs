//! Handing SQLite's page caches back once the store has gone quiet.
//!
//! Every connection keeps a page cache of up to `cache_size` (2 MB by default), and the store
//! has four (the sqlx writer and reader, the write lane and the read lane). After a burst (10,000
//! new sessions, a large search) they stay full for as long as the daemon runs, although an idle
//! daemon reads almost nothing. So when nothing was written or read through the reader
//! connections (the control panel's pages, searches) for `RELEASE_AFTER` (30 s), the
//! background indexer's next quiet round asks each connection not in use to free its cache
//! (`PRAGMA shrink_memory`); SQLite's memory comes from the binary's allocator, which purges the
//! freed pages. The next read fills a cache again from the OS's file cache, a cost paid once
//! per quiet spell.
//!
//! Under glibc's malloc those caches sat in per-thread arenas, which kept the memory even after
//! SQLite freed it; with jemalloc (which also serves `malloc`) it goes back.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::SqliteStore;

/// How long without a write before the caches are released.
const RELEASE_AFTER: Duration = Duration::from_secs(30);

/// When the store was last seen busy; `None` once its caches were released for that quiet spell.
#[derive(Debug)]
pub(super) struct Quiet {
    busy_at: Mutex<Option<Instant>>,
}

impl Default for Quiet {
    fn default() -> Self {
        // A fresh store counts as busy: migrations and start-up reads filled its caches.
        Self { busy_at: Mutex::new(Some(Instant::now())) }
    }
}

impl Quiet {
    /// Writes happened since the last round.
    pub(super) fn busy(&self) {
        *self.busy_at.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
    }

    /// Whether the caches are due for release now (true once per quiet spell).
    fn due(&self, now: Instant) -> bool {
        let mut busy_at = self.busy_at.lock().unwrap_or_else(PoisonError::into_inner);
        match *busy_at {
            Some(at) if now.saturating_duration_since(at) >= RELEASE_AFTER => {
                *busy_at = None;
                true
            }
            _ => false,
        }
    }
}

impl SqliteStore {
    /// A round of the background indexer that found nothing to index and no write since the
    /// last one: release the caches if the store has been quiet for `RELEASE_AFTER`.
    pub(super) async fn quiet_round(&self) {
        if self.quiet.due(Instant::now()) {
            self.release_memory().await;
        }
    }

    /// Ask every connection not in use now to free its page cache.
    pub(super) async fn release_memory(&self) {
        self.writer.shrink_memory().await;
        self.readers.shrink_memory().await;
        self.lane.shrink_memory();
        self.read_lane.shrink_memory();
        tracing::debug!("store quiet: released the connections' page caches");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_spell_releases_once_and_a_write_starts_a_new_one() {
        let quiet = Quiet::default();
        let start = Instant::now();
        assert!(!quiet.due(start), "not before RELEASE_AFTER");
        assert!(quiet.due(start + RELEASE_AFTER + Duration::from_secs(1)));
        assert!(!quiet.due(start + RELEASE_AFTER * 3), "once per quiet spell");
        quiet.busy();
        let busy = Instant::now();
        assert!(!quiet.due(busy + RELEASE_AFTER / 2));
        assert!(quiet.due(busy + RELEASE_AFTER));
    }

    #[tokio::test]
    async fn a_read_starts_a_quiet_spell_and_the_indexers_and_health_checks_looks_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("state.db"), Duration::from_secs(5), 2).await.unwrap();
        let later = || Instant::now() + RELEASE_AFTER + Duration::from_secs(1);
        assert!(store.quiet.due(later()), "the spell since the store opened");
        drop(store.readers.get_quietly().await.unwrap());
        assert!(!store.quiet.due(later()), "the indexer's look is no use");
        crate::store::InboundStore::ping(&store).await.unwrap();
        crate::store::OutboxStore::pending_by_platform(&store).await.unwrap();
        assert!(!store.quiet.due(later()), "nor are health checks and the status page's queue counts");
        drop(store.readers.get().await.unwrap());
        assert!(store.quiet.due(later()), "a read fills caches: they go back after its quiet spell");
        store.close().await;
    }
}
