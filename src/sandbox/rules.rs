//! Turning a `Policy` into a Landlock ruleset on the calling thread, and probing what the
//! kernel enforces. Runs in the `sandbox-exec` helper right before `exec`; it must never grant an
//! ancestor of a denied path, nor follow a symlink while granting siblings.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, LandlockStatus, PathBeneath, PathFd, RestrictionStatus, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::policy::real;
use super::{Policy, SandboxError, Support};

/// The newest Landlock ABI this code was tested against (the crate negotiates down from it,
/// best effort, on older kernels).
const TARGET_ABI: ABI = ABI::V7;

/// Device files every child may read and write (and ioctl, e.g. a terminal's size).
const DEVICES: &[&str] =
    &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts"];

/// Sibling grants are capped so a huge directory on the way to a denied path cannot stall a spawn.
const MAX_RULES: usize = 20_000;

fn ruleset(network: bool) -> Result<RulesetCreated, SandboxError> {
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(TARGET_ABI))?;
    if !network {
        ruleset = ruleset.handle_access(AccessNet::from_all(TARGET_ABI))?;
    }
    Ok(ruleset.scope(Scope::from_all(TARGET_ABI))?.create()?)
}

/// Restrict the calling thread (and everything it execs) to `policy`. Fails rather than
/// returning when the kernel enforces nothing.
pub(super) fn restrict(policy: &Policy) -> Result<RestrictionStatus, SandboxError> {
    let mut ruleset = ruleset(policy.network)?;
    let read = AccessFs::from_read(TARGET_ABI);
    let all = AccessFs::from_all(TARGET_ABI);
    let deny: Vec<PathBuf> = policy.deny_read.iter().map(|p| real(p)).collect();
    let mut grants = Vec::new();
    for root in &policy.read {
        grant_beneath(&real(root), &deny, &mut grants);
    }
    for path in grants {
        ruleset = add(ruleset, &path, read)?;
    }
    for path in policy.write.iter().chain(&policy.tmp) {
        ruleset = add(ruleset, path, all)?;
    }
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev;
    for path in DEVICES {
        ruleset = add(ruleset, Path::new(path), device)?;
    }
    let status = ruleset.restrict_self()?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(SandboxError::Unavailable(unavailable_reason(&status.landlock)));
    }
    Ok(status)
}

/// Grant `path` with `access`, narrowed to file rights for a non-directory; a path that
/// vanished or cannot be opened is skipped (nothing is granted for it).
fn add(ruleset: RulesetCreated, path: &Path, access: BitFlags<AccessFs>) -> Result<RulesetCreated, SandboxError> {
    let Ok(fd) = PathFd::new(path) else { return Ok(ruleset) };
    let is_dir = std::fs::metadata(path).is_ok_and(|m| m.is_dir());
    let access = if is_dir { access } else { access & AccessFs::from_file(TARGET_ABI) };
    Ok(ruleset.add_rule(PathBeneath::new(fd, access))?)
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
        parts.push("TCP bind and connect (when the network is off)");
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
        let root = real(dir.path());
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
    fn this_kernel_offers_landlock() {
        // CI and development machines run a kernel with Landlock; this fails loudly elsewhere
        // rather than letting the bypass corpus pass vacuously.
        match probe() {
            Support::Available { abi, .. } => assert!(abi >= 1),
            Support::Unavailable(why) => panic!("Landlock unavailable: {why}"),
        }
    }
}
