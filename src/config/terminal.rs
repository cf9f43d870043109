//! `[tools.terminal]`: how the terminal tool's commands are confined.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How tool commands are confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Landlock, applied by the re-executed `hermesd sandbox-exec` helper. Where the kernel has
    /// no Landlock, commands are refused (never run unconfined).
    #[default]
    Landlock,
    /// No confinement: commands run with the daemon's rights. Must be chosen explicitly.
    None,
}

/// `[tools.terminal]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TerminalConfig {
    /// `landlock` (default) or `none`.
    pub sandbox: SandboxMode,
    /// Deny TCP bind and connect to commands (Landlock covers TCP only; UDP stays open).
    pub deny_network: bool,
    /// More trees commands must not read, besides the data dir, `/dev` and
    /// `$CREDENTIALS_DIRECTORY`.
    pub deny_read: Vec<PathBuf>,
    /// The `hermesd` binary re-executed as the sandbox helper (default: the running executable).
    pub helper: Option<PathBuf>,
}
