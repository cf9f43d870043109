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
//! Group commit: a write is queued, then its task waits for the writer slot; whoever gets the
//! slot runs every write queued by then in one transaction, each in a savepoint of its own, and
//! commits once. A commit is most of a small write's cost (locks, WAL frames, the wal-index), and
//! writes from many sessions touch the same pages (the newest rows of `inbound_events`,
//! `messages` and their indexes), so under load a batch writes each page once for all of them. A
//! write whose task finds it already committed by another never waits for the slot.
//!
//! Rules that keep it safe:
//! - A lane batch holds the writer slot (`Conns::get` of the writer) for its whole run, so the
//!   lane and the sqlx writer never write at once and never wait on each other's lock.
//! - A write that fails on its own (a constraint, a missing row) is rolled back to its savepoint
//!   and fails alone; a fault (a lock held elsewhere, a full disk, an I/O error), an error after
//!   which SQLite ended the transaction itself, or a failed commit rolls the whole batch back and
//!   fails every write in it, and each is retried by its caller (`retry_write`). A write's caller
//!   hears of success only after the commit.
//! - Its busy timeout is short (`LANE_BUSY`): a lock held by another process is waited out by
//!   `retry_write`'s async backoff, never by sleeping on a runtime thread.
//! - It never checkpoints (`wal_autocheckpoint = 0`): checkpoints, which sync the file, stay on
//!   the sqlx writer's thread (its automatic ones, and `checkpoint_if_dirty`).
//! - Errors come back as `sqlx::Error::Database` with SQLite's extended code, so fault handling
//!   (`health::classify`) is the same for both connections.
//!
//! Durability per write: a batch holding a write that must outlive a power cut
//! (`Outlive::PowerCut`: an accepted event, a send receipt) commits with `synchronous = FULL`;
//! every other batch keeps `NORMAL`. The lane switches between batches, so group commit shares one
//! sync among all the batch's writes, and since the WAL keeps commits in order, a synced commit
//! also makes every unsynced one before it durable.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, ToSql};
use tokio::sync::oneshot;

use super::conns::{Conn, Conns};

/// How long the lane lets SQLite itself wait for a lock before reporting it busy.
const LANE_BUSY: Duration = Duration::from_millis(10);

/// Statements the lane keeps prepared (the turn's writes are about a dozen).
const STATEMENT_CACHE: usize = 64;

/// A lane write: run on the lane's connection, inside its batch's transaction; `Fn`, because
/// `retry_write` queues it again after a fault.
pub(super) type LaneOp<T> = dyn Fn(&Connection) -> rusqlite::Result<T> + Send + Sync;

