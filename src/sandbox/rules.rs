//! Turning a `Policy` into a Landlock ruleset on the calling thread, and probing what the
//! kernel enforces. Runs in the `sandbox-exec` helper right before `exec`; it must never grant an
//! ancestor of a denied path, nor follow a symlink anywhere in a path it grants: every path is
//! opened one component at a time with `O_NOFOLLOW`, so a symlink swapped in after the daemon
//! resolved the policy fails the open instead of redirecting the grant.

use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, LandlockStatus, NetPort, PathBeneath, RestrictionStatus, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};

use rustix::fs::{FileType, Mode, OFlags};

use super::{Policy, SandboxError, Support};

/// The newest Landlock ABI this code was tested against (the crate negotiates down from it,
/// best effort, on older kernels).
const TARGET_ABI: ABI = ABI::V7;

/// Device files every child may read and write. No terminal (`/dev/tty`, `/dev/ptmx`,
/// `/dev/pts`): a command could type into the operator's shell through it (TIOCSTI).
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// Sibling grants are capped so a huge directory on the way to a denied path cannot stall a spawn.
const MAX_RULES: usize = 20_000;

/// A ruleset handling the filesystem, the scopes and, unless `network` is free, TCP.
fn ruleset(network: bool) -> Result<RulesetCreated, SandboxError> {
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(TARGET_ABI))?;
    if !network {
        ruleset = ruleset.handle_access(AccessNet::from_all(TARGET_ABI))?;
    }
    Ok(ruleset.scope(Scope::from_all(TARGET_ABI))?.create()?)
}

/// What Landlock lets TCP do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tcp {
    /// Unrestricted: inside the command's own network namespace, where nothing of the host is
    /// reachable anyway, or for a child that keeps the host's network (the MCP shim).
    Free,
    /// Connect only to this port (the helper's proxy forwarder on 127.0.0.1); no bind.
    OnlyTo(u16),
    /// No bind, no connect.
    Denied,
}

/// Restrict the calling thread (and everything it execs) to `policy`, whose paths the daemon
/// resolved (`Policy::resolve`). Fails rather than returning when the kernel enforces nothing,
/// or when a writable tree cannot be opened without following a symlink.
/// TCP as `tcp` says (Landlock ABI 4; older kernels leave it free).
pub(super) fn restrict(policy: &Policy, tcp: Tcp) -> Result<RestrictionStatus, SandboxError> {
    let mut ruleset = ruleset(tcp == Tcp::Free)?;
    if let Tcp::OnlyTo(port) = tcp {
        ruleset = ruleset.add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
    }
    let read = AccessFs::from_read(TARGET_ABI);
    let all = AccessFs::from_all(TARGET_ABI);
    let mut grants = Vec::new();
    for root in &policy.read {
        // A root inside a denied tree is an exception to that tree, not to those inside it.
        let deny: Vec<PathBuf> =
            policy.deny_read.iter().filter(|d| !(root.starts_with(d) && root != *d)).cloned().collect();
        grant_beneath(root, &deny, &mut grants);
    }
    for path in grants {
        // A read grant that vanished or turned into a symlink is skipped: nothing is granted.
        if let Ok((fd, is_dir)) = open_no_follow(&path) {
            ruleset = add(ruleset, fd, is_dir, read)?;
        }
    }
    for path in policy.writable() {
        let (fd, is_dir) = open_no_follow(path).map_err(|e| {
            SandboxError::Policy(format!("open the writable {} without following symlinks: {e}", path.display()))
        })?;
        if !is_dir {
            return Err(SandboxError::Policy(format!("the writable {} is not a folder", path.display())));
        }
        ruleset = add(ruleset, fd, true, all)?;
    }
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev;
    for path in DEVICES {
        if let Ok((fd, is_dir)) = open_no_follow(Path::new(path)) {
            ruleset = add(ruleset, fd, is_dir, device)?;
        }
    }
    let status = ruleset.restrict_self()?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(SandboxError::Unavailable(unavailable_reason(&status.landlock)));
    }
    Ok(status)
}

/// Grant the file or folder `fd` with `access`, narrowed to file rights for a non-directory.
fn add(
    ruleset: RulesetCreated,
    fd: OwnedFd,
    is_dir: bool,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, SandboxError> {
    let access = if is_dir { access } else { access & AccessFs::from_file(TARGET_ABI) };
    Ok(ruleset.add_rule(PathBeneath::new(fd, access))?)
}

/// Open the absolute `path` as an `O_PATH` handle one component at a time, each with
/// `O_NOFOLLOW`: a symlink anywhere in it fails the open (an intermediate one is not a folder to
/// walk on; a last one is refused by type). `..` is refused too. Returns the handle and whether it
/// is a folder; only folders, regular files and character devices are handed to Landlock.
pub(super) fn open_no_follow(path: &Path) -> std::io::Result<(OwnedFd, bool)> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut components = path.components();
    if components.next() != Some(Component::RootDir) {
        return Err(std::io::Error::other("not an absolute path"));
    }
    let mut fd = rustix::fs::open("/", flags | OFlags::DIRECTORY, Mode::empty())?;
    for component in components {
        let Component::Normal(name) = component else {
            return Err(std::io::Error::other("`.` or `..` in a path to grant"));
        };
        fd = rustix::fs::openat(&fd, name, flags, Mode::empty())?;
    }
    match FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) {
        FileType::Directory => Ok((fd, true)),
        FileType::RegularFile | FileType::CharacterDevice => Ok((fd, false)),
        other => Err(std::io::Error::other(format!("a {other:?}, not a folder or a file"))),
    }
}

