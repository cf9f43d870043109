//! `[retention]` at run time: one background task that, every `retention.interval`, deletes
//! what is past its age — finished inbound events, sent outbound rows, archived messages, media
//! files, cron output files and daily usage rows older than `USAGE_DAYS` — in small batches,
//! then gives freed pages back to the file system.
//!
//! Batches are small and the task yields between them, so the store's one writer is never held
//! for long; a failure is logged and retried at the next round, never fatal.
//!
//! Rows go in batches of `BATCH` (500) through the `RetentionStore`, oldest first by primary key
//! (archived messages found through a partial index). Files: old files under `media/` and
//! `cron/output/`, and stale folders left empty; a sent copy under `media/outbound/` goes no later
//! than its outbound row, and idempotency records no later than their events, so what ties a record
//! to its person outlives it for `sessions delete --user`. Daily usage rows go after `USAGE_DAYS`
//! (90). Freed pages are returned by an incremental vacuum, after a bounded share of an incremental
//! FTS5 merge: FTS5 keeps a deleted row's entries as delete markers until segments merge, so
//! without it the index would grow with every message ever pruned. An unfinished event or a pending
//! delivery is never pruned, whatever its age. Counted in `hermesd_retention_pruned_total{kind}`;
//! `benches/retention.rs` shows the database levelling off.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::config::RetentionConfig;
use crate::metrics::{Metrics, RETENTION_PRUNED_TOTAL};
use crate::store::Store;

/// Rows deleted per statement.
pub const BATCH: u32 = 500;
/// Free pages returned to the file system per round (4 KiB pages: up to 64 MiB).
const RECLAIM_PAGES: u32 = 16_384;
/// Days of daily usage rows kept (`/usage` shows 30; the rest is for the operator's queries).
pub const USAGE_DAYS: i64 = 90;
/// Files removed per folder walk before yielding.
const FILES_PER_YIELD: usize = 200;
/// The folder under `media/` of sent files' copies (`send_file::stage::OUTBOUND_DIR`).
const OUTBOUND_DIR_NAME: &str = "outbound";

/// What one round removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    /// Finished inbound events.
    pub inbound: u64,
    /// Outbound rows no longer pending.
    pub outbound: u64,
    /// Archived messages.
    pub archived_messages: u64,
    /// Media files.
    pub media_files: u64,
    /// Cron output files.
    pub cron_output_files: u64,
    /// Daily usage rows.
    pub usage_rows: u64,
}

impl Pruned {
    fn total(&self) -> u64 {
        self.inbound
            + self.outbound
            + self.archived_messages
            + self.media_files
            + self.cron_output_files
            + self.usage_rows
    }
}

/// Where retention looks for files.
#[derive(Debug, Clone)]
pub struct Folders {
    /// `$HERMESD_HOME/media`.
    pub media: PathBuf,
    /// `$HERMESD_HOME/cron/output`.
    pub cron_output: PathBuf,
    /// The tools' private temp dirs (outside the home, where commands cannot replace them),
    /// kept as long as media.
    pub tool_tmp: Option<PathBuf>,
}

impl Folders {
    /// The folders under `home`.
    pub fn under(home: &Path) -> Self {
        Self { media: home.join("media"), cron_output: home.join("cron").join("output"), tool_tmp: None }
    }

