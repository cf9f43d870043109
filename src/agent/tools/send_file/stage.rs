//! Staging a file the bot sends: a workdir file (or a finished download) is copied into
//! `media/outbound/<id>/<name>` in the data dir — 0600, written as `.part`, synced, then renamed —
//! before the message naming it is stored, so the stored row always references bytes that exist
//! and a resend after a crash sends the same bytes. Workdir paths go through the file tools'
//! confined resolver: nothing outside the workdir, nothing secret-looking, is ever copied.
//!
//! `split_media_lines` takes an answer's `MEDIA:<path>` lines apart from its text (lines inside
//! code fences stay text).

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use hermesd_platform::{AttachmentKind, FileLimits, OutboundFile};

use super::super::ToolError;
use super::super::files::{io_error, refuse_secret, resolve};
use crate::sandbox::Workdir;

/// Where outbound copies live, relative to the data dir.
pub const OUTBOUND_DIR: &str = "media/outbound";

/// A staging area for one file: a fresh folder under `media/outbound` and the final name.
pub(super) struct Slot {
    /// The folder, absolute.
    dir: PathBuf,
    /// Relative to the data dir, for the stored message.
    rel: String,
    /// The file name.
    name: String,
}

impl Slot {
    /// A new slot for a file named (after cleaning) `name`.
    pub(super) fn new(data_dir: &Path, name: &str) -> std::io::Result<Self> {
        let id = uuid::Uuid::now_v7().simple().to_string();
        let name = safe_name(name);
        let dir = data_dir.join(OUTBOUND_DIR).join(&id);
        std::fs::create_dir_all(&dir)?;
        Ok(Self { rel: format!("{OUTBOUND_DIR}/{id}/{name}"), dir, name })
    }

    /// The `.part` file to write into (0600, created new).
    pub(super) fn part(&self) -> std::io::Result<(PathBuf, std::fs::File)> {
        let path = self.dir.join(format!("{}.part", self.name));
        let file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
        Ok((path, file))
    }

    /// Sync and rename the finished `.part`; the file the stored message names now exists.
    pub(super) fn finish(self, part: &Path, mut file: std::fs::File, size: u64) -> std::io::Result<OutboundFile> {
        file.flush()?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(part, self.dir.join(&self.name))?;
        Ok(describe(self.rel, self.name, size))
    }

    /// Remove the slot after a failure.
    pub(super) fn discard(self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Copy the workdir file `raw` (relative to the workdir, or absolute inside it) into the data
/// dir; refused when it lies outside the workdir, looks secret, is not a file, or is larger than
/// `limits` allow.
pub fn stage_workdir_file(
    workdir: &Path,
    data_dir: &Path,
    raw: &str,
    limits: FileLimits,
) -> Result<OutboundFile, ToolError> {
    let wd = Workdir::open(workdir)
        .map_err(|e| ToolError::Failed(format!("cannot open the workdir {}: {e}", workdir.display())))?;
    let target = resolve(&wd, raw)?;
    refuse_secret(&target)?;
    let shown = &target.shown;
    let source = wd.dir().open(&target.rel).map_err(|e| io_error("read", shown, e))?;
    let meta = source.metadata().map_err(|e| io_error("read", shown, e))?;
    if !meta.is_file() {
        return Err(ToolError::Failed(format!("{shown} is not a file")));
    }
    check_size(shown, meta.len(), limits)?;
    let name = target.rel.file_name().map_or_else(|| "file".to_owned(), |n| n.to_string_lossy().into_owned());
    let slot = Slot::new(data_dir, &name).map_err(|e| ToolError::Failed(format!("cannot stage {shown}: {e}")))?;
    let copied = (|| {
        let (part, mut out) = slot.part()?;
        // Read at most one byte past the cap: a file growing while it is copied is still bounded.
        let size = std::io::copy(&mut source.take(limits.max_document_bytes + 1), &mut out)?;
        Ok::<_, std::io::Error>((part, out, size))
    })();
    match copied {
        Ok((_, _, size)) if size > limits.max_document_bytes => {
            slot.discard();
            check_size(shown, size, limits).map(|()| unreachable!("size is over the cap"))
        }
        Ok((part, out, size)) => {
            slot.finish(&part, out, size).map_err(|e| ToolError::Failed(format!("cannot stage {shown}: {e}")))
        }
        Err(e) => {
            slot.discard();
            Err(ToolError::Failed(format!("cannot copy {shown}: {e}")))
        }
    }
}

/// Refuse a file larger than the platform takes.
pub(super) fn check_size(shown: &str, size: u64, limits: FileLimits) -> Result<(), ToolError> {
    if size > limits.max_document_bytes {
        return Err(ToolError::Failed(format!(
            "{shown} is {}, over this platform's {} limit for files",
            megabytes(size),
            megabytes(limits.max_document_bytes)
        )));
    }
    Ok(())
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1_048_576.0)
}

/// A file name safe on every platform and filesystem: no separators, no leading dot, at most
/// 100 characters, never empty.
pub fn safe_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| if c.is_alphanumeric() || matches!(c, '.' | '-' | '_' | ' ') { c } else { '_' })
        .take(100)
        .collect();
    let cleaned = cleaned.trim().trim_start_matches('.').to_owned();
    if cleaned.is_empty() { "file".into() } else { cleaned }
}

