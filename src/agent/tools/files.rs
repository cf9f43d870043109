//! File tools: `read_file`, `write_file`, `search_files` and `patch`. Every path is opened beneath
//! the turn's workdir through one directory handle (`crate::sandbox::Workdir`: openat2 with
//! `RESOLVE_BENEATH`), so neither `..`, an absolute path elsewhere, nor a symlink — even one
//! swapped in after a check — reaches outside it, for reads as for writes. They must never read
//! secret-looking files (keys, `.env`, credentials), write one without a human's approval, or
//! leave a half-written file. `read_file` also reads the session's own chat media through a
//! read-only `media/` view (`files/media.rs`).

mod media;
mod search;

use std::io::{ErrorKind, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use super::{Approval, Tool, ToolContext, ToolError, ToolSpec};
use crate::sandbox::Workdir;
use crate::sandbox::beneath::is_escape;
use search::{MAX_WALK_FILES, Query};

/// How long a write to a secret-looking file waits for a human by default.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest file read, searched or patched.
const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
const DEFAULT_READ_LINES: usize = 500;
/// Characters of numbered lines one read returns; the rest is left for a later `offset`.
const READ_BUDGET_CHARS: usize = 40_000;
const MAX_LINE_CHARS: usize = 2_000;
const MAX_SEARCH_HITS: usize = 200;

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

/// A path the model named, beneath the workdir.
pub(super) struct Target {
    /// Relative to the workdir (`.` for the workdir itself).
    pub(super) rel: PathBuf,
    /// How to name it to the model.
    pub(super) shown: String,
    /// It, or what a symlink at it leads to, looks like a secret.
    pub(super) secret: bool,
}

pub(super) fn open_workdir(ctx: &ToolContext) -> Result<Workdir, ToolError> {
    ensure_workdir(ctx)?;
    Workdir::open(&ctx.workdir)
        .map_err(|e| ToolError::Failed(format!("cannot open the workdir {}: {e}", ctx.workdir.display())))
}

/// Create the turn's own folder (`tools::place`) on first use: a turn that never touches files
/// leaves no folder behind.
pub(super) fn ensure_workdir(ctx: &ToolContext) -> Result<(), ToolError> {
    std::fs::create_dir_all(&ctx.workdir)
        .map_err(|e| ToolError::Failed(format!("cannot create the workdir {}: {e}", ctx.workdir.display())))
}

/// Resolve `raw` beneath the workdir: relative to it, or absolute inside it; `~/` is the home
/// folder (so only inside the workdir when the workdir holds it).
pub(super) fn resolve(wd: &Workdir, raw: &str) -> Result<Target, ToolError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(ToolError::InvalidArguments("`path` is empty".into()));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let expanded = match (raw.strip_prefix("~/").or((raw == "~").then_some("")), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(raw),
    };
    let rel = wd.relative(&expanded).map_err(|e| ToolError::Denied(e.to_string()))?;
    // A symlink inside the workdir is judged by where it leads too (resolved beneath it).
    let real = wd.dir().canonicalize(&rel).ok();
    let secret = is_secret_path(&rel) || real.is_some_and(|r| is_secret_path(&r));
    Ok(Target { shown: rel.display().to_string(), rel, secret })
}

pub(super) fn refuse_secret(target: &Target) -> Result<(), ToolError> {
    if target.secret {
        return Err(ToolError::Denied(format!(
            "{} looks like a secret file (keys, .env, credentials); its contents are off limits",
            target.shown
        )));
    }
    Ok(())
}

/// Writes to secret-looking files need a human's yes.
async fn approve_secret_write(ctx: &ToolContext, target: &Target, timeout: Duration) -> Result<(), ToolError> {
    if !target.secret {
        return Ok(());
    }
    let path = &target.shown;
    let reason = match ctx.human.approve(&format!("write to a secret file: {path}"), timeout).await {
        Approval::Approved => return Ok(()),
        Approval::Denied => format!("the user denied the write to a secret file ({path}); not written"),
        Approval::TimedOut => format!(
            "the write to a secret file ({path}) got no answer within {} s; not written (fail closed)",
            timeout.as_secs()
        ),
        Approval::Unavailable => {
            format!("the write to a secret file ({path}) needs approval, and nobody can approve here; not written")
        }
    };
    Err(ToolError::Denied(reason))
}

