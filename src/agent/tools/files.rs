//! File tools: `read_file`, `write_file`, `search_files` and `patch`, with paths resolved against
//! the turn's workdir. They must never read secret-looking files (keys, `.env`, credentials) nor
//! write outside the workdir without a human's approval, and never leave a half-written file.

use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

use super::{Approval, Tool, ToolContext, ToolError, ToolSpec};

/// How long a write outside the workdir waits for a human by default.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest file read, searched or patched.
const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
const DEFAULT_READ_LINES: usize = 500;
/// Characters of numbered lines one read returns; the rest is left for a later `offset`.
const READ_BUDGET_CHARS: usize = 40_000;
const MAX_LINE_CHARS: usize = 2_000;
const MAX_WALK_FILES: usize = 20_000;
const MAX_SEARCH_HITS: usize = 200;
const SKIPPED_DIRS: &[&str] = &[".git", "target", "node_modules"];

/// Parse a tool's arguments into `T`, turning serde's complaint into an actionable error.
pub(super) fn parse_args<T: DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments(format!("{e}; check the tool's schema")))
}

/// Write `content` to `path` through a temporary file in the same directory and a rename, so
/// readers see the old or the new file, never a partial one. An existing file keeps its permissions.
pub(super) async fn write_atomic(path: &Path, content: &[u8]) -> std::io::Result<()> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::other("the path has no parent directory or file name"));
    };
    let tmp = dir.join(format!(".{}.tmp-{}", name.to_string_lossy(), uuid::Uuid::new_v4().simple()));
    let permissions = tokio::fs::metadata(path).await.ok().map(|m| m.permissions());
    let result = async {
        let mut file = tokio::fs::File::create(&tmp).await?;
        file.write_all(content).await?;
        file.sync_all().await?;
        drop(file);
        if let Some(permissions) = permissions {
            tokio::fs::set_permissions(&tmp, permissions).await?;
        }
        tokio::fs::rename(&tmp, path).await
    }
    .await;
    if result.is_err() {
        let _ = tokio::fs::remove_file(&tmp).await;
    }
    result
}

/// Resolve `.` and `..` without touching the disk (`..` never climbs above the root).
pub(super) fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Canonicalise the longest existing prefix of `path`, so a symlink cannot hide where it leads.
fn canonical(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(mut real) = std::fs::canonicalize(existing) {
            real.extend(rest.iter().rev());
            return real;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Whether `path` looks like it holds a secret: `.env` files, keys, certificates, credentials,
/// anything under `.ssh` or `.gnupg`.
pub fn is_secret_path(path: &Path) -> bool {
    if path.components().any(|c| matches!(c.as_os_str().to_str(), Some(".ssh" | ".gnupg"))) {
        return true;
    }
    let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_ascii_lowercase) else {
        return false;
    };
    let env_file = name == ".env"
        || (name.starts_with(".env.") && ![".example", ".sample", ".template"].iter().any(|s| name.ends_with(s)));
    env_file
        || name.ends_with(".pem")
        || name.ends_with(".key")
        || ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "credentials"].iter().any(|p| name.starts_with(p))
        || matches!(name.as_str(), ".netrc" | ".pgpass")
}

/// A path the model named, resolved against the workdir.
struct Target {
    /// The real path (symlinks in existing parts resolved).
    path: PathBuf,
    /// How to name it to the model: relative to the workdir when inside it.
    shown: String,
    inside: bool,
    secret: bool,
}

fn resolve(ctx: &ToolContext, raw: &str) -> Result<Target, ToolError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(ToolError::InvalidArguments("`path` is empty".into()));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let expanded = match (raw.strip_prefix("~/").or((raw == "~").then_some("")), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(raw),
    };
    let lexical = normalise(&ctx.workdir.join(expanded));
    let path = canonical(&lexical);
    let workdir = canonical(&normalise(&ctx.workdir));
    let inside = path.starts_with(&workdir);
    let shown = match path.strip_prefix(&workdir) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.display().to_string(),
    };
    let secret = is_secret_path(&lexical) || is_secret_path(&path);
    Ok(Target { path, shown, inside, secret })
}

fn refuse_secret(target: &Target) -> Result<(), ToolError> {
    if target.secret {
        return Err(ToolError::Denied(format!(
            "{} looks like a secret file (keys, .env, credentials); its contents are off limits",
            target.shown
        )));
    }
    Ok(())
}

