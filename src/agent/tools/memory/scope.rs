//! Which memory files a turn sees and edits (`[memory] scope`), and their rendering for the
//! system prompt. In `"user"` scope a person's `MEMORY.md` / `USER.md` live under
//! `memory/users/<platform>/<user>/` and reach only prompts of that person's own sessions; the
//! operator's shared file reaches every prompt and is never edited by the model. It must never
//! put one person's files into a prompt another person's turn sees.
//!
//! In `"user"` scope, where a turn has no person of its own (a shared chat, a cron run, a
//! webhook, an API request without `user`), the tool refuses an edit with a clear reason. With
//! `scope = "shared"` there is one pair of files for everyone, which the tool edits.

use std::path::{Path, PathBuf};

use super::{Target, parse_entries, render};
use crate::agent::tools::place::{Whose, person_dir};
use crate::config::{MemoryConfig, MemoryScope};
use crate::vocab::origin::Origin;

/// The folder under `HERMESD_HOME` that holds the memory files.
pub const MEMORY_DIR: &str = "memory";
/// Longest shared file shown in a prompt, in chars (the operator edits it by hand, uncapped).
const SHARED_CAP: usize = 20_000;

/// Where one turn's memory lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPlace {
    scope: MemoryScope,
    /// The operator's shared file (`memory.shared_file`), in every prompt.
    shared: PathBuf,
    /// `MEMORY.md` and `USER.md` the tool edits and the prompt shows: the person's own in
    /// `"user"` scope (none without a person), the shared pair in `"shared"` scope.
    own: Option<(PathBuf, PathBuf)>,
    /// Why the tool edits nothing here, when `own` is none.
    refusal: &'static str,
}

impl MemoryPlace {
    /// The memory of a turn for `whose` (`None`: nobody in particular), under `data_dir`.
    pub fn resolve(config: &MemoryConfig, data_dir: &Path, whose: Option<&Whose>) -> Self {
        let shared = shared_file(config, data_dir);
        let (own, refusal) = match config.scope {
            MemoryScope::Shared => {
                let user = shared.with_file_name(Target::User.file());
                (Some((shared.clone(), user)), "")
            }
            MemoryScope::User => match whose.and_then(Whose::person) {
                Some((platform, user)) => {
                    let dir = person_dir(&data_dir.join(MEMORY_DIR), platform, user);
                    (Some((dir.join(Target::Memory.file()), dir.join(Target::User.file()))), "")
                }
                None => (None, refusal(whose)),
            },
        };
        Self { scope: config.scope, shared, own, refusal }
    }

    /// The file the tool reads and edits for `target`, or why there is none in this turn.
    pub(super) fn file(&self, target: Target) -> Result<&Path, &'static str> {
        match (&self.own, target) {
            (Some((memory, _)), Target::Memory) => Ok(memory),
            (Some((_, user)), Target::User) => Ok(user),
            (None, _) => Err(self.refusal),
        }
    }

    /// The memory part of the system prompt: the shared file (in `"user"` scope), then `##
    /// Memory` and `## About the user` from the turn's own files, each only when it has
    /// entries. Unreadable files count as empty (the prompt must still be built).
    pub fn snapshot(&self) -> String {
        let section = |path: &Path, heading: &str| {
            let entries = parse_entries(&std::fs::read_to_string(path).unwrap_or_default());
            (!entries.is_empty()).then(|| format!("## {heading}\n{}", render(&entries)))
        };
        let mut sections = Vec::new();
        if self.scope == MemoryScope::User {
            sections.push(section(&self.shared, SHARED_HEADING).map(|text| capped(&text)));
        }
        if let Some((memory, user)) = &self.own {
            sections.push(section(memory, "Memory"));
            sections.push(section(user, "About the user"));
        }
        sections.into_iter().flatten().collect::<Vec<_>>().join("\n").trim_end().to_string()
    }
}

/// The heading of the shared file in `"user"` scope.
const SHARED_HEADING: &str = "Shared memory (the operator's notes for every conversation; read-only)";

/// Why a turn without a person of its own has no personal memory, for the model.
fn refusal(whose: Option<&Whose>) -> &'static str {
    match whose {
        Some(Whose::Chat { platform, .. }) if Origin::of(platform) == Origin::Api => {
            "an API request without `user` has no personal memory (send `user` to keep memory); \
             nothing was read or saved"
        }
        Some(Whose::Chat { .. }) => {
            "personal memory is kept only in direct conversations: this chat is shared (others read \
             the replies), so nothing is read or saved here; the shared memory in the prompt is the \
             operator's and read-only"
        }
        Some(Whose::Person { .. }) => {
            "this conversation is not one person's own (a cron run, or an API session header that \
             others may continue), so it has no personal memory; nothing was read or saved"
        }
        None => "this conversation has no personal memory; nothing was read or saved",
    }
}

/// `memory.shared_file`, relative paths under `data_dir`.
pub fn shared_file(config: &MemoryConfig, data_dir: &Path) -> PathBuf {
    if config.shared_file.is_absolute() { config.shared_file.clone() } else { data_dir.join(&config.shared_file) }
}

/// `text` cut to `SHARED_CAP` chars with a note.
fn capped(text: &str) -> String {
    if text.chars().count() <= SHARED_CAP {
        return text.to_owned();
    }
    let cut: String = text.chars().take(SHARED_CAP).collect();
    format!("{cut}\n[… shared memory truncated]\n")
}
