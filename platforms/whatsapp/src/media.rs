//! Inbound media: `GET /{version}/{media-id}` with the token gives a short-lived URL (and the
//! size), which is downloaded with the same token into the media dir under the size cap. Runs
//! only after the sender was admitted, before the event is accepted.
//!
//! A file that cannot be fetched never drops its message: the text says what is missing. The
//! token goes only in the `Authorization` header, never into a log line or an error.
//!
//! A size Meta announces over the cap is refused before any download.

use std::path::{Path, PathBuf};

use futures_util::StreamExt;
use hermesd_platform::media::{self, Fetched, MediaDir};
use hermesd_platform::{Attachment, InboundEvent};

use crate::api::Graph;
use crate::inbound::MediaRequest;

/// Where media goes and how much of it.
#[derive(Debug, Clone)]
pub(crate) struct MediaStore {
    media: MediaDir,
}

impl MediaStore {
    pub(crate) fn new(dir: PathBuf, max_bytes: u64) -> Self {
        Self { media: MediaDir::new(dir, max_bytes) }
    }

    /// Fetches `request` into `event`'s message: an attachment, or a note in the text.
    pub(crate) async fn fetch_into(&self, graph: &Graph, request: &MediaRequest, event: &mut InboundEvent) {
        let InboundEvent::Message { message, .. } = event else { return };
        let chat = message.chat.chat_id.clone();
        let outcome = self.fetch(graph, &chat, request).await.map_err(|e| graph.redactor().redact(&e));
        media::record(message, &request.name, outcome, crate::NAME);
    }

    async fn fetch(&self, graph: &Graph, chat: &str, request: &MediaRequest) -> Result<Fetched, String> {
        let max = self.media.max_bytes();
        let dest = self.media.destination(chat, &request.id, &request.name).await?;
        // A redelivered webhook finds its file already saved (the name holds the media id).
        if let Some(size) = MediaDir::existing(&dest).await {
            return Ok(Fetched::Saved(self.attachment(request, &dest, size)));
        }
        let info = graph.get(&request.id).await.map_err(|e| format!("media lookup: {e}"))?;
        let announced = info["file_size"].as_u64().or_else(|| info["file_size"].as_str().and_then(|s| s.parse().ok()));
        if let Some(size) = announced.filter(|&size| size > max) {
            return Ok(Fetched::TooLarge(size));
        }
        let url = info["url"].as_str().ok_or("media lookup: no url in the answer")?;
        match self.download(graph, url, &dest).await? {
            Some(written) => Ok(Fetched::Saved(self.attachment(request, &dest, written))),
            None => Ok(Fetched::TooLarge(announced.unwrap_or(max + 1))),
        }
    }

    fn attachment(&self, request: &MediaRequest, dest: &Path, size: u64) -> Attachment {
        Attachment {
            kind: request.kind,
            path: self.media.relative(dest),
            mime: request.mime.clone(),
            name: Some(request.name.clone()),
            size,
        }
    }

    /// Streams `url` into `dest`; `Ok(None)` when the body outgrew the cap.
    async fn download(&self, graph: &Graph, url: &str, dest: &Path) -> Result<Option<u64>, String> {
        let response = graph
            .http()
            .get(url)
            .bearer_auth(graph.token())
            .send()
            .await
            .map_err(|e| format!("download: {}", e.without_url()))?;
        if !response.status().is_success() {
            return Err(format!("download: HTTP {}", response.status()));
        }
        if response.content_length().is_some_and(|len| len > self.media.max_bytes()) {
            return Ok(None);
        }
        let mut body = response.bytes_stream();
        let mut saving = self.media.saving(dest).await?;
        let read = async {
            while let Some(piece) = body.next().await {
                let piece = piece.map_err(|e| format!("download: {}", e.without_url()))?;
                if !saving.write(&piece).await? {
                    break;
                }
            }
            Ok(())
        }
        .await;
        saving.finish(read).await
    }
}
