//! `hermesd backup PATH` (an online, checked copy of the store) and `hermesd store vacuum`.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;

use super::{Loaded, open_store, report_outcome};

/// `hermesd store …`.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Rewrite the database to reclaim free space and switch it to incremental auto-vacuum.
    /// Needs up to twice the database's size in free disk and holds the write lock while it
    /// runs (stop the daemon first on a busy gateway).
    Vacuum,
}

/// Copy the store to `dest` while the daemon may be running.
pub(super) async fn backup(loaded: Loaded, dest: &Path) -> ExitCode {
    let db = loaded.paths.database(&loaded.config.store);
    let result = crate::store::backup(&db, dest, loaded.config.store.busy_timeout.get()).await;
    report_outcome(
        result
            .map(|report| {
                format!(
                    "backup of {} written to {} ({} bytes, schema version {}, integrity checked)",
                    db.display(),
                    report.path.display(),
                    report.bytes,
                    report.schema_version
                )
            })
            .map_err(|e| format!("backup failed: {e}")),
    )
}

/// Run a `hermesd store` subcommand.
pub(super) async fn store(loaded: Loaded, command: StoreCommand) -> ExitCode {
    match command {
        StoreCommand::Vacuum => {
            let store = match open_store(&loaded).await {
                Ok(store) => store,
                Err(code) => return code,
            };
            let db = loaded.paths.database(&loaded.config.store);
            let result = store.vacuum(&db).await;
            store.close().await;
            report_outcome(
                result
                    .map(|r| format!("vacuumed {}: {} bytes before, {} after", db.display(), r.before, r.after))
                    .map_err(|e| format!("vacuum failed: {e}")),
            )
        }
    }
}
