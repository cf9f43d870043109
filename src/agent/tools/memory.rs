//! The `memory` tool: the agent's own notes (`MEMORY.md`) and what it has learned about the user
//! (`USER.md`), rendered into the system prompt's volatile tier. Whose files a call edits is
//! `scope.rs`'s decision (per person by default); the tool must never let a file grow past its
//! cap, leave a half-written file behind, or touch another person's files.
//!
//! File format: entries separated by lines holding only `§`; surrounding blank lines are ignored.

mod scope;
mod upgrade;

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

pub use scope::{MEMORY_DIR, MemoryPlace, shared_file};
pub use upgrade::upgrade_notes;

use super::files::{parse_args, write_atomic};
use super::place::Whose;
use super::{Tool, ToolContext, ToolError, ToolSpec};
use crate::config::MemoryConfig;

/// Default cap on `MEMORY.md`, in characters.
pub const DEFAULT_MEMORY_CAP: usize = 2_200;
/// Default cap on `USER.md`, in characters.
pub const DEFAULT_USER_CAP: usize = 1_375;
const SEPARATOR: &str = "§";

/// Reads and edits the two memory files.
#[derive(Debug)]
pub struct MemoryTool {
    memory_cap: usize,
    user_cap: usize,
    /// `[memory]`: whose files a call edits.
    config: MemoryConfig,
    /// The profile's folder its `memory/` is under; `None`: the turn's `data_dir`.
    folder: Option<PathBuf>,
    /// Sessions share the files; edits are read-modify-write, so one at a time.
    lock: tokio::sync::Mutex<()>,
}

impl MemoryTool {
    /// A memory tool with caps (in characters) on `MEMORY.md` and `USER.md`, in the default
    /// `[memory]` scope (per person).
    pub fn new(memory_cap: usize, user_cap: usize) -> Self {
        Self { memory_cap, user_cap, config: MemoryConfig::default(), folder: None, lock: tokio::sync::Mutex::new(()) }
    }

    /// This tool keeping memory under `folder` (a profile's: `$HERMESD_HOME` for the default).
    pub fn in_folder(mut self, folder: &Path) -> Self {
        self.folder = Some(folder.to_path_buf());
        self
    }

    /// This tool under `config` (`[memory]`).
    pub fn with_config(mut self, config: MemoryConfig) -> Self {
        self.config = config;
        self
    }
}

