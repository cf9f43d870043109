//! `[memory]`: whose memory files a turn sees and edits, and the memory-only turn that runs
//! before context is lost (compression, `/new`, an idle or daily reset).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::HumanDuration;

/// Whose `MEMORY.md` / `USER.md` a turn reads and writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryScope {
    /// One pair of files per (platform, user); shared sessions see only the shared file.
    #[default]
    User,
    /// One pair of files for everyone (single-user deployments).
    Shared,
}

/// `[memory]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// `"user"` (default): memory per person; `"shared"`: one memory for the whole daemon.
    pub scope: MemoryScope,
    /// The operator's file every prompt includes (relative paths are under `HERMESD_HOME`);
    /// in `"user"` scope the model reads it but does not edit it.
    pub shared_file: PathBuf,
    /// Give the model one memory-only turn before context is lost.
    pub flush: bool,
    /// Tell the user "💾 memory updated" when that turn saved something.
    pub flush_notice: bool,
    /// The longest a memory-only turn may take.
    pub flush_timeout: HumanDuration,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            scope: MemoryScope::User,
            shared_file: PathBuf::from("memory/MEMORY.md"),
            flush: true,
            flush_notice: false,
            flush_timeout: HumanDuration::secs(30),
        }
    }
}
