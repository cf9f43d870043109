//! Changing skills: what `skill_manage` does for the agent (create, edit, patch, write a file
//! beside a skill, delete) and what `hermesd skills install | remove` does for the operator.
//!
//! A change is prepared first (name, size caps, front matter, the injection scanner), shown to
//! whoever approves it, then applied only if the files are still as they were when prepared.
//! Writes are atomic (temp file + rename); nothing is ever written outside the skills folder.
//!
//! For the agent: `prepare` → approval → `apply`, for create, edit, patch, write_file and delete;
//! size caps, names and the prompt injection scanner are checked in `prepare`. For the CLI:
//! `install` and `remove`.

use std::path::{Path, PathBuf};

use super::{SkillError, Skills, split, validate_name};
use crate::vocab::scan::scan_prompt;

/// Files an installed skill may have, at most.
const MAX_INSTALL_FILES: usize = 1_000;
/// Bytes an installed skill may have in all, at most.
const MAX_INSTALL_BYTES: u64 = 32 * 1024 * 1024;
/// Characters of a change shown in an approval request.
const PREVIEW_CHARS: usize = 1_500;

/// A change the agent asks for.
#[derive(Debug, Clone)]
pub enum Change {
    /// A new skill with this `SKILL.md`.
    Create {
        /// The whole `SKILL.md`, front matter included.
        content: String,
    },
    /// Replace a skill's `SKILL.md`.
    Edit {
        /// The whole new `SKILL.md`.
        content: String,
    },
    /// Replace one exact occurrence of `old` by `new` in `SKILL.md` or a file beside it.
    Patch {
        /// A file beside `SKILL.md`; `None`: `SKILL.md` itself.
        file: Option<String>,
        /// The text to replace; must occur exactly once.
        old: String,
        /// The replacement.
        new: String,
    },
    /// Create or replace a file beside `SKILL.md` (e.g. `references/api.md`).
    WriteFile {
        /// Path inside the skill's folder.
        file: String,
        /// The file's text.
        content: String,
    },
    /// Remove the skill and its folder.
    Delete,
}

/// A checked change, ready to be approved and applied.
#[derive(Debug)]
pub struct Prepared {
    name: String,
    op: Op,
    /// What the change does, for the approval request and the result.
    pub summary: String,
    /// The text being written (cut), for the approval request.
    pub preview: String,
}

#[derive(Debug)]
enum Op {
    Write { path: PathBuf, content: String, expect: Expect },
    Delete { dir: PathBuf },
}

#[derive(Debug)]
enum Expect {
    Absent,
    Content(String),
    AnyContent,
}

/// What `install` did.
#[derive(Debug)]
pub struct Installed {
    /// The skill's name.
    pub name: String,
    /// Its folder.
    pub dir: PathBuf,
    /// Files copied.
    pub files: usize,
    /// Things the operator should know (skipped symlinks, scanner findings, a differing name).
    pub warnings: Vec<String>,
}

impl Skills {
    /// Check `change` to skill `name` as seen from `platform`, reading what it replaces.
    pub fn prepare(&self, name: &str, change: Change, platform: Option<&str>) -> Result<Prepared, SkillError> {
        let (summary, op) = match change {
            Change::Create { content } => {
                self.check_new_name(name)?;
                match self.find(name) {
                    Ok(_) => return Err(SkillError::Exists(name.to_owned())),
                    Err(SkillError::NotFound(_)) => {}
                    Err(e) => return Err(e),
                }
                self.check_skill_md(name, &content)?;
                let path = self.root().join(name).join("SKILL.md");
                (format!("create the skill {name:?}"), Op::Write { path, content, expect: Expect::Absent })
            }
            Change::Edit { content } => {
                let meta = self.visible(name, platform)?;
                self.check_skill_md(name, &content)?;
                let path = meta.dir.join("SKILL.md");
                let current = self.read_skill_md(&meta.dir)?;
                (
                    format!("replace the SKILL.md of {name:?}"),
                    Op::Write { path, content, expect: Expect::Content(current) },
                )
            }
            Change::Patch { file, old, new } => {
                let meta = self.visible(name, platform)?;
                let (path, current) = match file.as_deref().map(str::trim).filter(|f| !f.is_empty() && *f != "SKILL.md")
                {
                    None => (meta.dir.join("SKILL.md"), self.read_skill_md(&meta.dir)?),
                    Some(file) => {
                        let path = self.inside(&meta.dir, file)?;
                        let text = std::fs::read_to_string(&path).map_err(|source| SkillError::Io {
                            action: "read",
                            path: self.shown(&path),
                            source,
                        })?;
                        (path, text)
                    }
                };
                let content = patched(&current, &old, &new)?;
                if path.file_name().is_some_and(|f| f == "SKILL.md") {
                    self.check_skill_md(name, &content)?;
                } else {
                    self.check_file(&path, &content)?;
                }
                let what = self.shown(&path);
                (format!("patch {what}"), Op::Write { path, content, expect: Expect::Content(current) })
            }
            Change::WriteFile { file, content } => {
                let meta = self.visible(name, platform)?;
                let path = self.new_file_path(&meta.dir, &file)?;
                self.check_file(&path, &content)?;
                (format!("write {}", self.shown(&path)), Op::Write { path, content, expect: Expect::AnyContent })
            }
            Change::Delete => {
                let meta = self.visible(name, platform)?;
                (format!("delete the skill {name:?} and its folder"), Op::Delete { dir: meta.dir })
            }
        };
        let preview = match &op {
            Op::Write { content, .. } => cut(content, PREVIEW_CHARS),
            Op::Delete { .. } => String::new(),
        };
        Ok(Prepared { name: name.to_owned(), op, summary, preview })
    }

