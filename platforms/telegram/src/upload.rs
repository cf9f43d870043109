//! Files to Telegram: `sendPhoto` for pictures Telegram shows as photos (JPEG, PNG, WebP up to
//! 10 MB), `sendDocument` for everything else and for a photo Telegram refuses; multipart uploads
//! built by teloxide, documents up to 50 MB. The caption goes as HTML, as plain text if Telegram
//! cannot parse it.

use hermesd_platform::{FileLimits, MessageRef, OutboundFile, OutboundMessage, PlatformError, Redactor};
use teloxide::payloads::{SendDocumentSetters, SendPhotoSetters};
use teloxide::prelude::*;
use teloxide::types::{InputFile, ParseMode, ReplyParameters};
use teloxide::{ApiError, RequestError};

use crate::format::markdown_to_html;
use crate::outbound::{map_error, message_id, recipient, thread_id};

/// What the Bot API takes from a bot: 50 MB documents, 10 MB photos.
pub(crate) const LIMITS: FileLimits =
    FileLimits { max_document_bytes: 50 * 1024 * 1024, max_photo_bytes: 10 * 1024 * 1024 };

/// Whether Telegram can show `file` as a photo.
fn as_photo(file: &OutboundFile) -> bool {
    matches!(file.mime.as_str(), "image/jpeg" | "image/png" | "image/webp") && file.size <= LIMITS.max_photo_bytes
}

/// Send `file` (its `bytes`) with `message.text` as the caption.
pub(crate) async fn send_file(
    bot: &Bot,
    redactor: &Redactor,
    message: &OutboundMessage,
    file: &OutboundFile,
    bytes: &[u8],
) -> Result<MessageRef, PlatformError> {
    let context = || format!("send {} to chat {}", file.name, message.chat.chat_id);
    // Checked here so a bad chat id fails as such, not as a refused upload.
    recipient(&message.chat)?;
    let upload = Upload { bot, message, file, bytes };
    let mut sent = if as_photo(file) {
        match upload.send(true).await {
            // Too large in pixels, an odd format: Telegram still takes it as a document.
            Err(RequestError::Api(error)) if !matches!(error, ApiError::InvalidToken) => {
                tracing::debug!(platform = crate::NAME, %error, "photo refused; sending a document");
                upload.send(false).await
            }
            other => other,
        }
    } else {
        upload.send(false).await
    };
    if matches!(sent, Err(RequestError::Api(ApiError::CantParseEntities(_)))) {
        sent = upload.plain().send(as_photo(file)).await;
    }
    let sent = sent.map_err(|error| map_error(&error, &context(), redactor))?;
    Ok(MessageRef { chat: message.chat.clone(), message_id: sent.id.0.to_string() })
}

#[derive(Clone, Copy)]
struct Upload<'a> {
    bot: &'a Bot,
    message: &'a OutboundMessage,
    file: &'a OutboundFile,
    bytes: &'a [u8],
}

/// One upload attempt's caption: HTML, or the raw text.
struct Captioned<'a> {
    upload: Upload<'a>,
    html: bool,
}

impl<'a> Upload<'a> {
    fn plain(self) -> Captioned<'a> {
        Captioned { upload: self, html: false }
    }

    async fn send(self, photo: bool) -> Result<teloxide::types::Message, RequestError> {
        Captioned { upload: self, html: true }.send(photo).await
    }
}

impl Captioned<'_> {
    async fn send(&self, photo: bool) -> Result<teloxide::types::Message, RequestError> {
        let Upload { bot, message, file, bytes } = self.upload;
        let to = recipient(&message.chat).map_err(|e| RequestError::Api(ApiError::Unknown(e.to_string())))?;
        let input = InputFile::memory(bytes.to_vec()).file_name(file.name.clone());
        let thread = thread_id(&message.chat).ok().flatten();
        let reply = message.reply_to.as_deref().and_then(|r| message_id(r).ok());
        let caption = match (message.text.trim().is_empty(), self.html) {
            (true, _) => None,
            (false, true) => Some(markdown_to_html(&message.text)),
            (false, false) => Some(message.text.clone()),
        };
        if photo {
            let mut request = bot.send_photo(to, input);
            if let Some(caption) = caption {
                request = request.caption(caption);
                if self.html {
                    request = request.parse_mode(ParseMode::Html);
                }
            }
            if let Some(thread) = thread {
                request = request.message_thread_id(thread);
            }
            if let Some(reply) = reply {
                request = request.reply_parameters(ReplyParameters::new(reply).allow_sending_without_reply());
            }
            request.await
        } else {
            let mut request = bot.send_document(to, input);
            if let Some(caption) = caption {
                request = request.caption(caption);
                if self.html {
                    request = request.parse_mode(ParseMode::Html);
                }
            }
            if let Some(thread) = thread {
                request = request.message_thread_id(thread);
            }
            if let Some(reply) = reply {
                request = request.reply_parameters(ReplyParameters::new(reply).allow_sending_without_reply());
            }
            request.await
        }
    }
}