/// The lane: one rusqlite connection, opened on first use, and the writes queued for it.
pub(super) struct Lane {
    path: PathBuf,
    busy: Duration,
    conn: Mutex<Option<Connection>>,
    /// Writes waiting for the next batch, oldest first.
    queue: Mutex<Vec<Box<dyn Job>>>,
    /// Numbers the queued writes, so a task can take its own back out.
    next_id: AtomicU64,
    /// Batches run (tests: writes queued together commit together).
    #[cfg(test)]
    batches: AtomicU64,
    /// Written since the last checkpoint.
    dirty: AtomicBool,
    /// The connection's `synchronous` is FULL now (else NORMAL, as opened).
    sync_full: AtomicBool,
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
            queue: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            #[cfg(test)]
            batches: AtomicU64::new(0),
            dirty: AtomicBool::new(false),
            sync_full: AtomicBool::new(false),
            #[cfg(feature = "failpoints")]
            page_limit: Default::default(),
        }
    }

    /// Run the write `op` in the next batch and return its result once that batch committed:
    /// queued first, then either committed by the task holding the writer slot (`writer`) at
    /// the time, or by this task when the slot comes to it first. A `durable` write (an accepted
    /// event, a send receipt) commits in a batch synced to disk (`synchronous = FULL`), so it
    /// outlives a power cut, not only a crash of the process.
    pub(super) async fn write<T: Send + 'static>(
        &self,
        writer: &Conns,
        op: Arc<LaneOp<T>>,
        durable: bool,
    ) -> Result<T, sqlx::Error> {
        let (reply, mut done) = oneshot::channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).push(Box::new(Pending {
            id,
            op,
            durable,
            outcome: None,
            reply,
        }));
        let slot = tokio::select! {
            biased;
            outcome = &mut done => return outcome.unwrap_or(Err(sqlx::Error::PoolClosed)),
            slot = writer.get() => slot,
        };
        match slot {
            Ok(mut slot) => {
                // This write was queued before the slot was ours, so this run commits it, unless
                // a holder before us already did.
                self.run_queued(&mut slot);
                drop(slot);
            }
            Err(error) => {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(at) = queue.iter().position(|job| job.id() == id) {
                    queue.remove(at);
                    return Err(error);
                }
                // Another holder took it: its outcome is on the way.
            }
        }
        done.await.unwrap_or(Err(sqlx::Error::PoolClosed))
    }

    /// Commit every queued write, a batch of up to `MAX_BATCH` at a time. `_writer` is the
    /// writer slot, held by the caller for as long as this runs.
    fn run_queued(&self, _writer: &mut Conn) {
        let mut slot = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let batch: Vec<Box<dyn Job>> = {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                let n = queue.len().min(MAX_BATCH);
                queue.drain(..n).collect()
            };
            if batch.is_empty() {
                return;
            }
            if slot.is_none() {
                match self.open() {
                    Ok(conn) => {
                        self.sync_full.store(false, Ordering::Relaxed);
                        *slot = Some(conn);
                    }
                    Err(error) => {
                        let failure = Failure::from(&error);
                        batch.into_iter().for_each(|job| job.finish(Some(&failure)));
                        continue;
                    }
                }
            }
            let conn = slot.as_mut().expect("opened above");
            let full = batch.iter().any(|job| job.durable());
            if full != self.sync_full.load(Ordering::Relaxed) {
                // Set between transactions; a batch that cannot set it fails like any fault.
                let mode = if full { "PRAGMA synchronous = FULL" } else { "PRAGMA synchronous = NORMAL" };
                if let Err(error) = conn.execute_batch(mode) {
                    let failure = Failure::from(&error);
                    batch.into_iter().for_each(|job| job.finish(Some(&failure)));
                    continue;
                }
                self.sync_full.store(full, Ordering::Relaxed);
            }
            self.dirty.store(true, Ordering::Relaxed);
            #[cfg(test)]
            self.batches.fetch_add(1, Ordering::Relaxed);
            run_batch(conn, batch);
        }
    }

    /// Tests: whether the last batch committed synced to disk (`synchronous = FULL`).
    #[cfg(test)]
    pub(super) fn last_batch_synced(&self) -> bool {
        self.sync_full.load(Ordering::Relaxed)
    }

    /// Tests: batches run so far, and writes waiting now.
    #[cfg(test)]
    pub(super) fn counts(&self) -> (u64, usize) {
        (self.batches.load(Ordering::Relaxed), self.queue.lock().unwrap_or_else(PoisonError::into_inner).len())
    }

    fn open(&self) -> rusqlite::Result<Connection> {
        // The database exists: the sqlx writer created and migrated it before the lane opens.
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(self.busy)?;
        conn.execute_batch(&format!(
            "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; PRAGMA temp_store = memory; \
             PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = {};",
            super::WAL_SIZE_LIMIT
        ))?;
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

    /// Free the connection's page cache, unless a batch runs on it now.
    pub(super) fn shrink_memory(&self) {
        if let Ok(slot) = self.conn.try_lock()
            && let Some(conn) = slot.as_ref()
        {
            shrink(conn);
        }
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
        let slot = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(conn) = slot.as_ref() {
            let pages = if target == 0 { 4_294_967_294 } else { target };
            conn.query_row(&format!("PRAGMA max_page_count = {pages}"), [], |_| Ok(())).map_err(to_sqlx)?;
        }
        Ok(())
    }

    /// Close the connection (a later use opens it again).
    pub(super) fn close(&self, _writer: &mut Conn) {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(conn) = conn
            && let Err((_, e)) = conn.close()
        {
            tracing::warn!(error = %e, "closing the database's write lane");
        }
    }
}

/// Writes one batch commits at most (a batch holds the writer slot while it runs).
const MAX_BATCH: usize = 64;

/// A queued write, type-erased so writes of any result type share a batch.
trait Job: Send {
    fn id(&self) -> u64;
    /// Whether its batch must be synced to disk at commit.
    fn durable(&self) -> bool;
    /// Run the write; its own failure is kept for `finish`.
    fn run(&mut self, conn: &Connection) -> Result<(), &rusqlite::Error>;
    /// Hand the outcome to the waiting task: `batch_failure` when the batch did not commit,
    /// else the write's own result.
    fn finish(self: Box<Self>, batch_failure: Option<&Failure>);
}

struct Pending<T> {
    id: u64,
    op: Arc<LaneOp<T>>,
    durable: bool,
    outcome: Option<rusqlite::Result<T>>,
    reply: oneshot::Sender<Result<T, sqlx::Error>>,
}

impl<T: Send> Job for Pending<T> {
    fn id(&self) -> u64 {
        self.id
    }

    fn durable(&self) -> bool {
        self.durable
    }