    /// Apply a prepared change if nothing changed the files since; returns what was done.
    pub fn apply(&self, prepared: Prepared) -> Result<String, SkillError> {
        let _one_at_a_time = self.inner.apply.lock().unwrap_or_else(|e| e.into_inner());
        match prepared.op {
            Op::Write { path, content, expect } => {
                let current = std::fs::read_to_string(&path).ok();
                let unchanged = match (&expect, &current) {
                    (Expect::Absent, None) | (Expect::AnyContent, _) => true,
                    (Expect::Content(before), Some(now)) => before == now,
                    _ => false,
                };
                if !unchanged {
                    return Err(SkillError::Unusable {
                        path: self.shown(&path),
                        reason: "changed while the change waited; read it again and retry".into(),
                    });
                }
                let dir = path.parent().expect("skill files always have a parent folder");
                std::fs::create_dir_all(dir).map_err(|source| self.io("create", dir, source))?;
                write_atomic(&path, content.as_bytes()).map_err(|source| self.io("write", &path, source))?;
                Ok(format!("done: {} ({} bytes)", prepared.summary, content.len()))
            }
            Op::Delete { dir } => {
                std::fs::remove_dir_all(&dir).map_err(|source| self.io("delete", &dir, source))?;
                Ok(format!("done: deleted the skill {:?}", prepared.name))
            }
        }
    }

