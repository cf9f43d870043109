//! Downloads a message's files (`url_private`, fetched with the bot token) into the media dir,
//! with a size cap, before the event is accepted.
//!
//! A file that cannot be fetched never drops its message: the text says what is missing instead.
//! The bot token goes only in the `Authorization` header and never into a log line. A download
//! that makes no progress for `api_timeout`, or runs past `DOWNLOAD_SPAN` of them, is given up
//! (the receive loop waits for it before accepting the event).

use std::path::{Path, PathBuf};

use hermesd_platform::media::{self, Fetched, MediaDir};
use hermesd_platform::{Attachment, InboundEvent, Redactor};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

use tokio::time::Instant;

use crate::api::Connector;
use crate::inbound::{FileRequest, Normalised};

/// However steadily a file arrives, its download ends after this many `api_timeout`s.
const DOWNLOAD_SPAN: u32 = 10;

/// Where and how much to download, and the client to do it with.
#[derive(Debug, Clone)]
pub(crate) struct MediaStore {
    media: MediaDir,
    client: Client<Connector, Empty<Bytes>>,
}

impl MediaStore {
    pub(crate) fn new(dir: PathBuf, max_bytes: u64, connector: Connector) -> Self {
        Self { media: MediaDir::new(dir, max_bytes), client: Client::builder(TokioExecutor::new()).build(connector) }
    }

    /// Fetches every file of `normalised` into its message's attachments, noting failures and
    /// oversized files in the message text.
    pub(crate) async fn fetch_all(
        &self,
        token: &str,
        redactor: &Redactor,
        idle: Duration,
        normalised: &mut Normalised,
    ) {
        let InboundEvent::Message { message, .. } = &mut normalised.event else { return };
        let channel = message.chat.chat_id.clone();
        for file in std::mem::take(&mut normalised.files) {
            let outcome = self.fetch(token, &channel, &file, idle).await.map_err(|e| redactor.redact(&e));
            media::record(message, &file.name, outcome, crate::NAME);
        }
    }

    async fn fetch(&self, token: &str, channel: &str, file: &FileRequest, idle: Duration) -> Result<Fetched, String> {
        let max = self.media.max_bytes();
        if let Some(size) = file.size.filter(|&size| size > max) {
            return Ok(Fetched::TooLarge(size));
        }
        let dest = self.media.destination(channel, &file.id, &file.name).await?;
        // A redelivered event finds its file already saved (the name holds Slack's file id).
        let written = match MediaDir::existing(&dest).await {
            Some(size) => size,
            None => match self.download(token, &file.url, &dest, idle).await? {
                Some(written) => written,
                None => return Ok(Fetched::TooLarge(file.size.unwrap_or(max + 1))),
            },
        };
        Ok(Fetched::Saved(Attachment {
            kind: file.kind,
            path: self.media.relative(&dest),
            mime: file.mime.clone(),
            name: Some(file.name.clone()),
            size: written,
        }))
    }

    /// Streams `url` into `dest`; `Ok(None)` when the body outgrew the cap.
    async fn download(&self, token: &str, url: &str, dest: &Path, idle: Duration) -> Result<Option<u64>, String> {
        let deadline = Instant::now() + idle * DOWNLOAD_SPAN;
        // Each wait (the answer, every piece of the body) ends at `idle` or the deadline.
        let bounded = |step: Duration| step.min(deadline.saturating_duration_since(Instant::now()));
        let stalled = || format!("download: no progress within {}s", idle.as_secs_f32());
        let request = hyper::Request::get(url)
            .header(hyper::header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Empty::new())
            .map_err(|_| "the file URL is not a valid URL".to_owned())?;
        let response = tokio::time::timeout(bounded(idle), self.client.request(request))
            .await
            .map_err(|_| stalled())?
            .map_err(|e| format!("download: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("download: HTTP {}", response.status()));
        }
        let mut body = response.into_body();
        let mut saving = self.media.saving(dest).await?;
        let read = async {
            while let Some(frame) = tokio::time::timeout(bounded(idle), body.frame()).await.map_err(|_| stalled())? {
                let Ok(data) = frame.map_err(|e| format!("download: {e}"))?.into_data() else { continue };
                if !saving.write(&data).await? {
                    break;
                }
            }
            Ok(())
        }
        .await;
        saving.finish(read).await
    }
}
