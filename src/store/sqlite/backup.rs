//! Copies of the database: `hermesd backup PATH` (online, consistent, while the daemon writes),
//! the snapshot kept before a schema migration, and `hermesd store vacuum`.
//!
//! Copies are made with `VACUUM INTO`, which reads one consistent snapshot of the database (a
//! WAL reader sees every committed transaction up to its start and nothing after), so neither the
//! daemon's writer nor its readers are stopped. Every copy is written under a `.part` name, checked
//! with `PRAGMA quick_check` and only then renamed into place.
//!
//! A schema migration never runs on a database without a copy of it: the database is snapshotted
//! under `backups/` first (the newest `SNAPSHOTS_KEPT`, 3, are kept), and the log says where. A
//! backup opens the database read-only and never migrates it.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::SqliteConnection;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};

use super::SqliteStore;
use crate::store::{StoreError, StoreResult};

/// How many pre-migration snapshots are kept beside the database; older ones are removed.
pub(crate) const SNAPSHOTS_KEPT: usize = 3;

/// What a finished copy holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    /// Where the copy is.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// The schema version it carries.
    pub schema_version: i64,
}

fn io_error(e: std::io::Error) -> StoreError {
    StoreError::Database(sqlx::Error::Io(e))
}

fn invalid(message: String) -> StoreError {
    io_error(std::io::Error::other(message))
}

/// One read-only connection to the database at `path` (never creating it, never migrating it: a
/// backup must not change the database of a daemon that may be running an older binary).
async fn read_only(path: &Path, busy_timeout: Duration) -> StoreResult<SqlitePool> {
    let options =
        SqliteConnectOptions::from_str("sqlite://")?.filename(path).read_only(true).busy_timeout(busy_timeout);
    Ok(SqlitePoolOptions::new().max_connections(1).connect_with(options).await?)
}

/// Copy the database at `db` to `dest` while it may be in use. `dest` must not exist yet.
pub async fn backup(db: &Path, dest: &Path, busy_timeout: Duration) -> StoreResult<BackupReport> {
    if !db.exists() {
        return Err(invalid(format!("no database at {}", db.display())));
    }
    if dest.exists() {
        return Err(invalid(format!("{} exists already; choose a new path", dest.display())));
    }
    let pool = read_only(db, busy_timeout).await?;
    let result = match pool.acquire().await {
        Ok(mut conn) => copy_into(&mut conn, dest).await,
        Err(e) => Err(e.into()),
    };
    pool.close().await;
    result
}

/// `VACUUM INTO` a `.part` file beside `dest`, check it, then rename it to `dest`.
async fn copy_into(conn: &mut SqliteConnection, dest: &Path) -> StoreResult<BackupReport> {
    let mut part = dest.as_os_str().to_owned();
    part.push(".part");
    let part = PathBuf::from(part);
    // A `.part` left by an interrupted copy is ours to replace.
    match std::fs::remove_file(&part) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error(e)),
    }
    let target = part.to_str().ok_or_else(|| invalid(format!("{} is not valid UTF-8", part.display())))?;
    sqlx::query("VACUUM INTO ?1").bind(target).execute(&mut *conn).await?;
    let report = match verify(&part).await {
        Ok(schema_version) => schema_version,
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            return Err(e);
        }
    };
    std::fs::rename(&part, dest).map_err(io_error)?;
    let bytes = std::fs::metadata(dest).map_err(io_error)?.len();
    Ok(BackupReport { path: dest.to_path_buf(), bytes, schema_version: report })
}

/// `quick_check` a copy and read its schema version.
async fn verify(copy: &Path) -> StoreResult<i64> {
    let pool = read_only(copy, Duration::from_secs(5)).await?;
    let checked: StoreResult<i64> = async {
        let (verdict,): (String,) = sqlx::query_as("PRAGMA quick_check").fetch_one(&pool).await?;
        if verdict != "ok" {
            return Err(invalid(format!("the copy failed its integrity check: {verdict}")));
        }
        let version: Option<(Option<i64>,)> =
            sqlx::query_as("SELECT MAX(version) FROM _sqlx_migrations").fetch_optional(&pool).await.unwrap_or(None);
        Ok(version.and_then(|(v,)| v).unwrap_or(0))
    }
    .await;
    pool.close().await;
    checked
}

