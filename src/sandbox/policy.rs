//! `Policy`: what a sandboxed child may read, write and reach, and its translation to the
//! arguments of `hermesd sandbox-exec`. Pure data; applying it is `rules.rs`'s job.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::SandboxError;

/// Name of the private temp dir made inside the workdir (the child's `TMPDIR`).
pub const PRIVATE_TMP: &str = ".hermesd-tmp";

/// What a sandboxed child may touch. Landlock rules are allow-lists, so `deny_read` is not a rule
/// of its own: the helper grants each sibling along the path from a `read` root down to a denied
/// path instead of the root itself (never an ancestor of a denied path).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Trees the child may read and execute from (the default is `/`).
    pub read: Vec<PathBuf>,
    /// Trees carved out of `read`: never readable, whatever `read` says.
    pub deny_read: Vec<PathBuf>,
    /// Trees the child may read and write (create, delete, rename, truncate).
    pub write: Vec<PathBuf>,
    /// A private temp dir, created if missing, writable, and passed as `TMPDIR`.
    pub tmp: Option<PathBuf>,
    /// Whether TCP bind and connect are allowed (Landlock governs TCP only; UDP and raw sockets
    /// stay open either way).
    pub network: bool,
}

impl Policy {
    /// The tools' policy: read everything but the data dir, `/dev` (except the harmless devices
    /// the helper always grants) and `$CREDENTIALS_DIRECTORY`; write only `workdir` and its
    /// private temp dir; network on.
    pub fn for_workdir(workdir: &Path, data_dir: &Path) -> Self {
        let mut deny_read = vec![data_dir.to_path_buf(), PathBuf::from("/dev")];
        if let Some(credentials) = std::env::var_os("CREDENTIALS_DIRECTORY").filter(|c| !c.is_empty()) {
            deny_read.push(PathBuf::from(credentials));
        }
        Self {
            read: vec![PathBuf::from("/")],
            deny_read,
            write: vec![workdir.to_path_buf()],
            tmp: Some(workdir.join(PRIVATE_TMP)),
            network: true,
        }
    }

    /// This policy with `path` also unreadable.
    pub fn deny(mut self, path: impl Into<PathBuf>) -> Self {
        self.deny_read.push(path.into());
        self
    }

    /// This policy with TCP allowed or denied.
    pub fn with_network(mut self, on: bool) -> Self {
        self.network = on;
        self
    }

    /// Refuse a policy that would undo itself: a writable tree that contains a denied one
    /// (Landlock adds rights up, so the write grant would expose the denied tree). Resolves
    /// symlinks of existing paths.
    pub fn check(&self) -> Result<(), SandboxError> {
        let writable = self.write.iter().chain(&self.tmp);
        for write in writable {
            let write = real(write);
            for deny in &self.deny_read {
                if real(deny).starts_with(&write) {
                    return Err(SandboxError::Policy(format!(
                        "the writable {} contains {}, which must stay unreadable; move the workdir \
                         out of it (tools.workdir)",
                        write.display(),
                        deny.display()
                    )));
                }
            }
        }
        Ok(())
    }

    /// The arguments `hermesd sandbox-exec` takes for this policy, before `--`.
    pub(crate) fn to_args(&self) -> Vec<OsString> {
        let mut args = Vec::new();
        let mut push = |flag: &str, path: &Path| {
            args.push(OsString::from(flag));
            args.push(path.as_os_str().to_owned());
        };
        self.read.iter().for_each(|p| push("--read", p));
        self.deny_read.iter().for_each(|p| push("--deny-read", p));
        self.write.iter().for_each(|p| push("--write", p));
        if let Some(tmp) = &self.tmp {
            push("--tmp", tmp);
        }
        if !self.network {
            args.push("--no-network".into());
        }
        args
    }
}

/// `path` with symlinks resolved when it exists, as given otherwise.
pub(super) fn real(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tools_policy_denies_the_data_dir_and_writes_only_the_workdir() {
        let policy = Policy::for_workdir(Path::new("/srv/h/workspace"), Path::new("/srv/h"));
        assert_eq!(policy.read, [PathBuf::from("/")]);
        assert!(policy.deny_read.contains(&PathBuf::from("/srv/h")));
        assert_eq!(policy.write, [PathBuf::from("/srv/h/workspace")]);
        assert_eq!(policy.tmp, Some(PathBuf::from("/srv/h/workspace").join(PRIVATE_TMP)));
        policy.check().unwrap();
        let args: Vec<String> =
            policy.with_network(false).to_args().iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert!(args.windows(2).any(|w| w == ["--deny-read", "/srv/h"]), "{args:?}");
        assert!(args.windows(2).any(|w| w == ["--write", "/srv/h/workspace"]), "{args:?}");
        assert_eq!(args.last().map(String::as_str), Some("--no-network"));
    }

    #[test]
    fn a_workdir_holding_the_data_dir_is_refused() {
        let err = Policy::for_workdir(Path::new("/srv/h"), Path::new("/srv/h/data")).check().unwrap_err();
        assert!(err.to_string().contains("must stay unreadable"), "{err}");
        let same = Policy::for_workdir(Path::new("/srv/h"), Path::new("/srv/h")).check();
        assert!(same.is_err());
    }
}
