//! What an operator upgrading from daemon-wide memory and one shared workdir should know, for
//! `hermesd check` and the start-up log. Reads only; never moves or deletes anything.

use std::path::Path;

use super::scope::{MEMORY_DIR, shared_file};
use super::{Target, parse_entries};
use crate::agent::runtime::prompt::CONTEXT_FILES;
use crate::agent::tools::place::{CHATS_DIR, USERS_DIR};
use crate::config::{MemoryConfig, MemoryScope};
use crate::sandbox::PRIVATE_TMP;

/// Notes about memory files and workdir contents that per-person scoping changed the meaning of:
/// the old daemon-wide `USER.md` (no longer read in `"user"` scope), the old `MEMORY.md` now
/// being the shared file every prompt carries, and files left at the workdir's root, which no
/// turn's tools reach any more.
pub fn upgrade_notes(config: &MemoryConfig, data_dir: &Path, workdir: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    let has_entries = |path: &Path| !parse_entries(&std::fs::read_to_string(path).unwrap_or_default()).is_empty();
    let memory = data_dir.join(MEMORY_DIR);
    let shared = shared_file(config, data_dir);
    if config.scope == MemoryScope::User {
        let old_user = memory.join(Target::User.file());
        let upgraded = memory.join(USERS_DIR).exists();
        if has_entries(&old_user) {
            notes.push(format!(
                "{} is the old daemon-wide USER.md and is no longer read: with memory.scope = \"user\" each \
                 person has their own USER.md under {}/<platform>/<user>/. Move entries that belong to one \
                 person into that person's file and delete it, or set memory.scope = \"shared\" for a \
                 single-user deployment",
                old_user.display(),
                memory.join(USERS_DIR).display()
            ));
        }
        if has_entries(&shared) && (!upgraded || has_entries(&old_user)) {
            notes.push(format!(
                "{} is now the shared memory file (memory.shared_file): every conversation's prompt carries \
                 it, read-only, while each person's own notes go to their MEMORY.md. It was written by the \
                 model while talking to anyone: review it and remove what belongs to one person",
                shared.display()
            ));
        }
    }
    let left: Vec<String> = std::fs::read_dir(workdir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| ![USERS_DIR, CHATS_DIR, PRIVATE_TMP].contains(&name.as_str()))
        .filter(|name| !CONTEXT_FILES.contains(&name.as_str()))
        .collect();
    if !left.is_empty() {
        notes.push(format!(
            "{} still holds files from before per-person folders ({} at its root, e.g. {}); every turn's tools now work in \
             their own folder beneath it ({USERS_DIR}/<platform>/<user>/, {CHATS_DIR}/<platform>/<chat>/), \
             so no conversation reaches them: move each into the folder of the person or chat it belongs \
             to. Project files (AGENTS.md and friends) stay at the root and are still read into prompts",
            workdir.display(),
            left.len(),
            left.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_home_is_told_what_changed_and_a_new_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (home, work) = (dir.path().join("home"), dir.path().join("home/workspace"));
        std::fs::create_dir_all(home.join("memory")).unwrap();
        std::fs::create_dir_all(work.join("users")).unwrap();
        let config = MemoryConfig::default();
        assert!(upgrade_notes(&config, &home, &work).is_empty(), "nothing old, nothing to say");

        std::fs::write(home.join("memory/MEMORY.md"), "Deploys go through CI.\n").unwrap();
        std::fs::write(home.join("memory/USER.md"), "Name: Ann\n").unwrap();
        std::fs::write(work.join("notes.txt"), "x").unwrap();
        std::fs::write(work.join("AGENTS.md"), "x").unwrap();
        let notes = upgrade_notes(&config, &home, &work);
        assert_eq!(notes.len(), 3, "{notes:#?}");
        assert!(notes[0].contains("USER.md is the old daemon-wide USER.md and is no longer read"), "{notes:#?}");
        assert!(notes[1].contains("MEMORY.md is now the shared memory file"), "{notes:#?}");
        assert!(
            notes[2].contains("still holds files from before per-person folders (1 at its root, e.g. notes.txt)"),
            "{notes:#?}"
        );

        let shared = MemoryConfig { scope: MemoryScope::Shared, ..MemoryConfig::default() };
        std::fs::remove_file(work.join("notes.txt")).unwrap();
        std::fs::remove_file(work.join("AGENTS.md")).unwrap();
        assert!(upgrade_notes(&shared, &home, &work).is_empty(), "shared scope reads both files as before");
    }
}
