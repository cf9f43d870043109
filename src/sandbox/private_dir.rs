//! Making a command's private temp dir where no command can replace it: a folder of this user's
//! own (mode 0700) in the system's temp dir, outside every write grant. It must never accept a
//! folder someone else made or a symlink in its place (the system's temp dir is shared).

use std::fs::DirBuilder;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::Path;

use super::SandboxError;

/// Create `tmp` and its parent (mode 0700) unless they exist, then check both are folders, not
/// symlinks, owned by this user and closed to others, so nobody else can swap what is inside.
pub(super) fn create(tmp: &Path) -> Result<(), SandboxError> {
    let parent = tmp.parent().unwrap_or(tmp);
    for dir in [parent, tmp] {
        make(dir).map_err(|e| SandboxError::Policy(format!("create the private temp dir {}: {e}", dir.display())))?;
    }
    Ok(())
}

/// Create `dir` (mode 0700) unless it exists, then check it is a folder of this user closed to
/// others.
pub(super) fn make(dir: &Path) -> io::Result<()> {
    match DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    let meta = std::fs::symlink_metadata(dir)?;
    let uid = rustix::process::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(io::Error::other(format!(
            "it is not a folder of this user (uid {uid}) closed to others; remove it and retry"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_or_an_open_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("base");
        create(&base.join("one")).unwrap();
        assert!(base.join("one").is_dir());
        create(&base.join("one")).unwrap();

        std::os::unix::fs::symlink(dir.path(), dir.path().join("link")).unwrap();
        assert!(create(&dir.path().join("link/x")).is_err(), "a symlinked parent");
        std::os::unix::fs::symlink(&base, base.join("two")).unwrap();
        assert!(create(&base.join("two")).is_err(), "a symlink in its place");

        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        assert!(create(&open.join("x")).is_err(), "a parent others may write");
    }
}
