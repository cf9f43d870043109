//! Where adapters put downloaded attachments: `<media dir>/<chat>/<file id>_<name>`, names kept
//! to a safe alphabet, a `.part` file renamed into place only when complete, paths reported
//! relative to the data dir. A file that cannot be fetched never drops its message: the text
//! says what is missing instead.
//!
//! Never writes outside the media dir, whatever a chat id or file name holds.
//!
//! `MediaDir` is one adapter's media dir (`media/<platform>`) and size cap; `saving` writes a body
//! into place under that cap (`Saving`). `CappedBuffer` collects a body in memory under a cap and
//! `CappedWriter` refuses writes past one, for clients that read or write for the adapter.
//! `record` puts a fetch's outcome (`Fetched`) into the message: the attachment, or a note for a
//! file too large or failed.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::model::{Attachment, InboundMessage};

/// An adapter's media folder (`$HERMESD_HOME/media/<platform>`) and its size cap.
#[derive(Debug, Clone)]
pub struct MediaDir {
    dir: PathBuf,
    max_bytes: u64,
}

impl MediaDir {
    /// Files go under `dir`, none larger than `max_bytes`.
    pub fn new(dir: PathBuf, max_bytes: u64) -> Self {
        Self { dir, max_bytes }
    }

    /// The size cap.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Where file `file_id` named `name` of `chat` goes; its folder is created.
    pub async fn destination(&self, chat: &str, file_id: &str, name: &str) -> Result<PathBuf, String> {
        let dir = self.dir.join(sanitise(chat));
        tokio::fs::create_dir_all(&dir).await.map_err(|e| format!("create {}: {e}", dir.display()))?;
        Ok(dir.join(sanitise(&format!("{file_id}_{name}"))))
    }

    /// The size of a file already saved at `dest` (a redelivered event finds its file there).
    pub async fn existing(dest: &Path) -> Option<u64> {
        tokio::fs::metadata(dest).await.ok().filter(|meta| meta.is_file() && meta.len() > 0).map(|meta| meta.len())
    }

    /// The temporary path a download is written to before it is complete.
    pub fn partial(dest: &Path) -> PathBuf {
        let mut partial = dest.as_os_str().to_owned();
        partial.push(".part");
        PathBuf::from(partial)
    }

    /// Move a complete download into place.
    pub async fn complete(partial: &Path, dest: &Path) -> Result<(), String> {
        tokio::fs::rename(partial, dest).await.map_err(|e| format!("rename to {}: {e}", dest.display()))
    }

    /// Remove an incomplete download (best effort: a leftover is harmless, only untidy).
    pub async fn abandon(partial: &Path) {
        let _ = tokio::fs::remove_file(partial).await;
    }

    /// Start saving a body into `dest`, through its partial file, under the cap.
    pub async fn saving(&self, dest: &Path) -> Result<Saving, String> {
        let partial = Self::partial(dest);
        let file = tokio::fs::File::create(&partial).await.map_err(|e| format!("create {}: {e}", partial.display()))?;
        let out = CappedWriter::new(file, self.max_bytes);
        Ok(Saving { partial, dest: dest.to_owned(), out, over: false })
    }

    /// The path reported to the host: relative to the data dir, the media dir's grandparent.
    pub fn relative(&self, dest: &Path) -> String {
        let base = self.dir.parent().and_then(Path::parent);
        let relative = base.and_then(|base| dest.strip_prefix(base).ok()).unwrap_or(dest);
        relative.to_string_lossy().into_owned()
    }
}

/// A body being saved by `MediaDir::saving`: write its pieces, then `finish`.
pub struct Saving {
    partial: PathBuf,
    dest: PathBuf,
    out: CappedWriter<tokio::fs::File>,
    over: bool,
}

impl Saving {
    /// Write the next piece; `false` once the body outgrew the cap (stop reading then).
    pub async fn write(&mut self, piece: &[u8]) -> Result<bool, String> {
        if self.over || !self.out.fits(piece.len()) {
            self.over = true;
            return Ok(false);
        }
        self.out.write_all(piece).await.map_err(|e| format!("write: {e}"))?;
        Ok(true)
    }

    /// End the body with how reading it went: `Ok(Some(bytes))` once the file is in place,
    /// `Ok(None)` when it outgrew the cap; the partial file is removed on either failure.
    pub async fn finish(mut self, read: Result<(), String>) -> Result<Option<u64>, String> {
        let outcome = match read {
            Ok(()) if self.over => Ok(false),
            Ok(()) => self.out.flush().await.map(|()| true).map_err(|e| format!("write: {e}")),
            Err(error) => Err(error),
        };
        let written = self.out.written();
        drop(self.out);
        if !matches!(outcome, Ok(true)) {
            MediaDir::abandon(&self.partial).await;
            return outcome.map(|_| None);
        }
        MediaDir::complete(&self.partial, &self.dest).await?;
        Ok(Some(written))
    }
}

/// A body collected in memory, refusing to grow past a cap.
#[derive(Debug)]
pub struct CappedBuffer {
    cap: usize,
    body: Vec<u8>,
}

