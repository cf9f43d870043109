//! `Policy`: what a sandboxed child may read, write and reach, and its translation to the
//! arguments of `hermesd sandbox-exec`. Pure data; applying it is `rules.rs`'s job.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::SandboxError;

/// Name the private temp dir had inside the workdir before it moved out of the commands' reach;
/// left-over folders of that name are skipped by the memory upgrade.
pub const PRIVATE_TMP: &str = ".hermesd-tmp";

/// Writable caches that package launchers (`uvx`, `npx`, `pip`) need, relative to `$HOME`.
pub const LAUNCHER_CACHES: &[&str] = &[".cache", ".npm", ".local/share/uv", ".local/state"];

/// What a sandboxed child may touch. Landlock rules are allow-lists, so `deny_read` is not a rule
/// of its own: the helper grants each sibling along the path from a `read` root down to a denied
/// path instead of the root itself (never an ancestor of a denied path). A `read` root lying
/// inside a denied tree is an explicit exception to it (a launcher cache inside the denied
/// home); denied trees inside a root are carved out of it all the same.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Trees the child may read and execute from (the default is `/`).
    pub read: Vec<PathBuf>,
    /// Trees carved out of `read`: never readable, whatever `read` says.
    pub deny_read: Vec<PathBuf>,
    /// The turn's workdir: readable and writable, and the one writable tree that may lie inside
    /// a denied one (the tools' workdir root sits in the data dir by default).
    pub workdir: Option<PathBuf>,
    /// Other trees the child may read and write (create, delete, rename, truncate); none may lie
    /// inside or contain a denied tree.
    pub write: Vec<PathBuf>,
    /// A private temp dir, created if missing, writable, and passed as `TMPDIR`.
    pub tmp: Option<PathBuf>,
    /// Whether TCP bind and connect are allowed (Landlock governs TCP only; UDP and raw sockets
    /// stay open either way). With `isolate`, "allowed" reaches only the proxy.
    pub network: bool,
    /// Run the child in new user, network and PID namespaces: no address of the host (its
    /// loopback services included) is reachable. Set by `Sandbox::command` where the kernel
    /// allows it.
    pub isolate: bool,
    /// The daemon's egress proxy socket (`proxy.rs`): with `network`, the child's only way out,
    /// through the helper's forwarder on 127.0.0.1. Set by `Sandbox::command`.
    pub proxy: Option<PathBuf>,
}

impl Policy {
    /// The tools' policy: read everything but the data dir, `/dev` (except the harmless devices
    /// the helper always grants), `$CREDENTIALS_DIRECTORY`, the operator's `$HOME` (but for the
    /// launchers' caches in it) and the other workdirs' temp dirs; write only `workdir` and its
    /// private temp dir outside it, where commands cannot swap it for a symlink; network on.
    pub fn for_workdir(workdir: &Path, data_dir: &Path) -> Self {
        Self::for_workdir_in(workdir, data_dir, &|name| std::env::var_os(name))
    }

