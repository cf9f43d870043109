//! Skills in the Agent Skills format: `$HERMESD_HOME/skills/<name>/SKILL.md` (YAML front matter
//! with `name`, `description`, optional `platforms`) plus files beside it; Hermes' category
//! folders (`skills/<category>/<name>/SKILL.md`) load too.
//!
//! Everything is read from disk on demand (progressive disclosure): the index for a new
//! session's prompt, `skills_list`, `skill_view` and `/<name>` each look again, so a new or
//! edited skill is usable at once. Nothing here ever reads outside a skill's own folder.
//!
//! `Skills` decides visibility (`[skills] disabled`, `platform_disabled`, and a skill's `platforms`
//! naming operating systems or chat platforms), builds the capped index and serves `view` (a body,
//! or a file confined to the skill's folder: no `..`, absolute paths or symlinks out). The index is
//! part of the prompt stored at a session's first turn, so skills never change a running session's
//! system prompt.

mod front_matter;
mod manage;

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::config::SkillsConfig;
use crate::vocab::scan::ScanRefusal;
pub use front_matter::{FrontMatter, FrontMatterError, split};
pub use manage::{Change, Installed};

/// Longest skill name (the Agent Skills limit).
pub const MAX_NAME_CHARS: usize = 64;
/// Skill folders looked at, at most (a bound on every scan).
const MAX_SKILLS: usize = 256;
/// Longest description shown in the index; `skills_list` shows them whole.
const INDEX_DESCRIPTION_CHARS: usize = 240;
/// Files listed under a skill by `skill_view`, at most.
const MAX_LISTED_FILES: usize = 100;
/// Operating-system names the `platforms` front matter may hold (Hermes' meaning of the key);
/// any other entry names a chat platform.
const OPERATING_SYSTEMS: &[(&str, &str)] =
    &[("linux", "linux"), ("macos", "macos"), ("darwin", "macos"), ("windows", "windows"), ("win32", "windows")];

/// Why a skill could not be read, shown, or changed. Messages are for the model or the operator.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    /// Not a valid skill name.
    #[error("invalid skill name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// A built-in chat command has this name (the command would always win).
    #[error("{name:?} is the name of a built-in chat command; choose another skill name")]
    Reserved {
        /// The name.
        name: String,
    },
    /// No such skill.
    #[error("no skill named {0:?}; skills_list shows the available ones")]
    NotFound(String),
    /// The skill exists but is hidden here.
    #[error("the skill {name:?} is not available here ({why})")]
    Hidden {
        /// The skill.
        name: String,
        /// Disabled by config, or another platform's.
        why: String,
    },
    /// A skill of that name exists already.
    #[error("a skill named {0:?} exists already")]
    Exists(String),
    /// The `SKILL.md` or a file is unusable.
    #[error("{path}: {reason}")]
    Unusable {
        /// The file, relative to the skills folder.
        path: String,
        /// Why.
        reason: String,
    },
    /// A path given for a file beside a skill is refused.
    #[error("file {file:?} refused: {reason}")]
    BadPath {
        /// The path as given.
        file: String,
        /// Why.
        reason: &'static str,
    },
    /// The text failed the injection scanner.
    #[error("refused by the injection scanner: {0}")]
    Refused(ScanRefusal),
    /// Reading or writing failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// Where.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

/// A skill as listed: what its front matter says and where it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillMeta {
    /// Its name (the folder's name).
    pub name: String,
    /// Its description, or a note that it has none.
    pub description: String,
    /// Where it may show (operating systems and chat platforms); empty: everywhere.
    pub platforms: Vec<String>,
    /// Its folder.
    pub dir: PathBuf,
}

/// A skill with its instructions.
#[derive(Debug, Clone)]
pub struct Skill {
    /// Name, description, folder.
    pub meta: SkillMeta,
    /// The text after the front matter.
    pub body: String,
}

/// Every skill on disk plus what could not be loaded.
#[derive(Debug, Default)]
pub struct Listing {
    /// Loaded skills, by name.
    pub skills: Vec<SkillMeta>,
    /// One line per skill folder that could not be loaded, with the reason.
    pub problems: Vec<String>,
}