    fn run(&mut self, conn: &Connection) -> Result<(), &rusqlite::Error> {
        match self.outcome.insert((self.op)(conn)) {
            Ok(_) => Ok(()),
            Err(error) => Err(&*error),
        }
    }

    fn finish(self: Box<Self>, batch_failure: Option<&Failure>) {
        let result = match (batch_failure, self.outcome) {
            (Some(failure), _) => Err(failure.to_sqlx()),
            (None, Some(outcome)) => outcome.map_err(to_sqlx),
            (None, None) => Err(sqlx::Error::Protocol("write lane: a write was never run".into())),
        };
        // The task may have stopped waiting (its request was cancelled); the write stands.
        let _ = self.reply.send(result);
    }
}

/// Run `batch` in one transaction, each write in a savepoint, and commit once. A batch of one
/// needs no savepoint: its own failure rolls the transaction back.
fn run_batch(conn: &Connection, batch: Vec<Box<dyn Job>>) {
    let mut batch = batch;
    let step = |sql: &str| conn.prepare_cached(sql).and_then(|mut statement| statement.execute([])).map(drop);
    if !conn.is_autocommit() {
        // A batch before this one was cut short (a write panicked): what it left is undone.
        let _ = step("ROLLBACK");
    }
    if let Err(error) = step("BEGIN IMMEDIATE") {
        let failure = Failure::from(&error);
        batch.into_iter().for_each(|job| job.finish(Some(&failure)));
        return;
    }
    let single = batch.len() == 1;
    let mut aborted = None;
    let mut kept = 0;
    for job in &mut batch {
        if !single && let Err(error) = step("SAVEPOINT lane_write") {
            aborted = Some(Failure::from(&error));
            break;
        }
        let Err(error) = job.run(conn) else {
            kept += 1;
            if !single && let Err(error) = step("RELEASE lane_write") {
                aborted = Some(Failure::from(&error));
                break;
            }
            continue;
        };
        if conn.is_autocommit() || is_fault(error) {
            // SQLite ended the transaction itself, or the next write would meet the same fault.
            aborted = Some(Failure::from(error));
            break;
        }
        if single {
            break;
        }
        // This write alone failed: undo what it did, keep the others.
        if let Err(error) = conn.execute_batch("ROLLBACK TO lane_write; RELEASE lane_write") {
            aborted = Some(Failure::from(&error));
            break;
        }
    }
    if aborted.is_none()
        && kept > 0
        && let Err(error) = step("COMMIT")
    {
        aborted = Some(Failure::from(&error));
    }
    if !conn.is_autocommit() {
        // Nothing to keep (every write failed on its own) or the batch failed. A failed ROLLBACK
        // leaves nothing more to undo: the transaction is gone either way, or the next BEGIN
        // fails and says so to the writes of that batch.
        let _ = step("ROLLBACK");
    }
    for job in batch {
        job.finish(aborted.as_ref());
    }
}

/// Whether `error` is a fault that fails the whole batch (waited out by `retry_write`): a lock,
/// a full disk, an I/O error, no memory.
fn is_fault(error: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode;
    matches!(
        error.sqlite_error_code(),
        Some(
            ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked
                | ErrorCode::DiskFull
                | ErrorCode::SystemIoFailure
                | ErrorCode::OutOfMemory
        )
    )
}

/// Why a batch did not commit, handed to each of its writes.
#[derive(Debug, Clone)]
enum Failure {
    Sqlite { code: i32, message: String },
    Other(String),
}

impl From<&rusqlite::Error> for Failure {
    fn from(error: &rusqlite::Error) -> Self {
        match error {
            rusqlite::Error::SqliteFailure(failure, message) => Self::Sqlite {
                code: failure.extended_code,
                message: message.clone().unwrap_or_else(|| failure.to_string()),
            },
            other => Self::Other(other.to_string()),
        }
    }
}

impl Failure {
    fn to_sqlx(&self) -> sqlx::Error {
        match self {
            Self::Sqlite { code, message } => {
                sqlx::Error::Database(Box::new(LaneError { code: *code, message: message.clone() }))
            }
            Self::Other(message) => sqlx::Error::Protocol(format!("write lane: {message}")),
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
        let idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let conn = match idle {
            Some(conn) => conn,
            None => self.open().map_err(to_sqlx)?,
        };
        let result = op(&conn).map_err(to_sqlx);
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
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

    /// Free the page caches of the idle connections.
    pub(super) fn shrink_memory(&self) {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).iter().for_each(shrink);
    }

    /// Close the idle connections; later uses fail like a closed pool.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }
}

/// SQLite frees the pages `conn`'s cache holds and no statement uses (`PRAGMA shrink_memory`).
fn shrink(conn: &Connection) {
    if let Err(e) = conn.release_memory() {
        tracing::debug!(error = %e, "releasing a connection's page cache");
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
