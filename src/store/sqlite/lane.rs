//! The store's in-place lanes: the writes every turn makes (accept, turn start, turn end, usage,
//! send receipt) run on a second writer connection to the same database, and its reads (the
//! session's route and transcript) on read-only ones (`ReadLane`), all opened with rusqlite on
//! the same SQLite library and used in the calling task, with no thread in between.
//!
//! Why: an sqlx SQLite connection runs each statement on a thread of its own, so a statement is
//! a round trip between threads — two context switches, which on the turn's path cost more CPU
//! than the statements (a profile of the daemon at 1,000 turns/s spent 40% of the writer thread
//! in the scheduler). A turn's writes are a few tens of microseconds of SQLite work, short enough
//! to run where the turn runs.
//!
//! Rules that keep it safe:
//! - A lane write holds the writer slot (`Conns::get` of the writer) for its whole run, so the
//!   lane and the sqlx writer never write at once and never wait on each other's lock.
//! - Its busy timeout is short (`LANE_BUSY`): a lock held by another process is waited out by
//!   `retry_write`'s async backoff, never by sleeping on a runtime thread.
//! - It never checkpoints (`wal_autocheckpoint = 0`): checkpoints, which sync the file, stay on
//!   the sqlx writer's thread (its automatic ones, and `checkpoint_if_dirty`).
//! - Errors come back as `sqlx::Error::Database` with SQLite's extended code, so fault handling
//!   (`health::classify`) is the same for both connections.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, ToSql};

use super::conns::Conn;

/// How long the lane lets SQLite itself wait for a lock before reporting it busy.
const LANE_BUSY: Duration = Duration::from_millis(10);

/// Statements the lane keeps prepared (the turn's writes are about a dozen).
const STATEMENT_CACHE: usize = 64;

/// The lane: one rusqlite connection, opened on first use.
pub(super) struct Lane {
    path: PathBuf,
    busy: Duration,
    conn: Mutex<Option<Connection>>,
    /// Written since the last checkpoint.
    dirty: AtomicBool,
    /// The page cap a test armed (`store.max_page_count`; 0: none), applied on open too.
    #[cfg(feature = "failpoints")]
    page_limit: std::sync::atomic::AtomicU64,
}

impl Lane {
    pub(super) fn new(path: PathBuf, busy: Duration) -> Self {
        Self {
            path,
            busy: busy.min(LANE_BUSY),
            conn: Mutex::new(None),
            dirty: AtomicBool::new(false),
            #[cfg(feature = "failpoints")]
            page_limit: Default::default(),
        }
    }

    /// Run `op` on the lane's connection. `_writer` is the writer slot, held by the caller for
    /// as long as this runs.
    pub(super) fn run<T>(
        &self,
        _writer: &mut Conn,
        op: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, sqlx::Error> {
        let mut slot = self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(self.open().map_err(to_sqlx)?);
        }
        let conn = slot.as_mut().expect("opened above");
        self.dirty.store(true, Ordering::Relaxed);
        op(conn).map_err(to_sqlx)
    }

    fn open(&self) -> rusqlite::Result<Connection> {
        // The database exists: the sqlx writer created and migrated it before the lane opens.
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(self.busy)?;
        conn.execute_batch(
            "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; PRAGMA temp_store = memory; \
             PRAGMA wal_autocheckpoint = 0;",
        )?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        #[cfg(feature = "failpoints")]
        {
            let limit = self.page_limit.load(Ordering::SeqCst);
            if limit != 0 {
                conn.query_row(&format!("PRAGMA max_page_count = {limit}"), [], |_| Ok(()))?;
            }
        }
        Ok(conn)
    }

    /// Whether the lane wrote since the last call (which clears it).
    pub(super) fn take_dirty(&self) -> bool {
        self.dirty.swap(false, Ordering::Relaxed)
    }

    /// Test builds: the page cap `store.max_page_count` armed on the writer applies here too
    /// (`target` pages; `0` lifts it).
    #[cfg(feature = "failpoints")]
    pub(super) fn set_page_limit(&self, _writer: &mut Conn, target: u64) -> Result<(), sqlx::Error> {
        self.page_limit.store(target, Ordering::SeqCst);
        let slot = self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(conn) = slot.as_ref() {
            let pages = if target == 0 { 4_294_967_294 } else { target };
            conn.query_row(&format!("PRAGMA max_page_count = {pages}"), [], |_| Ok(())).map_err(to_sqlx)?;
        }
        Ok(())
    }

    /// Close the connection (a later use opens it again).
    pub(super) fn close(&self, _writer: &mut Conn) {
        let conn = self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(conn) = conn
            && let Err((_, e)) = conn.close()
        {
            tracing::warn!(error = %e, "closing the database's write lane");
        }
    }
}