impl Default for MemoryTool {
    fn default() -> Self {
        Self::new(DEFAULT_MEMORY_CAP, DEFAULT_USER_CAP)
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Action {
    Read,
    Add,
    Replace,
    Remove,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Target {
    Memory,
    User,
}

impl Target {
    fn file(self) -> &'static str {
        match self {
            Target::Memory => "MEMORY.md",
            Target::User => "USER.md",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    action: Action,
    target: Target,
    content: Option<String>,
    old: Option<String>,
}

#[async_trait]
impl Tool for MemoryTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "memory".into(),
            description: "Keep durable notes across sessions with this person. target \"memory\" is your own notes \
                          (MEMORY.md: lessons, conventions, environment facts); target \"user\" is facts about the \
                          user (USER.md: preferences, name, projects). Both belong to the person you are talking \
                          with, are small and capped: keep entries short. Actions: read; add (content); replace \
                          (old = a unique part of an entry, content = the new entry); remove (old). Both files \
                          already appear in your system prompt. The shared memory there is the operator's and \
                          read-only."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["read", "add", "replace", "remove"]},
                    "target": {"type": "string", "enum": ["memory", "user"]},
                    "content": {"type": "string", "description": "The entry text (add, replace)"},
                    "old": {"type": "string", "description": "A unique part of the entry to change (replace, remove)"}
                },
                "required": ["action", "target"],
                "additionalProperties": false
            }),
            toolset: "memory".into(),
            parallel_safe: false,
            max_result_chars: 10_000,
            timeout: Duration::from_secs(30),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let (file, cap) = match args.target {
            Target::Memory => (args.target.file(), self.memory_cap),
            Target::User => (args.target.file(), self.user_cap),
        };
        let folder = self.folder.as_ref().unwrap_or(&ctx.data_dir);
        let place = MemoryPlace::resolve(&self.config, folder, Some(&Whose::of(&ctx.chat, &ctx.user_id)));
        let path = place.file(args.target).map_err(|why| ToolError::Denied(why.to_owned()))?.to_path_buf();
        let _guard = self.lock.lock().await;
        let text = match tokio::fs::read_to_string(&path).await {
            Ok(text) => text,
            Err(e) if e.kind() == ErrorKind::NotFound => String::new(),
            Err(e) => return Err(ToolError::Failed(format!("cannot read {file}: {e}"))),
        };
        let mut entries = parse_entries(&text);
        let before = usage(&entries);
        let verb = match args.action {
            Action::Read if entries.is_empty() => return Ok(format!("{file} is empty (0/{} chars)", thousands(cap))),
            Action::Read => {
                return Ok(format!("{file} ({}/{} chars):\n{}", thousands(before), thousands(cap), render(&entries)));
            }
            Action::Add => {
                let content = entry_text(args.content, "add")?;
                if entries.contains(&content) {
                    return Ok(format!("{file} already has that entry; nothing changed"));
                }
                entries.push(content);
                "added to"
            }
            Action::Replace => {
                let at = find_one(&entries, args.old.as_deref(), file, "replace")?;
                entries[at] = entry_text(args.content, "replace")?;
                "replaced an entry in"
            }
            Action::Remove => {
                let at = find_one(&entries, args.old.as_deref(), file, "remove")?;
                entries.remove(at);
                "removed an entry from"
            }
        };
        let after = usage(&entries);
        if after > cap && after > before {
            return Err(ToolError::Failed(format!(
                "{file} would grow to {} chars, over its cap ({}/{} chars used now); replace or remove entries \
                 first (merge related ones, drop stale ones), or shorten this entry",
                thousands(after),
                thousands(before),
                thousands(cap)
            )));
        }
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| ToolError::Failed(format!("cannot create {file}: {e}")))?;
        }
        write_atomic(&path, render(&entries).as_bytes())
            .await
            .map_err(|e| ToolError::Failed(format!("cannot write {file}: {e}")))?;
        Ok(format!("{verb} {file} ({}/{} chars, {} entries)", thousands(after), thousands(cap), entries.len()))
    }
}

/// The entry the model gave, checked: present, not blank, no separator line inside.
fn entry_text(content: Option<String>, action: &str) -> Result<String, ToolError> {
    let content = content.unwrap_or_default();
    let content = content.trim();
    if content.is_empty() {
        return Err(ToolError::InvalidArguments(format!("{action} needs `content`: the entry text")));
    }
    if content.lines().any(|line| line.trim() == SEPARATOR) {
        return Err(ToolError::InvalidArguments(format!(
            "an entry cannot contain a line holding only {SEPARATOR} (that line separates entries)"
        )));
    }
    Ok(content.to_string())
}

/// The one entry containing `old`; none or several is an error saying what to do.
fn find_one(entries: &[String], old: Option<&str>, file: &str, action: &str) -> Result<usize, ToolError> {
    let old = old.map(str::trim).unwrap_or_default();
    if old.is_empty() {
        return Err(ToolError::InvalidArguments(format!("{action} needs `old`: a unique part of the entry")));
    }
    let hits: Vec<usize> = entries.iter().enumerate().filter(|(_, e)| e.contains(old)).map(|(i, _)| i).collect();
    match hits.as_slice() {
        [one] => Ok(*one),
        [] => Err(ToolError::Failed(format!(
            "no entry in {file} contains {old:?}; read {file} and quote part of an entry exactly"
        ))),
        many => Err(ToolError::Failed(format!(
            "{} entries in {file} contain {old:?}; quote a longer part so only one entry matches",
            many.len()
        ))),
    }
}

fn parse_entries(text: &str) -> Vec<String> {
    let mut entries = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if line.trim() == SEPARATOR {
            push_entry(&mut entries, &mut current);
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    push_entry(&mut entries, &mut current);
    entries
}

fn push_entry(entries: &mut Vec<String>, current: &mut String) {
    let entry = current.trim();
    if !entry.is_empty() {
        entries.push(entry.to_string());
    }
    current.clear();
}

/// The file content: entries separated by `§` lines, ending in a newline (empty when no entries).
fn render(entries: &[String]) -> String {
    if entries.is_empty() {
        return String::new();
    }
    format!("{}\n", entries.join(&format!("\n{SEPARATOR}\n")))
}

fn usage(entries: &[String]) -> usize {
    render(entries).chars().count()
}

/// `1980` → `"1,980"`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests;