/// The trees to grant for reading `dir` minus `deny`: `dir` itself when no denied path is inside
/// it; nothing when it is denied; otherwise, recursively, each entry of `dir` — never `dir`, and
/// never through a symlink (a symlink's target is granted or not on its own account).
pub(super) fn grant_beneath(dir: &Path, deny: &[PathBuf], out: &mut Vec<PathBuf>) {
    if out.len() >= MAX_RULES || deny.iter().any(|d| dir.starts_with(d)) {
        return;
    }
    if !deny.iter().any(|d| d.starts_with(dir)) {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| !t.is_symlink()) {
            grant_beneath(&entry.path(), deny, out);
        }
    }
}

/// What Landlock enforces on this kernel, learnt by restricting a throwaway thread the way the
/// helper restricts a child (a thread's Landlock domain and no-new-privs flag die with it).
pub(super) fn probe() -> Support {
    let probe = std::thread::Builder::new().name("landlock-probe".into()).spawn(|| {
        let status = ruleset(false)?.restrict_self()?;
        Ok::<_, SandboxError>(status)
    });
    let status = match probe.map(|handle| handle.join()) {
        Ok(Ok(Ok(status))) => status,
        Ok(Ok(Err(e))) => return Support::Unavailable(format!("probe failed: {e}")),
        Ok(Err(_)) | Err(_) => return Support::Unavailable("probe thread failed".into()),
    };
    match (&status.ruleset, status.landlock) {
        (RulesetStatus::NotEnforced, landlock) => Support::Unavailable(unavailable_reason(&landlock)),
        (ruleset, LandlockStatus::Available { effective_abi, kernel_abi }) => Support::Available {
            abi: kernel_abi.unwrap_or(effective_abi as i32),
            enforced: features(effective_abi),
            partial: *ruleset == RulesetStatus::PartiallyEnforced,
        },
        (_, landlock) => Support::Unavailable(unavailable_reason(&landlock)),
    }
}

fn unavailable_reason(landlock: &LandlockStatus) -> String {
    match landlock {
        LandlockStatus::NotEnabled => "Landlock is built into this kernel but not enabled (add `landlock` to the \
                                       `lsm=` boot parameter)"
            .into(),
        LandlockStatus::NotImplemented => "this kernel has no Landlock (it needs Linux 5.13 or later built with \
                                           CONFIG_SECURITY_LANDLOCK)"
            .into(),
        LandlockStatus::Available { .. } => "the kernel enforced none of the requested restrictions".into(),
    }
}

/// What the restrictions cover at `abi`, in words.
fn features(abi: ABI) -> String {
    let at = |level: ABI| abi >= level;
    let mut parts = vec!["filesystem reads and writes", "ptrace of processes outside the sandbox"];
    if at(ABI::V2) {
        parts.push("cross-directory renames and links");
    }
    if at(ABI::V3) {
        parts.push("truncation");
    }
    if at(ABI::V4) {
        parts.push("TCP bind and connect (outside a network namespace: only to the egress proxy)");
    }
    if at(ABI::V5) {
        parts.push("device ioctls");
    }
    if at(ABI::V6) {
        parts.push("signals and abstract unix sockets outside the sandbox");
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siblings_are_granted_instead_of_an_ancestor_of_a_denied_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for sub in ["home/.env-dir", "home/workspace", "other/deep", "home/sibling"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("home/state.db"), "db").unwrap();
        std::os::unix::fs::symlink(root.join("home"), root.join("link-to-home")).unwrap();
        let mut out = Vec::new();
        grant_beneath(&root, &[root.join("home")], &mut out);
        out.sort();
        assert_eq!(out, [root.join("other")], "neither home, its parent, nor the symlink to it");

        let mut out = Vec::new();
        grant_beneath(&root, &[root.join("home/.env-dir")], &mut out);
        out.sort();
        let expected: Vec<PathBuf> =
            ["home/sibling", "home/state.db", "home/workspace", "other"].iter().map(|s| root.join(s)).collect();
        assert_eq!(out, expected);
    }

    #[test]
    fn no_symlink_is_followed_while_opening_a_grant() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("real/sub")).unwrap();
        std::fs::write(root.join("real/file"), "x").unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        assert!(open_no_follow(&root.join("real/sub")).unwrap().1);
        assert!(!open_no_follow(&root.join("real/file")).unwrap().1);
        for bad in ["link", "link/sub", "real/../real", "missing"] {
            assert!(open_no_follow(&root.join(bad)).is_err(), "{bad}");
        }
        assert!(open_no_follow(Path::new("relative")).is_err());
    }

    #[test]
    fn this_kernel_offers_landlock() {
        // CI and development machines run a kernel with Landlock; this fails loudly elsewhere
        // rather than letting the bypass corpus pass vacuously.
        match probe() {
            Support::Available { abi, .. } => assert!(abi >= 1),
            Support::Unavailable(why) => panic!("Landlock unavailable: {why}"),
        }
    }
}