/// Writes outside the workdir, and writes to secret-looking files, need a human's yes.
async fn approve_write(ctx: &ToolContext, target: &Target, timeout: Duration) -> Result<(), ToolError> {
    let what = match (target.inside, target.secret) {
        (false, _) => "write outside the workdir",
        (true, true) => "write to a secret file",
        (true, false) => return Ok(()),
    };
    let path = target.path.display();
    let reason = match ctx.human.approve(&format!("{what}: {path}"), timeout).await {
        Approval::Approved => return Ok(()),
        Approval::Denied => format!("the user denied the {what} ({path}); not written"),
        Approval::TimedOut => {
            format!("the {what} ({path}) got no answer within {} s; not written (fail closed)", timeout.as_secs())
        }
        Approval::Unavailable => format!(
            "the {what} ({path}) needs approval, and nobody can approve here; not written; \
             write inside the workdir ({}) instead",
            ctx.workdir.display()
        ),
    };
    Err(ToolError::Denied(reason))
}

fn io_error(action: &str, shown: &str, e: std::io::Error) -> ToolError {
    match e.kind() {
        ErrorKind::NotFound => ToolError::Failed(format!("{shown} does not exist")),
        ErrorKind::PermissionDenied => ToolError::Failed(format!("permission denied: cannot {action} {shown}")),
        _ => ToolError::Failed(format!("cannot {action} {shown}: {e}")),
    }
}

/// Read a text file; `strict` refuses invalid UTF-8 instead of replacing it (for edits).
async fn read_text(target: &Target, strict: bool) -> Result<String, ToolError> {
    let shown = &target.shown;
    let meta = tokio::fs::metadata(&target.path).await.map_err(|e| io_error("read", shown, e))?;
    if meta.is_dir() {
        return Err(ToolError::Failed(format!("{shown} is a directory; use search_files to look inside it")));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ToolError::Failed(format!(
            "{shown} is {:.1} MB, over the 10 MB limit; use the terminal (head, tail, grep) on it",
            meta.len() as f64 / 1_048_576.0
        )));
    }
    let bytes = tokio::fs::read(&target.path).await.map_err(|e| io_error("read", shown, e))?;
    if bytes.contains(&0) {
        return Err(ToolError::Failed(format!("{shown} looks binary (it contains NUL bytes); only text files work")));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(_) if strict => Err(ToolError::Failed(format!("{shown} is not valid UTF-8; it cannot be edited safely"))),
        Err(e) => Ok(String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

fn clip(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}… [line cut at {max} chars]", &line[..cut]),
        None => line.to_string(),
    }
}

/// Reads a text file as numbered lines.
#[derive(Debug, Default)]
pub struct ReadFileTool;

impl ReadFileTool {
    /// A read tool.
    pub fn new() -> Self {
        Self
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    offset: Option<usize>,
    limit: Option<usize>,
}

#[async_trait]
impl Tool for ReadFileTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read_file".into(),
            description: "Read a text file as numbered lines (`   12|text`). Relative paths are under the workdir. \
                          Use offset (first line, from 1) and limit (default 500) to page through long files."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workdir or absolute"},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to show (from 1)"},
                    "limit": {"type": "integer", "minimum": 1, "description": "How many lines (default 500)"}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
            toolset: "files".into(),
            parallel_safe: true,
            max_result_chars: READ_BUDGET_CHARS + 10_000,
            timeout: Duration::from_secs(30),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args: ReadArgs = parse_args(args)?;
        let target = resolve(ctx, &args.path)?;
        refuse_secret(&target)?;
        let text = read_text(&target, false).await?;
        number_lines(&text, args.offset.unwrap_or(1).max(1), args.limit.unwrap_or(DEFAULT_READ_LINES).max(1))
            .map_err(|total| {
                ToolError::InvalidArguments(format!("offset is past the end: {} has {total} lines", target.shown))
            })
            .map(|out| if out.is_empty() { format!("{} is empty", target.shown) } else { out })
    }
}

/// Lines `offset..offset+limit` numbered, within the read budget, with a note on how to go on.
/// `Err(total lines)` when `offset` is past the end of a non-empty file.
fn number_lines(text: &str, offset: usize, limit: usize) -> Result<String, usize> {
    let total = text.lines().count();
    if total == 0 {
        return Ok(String::new());
    }
    if offset > total {
        return Err(total);
    }
    let mut out = String::new();
    let mut last = offset - 1;
    for (n, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
        let numbered = format!("{:>5}|{}\n", n + 1, clip(line, MAX_LINE_CHARS));
        if out.len() + numbered.len() > READ_BUDGET_CHARS && last >= offset {
            break;
        }
        out.push_str(&numbered);
        last = n + 1;
    }
    if last < total {
        out.push_str(&format!("[lines {offset}-{last} of {total}; continue with offset={}]", last + 1));
    }
    Ok(out.trim_end().to_string())
}

/// Writes a whole file, creating parent directories.
#[derive(Debug)]
pub struct WriteFileTool {
    approval_timeout: Duration,
}

impl WriteFileTool {
    /// A write tool that waits `approval_timeout` for a human before writing outside the workdir.
    pub fn new(approval_timeout: Duration) -> Self {
        Self { approval_timeout }
    }
}

