//! Downloads a message's files into the media dir, with a size cap, before the event is accepted.
//!
//! A file that cannot be fetched never drops its message: the text says what is missing instead.
//!
//! A file is located with `getFile`, then downloaded.

use std::path::Path;

use hermesd_platform::media::{self, CappedWriter, Fetched, MediaDir};
use hermesd_platform::{Attachment, InboundEvent, Redactor};
use teloxide::Bot;
use teloxide::net::Download;
use teloxide::prelude::Requester;
use teloxide::types::FileId;

use crate::inbound::{FileRequest, Normalised};

/// Where and how much to download.
#[derive(Debug, Clone)]
pub(crate) struct MediaStore {
    pub(crate) media: MediaDir,
}

impl MediaStore {
    /// Fetches every file of `normalised` into its message's attachments, noting failures and
    /// oversized files in the message text.
    pub(crate) async fn fetch_all(&self, bot: &Bot, redactor: &Redactor, normalised: &mut Normalised) {
        let InboundEvent::Message { message, .. } = &mut normalised.event else { return };
        let chat_id = message.chat.chat_id.clone();
        for file in std::mem::take(&mut normalised.files) {
            let outcome = self.fetch(bot, &chat_id, &file).await.map_err(|e| redactor.redact(&e));
            media::record(message, &file.name, outcome, crate::NAME);
        }
    }

    async fn fetch(&self, bot: &Bot, chat_id: &str, file: &FileRequest) -> Result<Fetched, String> {
        let max = self.media.max_bytes();
        if let Some(size) = file.size.filter(|&size| size > max) {
            return Ok(Fetched::TooLarge(size));
        }
        let remote = bot.get_file(FileId(file.file_id.clone())).await.map_err(|e| format!("getFile: {e}"))?;
        let size = u64::from(remote.meta.size);
        if remote.meta.size != u32::MAX && size > max {
            return Ok(Fetched::TooLarge(size));
        }
        let dest = self.media.destination(chat_id, &file.unique_id, &file.name).await?;
        // A redelivered update finds its file already saved (the name holds Telegram's unique id).
        let written = match MediaDir::existing(&dest).await {
            Some(size) => size,
            None => self.download(bot, &remote.path, &dest).await?,
        };
        Ok(Fetched::Saved(Attachment {
            kind: file.kind,
            path: self.media.relative(&dest),
            mime: file.mime.clone(),
            name: Some(file.name.clone()),
            size: written,
        }))
    }

    async fn download(&self, bot: &Bot, remote_path: &str, dest: &Path) -> Result<u64, String> {
        let partial = MediaDir::partial(dest);
        let file = tokio::fs::File::create(&partial).await.map_err(|e| format!("create {}: {e}", partial.display()))?;
        let mut writer = CappedWriter::new(file, self.media.max_bytes());
        let outcome = bot.download_file(remote_path, &mut writer).await;
        let finished = match outcome {
            Ok(()) => tokio::io::AsyncWriteExt::flush(&mut writer).await.map_err(|e| format!("write: {e}")),
            Err(error) => Err(format!("download: {error}")),
        };
        if let Err(error) = finished {
            MediaDir::abandon(&partial).await;
            return Err(error);
        }
        MediaDir::complete(&partial, dest).await?;
        Ok(writer.written())
    }
}
