//! `search_files`' walk: depth-first in name order beneath the workdir handle, never following a
//! symlink, skipping noise and secret-looking files, bounded in files and hits.

use std::io::Read;
use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use super::{MAX_FILE_BYTES, Target, clip, io_error, is_secret_path};
use crate::agent::tools::ToolError;
use crate::sandbox::Workdir;

/// Most files looked at in one search.
pub(super) const MAX_WALK_FILES: usize = 20_000;
const SKIPPED_DIRS: &[&str] = &[".git", "target", "node_modules"];

/// What a search found.
pub(super) struct Found {
    pub(super) hits: Vec<String>,
    pub(super) files: usize,
    pub(super) walk_capped: bool,
}

/// What to look for and how much of it.
pub(super) struct Query<'a> {
    pub(super) pattern: &'a str,
    pub(super) glob: Option<&'a str>,
    pub(super) limit: usize,
}

/// Search `root` (a file or a folder beneath the workdir). Folders are reopened by their path
/// beneath the workdir as the walk reaches them, so the walk holds one directory open at a time.
pub(super) fn search(
    wd: &Workdir,
    root: &Target,
    query: &Query<'_>,
    cancel: &CancellationToken,
) -> Result<Found, ToolError> {
    let meta = wd.dir().metadata(&root.rel).map_err(|e| io_error("search", &root.shown, e))?;
    let mut found = Found { hits: Vec::new(), files: 0, walk_capped: false };
    if !meta.is_dir() {
        if let Ok(file) = wd.dir().open(&root.rel) {
            scan(file, &root.rel, query, &mut found);
        }
        return Ok(found);
    }
    let mut stack = vec![root.rel.clone()];
    while let Some(rel) = stack.pop() {
        let Ok(dir) = wd.dir().open_dir(&rel) else { continue };
        let Ok(entries) = dir.entries() else { continue };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for entry in entries {
            if cancel.is_cancelled() || found.hits.len() >= query.limit {
                return Ok(found);
            }
            let (Ok(kind), name) = (entry.file_type(), entry.file_name()) else { continue };
            let path = child(&rel, &name);
            let name = name.to_string_lossy();
            if kind.is_dir() {
                if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_ref()) {
                    subdirs.push(path);
                }
            } else if kind.is_file() {
                found.files += 1;
                if found.files > MAX_WALK_FILES {
                    found.walk_capped = true;
                    return Ok(found);
                }
                let wanted = query.glob.is_none_or(|g| glob_match(g, &name)) && !is_secret_path(&path);
                if let Some(file) = wanted.then(|| entry.open().ok()).flatten() {
                    scan(file, &path, query, &mut found);
                }
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(found)
}

fn child(dir: &Path, name: &std::ffi::OsStr) -> PathBuf {
    if dir == Path::new(".") { PathBuf::from(name) } else { dir.join(name) }
}

fn scan(file: cap_std::fs::File, path: &Path, query: &Query<'_>, found: &mut Found) {
    if !file.metadata().is_ok_and(|m| m.len() <= MAX_FILE_BYTES) {
        return;
    }
    let mut bytes = Vec::new();
    if file.take(MAX_FILE_BYTES).read_to_end(&mut bytes).is_err() || bytes.contains(&0) {
        return;
    }
    let shown = path.display().to_string();
    for (n, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
        if found.hits.len() >= query.limit {
            return;
        }
        if line.contains(query.pattern) {
            found.hits.push(format!("{shown}:{}: {}", n + 1, clip(line.trim(), 200)));
        }
    }
}

/// Match a file name against a pattern where `*` stands for any run of characters.
pub(super) fn glob_match(glob: &str, name: &str) -> bool {
    let parts: Vec<&str> = glob.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return glob == name;
    }
    if name.len() < first.len() + last.len() || !name.starts_with(first) || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}
