//! Fetches a message's attachments with JSON-RPC `getAttachment` (base64 in the answer, never
//! signal-cli's own files) into the media dir, under the size cap, after the sender was admitted.
//!
//! A file that cannot be fetched never drops its message: the text says what is missing instead.
//!
//! The file is capped by `max_file_mb`, and the JSON-RPC answer carrying it by the base64 size of
//! that cap.

use base64::Engine;
use hermesd_platform::media::{self, Fetched, MediaDir};
use hermesd_platform::{Attachment, InboundEvent};
use serde_json::{Value, json};

use crate::inbound::{FileRequest, Normalised};
use crate::rpc::Rpc;

/// Where attachments go and how large they may be.
#[derive(Debug, Clone)]
pub(crate) struct MediaStore {
    media: MediaDir,
}

impl MediaStore {
    pub(crate) fn new(media: MediaDir) -> Self {
        Self { media }
    }

    /// Fetches every file of `normalised` into its message's attachments, noting failures and
    /// oversized files in the message text.
    pub(crate) async fn fetch_all(&self, rpc: &Rpc, timeout: std::time::Duration, normalised: &mut Normalised) {
        let params = match &normalised.group_id {
            Some(group) => json!({"groupId": group}),
            None => json!({"recipient": normalised.author}),
        };
        let InboundEvent::Message { message, .. } = &mut normalised.event else { return };
        let chat = message.chat.chat_id.clone();
        for file in std::mem::take(&mut normalised.files) {
            let outcome = self.fetch(rpc, timeout, &params, &chat, &file).await;
            media::record(message, &file.name, outcome, crate::NAME);
        }
    }

    async fn fetch(
        &self,
        rpc: &Rpc,
        timeout: std::time::Duration,
        params: &Value,
        chat: &str,
        file: &FileRequest,
    ) -> Result<Fetched, String> {
        let max = self.media.max_bytes();
        if let Some(size) = file.size.filter(|&size| size > max) {
            return Ok(Fetched::TooLarge(size));
        }
        let dest = self.media.destination(chat, &file.id, &file.name).await?;
        // A redelivered message finds its file already saved (the name holds signal-cli's id).
        if let Some(size) = MediaDir::existing(&dest).await {
            return Ok(Fetched::Saved(self.attachment(file, &dest, size)));
        }
        let mut params = params.clone();
        params["id"] = json!(file.id);
        // Base64 is 4/3 of the bytes; the rest is the JSON around it.
        let cap = usize::try_from(max.saturating_mul(4) / 3 + 4096).unwrap_or(usize::MAX);
        let answer = match rpc.call_capped("getAttachment", params, timeout, cap).await {
            Ok(answer) => answer,
            Err(crate::rpc::RpcError::Decode { detail, .. }) if detail.starts_with("answer larger") => {
                return Ok(Fetched::TooLarge(file.size.unwrap_or(max + 1)));
            }
            Err(error) => return Err(error.to_string()),
        };
        let encoded = answer.get("data").and_then(Value::as_str).ok_or("getAttachment: no data in the answer")?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| format!("getAttachment: bad base64: {e}"))?;
        let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if size > max {
            return Ok(Fetched::TooLarge(size));
        }
        let partial = MediaDir::partial(&dest);
        if let Err(error) = tokio::fs::write(&partial, &bytes).await {
            MediaDir::abandon(&partial).await;
            return Err(format!("write {}: {error}", partial.display()));
        }
        MediaDir::complete(&partial, &dest).await?;
        Ok(Fetched::Saved(self.attachment(file, &dest, size)))
    }

    fn attachment(&self, file: &FileRequest, dest: &std::path::Path, size: u64) -> Attachment {
        Attachment {
            kind: file.kind,
            path: self.media.relative(dest),
            mime: file.mime.clone(),
            name: Some(file.name.clone()),
            size,
        }
    }
}
