//! Downloads a message's files (`url_private`, fetched with the bot token) into the media dir,
//! with a size cap, before the event is accepted.
//!
//! A file that cannot be fetched never drops its message: the text says what is missing instead.
//! The bot token goes only in the `Authorization` header and never into a log line.

use std::path::{Path, PathBuf};

use hermesd_platform::{Attachment, InboundEvent};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::io::AsyncWriteExt;

use crate::api::{Connector, Redactor};
use crate::inbound::{FileRequest, Normalised};

/// Where and how much to download, and the client to do it with.
#[derive(Debug, Clone)]
pub(crate) struct MediaStore {
    pub(crate) dir: PathBuf,
    pub(crate) max_bytes: u64,
    client: Client<Connector, Empty<Bytes>>,
}

enum Fetched {
    Saved(Attachment),
    TooLarge(u64),
}

impl MediaStore {
    pub(crate) fn new(dir: PathBuf, max_bytes: u64, connector: Connector) -> Self {
        Self { dir, max_bytes, client: Client::builder(TokioExecutor::new()).build(connector) }
    }

    /// Fetches every file of `normalised` into its message's attachments, noting failures and
    /// oversized files in the message text.
    pub(crate) async fn fetch_all(&self, token: &str, redactor: &Redactor, normalised: &mut Normalised) {
        let InboundEvent::Message { message, .. } = &mut normalised.event else { return };
        for file in std::mem::take(&mut normalised.files) {
            let note = match self.fetch(token, &message.chat.chat_id, &file).await {
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

    async fn fetch(&self, token: &str, channel: &str, file: &FileRequest) -> Result<Fetched, String> {
        if let Some(size) = file.size.filter(|&size| size > self.max_bytes) {
            return Ok(Fetched::TooLarge(size));
        }
        let dir = self.dir.join(sanitise(channel));
        tokio::fs::create_dir_all(&dir).await.map_err(|e| format!("create {}: {e}", dir.display()))?;
        let dest = dir.join(sanitise(&format!("{}_{}", file.id, file.name)));
        // A redelivered event finds its file already saved (the name holds Slack's file id).
        let existing = tokio::fs::metadata(&dest).await.ok().filter(|meta| meta.is_file() && meta.len() > 0);
        let written = match existing {
            Some(meta) => meta.len(),
            None => match self.download(token, &file.url, &dest).await? {
                Some(written) => written,
                None => return Ok(Fetched::TooLarge(file.size.unwrap_or(self.max_bytes + 1))),
            },
        };
        Ok(Fetched::Saved(Attachment {
            kind: file.kind,
            path: self.relative(&dest),
            mime: file.mime.clone(),
            name: Some(file.name.clone()),
            size: written,
        }))
    }

    /// Streams `url` into `dest`; `Ok(None)` when the body outgrew the cap.
    async fn download(&self, token: &str, url: &str, dest: &Path) -> Result<Option<u64>, String> {
        let request = hyper::Request::get(url)
            .header(hyper::header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Empty::new())
            .map_err(|_| "the file URL is not a valid URL".to_owned())?;
        let response = self.client.request(request).await.map_err(|e| format!("download: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("download: HTTP {}", response.status()));
        }
        let mut partial = dest.as_os_str().to_owned();
        partial.push(".part");
        let partial = PathBuf::from(partial);
        let mut out =
            tokio::fs::File::create(&partial).await.map_err(|e| format!("create {}: {e}", partial.display()))?;
        let mut body = response.into_body();
        let mut written: u64 = 0;
        let outcome: Result<bool, String> = async {
            while let Some(frame) = body.frame().await {
                let Ok(data) = frame.map_err(|e| format!("download: {e}"))?.into_data() else { continue };
                written = written.saturating_add(u64::try_from(data.len()).unwrap_or(u64::MAX));
                if written > self.max_bytes {
                    return Ok(false);
                }
                out.write_all(&data).await.map_err(|e| format!("write: {e}"))?;
            }
            out.flush().await.map_err(|e| format!("write: {e}"))?;
            Ok(true)
        }
        .await;
        drop(out);
        if !matches!(outcome, Ok(true)) {
            // Best effort: a leftover partial file is harmless, only untidy.
            let _ = tokio::fs::remove_file(&partial).await;
            return outcome.map(|_| None);
        }
        tokio::fs::rename(&partial, dest).await.map_err(|e| format!("rename to {}: {e}", dest.display()))?;
        Ok(Some(written))
    }

    /// The path reported to the host: relative to the data dir, the media dir's grandparent
    /// (`$HERMESD_HOME/media/slack`).
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
    fn names_are_sanitised() {
        assert_eq!(sanitise("F1_../../etc/passwd"), "F1_.._.._etc_passwd");
        assert_eq!(sanitise("..hidden"), "hidden");
        assert_eq!(sanitise("résumé.pdf"), "r_sum_.pdf");
        assert_eq!(sanitise(""), "file");
    }

    #[test]
    fn paths_are_relative_to_the_data_dir() {
        let connector = crate::api::connector().expect("connector");
        let store = MediaStore::new(PathBuf::from("/home/h/.hermesd/media/slack"), 1, connector);
        let dest = Path::new("/home/h/.hermesd/media/slack/D1/F1_cat.png");
        assert_eq!(store.relative(dest), "media/slack/D1/F1_cat.png");
        assert_eq!(megabytes(1536 * 1024), "1.5 MB");
    }
}
