//! Downloads a message's attachments into the media dir, with a size cap, before the event is
//! accepted.
//!
//! A file that cannot be fetched never drops its message: the text says what is missing instead.

use hermesd_platform::media::{self, Fetched, MediaDir};
use hermesd_platform::{Attachment, InboundEvent};

use crate::inbound::{FileRequest, Normalised};
use crate::rest::Rest;

/// Where and how much to download.
#[derive(Debug, Clone)]
pub(crate) struct MediaStore {
    pub(crate) media: MediaDir,
}

impl MediaStore {
    /// Fetches every file of `normalised` into its message's attachments, noting failures and
    /// oversized files in the message text.
    pub(crate) async fn fetch_all(&self, rest: &Rest, normalised: &mut Normalised) {
        let InboundEvent::Message { message, .. } = &mut normalised.event else { return };
        let chat_id = message.chat.chat_id.clone();
        for file in std::mem::take(&mut normalised.files) {
            let outcome = if file.size > self.media.max_bytes() {
                Ok(Fetched::TooLarge(file.size))
            } else {
                self.fetch(rest, &chat_id, &file).await.map(Fetched::Saved)
            };
            media::record(message, &file.name, outcome, crate::NAME);
        }
    }

    async fn fetch(&self, rest: &Rest, chat_id: &str, file: &FileRequest) -> Result<Attachment, String> {
        let dest = self.media.destination(chat_id, &file.id.to_string(), &file.name).await?;
        // A replayed dispatch finds its file already saved (the name holds the attachment id).
        let size = match MediaDir::existing(&dest).await {
            Some(size) => size,
            None => {
                let body = rest.download(&file.url, self.media.max_bytes()).await?;
                let partial = MediaDir::partial(&dest);
                tokio::fs::write(&partial, &body).await.map_err(|e| format!("write {}: {e}", partial.display()))?;
                MediaDir::complete(&partial, &dest).await?;
                u64::try_from(body.len()).unwrap_or(u64::MAX)
            }
        };
        Ok(Attachment {
            kind: file.kind,
            path: self.media.relative(&dest),
            mime: file.mime.clone(),
            name: Some(file.name.clone()),
            size,
        })
    }
}
