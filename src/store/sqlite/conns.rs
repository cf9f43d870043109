//! The store's SQLite connections, without a pool in between. Each sqlx SQLite connection runs
//! its statements on a thread of its own, so every statement is a round trip between threads;
//! sqlx's pool adds one more per use (a liveness ping as a connection goes back, in a task of its
//! own), which on the turn's path was as many round trips as the statements themselves. A local
//! file cannot hang up, so the store keeps its few connections behind async mutexes instead: a
//! use is a lock, and the connection thread only ever runs the store's own statements.
//!
//! Connections open on first use. `close` closes them (checkpointing the WAL on the last one);
//! a use after it fails like a closed pool.
//!
//! Statements of one write that need no answer in between go to the connection's thread as one
//! command, so such a write is one round trip, not several.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, SqliteConnection};

use tokio::sync::{Mutex, OwnedMappedMutexGuard, OwnedMutexGuard};

/// A connection in use; dropping it hands the connection to the next in line.
pub(super) type Conn = OwnedMappedMutexGuard<Option<SqliteConnection>, SqliteConnection>;

/// A fixed set of connections with the same options.
#[derive(Clone)]
pub(super) struct Conns {
    options: SqliteConnectOptions,
    slots: Arc<[Arc<Mutex<Option<SqliteConnection>>>]>,
    /// The slot the next caller waits on when all are taken (round robin).
    next: Arc<AtomicUsize>,
    closed: Arc<AtomicBool>,
    /// Told of every use, when set: reads fill page caches too (`idle`).
    quiet: Option<Arc<super::idle::Quiet>>,
}

impl Conns {
    /// `size` connections (at least one) opened with `options` as they are first needed.
    pub(super) fn new(options: SqliteConnectOptions, size: u32) -> Self {
        let slots = (0..size.max(1)).map(|_| Arc::new(Mutex::new(None))).collect();
        Self { options, slots, next: Arc::default(), closed: Arc::default(), quiet: None }
    }

    /// Tell `quiet` of every use, so that the page caches reads fill go back once reads stop too.
    pub(super) fn watched(mut self, quiet: Arc<super::idle::Quiet>) -> Self {
        self.quiet = Some(quiet);
        self
    }

    /// A connection: a free one when there is one, else the next in turn once it is free.
    pub(super) async fn get(&self) -> Result<Conn, sqlx::Error> {
        if let Some(quiet) = &self.quiet {
            quiet.busy();
        }
        self.get_quietly().await
    }

    /// A connection, as `get`, for the store's own background look (the indexer's "anything
    /// queued?"), which is no use that fills a cache.
    pub(super) async fn get_quietly(&self) -> Result<Conn, sqlx::Error> {
        let guard = match self.slots.iter().find_map(|slot| slot.clone().try_lock_owned().ok()) {
            Some(guard) => guard,
            None => {
                let turn = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
                self.slots[turn].clone().lock_owned().await
            }
        };
        self.ready(guard).await
    }

    async fn ready(&self, mut guard: OwnedMutexGuard<Option<SqliteConnection>>) -> Result<Conn, sqlx::Error> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(sqlx::Error::PoolClosed);
        }
        if let Some(conn) = guard.as_mut()
            && conn.is_in_transaction()
        {
            // A transaction ended by an error is rolled back by a command its guard queued to the
            // connection's thread as it dropped: let that run, then look again.
            let _ = sqlx::query("SELECT 1").execute(&mut *conn).await;
            if conn.is_in_transaction() {
                // SQLite itself rolled the transaction back (it does on a full disk or an I/O
                // error), so sqlx's ROLLBACK failed and it counts the transaction as open for
                // good: every later BEGIN would fail. Start over with a new connection.
                tracing::warn!("a database connection was left in a transaction SQLite had ended; opening a new one");
                if let Some(stuck) = guard.take() {
                    let _ = stuck.close().await;
                }
            }
        }
        if guard.is_none() {
            *guard = Some(self.options.connect().await?);
        }
        OwnedMutexGuard::try_map(guard, Option::as_mut).map_err(|_| sqlx::Error::PoolClosed)
    }

    /// Ask each open connection not in use now to free its page cache (`PRAGMA shrink_memory`).
    pub(super) async fn shrink_memory(&self) {
        for slot in self.slots.iter() {
            let Ok(mut guard) = slot.clone().try_lock_owned() else { continue };
            if let Some(conn) = guard.as_mut()
                && let Err(e) = sqlx::query("PRAGMA shrink_memory").execute(&mut *conn).await
            {
                tracing::debug!(error = %e, "releasing a connection's page cache");
            }
        }
    }

    /// Close every connection, waiting for those in use to be handed back.
    pub(super) async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        for slot in self.slots.iter() {
            if let Some(conn) = slot.lock().await.take()
                && let Err(e) = conn.close().await
            {
                tracing::warn!(error = %e, "closing a database connection");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    #[tokio::test]
    async fn a_connection_left_in_a_transaction_sqlite_ended_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteConnectOptions::from_str("sqlite://")
            .unwrap()
            .filename(dir.path().join("t.db"))
            .create_if_missing(true);
        let conns = Conns::new(options, 1);
        {
            let mut conn = conns.get().await.unwrap();
            let mut tx = conn.begin().await.unwrap();
            // What a full disk does mid-transaction: SQLite ends it, sqlx does not know.
            sqlx::query("ROLLBACK").execute(&mut *tx).await.unwrap();
        }
        let mut conn = conns.get().await.unwrap();
        assert!(!conn.is_in_transaction());
        let mut tx = conn.begin().await.expect("a transaction can begin again");
        sqlx::query("CREATE TABLE t (a)").execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
    }
}