    /// Copy the skill folder `src` into the skills folder (the operator's `hermesd skills
    /// install`). The name is `name`, else the front matter's, else the folder's; a built-in
    /// command's name is refused, and so is an existing skill's unless `replace`.
    pub fn install(&self, src: &Path, name: Option<&str>, replace: bool) -> Result<Installed, SkillError> {
        let text = self.read_skill_md(src)?;
        let (front, body) = split(&text).map_err(|e| self.unusable(&src.join("SKILL.md"), e.to_string()))?;
        let folder = src.canonicalize().ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        let name = name.map(str::to_owned).or_else(|| front.name.clone()).or(folder).unwrap_or_default();
        self.check_new_name(&name)?;
        let mut warnings = Vec::new();
        if front.name.as_deref().is_some_and(|n| n != name) {
            warnings.push(format!(
                "its front matter says name {:?}; installed as {name:?}",
                front.name.unwrap_or_default()
            ));
        }
        if front.description.is_none() {
            warnings.push("it has no description; the index shows \"(no description)\"".into());
        }
        if let Err(refusal) = scan_prompt(&text) {
            warnings.push(format!("the injection scanner flags it: {refusal}"));
        }
        if body.trim().is_empty() {
            warnings.push("its SKILL.md has no instructions after the front matter".into());
        }
        let existing = match self.find(&name) {
            Ok(_) if !replace => return Err(SkillError::Exists(name)),
            Ok(meta) => Some(meta.dir),
            Err(SkillError::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        std::fs::create_dir_all(self.root()).map_err(|source| self.io("create", self.root(), source))?;
        let staging = self.root().join(format!(".install-{name}-{}", uuid::Uuid::new_v4().simple()));
        let mut budget = Budget { files: 0, bytes: 0 };
        let copied = copy_tree(src, &staging, &mut budget, &mut warnings);
        let dir = self.root().join(&name);
        let result = copied.and_then(|()| {
            if let Some(old) = &existing {
                std::fs::remove_dir_all(old)?;
            }
            std::fs::rename(&staging, &dir)
        });
        if let Err(source) = result {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(self.io("install into", &dir, source));
        }
        Ok(Installed { name, dir, files: budget.files, warnings })
    }

    /// Delete the skill `name` and its folder (the operator's `hermesd skills remove`).
    pub fn remove(&self, name: &str) -> Result<PathBuf, SkillError> {
        validate_name(name)?;
        let meta = self.find(name)?;
        std::fs::remove_dir_all(&meta.dir).map_err(|source| self.io("remove", &meta.dir, source))?;
        Ok(meta.dir)
    }

    fn visible(&self, name: &str, platform: Option<&str>) -> Result<super::SkillMeta, SkillError> {
        validate_name(name)?;
        let meta = self.find(name)?;
        self.visibility(&meta, platform)?;
        Ok(meta)
    }

    /// A `SKILL.md` the agent writes: within the cap, with front matter and a description,
    /// its `name` (when given) matching, and passing the injection scanner.
    fn check_skill_md(&self, name: &str, content: &str) -> Result<(), SkillError> {
        let shown = format!("{name}/SKILL.md");
        let unusable = |reason: String| SkillError::Unusable { path: shown.clone(), reason };
        let cap = self.config().max_skill_bytes;
        if content.len() > cap {
            return Err(unusable(format!("{} bytes, more than the {cap}-byte cap", content.len())));
        }
        let (front, body) = split(content).map_err(|e| unusable(e.to_string()))?;
        if front.name.as_deref().is_some_and(|n| n != name) {
            return Err(unusable(format!("its front matter names {:?}, not {name:?}", front.name.unwrap_or_default())));
        }
        if front.description.is_none() {
            return Err(unusable("the front matter needs a `description:` saying when to use the skill".into()));
        }
        if body.trim().is_empty() {
            return Err(unusable("write the instructions after the front matter".into()));
        }
        scan_prompt(content).map_err(SkillError::Refused)
    }

    fn check_file(&self, path: &Path, content: &str) -> Result<(), SkillError> {
        let cap = self.config().max_file_bytes;
        if content.len() > cap {
            let reason = format!("{} bytes, more than the {cap}-byte cap", content.len());
            return Err(SkillError::Unusable { path: self.shown(path), reason });
        }
        scan_prompt(content).map_err(SkillError::Refused)
    }

    /// Where `file` (which may not exist yet) goes inside `dir`: relative, no `..`, no hidden
    /// part, not `SKILL.md`, and no existing symlink on the way out.
    fn new_file_path(&self, dir: &Path, file: &str) -> Result<PathBuf, SkillError> {
        let bad = |reason| SkillError::BadPath { file: file.to_owned(), reason };
        let relative = Path::new(file.trim());
        if relative.is_absolute() {
            return Err(bad("absolute paths are not allowed; give a path inside the skill's folder"));
        }
        let mut parts = Vec::new();
        for part in relative.components() {
            match part {
                std::path::Component::Normal(p) if !p.to_string_lossy().starts_with('.') => parts.push(p),
                std::path::Component::CurDir => {}
                _ => return Err(bad("use a plain relative path: no `..` and no hidden names")),
            }
        }
        if parts.is_empty() || parts == [std::ffi::OsStr::new("SKILL.md")] {
            return Err(bad("name a file beside SKILL.md (change SKILL.md with edit or patch)"));
        }
        let path: PathBuf = parts.iter().fold(dir.to_owned(), |p, part| p.join(part));
        // Every existing prefix must be a real folder or file inside `dir`, never a symlink.
        let mut walk = dir.to_owned();
        for part in &parts {
            walk.push(part);
            match std::fs::symlink_metadata(&walk) {
                Ok(meta) if meta.file_type().is_symlink() => return Err(bad("a symlink is on the way")),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        Ok(path)
    }

    fn io(&self, action: &'static str, path: &Path, source: std::io::Error) -> SkillError {
        SkillError::Io { action, path: self.shown(path), source }
    }
}

/// `current` with the one occurrence of `old` replaced by `new`.
fn patched(current: &str, old: &str, new: &str) -> Result<String, SkillError> {
    let unusable = |reason: &str| SkillError::Unusable { path: "patch".into(), reason: reason.into() };
    if old.is_empty() {
        return Err(unusable("`old` must be the exact text to replace"));
    }
    match current.matches(old).count() {
        0 => Err(unusable("`old` does not occur in the file; read it with skill_view and copy the text exactly")),
        1 => Ok(current.replacen(old, new, 1)),
        n => Err(unusable(&format!("`old` occurs {n} times; include more text so it is unique"))),
    }
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push_str("\n[…]");
    out
}

fn write_atomic(path: &Path, content: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", uuid::Uuid::new_v4().simple()));
    let result = std::fs::write(&tmp, content)
        .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

struct Budget {
    files: usize,
    bytes: u64,
}

/// Copy `src` to `dst` (created), skipping symlinks and hidden entries, within the budget.
fn copy_tree(src: &Path, dst: &Path, budget: &mut Budget, warnings: &mut Vec<String>) -> std::io::Result<()> {
    std::fs::create_dir_all(dst)?;
    let mut entries: Vec<_> = std::fs::read_dir(src)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let kind = entry.file_type()?;
        let (from, to) = (entry.path(), dst.join(&name));
        if kind.is_symlink() {
            warnings.push(format!("skipped the symlink {}", from.display()));
        } else if kind.is_dir() {
            copy_tree(&from, &to, budget, warnings)?;
        } else if kind.is_file() {
            budget.files += 1;
            budget.bytes += entry.metadata()?.len();
            if budget.files > MAX_INSTALL_FILES || budget.bytes > MAX_INSTALL_BYTES {
                return Err(std::io::Error::other(format!(
                    "the skill is larger than {MAX_INSTALL_FILES} files or {} MiB",
                    MAX_INSTALL_BYTES / 1024 / 1024
                )));
            }
            std::fs::copy(&from, &to)?;
        }
    }
    Ok(())
}