/// The skills folder and its policy; cheap to clone.
#[derive(Debug, Clone)]
pub struct Skills {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    config: SkillsConfig,
    reserved: Vec<String>,
    /// One change applied at a time, so a patch never interleaves with another write.
    apply: std::sync::Mutex<()>,
}

impl Skills {
    /// Skills under `root` (normally `$HERMESD_HOME/skills`) with `config`'s policy; `reserved`
    /// names (the built-in chat commands) can never be given to a skill.
    pub fn new(root: PathBuf, config: SkillsConfig, reserved: Vec<String>) -> Self {
        Self { inner: Arc::new(Inner { root, config, reserved, apply: std::sync::Mutex::new(()) }) }
    }

    /// The skills folder.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The policy.
    pub fn config(&self) -> &SkillsConfig {
        &self.inner.config
    }

    /// Check a name for a new skill: `[a-z0-9-]`, at most 64 characters, no leading, trailing
    /// or doubled hyphen, and not a built-in command.
    pub fn check_new_name(&self, name: &str) -> Result<(), SkillError> {
        validate_name(name)?;
        if self.inner.reserved.iter().any(|r| r == name) {
            return Err(SkillError::Reserved { name: name.to_owned() });
        }
        Ok(())
    }

    /// Every skill on disk, whatever the platform, sorted by name.
    pub fn scan(&self) -> Listing {
        let mut listing = Listing::default();
        let mut found: BTreeMap<String, SkillMeta> = BTreeMap::new();
        for dir in self.skill_dirs(&mut listing.problems) {
            match self.load_meta(&dir) {
                Ok(meta) if found.contains_key(&meta.name) => listing.problems.push(format!(
                    "{}: a second skill named {:?} (the first one is used)",
                    self.shown(&dir),
                    meta.name
                )),
                Ok(meta) => {
                    found.insert(meta.name.clone(), meta);
                }
                Err(e) => listing.problems.push(e.to_string()),
            }
        }
        listing.skills = found.into_values().collect();
        listing
    }

    /// The skills visible on `platform` (`None`: the operator, who sees everything enabled).
    pub fn available(&self, platform: Option<&str>) -> Vec<SkillMeta> {
        self.scan().skills.into_iter().filter(|m| self.visibility(m, platform).is_ok()).collect()
    }

    /// Why `meta` is hidden on `platform`, if it is.
    pub fn visibility(&self, meta: &SkillMeta, platform: Option<&str>) -> Result<(), SkillError> {
        let hidden = |why: String| Err(SkillError::Hidden { name: meta.name.clone(), why });
        let config = &self.inner.config;
        // An account (`telegram@work`) is its platform here.
        let platform = platform.map(|p| p.split_once('@').map_or(p, |(base, _)| base));
        if config.disabled.iter().any(|d| d == &meta.name) {
            return hidden("disabled in [skills] disabled".into());
        }
        if let Some(platform) = platform
            && config.platform_disabled.get(platform).is_some_and(|names| names.contains(&meta.name))
        {
            return hidden(format!("disabled on {platform} in [skills] platform_disabled"));
        }
        let (systems, chats): (Vec<&str>, Vec<&str>) =
            meta.platforms.iter().map(String::as_str).partition(|p| os_name(p).is_some());
        if !systems.is_empty() && !systems.iter().any(|s| os_name(s) == Some(current_os())) {
            return hidden(format!("made for {}", systems.join(", ")));
        }
        if let Some(platform) = platform
            && !chats.is_empty()
            && !chats.contains(&platform)
        {
            return hidden(format!("only for {}", chats.join(", ")));
        }
        Ok(())
    }

    /// The skill `name` as `platform` may see it, with its body.
    pub fn load(&self, name: &str, platform: Option<&str>) -> Result<Skill, SkillError> {
        validate_name(name)?;
        let meta = self.find(name)?;
        self.visibility(&meta, platform)?;
        let text = self.read_skill_md(&meta.dir)?;
        let (_, body) = split(&text).map_err(|e| self.unusable(&meta.dir.join("SKILL.md"), e.to_string()))?;
        Ok(Skill { body: body.trim().to_owned(), meta })
    }