/// Before migrating a database from `found` to this binary's schema, keep a copy of it in
/// `<db dir>/backups/` (and only the newest `SNAPSHOTS_KEPT` of them). Returns where it went.
pub(super) async fn snapshot_before_migration(
    writer: &mut SqliteConnection,
    db: &Path,
    found: i64,
) -> StoreResult<PathBuf> {
    let dir = db.parent().unwrap_or(Path::new(".")).join("backups");
    std::fs::create_dir_all(&dir).map_err(io_error)?;
    let stem = db.file_stem().and_then(|s| s.to_str()).unwrap_or("state");
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let dest = dir.join(format!("{stem}-v{found}-{stamp}.db"));
    let report = copy_into(writer, &dest).await?;
    prune_snapshots(&dir, stem);
    Ok(report.path)
}

/// Remove all but the newest `SNAPSHOTS_KEPT` snapshots of `stem` in `dir` (names sort by time).
fn prune_snapshots(dir: &Path, stem: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let prefix = format!("{stem}-v");
    let mut snapshots: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".db"))
        })
        .collect();
    // `<stem>-v<version>-<UTC stamp>.db`: order by the stamp, the part after the last `-`.
    snapshots.sort_by_key(|path| {
        path.file_stem().and_then(|n| n.to_str()).and_then(|n| n.rsplit('-').next()).unwrap_or("").to_owned()
    });
    let excess = snapshots.len().saturating_sub(SNAPSHOTS_KEPT);
    for old in &snapshots[..excess] {
        if let Err(e) = std::fs::remove_file(old) {
            tracing::warn!(path = %old.display(), error = %e, "could not remove an old database snapshot");
        }
    }
}

/// What `hermesd store vacuum` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VacuumReport {
    /// Size before, in bytes (database plus WAL).
    pub before: u64,
    /// Size after.
    pub after: u64,
}

fn on_disk(db: &Path) -> u64 {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    [db.to_path_buf(), PathBuf::from(wal)].iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum()
}

impl SqliteStore {
    /// Rewrite the whole database (`VACUUM`), switching it to incremental auto-vacuum on the way,
    /// so freed pages return to the file system from then on. Takes time and up to twice the
    /// database's size in free disk, and holds the write lock while it runs: an explicit command,
    /// never run at start.
    pub async fn vacuum(&self, db: &Path) -> StoreResult<VacuumReport> {
        let before = on_disk(db);
        sqlx::query("PRAGMA auto_vacuum = INCREMENTAL").execute(&mut *self.writer.get().await?).await?;
        sqlx::query("VACUUM").execute(&mut *self.writer.get().await?).await?;
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut *self.writer.get().await?).await?;
        Ok(VacuumReport { before, after: on_disk(db) })
    }

    /// Return up to `pages` free pages to the file system (incremental auto-vacuum databases; a
    /// no-op on others). Small steps, so the writer is never held for long.
    pub async fn incremental_vacuum(&self, pages: u32) -> StoreResult<()> {
        sqlx::query(sqlx::AssertSqlSafe(format!("PRAGMA incremental_vacuum({pages})")))
            .execute(&mut *self.writer.get().await?)
            .await?;
        Ok(())
    }

    /// The database's auto-vacuum mode: 0 none, 1 full, 2 incremental.
    pub async fn auto_vacuum_mode(&self) -> StoreResult<i64> {
        let (mode,): (i64,) = sqlx::query_as("PRAGMA auto_vacuum").fetch_one(&mut *self.readers.get().await?).await?;
        Ok(mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_newest_snapshots_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let names = [
            "state-v4-20260101T000000Z.db",
            "state-v5-20260201T000000Z.db",
            "state-v5-20260301T000000Z.db",
            "state-v6-20260401T000000Z.db",
            "other-v1-20250101T000000Z.db",
        ];
        for name in names {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        prune_snapshots(dir.path(), "state");
        let mut left: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(
            left,
            [
                "other-v1-20250101T000000Z.db",
                "state-v5-20260201T000000Z.db",
                "state-v5-20260301T000000Z.db",
                "state-v6-20260401T000000Z.db"
            ]
        );
    }
}
