//! Downloads a message's attachments into the media dir, with a size cap, before the event is
//! accepted.
//!
//! A file that cannot be fetched never drops its message: the text says what is missing instead.

use std::path::{Path, PathBuf};

use hermesd_platform::{Attachment, InboundEvent};

use crate::inbound::{FileRequest, Normalised};
use crate::rest::Rest;

/// Where and how much to download.
#[derive(Debug, Clone)]
pub(crate) struct MediaStore {
    pub(crate) dir: PathBuf,
    pub(crate) max_bytes: u64,
}

impl MediaStore {
    /// Fetches every file of `normalised` into its message's attachments, noting failures and
    /// oversized files in the message text.
    pub(crate) async fn fetch_all(&self, rest: &Rest, normalised: &mut Normalised) {
        let InboundEvent::Message { message, .. } = &mut normalised.event else { return };
        for file in std::mem::take(&mut normalised.files) {
            let note = if file.size > self.max_bytes {
                format!("[file too large: {}, {}]", file.name, megabytes(file.size))
            } else {
                match self.fetch(rest, &message.chat.chat_id, &file).await {
                    Ok(attachment) => {
                        message.attachments.push(attachment);
                        continue;
                    }
                    Err(error) => {
                        tracing::warn!(platform = crate::NAME, %error, "attachment download failed");
                        format!("[attachment download failed: {}]", file.name)
                    }
                }
            };
            if !message.text.is_empty() {
                message.text.push('\n');
            }
            message.text.push_str(&note);
        }
    }

    async fn fetch(&self, rest: &Rest, chat_id: &str, file: &FileRequest) -> Result<Attachment, String> {
        let dir = self.dir.join(sanitise(chat_id));
        tokio::fs::create_dir_all(&dir).await.map_err(|e| format!("create {}: {e}", dir.display()))?;
        let dest = dir.join(sanitise(&format!("{}_{}", file.id, file.name)));
        // A replayed dispatch finds its file already saved (the name holds the attachment id).
        let existing = tokio::fs::metadata(&dest).await.ok().filter(|meta| meta.is_file() && meta.len() > 0);
        let size = match existing {
            Some(meta) => meta.len(),
            None => {
                let body = rest.download(&file.url, self.max_bytes).await?;
                let mut partial = dest.as_os_str().to_owned();
                partial.push(".part");
                let partial = PathBuf::from(partial);
                tokio::fs::write(&partial, &body).await.map_err(|e| format!("write {}: {e}", partial.display()))?;
                tokio::fs::rename(&partial, &dest).await.map_err(|e| format!("rename to {}: {e}", dest.display()))?;
                u64::try_from(body.len()).unwrap_or(u64::MAX)
            }
        };
        Ok(Attachment {
            kind: file.kind,
            path: self.relative(&dest),
            mime: file.mime.clone(),
            name: Some(file.name.clone()),
            size,
        })
    }

    /// The path reported to the host: relative to the data dir, the media dir's grandparent.
    fn relative(&self, dest: &Path) -> String {
        let base = self.dir.parent().and_then(Path::parent);
        let relative = base.and_then(|base| dest.strip_prefix(base).ok()).unwrap_or(dest);
        relative.to_string_lossy().into_owned()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised_and_paths_relative_to_the_data_dir() {
        assert_eq!(sanitise("9_../../etc/passwd"), "9_.._.._etc_passwd");
        assert_eq!(sanitise(".."), "file");
        let store = MediaStore { dir: PathBuf::from("/h/.hermesd/media/discord"), max_bytes: 1 };
        assert_eq!(store.relative(Path::new("/h/.hermesd/media/discord/7/1_a.png")), "media/discord/7/1_a.png");
        assert_eq!(megabytes(3 * 1024 * 1024 / 2), "1.5 MB");
    }
}