    /// `for_workdir` with the daemon's environment read through `env` (tests pass a map).
    pub fn for_workdir_in(workdir: &Path, data_dir: &Path, env: &dyn Fn(&str) -> Option<OsString>) -> Self {
        let mut read = vec![PathBuf::from("/")];
        let mut deny_read = vec![data_dir.to_path_buf(), PathBuf::from("/dev")];
        if let Some(credentials) = env("CREDENTIALS_DIRECTORY").filter(|c| !c.is_empty()) {
            deny_read.push(PathBuf::from(credentials));
        }
        // Outside systemd the home holds `~/.ssh`, shell histories and other tools' tokens.
        if let Some(home) = env("HOME").map(PathBuf::from).filter(|h| h.is_absolute() && h.parent().is_some()) {
            read.extend(LAUNCHER_CACHES.iter().map(|cache| home.join(cache)));
            deny_read.push(home);
        }
        let tmp = private_tmp(workdir);
        if let Some(others) = tmp.parent() {
            deny_read.push(others.to_path_buf());
        }
        Self {
            read,
            deny_read,
            workdir: Some(workdir.to_path_buf()),
            write: Vec::new(),
            tmp: Some(tmp),
            network: true,
            isolate: false,
            proxy: None,
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

    /// Every writable tree: the workdir, the others, the temp dir.
    pub(super) fn writable(&self) -> impl Iterator<Item = &PathBuf> {
        self.workdir.iter().chain(&self.write).chain(&self.tmp)
    }

    /// This policy with every path resolved once, by the daemon, before the helper starts: read
    /// roots, denied trees and writable trees other than the workdir with symlinks resolved (a
    /// missing read root or writable tree grants nothing; a missing denied path stays as given);
    /// the workdir's parent resolved but its last component required to be a folder, not a
    /// symlink, since a chat's commands may replace a thread's folder inside it. The helper then
    /// opens each path without following any symlink, so one swapped in later fails the open.
    /// Checked (`check`) after resolution.
    pub fn resolve(&self) -> Result<Self, SandboxError> {
        let existing = |paths: &[PathBuf]| paths.iter().filter_map(|p| std::fs::canonicalize(p).ok()).collect();
        let workdir = self.workdir.as_deref().map(resolve_workdir).transpose()?;
        let tmp = match &self.tmp {
            Some(tmp) => Some(
                std::fs::canonicalize(tmp)
                    .map_err(|e| SandboxError::Policy(format!("the private temp dir {}: {e}", tmp.display())))?,
            ),
            None => None,
        };
        let resolved = Self {
            read: existing(&self.read),
            deny_read: self.deny_read.iter().map(|p| real(p)).collect(),
            workdir,
            write: existing(&self.write),
            tmp,
            network: self.network,
            isolate: self.isolate,
            proxy: self.proxy.clone(),
        };
        resolved.check()?;
        Ok(resolved)
    }

    /// Refuse a policy that would undo itself, comparing paths as given (`resolve` resolved
    /// them): a writable tree that contains a denied one (Landlock adds rights up, so the write
    /// grant would expose the denied tree), or a writable tree inside a denied one (it would open
    /// a piece of it) — but for the turn's workdir, and for the private temp dir when it is one
    /// `private_tmp` made (its folder is denied so no turn reads another's).
    pub fn check(&self) -> Result<(), SandboxError> {
        for write in self.writable() {
            for deny in &self.deny_read {
                if deny.starts_with(write) {
                    return Err(SandboxError::Policy(format!(
                        "the writable {} contains {}, which must stay unreadable; move the workdir \
                         out of it (tools.workdir)",
                        write.display(),
                        deny.display()
                    )));
                }
                let own =
                    Some(write) == self.workdir.as_ref() || (Some(write) == self.tmp.as_ref() && is_private_tmp(write));
                if write.starts_with(deny) && !own {
                    return Err(SandboxError::Policy(format!(
                        "the writable {} lies inside {}, which must stay unreadable",
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
        if let Some(workdir) = &self.workdir {
            push("--workdir", workdir);
        }
        self.write.iter().for_each(|p| push("--write", p));
        if let Some(tmp) = &self.tmp {
            push("--tmp", tmp);
        }
        if let Some(proxy) = &self.proxy {
            push("--proxy", proxy);
        }
        if !self.network {
            args.push("--no-network".into());
        }
        if self.isolate {
            args.push("--isolate".into());
        }
        args
    }
}

/// The private temp dir of `workdir`: `hermesd-tmp-<uid>/<digest of the workdir>` in the
/// system's temp dir, out of every command's write grant, so no command can replace it.
pub fn private_tmp(workdir: &Path) -> PathBuf {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(workdir.as_os_str().as_encoded_bytes());
    let name: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    private_tmp_root().join(name)
}

/// Where every private temp dir of this user lies (denied to every sandboxed child but for its
/// own temp dir).
pub fn private_tmp_root() -> PathBuf {
    std::env::temp_dir().join(private_tmp_folder())
}

/// The name of the folder of this user's private temp dirs.
fn private_tmp_folder() -> String {
    format!("hermesd-tmp-{}", rustix::process::geteuid().as_raw())
}

/// Whether `path` lies directly in a folder of private temp dirs (`private_tmp`).
fn is_private_tmp(path: &Path) -> bool {
    path.parent().and_then(Path::file_name).is_some_and(|name| name == private_tmp_folder().as_str())
}

/// The workdir with its parent resolved; its last component must be a folder, not a symlink.
fn resolve_workdir(workdir: &Path) -> Result<PathBuf, SandboxError> {
    let refuse = |why: String| SandboxError::Policy(format!("the workdir {}: {why}; not run", workdir.display()));
    let (Some(parent), Some(name)) = (workdir.parent(), workdir.file_name()) else {
        return Err(refuse("names no folder".into()));
    };
    let resolved = std::fs::canonicalize(parent).map_err(|e| refuse(e.to_string()))?.join(name);
    match std::fs::symlink_metadata(&resolved) {
        Ok(meta) if meta.is_dir() => Ok(resolved),
        Ok(_) => Err(refuse("it is not a folder (a symlink?)".into())),
        Err(e) => Err(refuse(e.to_string())),
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
        let policy = Policy::for_workdir_in(Path::new("/srv/h/workspace"), Path::new("/srv/h"), &|_| None);
        assert_eq!(policy.read, [PathBuf::from("/")]);
        assert!(policy.deny_read.contains(&PathBuf::from("/srv/h")));
        assert_eq!(policy.workdir, Some(PathBuf::from("/srv/h/workspace")));
        assert!(policy.write.is_empty());
        let tmp = policy.tmp.clone().unwrap();
        assert!(!tmp.starts_with("/srv/h") && tmp.starts_with(std::env::temp_dir()), "{}", tmp.display());
        assert!(policy.deny_read.contains(&tmp.parent().unwrap().to_path_buf()), "other turns' temp dirs");
        policy.check().unwrap();
        let args: Vec<String> =
            policy.with_network(false).to_args().iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert!(args.windows(2).any(|w| w == ["--deny-read", "/srv/h"]), "{args:?}");
        assert!(args.windows(2).any(|w| w == ["--workdir", "/srv/h/workspace"]), "{args:?}");
        assert_eq!(args.last().map(String::as_str), Some("--no-network"));
    }

    #[test]
    fn the_operators_home_is_denied_but_for_the_launcher_caches() {
        let env = |name: &str| match name {
            "HOME" => Some(OsString::from("/home/op")),
            "CREDENTIALS_DIRECTORY" => Some(OsString::from("/run/credentials/hermesd.service")),
            _ => None,
        };
        let policy = Policy::for_workdir_in(Path::new("/srv/h/workspace"), Path::new("/srv/h"), &env);
        for denied in ["/home/op", "/run/credentials/hermesd.service", "/dev"] {
            assert!(policy.deny_read.contains(&PathBuf::from(denied)), "{denied}: {policy:?}");
        }
        assert!(policy.read.contains(&PathBuf::from("/home/op/.cache")), "{policy:?}");
        assert!(!policy.read.iter().any(|r| r.ends_with(".ssh")));
        // A home of `/` would deny everything: it is left alone.
        let root_home =
            Policy::for_workdir_in(Path::new("/w"), Path::new("/d"), &|name| (name == "HOME").then(|| "/".into()));
        assert!(!root_home.deny_read.contains(&PathBuf::from("/")));
    }

    #[test]
    fn a_workdir_holding_the_data_dir_is_refused() {
        let err = Policy::for_workdir(Path::new("/srv/h"), Path::new("/srv/h/data")).check().unwrap_err();
        assert!(err.to_string().contains("must stay unreadable"), "{err}");
        let same = Policy::for_workdir(Path::new("/srv/h"), Path::new("/srv/h")).check();
        assert!(same.is_err());
    }

    #[test]
    fn only_the_workdir_may_lie_inside_a_denied_tree() {
        let policy = Policy::for_workdir_in(Path::new("/srv/h/workspace/u"), Path::new("/srv/h"), &|_| None);
        policy.check().unwrap();
        let mut planted = policy.clone();
        planted.tmp = Some(PathBuf::from("/srv/h/memory"));
        assert!(planted.check().unwrap_err().to_string().contains("lies inside /srv/h"));
        let mut extra = policy;
        extra.write.push(PathBuf::from("/srv/h/skills"));
        assert!(extra.check().is_err());
    }

    #[test]
    fn a_workdir_that_is_a_symlink_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (real_dir, link) = (dir.path().join("real"), dir.path().join("link"));
        std::fs::create_dir(&real_dir).unwrap();
        std::os::unix::fs::symlink(&real_dir, &link).unwrap();
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let policy = |workdir: &Path| Policy {
            read: vec![PathBuf::from("/")],
            workdir: Some(workdir.to_path_buf()),
            tmp: Some(tmp.clone()),
            ..Policy::default()
        };
        let err = policy(&link).resolve().unwrap_err();
        assert!(err.to_string().contains("not a folder"), "{err}");
        let resolved = policy(&real_dir).resolve().unwrap();
        assert_eq!(resolved.workdir, Some(std::fs::canonicalize(&real_dir).unwrap()));
    }
}