/// The read lane: read-only rusqlite connections for the turn's own reads (its session's route
/// and transcript), used in the calling task like the write lane, instead of a round trip to a
/// reader connection's thread. Connections open as needed; up to `keep` idle ones are kept.
pub(super) struct ReadLane {
    path: PathBuf,
    keep: usize,
    idle: Mutex<Vec<Connection>>,
    closed: AtomicBool,
}

impl ReadLane {
    pub(super) fn new(path: PathBuf, keep: usize) -> Self {
        Self { path, keep: keep.max(1), idle: Mutex::new(Vec::new()), closed: AtomicBool::new(false) }
    }

    /// Run the read `op` on an idle connection (a new one when none is idle).
    pub(super) fn run<T>(&self, op: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, sqlx::Error> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(sqlx::Error::PoolClosed);
        }
        let idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        let conn = match idle {
            Some(conn) => conn,
            None => self.open().map_err(to_sqlx)?,
        };
        let result = op(&conn).map_err(to_sqlx);
        let mut idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if idle.len() < self.keep && !self.closed.load(Ordering::SeqCst) {
            idle.push(conn);
        }
        result
    }

    fn open(&self) -> rusqlite::Result<Connection> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&self.path, flags)?;
        conn.busy_timeout(LANE_BUSY)?;
        conn.execute_batch("PRAGMA temp_store = memory;")?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(conn)
    }

    /// Close the idle connections; later uses fail like a closed pool.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }
}

/// Run every statement of `sql` (`;`-separated, with numbered parameters that are absolute
/// across them, as in the sqlx commands of this store) with `params`; the rows they changed.
pub(super) fn execute_all(conn: &Connection, sql: &str, params: &[&(dyn ToSql + Sync)]) -> rusqlite::Result<usize> {
    let mut changed = 0;
    for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let mut prepared = conn.prepare_cached(statement)?;
        let count = prepared.parameter_count().min(params.len());
        changed += prepared.execute(rusqlite::params_from_iter(&params[..count]))?;
    }
    Ok(changed)
}

/// A rusqlite error as the sqlx error the rest of the store handles: SQLite's own failures keep
/// their extended result code.
fn to_sqlx(error: rusqlite::Error) -> sqlx::Error {
    match error {
        rusqlite::Error::SqliteFailure(failure, message) => sqlx::Error::Database(Box::new(LaneError {
            code: failure.extended_code,
            message: message.unwrap_or_else(|| failure.to_string()),
        })),
        other => sqlx::Error::Protocol(format!("write lane: {other}")),
    }
}

/// A failure SQLite reported on the lane.
#[derive(Debug)]
struct LaneError {
    code: i32,
    message: String,
}

impl std::fmt::Display for LaneError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(code: {}) {}", self.code, self.message)
    }
}

impl std::error::Error for LaneError {}

impl sqlx::error::DatabaseError for LaneError {
    fn message(&self) -> &str {
        &self.message
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Owned(self.code.to_string()))
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> sqlx::error::ErrorKind {
        use sqlx::error::ErrorKind;
        match self.code {
            // SQLITE_CONSTRAINT_UNIQUE, _PRIMARYKEY, _FOREIGNKEY, _NOTNULL, _CHECK.
            2067 | 1555 => ErrorKind::UniqueViolation,
            787 => ErrorKind::ForeignKeyViolation,
            1299 => ErrorKind::NotNullViolation,
            275 => ErrorKind::CheckViolation,
            _ => ErrorKind::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_failures_keep_their_code_for_fault_handling() {
        let busy = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(5), Some("database is locked".into()));
        let full = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(13), None);
        assert_eq!(super::super::health::classify(&to_sqlx(busy)), Some(crate::store::health::WriteFault::Locked));
        assert_eq!(super::super::health::classify(&to_sqlx(full)), Some(crate::store::health::WriteFault::DiskFull));
        let unique = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(2067), None);
        let sqlx::Error::Database(db) = to_sqlx(unique) else { panic!("a database error") };
        assert!(db.is_unique_violation());
    }

    #[test]
    fn statements_share_numbered_parameters() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (a INTEGER, b TEXT)").unwrap();
        let changed = execute_all(
            &conn,
            "INSERT INTO t (a, b) VALUES (?1, ?2); INSERT INTO t (a, b) VALUES (?3, ?2); UPDATE t SET a = a + ?1",
            &[&1_i64, &"x", &5_i64],
        )
        .unwrap();
        assert_eq!(changed, 4);
        let sum: i64 = conn.query_row("SELECT SUM(a) FROM t WHERE b = 'x'", [], |r| r.get(0)).unwrap();
        assert_eq!(sum, 2 + 6);
    }
}