pub(super) fn io_error(action: &str, shown: &str, e: std::io::Error) -> ToolError {
    if is_escape(&e) {
        return ToolError::Denied(format!(
            "{shown} leads outside the workdir (through a symlink or `..`); file tools work only inside it"
        ));
    }
    match e.kind() {
        ErrorKind::NotFound => ToolError::Failed(format!("{shown} does not exist")),
        ErrorKind::PermissionDenied => ToolError::Failed(format!("permission denied: cannot {action} {shown}")),
        _ => ToolError::Failed(format!("cannot {action} {shown}: {e}")),
    }
}

/// Run blocking file work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work).await.map_err(|_| ToolError::Failed("the file operation crashed".into()))?
}

/// Read a text file through one handle opened beneath the workdir (what is checked is what is
/// read); `strict` refuses invalid UTF-8 instead of replacing it (for edits).
fn read_text(wd: &Workdir, target: &Target, strict: bool) -> Result<String, ToolError> {
    let shown = &target.shown;
    let file = wd.dir().open(&target.rel).map_err(|e| io_error("read", shown, e))?;
    let meta = file.metadata().map_err(|e| io_error("read", shown, e))?;
    if meta.is_dir() {
        return Err(ToolError::Failed(format!("{shown} is a directory; use search_files to look inside it")));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ToolError::Failed(format!(
            "{shown} is {:.1} MB, over the 10 MB limit; use the terminal (head, tail, grep) on it",
            meta.len() as f64 / 1_048_576.0
        )));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES).read_to_end(&mut bytes).map_err(|e| io_error("read", shown, e))?;
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
            description: "Read a text file as numbered lines (`   12|text`). Relative paths are under the workdir; \
                          `media/<file>` also reads files the user sent in this chat (read-only). \
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
        let wd = open_workdir(ctx)?;
        let chat_media = media::chat_media_dir(ctx);
        let (target, text) = blocking(move || {
            let (wd, target) = match media::in_view(&chat_media, &args.path) {
                Some(found) => found,
                None => {
                    let target = resolve(&wd, &args.path)?;
                    (wd, target)
                }
            };
            refuse_secret(&target)?;
            let text = read_text(&wd, &target, false)?;
            Ok((target, text))
        })
        .await?;
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
        let wd = open_workdir(ctx)?;
        let target = resolve(&wd, &args.path)?;
        if target.rel == Path::new(".") || wd.dir().is_dir(&target.rel) {
            return Err(ToolError::Failed(format!("{} is a directory; give a file path", target.shown)));
        }
        approve_secret_write(ctx, &target, self.approval_timeout).await?;
        let (bytes, lines) = (args.content.len(), args.content.lines().count());
        let (existed, shown) = blocking(move || {
            let existed = wd.dir().symlink_metadata(&target.rel).is_ok();
            wd.write_atomic(&target.rel, args.content.as_bytes()).map_err(|e| io_error("write", &target.shown, e))?;
            Ok((existed, target.shown))
        })
        .await?;
        let verb = if existed { "replaced" } else { "created" };
        Ok(format!("{verb} {shown} ({bytes} bytes, {lines} lines)"))
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
        let wd = open_workdir(ctx)?;
        let root = resolve(&wd, args.path.as_deref().unwrap_or("."))?;
        refuse_secret(&root)?;
        let (cancel, limit) = (ctx.cancel.clone(), args.limit.unwrap_or(50).clamp(1, MAX_SEARCH_HITS));
        let glob = args.glob.map(|g| g.rsplit('/').next().unwrap_or_default().to_string());
        let (found, shown) = blocking(move || {
            let query = Query { pattern: &args.pattern, glob: glob.as_deref(), limit };
            search::search(&wd, &root, &query, &cancel).map(|f| (f, root.shown))
        })
        .await?;
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
        let wd = Arc::new(open_workdir(ctx)?);
        let target = Arc::new(resolve(&wd, &args.path)?);
        refuse_secret(&target)?;
        let text = {
            let (wd, target) = (wd.clone(), target.clone());
            blocking(move || read_text(&wd, &target, true)).await?
        };
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
        let patched =
            if args.replace_all { text.replace(&args.old, &args.new) } else { text.replacen(&args.old, &args.new, 1) };
        let (wd2, target2) = (wd.clone(), target.clone());
        blocking(move || {
            wd2.write_atomic(&target2.rel, patched.as_bytes()).map_err(|e| io_error("write", &target2.shown, e))
        })
        .await?;
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