    /// What `skill_view` shows: the skill's instructions and the files beside it, or one of
    /// those files. `file` must stay inside the skill's folder (no `..`, absolute paths, or
    /// symlinks leading out).
    pub fn view(&self, name: &str, file: Option<&str>, platform: Option<&str>) -> Result<String, SkillError> {
        let skill = self.load(name, platform)?;
        let Some(file) = file.map(str::trim).filter(|f| !f.is_empty() && *f != "SKILL.md") else {
            let files = list_files(&skill.meta.dir);
            let mut out =
                format!("# Skill: {}\nFolder: {}\n\n{}", skill.meta.name, skill.meta.dir.display(), skill.body);
            if !files.is_empty() {
                out.push_str(&format!(
                    "\n\nFiles in this skill (read one with skill_view(name, file)): {}",
                    files.join(", ")
                ));
            }
            return Ok(out);
        };
        let path = self.inside(&skill.meta.dir, file)?;
        let bytes = read_capped(&path, self.inner.config.max_file_bytes).map_err(|e| self.io_or_unusable(&path, e))?;
        String::from_utf8(bytes).map_err(|_| self.unusable(&path, "not a UTF-8 text file".into()))
    }

    /// The index for a new session's system prompt: one line per skill visible on `platform`,
    /// at most `index_chars` in all; empty when there are none.
    pub fn index(&self, platform: Option<&str>) -> String {
        let skills = self.available(platform);
        if skills.is_empty() {
            return String::new();
        }
        let mut out = String::from(
            "# Skills\nSkills are instructions for particular tasks, kept on disk. Before a task one of them fits, \
             load it with skill_view(name) and follow it; skills_list shows the current set.\n",
        );
        let cap = self.inner.config.index_chars;
        for (shown, meta) in skills.iter().enumerate() {
            let line = format!("- {}: {}\n", meta.name, shorten(&meta.description, INDEX_DESCRIPTION_CHARS));
            let more = format!("[… {} more: call skills_list]", skills.len() - shown);
            if out.chars().count() + line.chars().count() + more.chars().count() > cap {
                out.push_str(&more);
                return out;
            }
            out.push_str(&line);
        }
        out.trim_end().to_owned()
    }

    fn find(&self, name: &str) -> Result<SkillMeta, SkillError> {
        // Flat layout first: the common case needs no scan.
        let direct = self.inner.root.join(name);
        if direct.join("SKILL.md").is_file() {
            return self.load_meta(&direct);
        }
        self.scan().skills.into_iter().find(|m| m.name == name).ok_or_else(|| SkillError::NotFound(name.to_owned()))
    }

