//! The SQLite backend of the store: WAL, one writer connection (with the turn's writes on its
//! in-place lane, `lane`), a pool of read-only readers, a busy timeout and a jittered retry
//! when another process holds the write lock.
//!
//! Only this folder writes SQL. Schema changes go through `migrations/`, never ad hoc DDL here.
//!
//! Connections: the writer and `store.readers` readers behind async mutexes (`conns.rs`, no sqlx
//! pool), plus the lanes (`lane.rs`). Every connection sets `journal_size_limit` (8 MB): after a
//! burst, the next writer to start the WAL over cuts the file back instead of it keeping its
//! largest size for good. Writes ride out faults in `health.rs`; caches go back when quiet
//! (`idle.rs`); full-text indexing is batched (`fts.rs`); live transcripts are kept decoded
//! (`transcripts.rs`).
//!
//! The migrations in `migrations/` are embedded; a database with a newer schema is refused
//! (`SchemaTooNew`), and before a migration runs a snapshot is kept (`backup.rs`). New databases
//! use incremental auto-vacuum.
//!
//! An inbound or pending outbound row whose payload no longer decodes is set to `quarantined` while
//! loading (kept for inspection, never run, retried or sent), so the rows around it still run and
//! send; a damaged transcript row is set aside by `damaged.rs`. The full history (`hermesd sessions
//! show`/`export`) shows what decodes and writes nothing. `inbound_count` (`access.rs`) lets tests
//! see that strangers' events never reach the store.

mod access;
pub(crate) mod backup;
pub(crate) mod checkup;
mod conns;
mod cron;
mod damaged;
mod extras;
mod fts;
mod grants;
mod health;
mod idempotency;
mod idle;
mod import;
mod inbound;
mod lane;
mod lease;
mod lifecycle;
mod operator;
mod outbox;
mod people;
mod preview;
mod receipts;
mod responses;
mod retention;
mod search;
mod sessions;
mod transcripts;
mod usage;

use std::borrow::Cow;
use std::future::Future;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::SqlStr;
use sqlx::SqliteConnection;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::sqlite::{SqliteAutoVacuum, SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};

use self::conns::Conns;
use super::{StoreError, StoreResult};

/// What the WAL file is cut back to when a writer starts it over after a checkpoint (`PRAGMA
/// journal_size_limit`, bytes): a burst can grow the WAL far beyond its usual few MB, and without
/// a limit the file keeps its largest size for good.
const WAL_SIZE_LIMIT: u64 = 8 * 1024 * 1024;

/// The migrations compiled into this binary, in order.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "initial", include_str!("../../../migrations/0001_initial.sql")),
    (2, "runtime", include_str!("../../../migrations/0002_runtime.sql")),
    (3, "access", include_str!("../../../migrations/0003_access.sql")),
    (4, "cron", include_str!("../../../migrations/0004_cron.sql")),
    (5, "idempotency", include_str!("../../../migrations/0005_idempotency.sql")),
    (6, "access", include_str!("../../../migrations/0006_access.sql")),
    (7, "reasoning", include_str!("../../../migrations/0007_reasoning.sql")),
    (8, "message_images", include_str!("../../../migrations/0008_message_images.sql")),
    (9, "stream_previews", include_str!("../../../migrations/0009_stream_previews.sql")),
    (10, "retention", include_str!("../../../migrations/0010_retention.sql")),
    (11, "session_lifecycle", include_str!("../../../migrations/0011_session_lifecycle.sql")),
    (12, "search", include_str!("../../../migrations/0012_search.sql")),
    (13, "usage", include_str!("../../../migrations/0013_usage.sql")),
    (14, "session_people", include_str!("../../../migrations/0014_session_people.sql")),
    (15, "delivery_receipts", include_str!("../../../migrations/0015_delivery_receipts.sql")),
    (19, "fts_pending", include_str!("../../../migrations/0019_fts_pending.sql")),
    (20, "quarantined_messages", include_str!("../../../migrations/0020_quarantined_messages.sql")),
    (21, "leases", include_str!("../../../migrations/0021_leases.sql")),
    (22, "cron_profile", include_str!("../../../migrations/0022_cron_profile.sql")),
    (23, "usage_by_profile", include_str!("../../../migrations/0023_usage_by_profile.sql")),
    (24, "trouble_indexes", include_str!("../../../migrations/0024_trouble_indexes.sql")),
    (25, "approval_grants", include_str!("../../../migrations/0025_approval_grants.sql")),
    (26, "imports", include_str!("../../../migrations/0026_imports.sql")),
    (27, "api_responses", include_str!("../../../migrations/0027_api_responses.sql")),
    (28, "response_context", include_str!("../../../migrations/0028_response_context.sql")),
    (29, "usage_by_model", include_str!("../../../migrations/0029_usage_by_model.sql")),
];

