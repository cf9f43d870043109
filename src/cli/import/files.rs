//! Files an import writes under `HERMESD_HOME`: `.env` read and appended (0600), files written
//! through a temporary one renamed into place, folders copied, and old backups pruned.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Backups taken before imports kept at most: the oldest go first.
const KEPT_BACKUPS: usize = 5;

/// Remove all but the newest `KEPT_BACKUPS - 1` backups taken before an import (one is being made).
pub(super) fn prune_backups(dir: &Path) {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("before-import-")))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    let excess = found.len().saturating_sub(KEPT_BACKUPS - 1);
    for old in found.into_iter().take(excess) {
        if let Err(e) = std::fs::remove_dir_all(&old) {
            tracing::warn!(path = %old.display(), error = %e, "an old import backup was not removed");
        }
    }
}

/// This home's `.env` (empty when there is none).
pub(super) fn read_env(path: &Path) -> Result<BTreeMap<String, String>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => crate::config::parse_dotenv(&text)
            .map(|vars| vars.into_iter().collect())
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Add variables to `.env` (made 0600).
pub(super) fn append_env(path: &Path, vars: &[(&String, &String)]) -> Result<(), String> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(|e| format!("{}: {e}", path.display()))?;
    let starts_fresh = std::fs::metadata(path).map(|m| m.len() == 0).unwrap_or(true);
    let mut text = String::new();
    if !starts_fresh {
        text.push('\n');
    }
    text.push_str("# Imported by hermesd import hermes\n");
    for (name, value) in vars {
        text.push_str(&format!("{name}={}\n", quote_env(value)));
    }
    file.write_all(text.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))
}

/// A value as `parse_dotenv` reads it back.
pub(super) fn quote_env(value: &str) -> String {
    let plain = value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:/@+,=%".contains(c));
    if plain && !value.is_empty() {
        value.to_owned()
    } else if !value.contains('\'') {
        format!("'{value}'")
    } else {
        format!("\"{value}\"")
    }
}

/// Write a file through a temporary one renamed into place, with `mode`, making its folder.
pub(super) fn write_private(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let parent = path.parent().ok_or_else(|| format!("{}: no folder", path.display()))?;
    std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    let tmp = parent.join(format!(".{}.import-tmp", path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Copy a folder's files and folders (symbolic links are left out).
pub(super) fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