impl Default for WriteFileTool {
    fn default() -> Self {
        Self::new(DEFAULT_APPROVAL_TIMEOUT)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

#[async_trait]
impl Tool for WriteFileTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write_file".into(),
            description: "Create or overwrite a text file with `content`, creating parent directories. \
                          Relative paths are under the workdir; writing elsewhere needs the user's approval. \
                          To change part of a file, prefer `patch`."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workdir or absolute"},
                    "content": {"type": "string", "description": "The complete new file content"}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
            toolset: "files".into(),
            parallel_safe: false,
            max_result_chars: 2_000,
            timeout: self.approval_timeout + Duration::from_secs(60),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args: WriteArgs = parse_args(args)?;
        let target = resolve(ctx, &args.path)?;
        if target.path.is_dir() {
            return Err(ToolError::Failed(format!("{} is a directory; give a file path", target.shown)));
        }
        approve_write(ctx, &target, self.approval_timeout).await?;
        if let Some(parent) = target.path.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(|e| io_error("create the folder for", &target.shown, e))?;
        }
        let existed = target.path.exists();
        write_atomic(&target.path, args.content.as_bytes()).await.map_err(|e| io_error("write", &target.shown, e))?;
        let verb = if existed { "replaced" } else { "created" };
        Ok(format!("{verb} {} ({} bytes, {} lines)", target.shown, args.content.len(), args.content.lines().count()))
    }
}

/// Searches file contents for a plain substring.
#[derive(Debug, Default)]
pub struct SearchFilesTool;

impl SearchFilesTool {
    /// A search tool.
    pub fn new() -> Self {
        Self
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    limit: Option<usize>,
}

#[async_trait]
impl Tool for SearchFilesTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "search_files".into(),
            description: "Search text files for a plain, case-sensitive substring (not a regex). Returns \
                          `path:line: text` hits. Skips .git, target, node_modules, hidden folders and binary files."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Exact text to find (case-sensitive, no regex)"},
                    "path": {"type": "string", "description": "Folder or file to search (default: the workdir)"},
                    "glob": {"type": "string", "description": "File name filter with * wildcards, e.g. *.rs or test_*"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_HITS, "description": "Most hits (default 50)"}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
            toolset: "files".into(),
            parallel_safe: true,
            max_result_chars: 50_000,
            timeout: Duration::from_secs(60),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args: SearchArgs = parse_args(args)?;
        if args.pattern.is_empty() {
            return Err(ToolError::InvalidArguments("`pattern` is empty".into()));
        }
        let root = resolve(ctx, args.path.as_deref().unwrap_or("."))?;
        refuse_secret(&root)?;
        let workdir = canonical(&normalise(&ctx.workdir));
        let (cancel, limit) = (ctx.cancel.clone(), args.limit.unwrap_or(50).clamp(1, MAX_SEARCH_HITS));
        let glob = args.glob.map(|g| g.rsplit('/').next().unwrap_or_default().to_string());
        let found = tokio::task::spawn_blocking(move || {
            search(&root, &workdir, &args.pattern, glob.as_deref(), limit, &cancel).map(|f| (f, root.shown))
        })
        .await
        .map_err(|_| ToolError::Failed("the search crashed; try a narrower path".into()))?;
        let (found, shown) = found?;
        let mut out = found.hits.join("\n");
        if found.hits.is_empty() {
            out = format!("no matches in {shown} ({} files searched)", found.files);
        } else if found.hits.len() >= limit {
            out.push_str(&format!("\n[stopped at {limit} hits; narrow the path or glob, or raise limit]"));
        }
        if found.walk_capped {
            out.push_str(&format!("\n[stopped after {MAX_WALK_FILES} files; search a smaller folder]"));
        }
        Ok(out)
    }
}

struct Found {
    hits: Vec<String>,
    files: usize,
    walk_capped: bool,
}