/// The SQLite store.
#[derive(Clone)]
pub struct SqliteStore {
    writer: Conns,
    /// The turn's writes, in the calling task, under the writer slot (`lane`).
    lane: std::sync::Arc<lane::Lane>,
    /// The turn's reads, in the calling task (`lane::ReadLane`).
    read_lane: std::sync::Arc<lane::ReadLane>,
    /// Live transcripts of recent sessions, kept decoded between turns (`transcripts`).
    transcripts: std::sync::Arc<transcripts::Transcripts>,
    readers: Conns,
    /// What the durable-path writes last saw (`/readyz`).
    health: std::sync::Arc<super::health::WriteHealth>,
    /// When the store was last busy, to hand the page caches back once it is quiet (`idle`).
    quiet: std::sync::Arc<idle::Quiet>,
    /// Where rows set aside are counted, once the daemon wired its registry (`damaged`).
    metrics: std::sync::Arc<std::sync::OnceLock<std::sync::Arc<crate::metrics::Metrics>>>,
    /// The page cap a test armed on the writer (`store.max_page_count`; 0: none).
    #[cfg(feature = "failpoints")]
    page_limit: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl SqliteStore {
    /// Open (creating if needed) the database at `path`, apply migrations, and refuse a schema
    /// newer than this binary knows. A new database uses incremental auto-vacuum; before an
    /// existing one is migrated, a snapshot of it is kept under `backups/` beside it.
    pub async fn open(path: &Path, busy_timeout: Duration, readers: u32) -> StoreResult<Self> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| StoreError::Database(sqlx::Error::Io(e)))?;
        }
        let new = !path.exists();
        let base = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(busy_timeout)
            .foreign_keys(true)
            .pragma("temp_store", "memory")
            .pragma("journal_size_limit", WAL_SIZE_LIMIT.to_string());
        // One writer connection: SQLite serialises writers anyway, and a single connection turns
        // contention inside this process into a queue instead of BUSY errors. Incremental
        // auto-vacuum can only be chosen before the first page is written; older databases
        // switch with `hermesd store vacuum`.
        let writer = Conns::new(
            if new {
                base.clone().create_if_missing(true).auto_vacuum(SqliteAutoVacuum::Incremental)
            } else {
                base.clone().create_if_missing(true)
            },
            1,
        );
        {
            let mut conn = writer.get().await?;
            let found = check_schema_version(&mut conn).await?;
            if let Some(found) = found.filter(|found| *found < Self::known_schema_version()) {
                let snapshot = backup::snapshot_before_migration(&mut conn, path, found).await?;
                tracing::warn!(
                    from = found,
                    to = Self::known_schema_version(),
                    snapshot = %snapshot.display(),
                    "migrating the database schema; the previous database is kept as a snapshot"
                );
            }
            migrator().run(&mut *conn).await?;
        }
        let read_lane = lane::ReadLane::new(path.to_path_buf(), readers as usize);
        let quiet = std::sync::Arc::new(idle::Quiet::default());
        let readers = Conns::new(base.read_only(true), readers).watched(quiet.clone());
        Ok(Self {
            writer,
            lane: std::sync::Arc::new(lane::Lane::new(path.to_path_buf(), busy_timeout)),
            read_lane: std::sync::Arc::new(read_lane),
            transcripts: Default::default(),
            readers,
            health: Default::default(),
            quiet,
            metrics: Default::default(),
            #[cfg(feature = "failpoints")]
            page_limit: Default::default(),
        })
    }

    /// Open an existing database only to read it: no migration, no file created, every write
    /// refused by SQLite. Also gives the schema version found (older ones lack newer tables).
    pub async fn open_read_only(path: &Path, busy_timeout: Duration) -> StoreResult<(Self, i64)> {
        if !path.exists() {
            return Err(StoreError::NotFound(format!("no database at {}", path.display())));
        }
        let base = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .busy_timeout(busy_timeout)
            .read_only(true)
            .pragma("temp_store", "memory");
        let writer = Conns::new(base.clone(), 1);
        let found = {
            let mut conn = writer.get().await?;
            check_schema_version(&mut conn).await?.unwrap_or(0)
        };
        let store = Self {
            writer,
            lane: std::sync::Arc::new(lane::Lane::new(path.to_path_buf(), busy_timeout)),
            read_lane: std::sync::Arc::new(lane::ReadLane::new(path.to_path_buf(), 1)),
            transcripts: Default::default(),
            readers: Conns::new(base, 1),
            health: Default::default(),
            quiet: Default::default(),
            metrics: Default::default(),
            #[cfg(feature = "failpoints")]
            page_limit: Default::default(),
        };
        Ok((store, found))
    }

    /// Close every connection, checkpointing the WAL.
    pub async fn close(&self) {
        self.readers.close().await;
        self.read_lane.close();
        // The lane first: the writer's close is the last and checkpoints the WAL.
        if let Ok(mut writer) = self.writer.get().await {
            self.lane.close(&mut writer);
        }
        self.writer.close().await;
    }

    /// The newest schema version this binary knows.
    pub fn known_schema_version() -> i64 {
        MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
    }
}

fn migrator() -> Migrator {
    let migrations = MIGRATIONS
        .iter()
        .map(|(version, name, sql)| {
            Migration::new(*version, Cow::Borrowed(*name), MigrationType::Simple, SqlStr::from_static(sql), false)
        })
        .collect();
    Migrator::with_migrations(migrations)
}

/// The database's schema version (`None` for a database no migration ran on); an error when it
/// is newer than this binary knows.
async fn check_schema_version(conn: &mut SqliteConnection) -> StoreResult<Option<i64>> {
    let exists: Option<(String,)> =
        sqlx::query_as("SELECT name FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'")
            .fetch_optional(&mut *conn)
            .await?;
    if exists.is_none() {
        return Ok(None);
    }
    let (found,): (Option<i64>,) =
        sqlx::query_as("SELECT MAX(version) FROM _sqlx_migrations").fetch_one(&mut *conn).await?;
    let known = SqliteStore::known_schema_version();
    match found {
        Some(found) if found > known => Err(StoreError::SchemaTooNew { found, known }),
        found => Ok(found),
    }
}

/// Run a write, retrying with jitter while another process keeps the database locked (or the
/// disk is full, or I/O fails) for as long as `health::retry_write` allows. Writes on the
/// durable path use `SqliteStore::write`, which also records the fault for `/readyz`.
async fn retry_busy<T, F, Fut>(op: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, sqlx::Error>>,
{
    health::retry_write(None, op).await
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("store types always serialise to JSON")
}

fn from_json<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

#[cfg(test)]
mod tests;
