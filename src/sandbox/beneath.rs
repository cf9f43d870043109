//! `Workdir`: a directory handle the file tools open every path beneath (openat2 with
//! `RESOLVE_BENEATH` through cap-std on Linux), so neither `..` nor a symlink — even one swapped
//! in after a check — leads outside it. It must never resolve a path from the ambient root.

use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};

/// A path the model named that lies outside the workdir.
#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    /// An absolute path elsewhere, or `..` climbing above the workdir.
    #[error("{path} is outside the workdir ({workdir}); file tools work only inside it")]
    Outside {
        /// The path as named.
        path: String,
        /// The workdir.
        workdir: String,
    },
}

/// The workdir, opened once; every file operation goes through `dir()`.
#[derive(Debug)]
pub struct Workdir {
    root: PathBuf,
    real: PathBuf,
    dir: Dir,
}

impl Workdir {
    /// Open `root` (which must exist) as the base of every later path.
    pub fn open(root: &Path) -> io::Result<Self> {
        let dir = Dir::open_ambient_dir(root, ambient_authority())?;
        let real = std::fs::canonicalize(root)?;
        Ok(Self { root: root.to_path_buf(), real, dir })
    }

    /// The workdir as configured.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The handle to open paths beneath.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// `path` relative to the workdir: an absolute path must lie inside it (as configured or
    /// with symlinks resolved), and `..` may not climb above it. `.` names the workdir itself.
    pub fn relative(&self, path: &Path) -> Result<PathBuf, BeneathError> {
        let outside =
            || BeneathError::Outside { path: path.display().to_string(), workdir: self.root.display().to_string() };
        let rel = if path.is_absolute() {
            let path = lexical(path).ok_or_else(outside)?;
            let root = lexical(&self.root).filter(|r| r.is_absolute()).unwrap_or_else(|| self.real.clone());
            match (path.strip_prefix(&root), path.strip_prefix(&self.real)) {
                (Ok(rel), _) | (_, Ok(rel)) => rel.to_path_buf(),
                _ => return Err(outside()),
            }
        } else {
            path.to_path_buf()
        };
        let rel = lexical(&rel).ok_or_else(outside)?;
        Ok(if rel.as_os_str().is_empty() { PathBuf::from(".") } else { rel })
    }

    /// Write `content` to `rel` through a temporary file beside it and a rename, so readers see
    /// the old or the new file, never a partial one. Parents are created; an existing file keeps
    /// its permissions; a symlink at `rel` is replaced, never followed.
    pub fn write_atomic(&self, rel: &Path, content: &[u8]) -> io::Result<()> {
        let name = rel.file_name().ok_or_else(|| io::Error::other("the path names no file"))?;
        let parent = rel.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let dir = match self.dir.open_dir(parent) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.dir.create_dir_all(parent)?;
                self.dir.open_dir(parent)?
            }
            other => other?,
        };
        let tmp = format!(".{}.tmp-{}", name.to_string_lossy(), uuid::Uuid::new_v4().simple());
        let permissions = dir.symlink_metadata(name).ok().filter(|m| m.is_file()).map(|m| m.permissions());
        let result = (|| {
            let mut file = dir.open_with(&tmp, OpenOptions::new().write(true).create_new(true))?;
            file.write_all(content)?;
            file.sync_all()?;
            drop(file);
            if let Some(permissions) = permissions {
                dir.set_permissions(&tmp, permissions)?;
            }
            dir.rename(&tmp, &dir, name)
        })();
        if result.is_err() {
            let _ = dir.remove_file(&tmp);
        }
        result
    }
}

/// Whether `e` is cap-std refusing a path that resolved outside the workdir.
pub fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied && e.to_string().contains("outside of the filesystem")
}

/// `path` with `.` and `..` resolved lexically; `None` when `..` climbs above its start.
fn lexical(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    let mut depth = 0usize;
    for component in path.components() {
        match component {
            Component::ParentDir if depth == 0 => return None,
            Component::ParentDir => {
                out.pop();
                depth -= 1;
            }
            Component::CurDir => {}
            Component::Normal(part) => {
                out.push(part);
                depth += 1;
            }
            root => out.push(root),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_stay_inside() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir(&work).unwrap();
        let wd = Workdir::open(&work).unwrap();
        assert_eq!(wd.relative(Path::new("a/./b/../c")).unwrap(), Path::new("a/c"));
        assert_eq!(wd.relative(Path::new(".")).unwrap(), Path::new("."));
        assert_eq!(wd.relative(&work.join("x/y")).unwrap(), Path::new("x/y"));
        for bad in ["../x", "a/../../x", "/etc/passwd"] {
            assert!(wd.relative(Path::new(bad)).is_err(), "{bad}");
        }
        assert!(wd.relative(&work.join("../work2/x")).is_err());
    }

    #[test]
    fn a_symlink_out_is_refused_by_the_handle() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir(&work).unwrap();
        std::fs::write(dir.path().join(".env"), "SECRET=1").unwrap();
        std::os::unix::fs::symlink("../.env", work.join("link")).unwrap();
        let wd = Workdir::open(&work).unwrap();
        let err = wd.dir().read_to_string("link").unwrap_err();
        assert!(is_escape(&err), "{err}");
        // Writing through it replaces the link instead of following it.
        wd.write_atomic(Path::new("link"), b"mine").unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join(".env")).unwrap(), "SECRET=1");
        assert_eq!(std::fs::read_to_string(work.join("link")).unwrap(), "mine");
    }
}