impl CappedBuffer {
    /// An empty buffer taking at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self { cap, body: Vec::new() }
    }

    /// Append `piece`; `false`, and nothing appended, when it would pass the cap.
    pub fn push(&mut self, piece: &[u8]) -> bool {
        if self.body.len().saturating_add(piece.len()) > self.cap {
            return false;
        }
        self.body.extend_from_slice(piece);
        true
    }

    /// The bytes collected.
    pub fn into_inner(self) -> Vec<u8> {
        self.body
    }
}

/// A writer that refuses to write past `cap` bytes, so a file whose size a platform
/// under-reported cannot fill the disk.
pub struct CappedWriter<W> {
    inner: W,
    written: u64,
    cap: u64,
}

impl<W> CappedWriter<W> {
    /// Writes to `inner`, at most `cap` bytes in all.
    pub fn new(inner: W, cap: u64) -> Self {
        Self { inner, written: 0, cap }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Whether `len` more bytes stay within the cap.
    pub fn fits(&self, len: usize) -> bool {
        self.written.saturating_add(u64::try_from(len).unwrap_or(u64::MAX)) <= self.cap
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for CappedWriter<W> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if !self.fits(buf.len()) {
            return Poll::Ready(Err(io::Error::other(format!("file exceeds the {} byte cap", self.cap))));
        }
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &polled {
            this.written += u64::try_from(*n).unwrap_or(u64::MAX);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// What fetching one file gave.
#[derive(Debug)]
pub enum Fetched {
    /// Saved; this is its attachment.
    Saved(Attachment),
    /// Over the cap (the size it has or announced); not saved.
    TooLarge(u64),
}

/// Put the outcome of fetching file `name` into `message`: its attachment, or a note saying what
/// is missing. A failure is logged; `error` must already be free of secrets.
pub fn record(message: &mut InboundMessage, name: &str, outcome: Result<Fetched, String>, platform: &str) {
    let note = match outcome {
        Ok(Fetched::Saved(attachment)) => {
            message.attachments.push(attachment);
            return;
        }
        Ok(Fetched::TooLarge(size)) => too_large(name, size),
        Err(error) => {
            tracing::warn!(platform, %error, "attachment download failed");
            failed(name)
        }
    };
    add_note(message, &note);
}

/// The note left in a message for a file over the cap.
pub fn too_large(name: &str, bytes: u64) -> String {
    format!("[file too large: {name}, {}]", megabytes(bytes))
}

/// The note left in a message for a file whose download failed.
pub fn failed(name: &str) -> String {
    format!("[attachment download failed: {name}]")
}

/// Append `note` to the message text, on a line of its own.
pub fn add_note(message: &mut InboundMessage, note: &str) {
    if !message.text.is_empty() {
        message.text.push('\n');
    }
    message.text.push_str(note);
}

/// A size for people: `1.5 MB`.
pub fn megabytes(bytes: u64) -> String {
    // Display only: precision loss above 2^53 bytes does not matter.
    #[allow(clippy::cast_precision_loss)]
    let mb = bytes as f64 / (1024.0 * 1024.0);
    format!("{mb:.1} MB")
}

/// Keeps a file or folder name to a safe, portable alphabet and length.
pub fn sanitise(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' })
        .take(120)
        .collect();
    let clean = clean.trim_start_matches('.');
    if clean.is_empty() { "file".to_owned() } else { clean.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised() {
        assert_eq!(sanitise("AgAD_../../etc/passwd"), "AgAD_.._.._etc_passwd");
        assert_eq!(sanitise("..hidden"), "hidden");
        assert_eq!(sanitise(".."), "file");
        assert_eq!(sanitise("résumé final.pdf"), "r_sum__final.pdf");
        assert_eq!(sanitise(""), "file");
        assert_eq!(sanitise("-100123"), "-100123");
    }

    #[tokio::test]
    async fn files_stay_in_the_media_dir_and_paths_are_relative_to_the_data_dir() {
        let home = tempfile::tempdir().unwrap();
        let media = MediaDir::new(home.path().join("media").join("slack"), 10);
        let dest = media.destination("../../etc", "F1", "../passwd").await.unwrap();
        assert!(dest.starts_with(home.path().join("media").join("slack")), "{}", dest.display());
        assert_eq!(media.relative(&dest), "media/slack/_.._etc/F1_.._passwd");
        assert_eq!(MediaDir::existing(&dest).await, None);
        let partial = MediaDir::partial(&dest);
        tokio::fs::write(&partial, b"data").await.unwrap();
        MediaDir::complete(&partial, &dest).await.unwrap();
        assert_eq!(MediaDir::existing(&dest).await, Some(4));
    }

    #[test]
    fn notes_and_sizes() {
        assert_eq!(megabytes(1536 * 1024), "1.5 MB");
        assert_eq!(too_large("a.bin", 25 * 1024 * 1024), "[file too large: a.bin, 25.0 MB]");
        assert_eq!(failed("a.bin"), "[attachment download failed: a.bin]");
    }
}