/// Walk `root` depth-first in name order without following symlinks, scanning matching files.
fn search(
    root: &Target,
    workdir: &Path,
    pattern: &str,
    glob: Option<&str>,
    limit: usize,
    cancel: &CancellationToken,
) -> Result<Found, ToolError> {
    let meta = std::fs::metadata(&root.path).map_err(|e| io_error("search", &root.shown, e))?;
    let mut found = Found { hits: Vec::new(), files: 0, walk_capped: false };
    if !meta.is_dir() {
        scan_file(&root.path, workdir, pattern, limit, &mut found);
        return Ok(found);
    }
    let mut stack = vec![root.path.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for entry in entries {
            if cancel.is_cancelled() || found.hits.len() >= limit {
                return Ok(found);
            }
            let (Ok(kind), name) = (entry.file_type(), entry.file_name()) else { continue };
            let name = name.to_string_lossy();
            if kind.is_dir() {
                if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_ref()) {
                    subdirs.push(entry.path());
                }
            } else if kind.is_file() {
                found.files += 1;
                if found.files > MAX_WALK_FILES {
                    found.walk_capped = true;
                    return Ok(found);
                }
                if glob.is_none_or(|g| glob_match(g, &name)) && !is_secret_path(&entry.path()) {
                    scan_file(&entry.path(), workdir, pattern, limit, &mut found);
                }
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(found)
}

fn scan_file(path: &Path, workdir: &Path, pattern: &str, limit: usize, found: &mut Found) {
    if !std::fs::metadata(path).is_ok_and(|m| m.len() <= MAX_FILE_BYTES) {
        return;
    }
    let Ok(bytes) = std::fs::read(path) else { return };
    if bytes.contains(&0) {
        return;
    }
    let shown = path.strip_prefix(workdir).unwrap_or(path).display().to_string();
    for (n, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
        if found.hits.len() >= limit {
            return;
        }
        if line.contains(pattern) {
            found.hits.push(format!("{shown}:{}: {}", n + 1, clip(line.trim(), 200)));
        }
    }
}

/// Match a file name against a pattern where `*` stands for any run of characters.
fn glob_match(glob: &str, name: &str) -> bool {
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

/// Replaces exact text in a file.
#[derive(Debug)]
pub struct PatchTool {
    approval_timeout: Duration,
}

impl PatchTool {
    /// A patch tool that waits `approval_timeout` for a human before editing outside the workdir.
    pub fn new(approval_timeout: Duration) -> Self {
        Self { approval_timeout }
    }
}

impl Default for PatchTool {
    fn default() -> Self {
        Self::new(DEFAULT_APPROVAL_TIMEOUT)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchArgs {
    path: String,
    old: String,
    new: String,
    #[serde(default)]
    replace_all: bool,
}

#[async_trait]
impl Tool for PatchTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "patch".into(),
            description: "Replace exact text in a file: `old` must appear exactly once (include surrounding lines \
                          to make it unique) unless replace_all is true. Whitespace and indentation must match."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workdir or absolute"},
                    "old": {"type": "string", "description": "The exact text to replace"},
                    "new": {"type": "string", "description": "The replacement text"},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)"}
                },
                "required": ["path", "old", "new"],
                "additionalProperties": false
            }),
            toolset: "files".into(),
            parallel_safe: false,
            max_result_chars: 10_000,
            timeout: self.approval_timeout + Duration::from_secs(60),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args: PatchArgs = parse_args(args)?;
        if args.old.is_empty() {
            return Err(ToolError::InvalidArguments("`old` is empty; to create a file use write_file".into()));
        }
        if args.old == args.new {
            return Err(ToolError::InvalidArguments("`old` and `new` are the same; nothing to change".into()));
        }
        let target = resolve(ctx, &args.path)?;
        refuse_secret(&target)?;
        let text = read_text(&target, true).await?;
        let lines: Vec<usize> =
            text.match_indices(&args.old).map(|(at, _)| text[..at].matches('\n').count() + 1).collect();
        let shown = &target.shown;
        match lines.len() {
            0 => {
                return Err(ToolError::Failed(format!(
                    "`old` was not found in {shown}; read the file again and copy the text exactly, \
                     including indentation and line breaks"
                )));
            }
            n if n > 1 && !args.replace_all => {
                return Err(ToolError::Failed(format!(
                    "`old` occurs {n} times in {shown}; include more surrounding text so it occurs once, \
                     or set replace_all to true"
                )));
            }
            _ => {}
        }
        approve_write(ctx, &target, self.approval_timeout).await?;
        let patched =
            if args.replace_all { text.replace(&args.old, &args.new) } else { text.replacen(&args.old, &args.new, 1) };
        write_atomic(&target.path, patched.as_bytes()).await.map_err(|e| io_error("write", shown, e))?;
        Ok(patch_summary(shown, &lines, &args.old, &args.new))
    }
}

fn patch_summary(shown: &str, lines: &[usize], old: &str, new: &str) -> String {
    let at: Vec<String> = lines.iter().take(10).map(usize::to_string).collect();
    let more = if lines.len() > 10 { ", …" } else { "" };
    let count = if lines.len() == 1 { "1 replacement".to_string() } else { format!("{} replacements", lines.len()) };
    let mut out = format!("patched {shown}: {count} (line {}{more})\n", at.join(", "));
    for (sign, text) in [('-', old), ('+', new)] {
        let all: Vec<&str> = text.lines().collect();
        for line in all.iter().take(20) {
            out.push_str(&format!("{sign}{}\n", clip(line, 200)));
        }
        if all.len() > 20 {
            out.push_str(&format!("{sign}… ({} more lines)\n", all.len() - 20));
        }
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests;
