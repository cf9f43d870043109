//! Downloads a message's files into the media dir, with a size cap, before the event is accepted.
//!
//! A file that cannot be fetched never drops its message: the text says what is missing instead.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use hermesd_platform::{Attachment, InboundEvent};
use teloxide::Bot;
use teloxide::net::Download;
use teloxide::prelude::Requester;
use teloxide::types::FileId;
use tokio::io::AsyncWrite;

use crate::inbound::{FileRequest, Normalised};
use crate::outbound::Redactor;

/// Where and how much to download.
#[derive(Debug, Clone)]
pub(crate) struct MediaStore {
    pub(crate) dir: PathBuf,
    pub(crate) max_bytes: u64,
}

impl MediaStore {
    /// Fetches every file of `normalised` into its message's attachments, noting failures and
    /// oversized files in the message text.
    pub(crate) async fn fetch_all(&self, bot: &Bot, redactor: &Redactor, normalised: &mut Normalised) {
        let InboundEvent::Message { message, .. } = &mut normalised.event else { return };
        for file in std::mem::take(&mut normalised.files) {
            let note = match self.fetch(bot, &message.chat.chat_id, &file).await {
                Ok(Fetched::Saved(attachment)) => {
                    message.attachments.push(attachment);
                    continue;
                }
                Ok(Fetched::TooLarge(size)) => format!("[file too large: {}, {}]", file.name, megabytes(size)),
                Err(error) => {
                    tracing::warn!(platform = crate::NAME, error = %redactor.redact(&error), "attachment download failed");
                    format!("[attachment download failed: {}]", file.name)
                }
            };
            if !message.text.is_empty() {
                message.text.push('\n');
            }
            message.text.push_str(&note);
        }
    }

    async fn fetch(&self, bot: &Bot, chat_id: &str, file: &FileRequest) -> Result<Fetched, String> {
        if let Some(size) = file.size.filter(|&size| size > self.max_bytes) {
            return Ok(Fetched::TooLarge(size));
        }
        let remote = bot.get_file(FileId(file.file_id.clone())).await.map_err(|e| format!("getFile: {e}"))?;
        let size = u64::from(remote.meta.size);
        if remote.meta.size != u32::MAX && size > self.max_bytes {
            return Ok(Fetched::TooLarge(size));
        }
        let dir = self.dir.join(sanitise(chat_id));
        tokio::fs::create_dir_all(&dir).await.map_err(|e| format!("create {}: {e}", dir.display()))?;
        let dest = dir.join(sanitise(&format!("{}_{}", file.unique_id, file.name)));
        // A redelivered update finds its file already saved (the name holds Telegram's unique id).
        let existing = tokio::fs::metadata(&dest).await.ok().filter(|meta| meta.is_file() && meta.len() > 0);
        let written = match existing {
            Some(meta) => meta.len(),
            None => self.download(bot, &remote.path, &dest).await?,
        };
        Ok(Fetched::Saved(Attachment {
            kind: file.kind,
            path: self.relative(&dest),
            mime: file.mime.clone(),
            name: Some(file.name.clone()),
            size: written,
        }))
    }

    async fn download(&self, bot: &Bot, remote_path: &str, dest: &Path) -> Result<u64, String> {
        let mut partial = dest.as_os_str().to_owned();
        partial.push(".part");
        let partial = PathBuf::from(partial);
        let file = tokio::fs::File::create(&partial).await.map_err(|e| format!("create {}: {e}", partial.display()))?;
        let mut writer = CappedWriter { inner: file, written: 0, cap: self.max_bytes };
        let outcome = bot.download_file(remote_path, &mut writer).await;
        let finished = match outcome {
            Ok(()) => tokio::io::AsyncWriteExt::flush(&mut writer).await.map_err(|e| format!("write: {e}")),
            Err(error) => Err(format!("download: {error}")),
        };
        if let Err(error) = finished {
            // Best effort: a leftover partial file is harmless, only untidy.
            let _ = tokio::fs::remove_file(&partial).await;
            return Err(error);
        }
        tokio::fs::rename(&partial, dest).await.map_err(|e| format!("rename to {}: {e}", dest.display()))?;
        Ok(writer.written)
    }

    /// The path reported to the host: relative to the data dir, which is the media dir's
    /// grandparent (`$HERMESD_HOME/media/telegram`).
    fn relative(&self, dest: &Path) -> String {
        let base = self.dir.parent().and_then(Path::parent);
        let relative = base.and_then(|base| dest.strip_prefix(base).ok()).unwrap_or(dest);
        relative.to_string_lossy().into_owned()
    }
}

enum Fetched {
    Saved(Attachment),
    TooLarge(u64),
}

fn megabytes(bytes: u64) -> String {
    // Display only: precision loss above 2^53 bytes does not matter.
    #[allow(clippy::cast_precision_loss)]
    let mb = bytes as f64 / (1024.0 * 1024.0);
    format!("{mb:.1} MB")
}

/// Keeps file names to a safe, portable alphabet and length.
fn sanitise(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' })
        .take(120)
        .collect();
    let clean = clean.trim_start_matches('.');
    if clean.is_empty() { "file".to_owned() } else { clean.to_owned() }
}

/// Refuses to write past `cap` bytes, so a file whose size Telegram under-reported cannot fill
/// the disk.
struct CappedWriter {
    inner: tokio::fs::File,
    written: u64,
    cap: u64,
}

impl AsyncWrite for CappedWriter {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let len = u64::try_from(buf.len()).unwrap_or(u64::MAX);
        if self.written.saturating_add(len) > self.cap {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised() {
        assert_eq!(sanitise("AgAD_../../etc/passwd"), "AgAD_.._.._etc_passwd");
        assert_eq!(sanitise("..hidden"), "hidden");
        assert_eq!(sanitise("résumé final.pdf"), "r_sum__final.pdf");
        assert_eq!(sanitise(""), "file");
        assert_eq!(sanitise("-100123"), "-100123");
    }

    #[test]
    fn paths_are_relative_to_the_data_dir() {
        let store = MediaStore { dir: PathBuf::from("/home/h/.hermesd/media/telegram"), max_bytes: 1 };
        let dest = Path::new("/home/h/.hermesd/media/telegram/42/u_photo.jpg");
        assert_eq!(store.relative(dest), "media/telegram/42/u_photo.jpg");
    }

    #[test]
    fn sizes_read_in_megabytes() {
        assert_eq!(megabytes(25 * 1024 * 1024), "25.0 MB");
        assert_eq!(megabytes(1536 * 1024), "1.5 MB");
    }
}