/// The stored description of a staged file: MIME type and kind from its extension.
fn describe(path: String, name: String, size: u64) -> OutboundFile {
    let (mime, kind) = mime_of(&name);
    OutboundFile { path, name, mime: mime.to_owned(), kind, size }
}

/// The MIME type and kind of a file name, by extension.
pub fn mime_of(name: &str) -> (&'static str, AttachmentKind) {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    match ext.as_str() {
        "jpg" | "jpeg" => ("image/jpeg", AttachmentKind::Image),
        "png" => ("image/png", AttachmentKind::Image),
        "webp" => ("image/webp", AttachmentKind::Image),
        "gif" => ("image/gif", AttachmentKind::Image),
        "pdf" => ("application/pdf", AttachmentKind::Document),
        "txt" | "log" => ("text/plain", AttachmentKind::Document),
        "md" => ("text/markdown", AttachmentKind::Document),
        "csv" => ("text/csv", AttachmentKind::Document),
        "json" => ("application/json", AttachmentKind::Document),
        "html" | "htm" => ("text/html", AttachmentKind::Document),
        "zip" => ("application/zip", AttachmentKind::Document),
        "mp3" => ("audio/mpeg", AttachmentKind::Audio),
        "ogg" | "oga" => ("audio/ogg", AttachmentKind::Audio),
        "mp4" => ("video/mp4", AttachmentKind::Video),
        _ => ("application/octet-stream", AttachmentKind::Document),
    }
}

/// Split a final answer into its text and the paths of its `MEDIA:<path>` lines (a line that is
/// only `MEDIA:` and a path, surrounding spaces allowed). Lines inside code fences are text.
pub fn split_media_lines(text: &str) -> (String, Vec<String>) {
    let mut kept = Vec::new();
    let mut media = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            fenced = !fenced;
        }
        match trimmed.strip_prefix("MEDIA:").map(str::trim) {
            Some(path) if !fenced && !path.is_empty() => media.push(path.to_owned()),
            _ => kept.push(line),
        }
    }
    if media.is_empty() {
        return (text.to_owned(), media);
    }
    (kept.join("\n").trim_end().to_owned(), media)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: FileLimits = FileLimits { max_document_bytes: 1_000, max_photo_bytes: 100 };

    #[test]
    fn media_lines_are_taken_out_of_the_text() {
        let (text, media) = split_media_lines("Here is the chart.\nMEDIA: out/chart.png\n  MEDIA:report.pdf  \nBye");
        assert_eq!(text, "Here is the chart.\nBye");
        assert_eq!(media, ["out/chart.png", "report.pdf"]);
        let (text, media) = split_media_lines("```\nMEDIA:x\n```\nsee MEDIA:y inline");
        assert_eq!(text, "```\nMEDIA:x\n```\nsee MEDIA:y inline");
        assert!(media.is_empty());
    }

    #[test]
    fn a_workdir_file_is_copied_private_and_whole() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let work = home.path().join("work");
        std::fs::create_dir(&work).unwrap();
        std::fs::write(work.join("chart.png"), b"\x89PNG bytes").unwrap();
        let file = stage_workdir_file(&work, home.path(), "chart.png", LIMITS).unwrap();
        assert_eq!((file.mime.as_str(), file.kind, file.size), ("image/png", AttachmentKind::Image, 10));
        assert!(file.path.starts_with("media/outbound/") && file.path.ends_with("/chart.png"), "{}", file.path);
        let copy = home.path().join(&file.path);
        assert_eq!(std::fs::read(&copy).unwrap(), b"\x89PNG bytes");
        assert_eq!(std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777, 0o600);
        // The original may change or vanish: the copy is what gets sent.
        std::fs::remove_file(work.join("chart.png")).unwrap();
        assert_eq!(std::fs::read(&copy).unwrap(), b"\x89PNG bytes");
    }

    #[test]
    fn paths_outside_the_workdir_secrets_and_big_files_are_refused() {
        let home = tempfile::tempdir().unwrap();
        let work = home.path().join("work");
        std::fs::create_dir(&work).unwrap();
        std::fs::write(home.path().join(".env"), "KEY=secret").unwrap();
        std::fs::write(work.join(".env"), "KEY=secret").unwrap();
        std::os::unix::fs::symlink("../.env", work.join("link.txt")).unwrap();
        std::fs::write(work.join("big.bin"), vec![0u8; 1_001]).unwrap();
        let outside = home.path().join(".env").display().to_string();
        for raw in [outside.as_str(), "../.env", ".env", "link.txt", "big.bin", "missing.txt", "."] {
            let err = stage_workdir_file(&work, home.path(), raw, LIMITS).unwrap_err();
            assert!(matches!(err, ToolError::Denied(_) | ToolError::Failed(_)), "{raw}: {err}");
        }
        // Nothing was left behind for the refused ones.
        let staged = home.path().join(OUTBOUND_DIR);
        let left = std::fs::read_dir(&staged).map(|d| d.count()).unwrap_or(0);
        assert_eq!(left, 0, "refused files left copies behind");
    }

    #[test]
    fn names_are_made_safe() {
        assert_eq!(safe_name("../../etc/passwd"), "_.._etc_passwd");
        assert_eq!(safe_name(".hidden"), "hidden");
        assert_eq!(safe_name(""), "file");
        assert_eq!(mime_of("A.JPG"), ("image/jpeg", AttachmentKind::Image));
    }
}