    /// The same, with the tools' temp dirs under `tmp`.
    pub fn with_tool_tmp(self, tmp: PathBuf) -> Self {
        Self { tool_tmp: Some(tmp), ..self }
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn age_ms(age: Duration) -> i64 {
    i64::try_from(age.as_millis()).unwrap_or(i64::MAX)
}

/// Run rounds until `cancel`: the first shortly after start, then every `config.interval`.
pub async fn run(
    store: Arc<dyn Store>,
    folders: Folders,
    config: RetentionConfig,
    metrics: Arc<Metrics>,
    cancel: CancellationToken,
) {
    // Let start-up (recovery, platforms) go first.
    let mut wait = Duration::from_secs(30).min(config.interval.get());
    loop {
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = cancel.cancelled() => return,
        }
        wait = config.interval.get();
        let pruned = round(store.as_ref(), &folders, &config, now_ms(), &cancel).await;
        for (kind, n) in [
            ("inbound", pruned.inbound),
            ("outbound", pruned.outbound),
            ("archived_messages", pruned.archived_messages),
            ("media", pruned.media_files),
            ("cron_output", pruned.cron_output_files),
            ("usage", pruned.usage_rows),
        ] {
            if n > 0 {
                metrics.add(RETENTION_PRUNED_TOTAL, &[("kind", kind)], n);
            }
        }
        if pruned.total() > 0 {
            tracing::info!(?pruned, "retention removed old records and files");
        }
    }
}

/// How long a stored API response (`Idempotency-Key` record) is kept: `idempotency`, but never
/// past its request's inbound event, the record that ties it to a person for
/// `hermesd sessions delete --user`.
pub fn idempotency_age(config: &RetentionConfig) -> Duration {
    config.idempotency.get().min(config.inbound_events.get())
}

/// How long a sent file's copy under `media/outbound/` is kept: `media`, but never past the
/// outbound row that names it (and so the person it went to).
fn sent_files_age(config: &RetentionConfig) -> Duration {
    config.media.get().min(config.outbound.get())
}

/// One round at time `now` (Unix ms): every table, then the folders, then reclaim space.
pub async fn round(
    store: &dyn Store,
    folders: &Folders,
    config: &RetentionConfig,
    now: i64,
    cancel: &CancellationToken,
) -> Pruned {
    let mut pruned = Pruned::default();
    let before = |age: Duration| now.saturating_sub(age_ms(age));
    pruned.inbound =
        batches("inbound events", cancel, |limit| store.prune_inbound(before(config.inbound_events.get()), limit))
            .await;
    pruned.outbound =
        batches("outbound messages", cancel, |limit| store.prune_outbound(before(config.outbound.get()), limit)).await;
    pruned.archived_messages = batches("archived messages", cancel, |limit| {
        store.prune_archived_messages(before(config.archived_messages.get()), limit)
    })
    .await;
    let usage_before = crate::usage::utc_day_before(now, USAGE_DAYS);
    pruned.usage_rows = batches("daily usage", cancel, |limit| store.prune_usage(&usage_before, limit)).await;
    let media_before = SystemTime::now().checked_sub(config.media.get());
    pruned.media_files = remove_old_files(&folders.media, media_before, cancel).await;
    if let Some(tmp) = &folders.tool_tmp {
        pruned.media_files += remove_old_files(tmp, media_before, cancel).await;
    }
    let sent_before = SystemTime::now().checked_sub(sent_files_age(config));
    pruned.media_files += remove_old_files(&folders.media.join(OUTBOUND_DIR_NAME), sent_before, cancel).await;
    let output_before = SystemTime::now().checked_sub(config.cron_output.get());
    pruned.cron_output_files = remove_old_files(&folders.cron_output, output_before, cancel).await;
    if pruned.inbound + pruned.outbound + pruned.archived_messages > 0
        && let Err(e) = store.reclaim_space(RECLAIM_PAGES).await
    {
        tracing::warn!(error = %e, "returning free pages to the file system failed");
    }
    pruned
}

/// Call `prune(BATCH)` until a call deletes fewer than `BATCH` rows (or fails, or `cancel`).
async fn batches<F, Fut>(what: &str, cancel: &CancellationToken, mut prune: F) -> u64
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = crate::store::StoreResult<u64>>,
{
    let mut total = 0;
    while !cancel.is_cancelled() {
        match prune(BATCH).await {
            Ok(n) => {
                total += n;
                if n < u64::from(BATCH) {
                    break;
                }
                tokio::task::yield_now().await;
            }
            Err(e) => {
                tracing::warn!(what, error = %e, "retention: pruning failed; retried next round");
                break;
            }
        }
    }
    total
}

/// Remove regular files under `dir` last modified before `before` (none when `None`), and the
/// folders that leaves empty. Symlinks are never followed. Runs on the blocking pool.
async fn remove_old_files(dir: &Path, before: Option<SystemTime>, cancel: &CancellationToken) -> u64 {
    let Some(before) = before else { return 0 };
    let dir = dir.to_path_buf();
    let cancel = cancel.clone();
    tokio::task::spawn_blocking(move || sweep(&dir, before, &cancel, true)).await.unwrap_or(0)
}

fn sweep(dir: &Path, before: SystemTime, cancel: &CancellationToken, top: bool) -> u64 {
    // Judged before this sweep removes anything (which touches the folder).
    let stale = std::fs::metadata(dir).and_then(|m| m.modified()).is_ok_and(|modified| modified < before);
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for (i, entry) in entries.filter_map(Result::ok).enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        if i % FILES_PER_YIELD == FILES_PER_YIELD - 1 {
            std::thread::yield_now();
        }
        let Ok(kind) = entry.file_type() else { continue };
        let path = entry.path();
        if kind.is_dir() {
            removed += sweep(&path, before, cancel, false);
        } else if kind.is_file() || kind.is_symlink() {
            let old = entry.metadata().and_then(|m| m.modified()).is_ok_and(|modified| modified < before);
            if old && std::fs::remove_file(&path).is_ok() {
                removed += 1;
            }
        }
    }
    // An emptied folder goes too (only succeeds when empty), unless it is the top or was changed
    // recently: an adapter may have just created it to save a file.
    if !top && stale {
        let _ = std::fs::remove_dir(dir);
    }
    removed
}

#[cfg(test)]
mod tests;