    /// Folders holding a `SKILL.md`: `root/<name>` and `root/<category>/<name>`.
    fn skill_dirs(&self, problems: &mut Vec<String>) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        for entry in sorted_dirs(&self.inner.root) {
            if dirs.len() >= MAX_SKILLS {
                problems.push(format!("more than {MAX_SKILLS} skill folders; the rest are not loaded"));
                break;
            }
            if entry.join("SKILL.md").is_file() {
                dirs.push(entry);
            } else {
                dirs.extend(sorted_dirs(&entry).into_iter().filter(|d| d.join("SKILL.md").is_file()));
            }
        }
        dirs.truncate(MAX_SKILLS);
        dirs
    }

    fn load_meta(&self, dir: &Path) -> Result<SkillMeta, SkillError> {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        validate_name(&name).map_err(|e| self.unusable(dir, e.to_string()))?;
        let text = self.read_skill_md(dir)?;
        let (front, _) = split(&text).map_err(|e| self.unusable(&dir.join("SKILL.md"), e.to_string()))?;
        let description = front.description.unwrap_or_else(|| "(no description)".to_owned());
        Ok(SkillMeta { name, description, platforms: front.platforms, dir: dir.to_owned() })
    }

    fn read_skill_md(&self, dir: &Path) -> Result<String, SkillError> {
        let path = dir.join("SKILL.md");
        let bytes = read_capped(&path, self.inner.config.max_skill_bytes).map_err(|e| self.io_or_unusable(&path, e))?;
        String::from_utf8(bytes).map_err(|_| self.unusable(&path, "not UTF-8 text".into()))
    }

    /// `file` resolved inside `dir`, refusing every way out of it.
    fn inside(&self, dir: &Path, file: &str) -> Result<PathBuf, SkillError> {
        let bad = |reason| SkillError::BadPath { file: file.to_owned(), reason };
        let relative = Path::new(file);
        if relative.is_absolute() {
            return Err(bad("absolute paths are not allowed; give a path inside the skill's folder"));
        }
        if relative.components().any(|c| !matches!(c, Component::Normal(_) | Component::CurDir)) {
            return Err(bad("`..` is not allowed; give a path inside the skill's folder"));
        }
        let joined = dir.join(relative);
        let (Ok(real_dir), Ok(real)) = (dir.canonicalize(), joined.canonicalize()) else {
            return Err(bad("no such file in this skill"));
        };
        if !real.starts_with(&real_dir) {
            return Err(bad("it leads out of the skill's folder (a symlink)"));
        }
        if !real.is_file() {
            return Err(bad("not a file"));
        }
        Ok(real)
    }

    /// A path as shown in messages: relative to the skills folder.
    fn shown(&self, path: &Path) -> String {
        path.strip_prefix(&self.inner.root).unwrap_or(path).display().to_string()
    }

    fn unusable(&self, path: &Path, reason: String) -> SkillError {
        SkillError::Unusable { path: self.shown(path), reason }
    }

    fn io_or_unusable(&self, path: &Path, e: ReadError) -> SkillError {
        match e {
            ReadError::TooLarge { size, cap } => {
                self.unusable(path, format!("{size} bytes, more than the {cap}-byte cap"))
            }
            ReadError::Io(source) => SkillError::Io { action: "read", path: self.shown(path), source },
        }
    }
}

/// A name is `[a-z0-9-]`, 1–64 characters, with no leading, trailing or doubled hyphen (the
/// Agent Skills rules), so it is also a safe folder name and a chat command word.
pub fn validate_name(name: &str) -> Result<(), SkillError> {
    let invalid = |reason| Err(SkillError::InvalidName { name: name.chars().take(80).collect(), reason });
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return invalid("a name has 1 to 64 characters");
    }
    if !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        return invalid("use only lowercase letters, digits and hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return invalid("no hyphen at the start or end, and no two in a row");
    }
    Ok(())
}

fn os_name(platform: &str) -> Option<&'static str> {
    OPERATING_SYSTEMS.iter().find(|(name, _)| *name == platform).map(|(_, os)| *os)
}

fn current_os() -> &'static str {
    match std::env::consts::OS {
        "macos" => "macos",
        "windows" => "windows",
        _ => "linux",
    }
}

/// Sub-folders of `dir`, hidden ones skipped, sorted; empty when `dir` cannot be read.
fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .take(MAX_SKILLS * 4)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// Files under `dir` (relative, sorted, hidden ones and `SKILL.md` left out), at most 100,
/// never following symlinked folders.
fn list_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(current) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else { continue };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(kind) = entry.file_type() else { continue };
            let path = entry.path();
            if kind.is_dir() {
                stack.push(path);
            } else if let Ok(relative) = path.strip_prefix(dir)
                && relative != Path::new("SKILL.md")
            {
                out.push(relative.display().to_string());
            }
            if out.len() >= MAX_LISTED_FILES {
                out.sort();
                out.push("…".into());
                return out;
            }
        }
    }
    out.sort();
    out
}

enum ReadError {
    TooLarge { size: u64, cap: usize },
    Io(std::io::Error),
}

fn read_capped(path: &Path, cap: usize) -> Result<Vec<u8>, ReadError> {
    let size = std::fs::metadata(path).map_err(ReadError::Io)?.len();
    if size > cap as u64 {
        return Err(ReadError::TooLarge { size, cap });
    }
    std::fs::read(path).map_err(ReadError::Io)
}

/// `text` on one line, cut to `max` characters with an ellipsis.
fn shorten(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests;
