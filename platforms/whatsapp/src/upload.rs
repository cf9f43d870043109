//! Files the bot sends: the bytes are uploaded to `/{phone-number-id}/media` (multipart), then
//! sent by the returned media id as an image (JPEG or PNG up to 5 MB) or a document (100 MB),
//! with the message text as the caption.

use hermesd_platform::{AttachmentKind, FileLimits, OutboundFile, OutboundMessage, PlatformError};
use serde_json::{Value, json};

use crate::api::Graph;

/// What WhatsApp takes: documents up to 100 MB, images up to 5 MB.
pub(crate) const LIMITS: FileLimits =
    FileLimits { max_document_bytes: 100 * 1024 * 1024, max_photo_bytes: 5 * 1024 * 1024 };

/// A caption is limited like an interactive body.
const MAX_CAPTION: usize = 1024;

/// Uploads `bytes` and returns Graph's media id.
pub(crate) async fn upload(
    graph: &Graph,
    phone_number_id: &str,
    file: &OutboundFile,
    bytes: &[u8],
) -> Result<String, PlatformError> {
    let part = reqwest::multipart::Part::bytes(bytes.to_vec())
        .file_name(file.name.clone())
        .mime_str(&file.mime)
        .map_err(|_| PlatformError::Permanent(format!("file {}: unusable MIME type {:?}", file.name, file.mime)))?;
    let form = reqwest::multipart::Form::new()
        .text("messaging_product", "whatsapp")
        .text("type", file.mime.clone())
        .part("file", part);
    let request =
        graph.http().post(graph.url(&format!("{phone_number_id}/media"))).bearer_auth(graph.token()).multipart(form);
    let answer = graph.execute(request).await?;
    answer["id"]
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| PlatformError::Transient("media upload answered without an id".into()))
}

/// The message payload sending uploaded media `media_id` as `message`'s file.
pub(crate) fn payload(message: &OutboundMessage, file: &OutboundFile, media_id: &str) -> Value {
    let as_image = file.kind == AttachmentKind::Image
        && matches!(file.mime.as_str(), "image/jpeg" | "image/png")
        && file.size <= LIMITS.max_photo_bytes;
    let caption: String = crate::outbound::whatsapp_text(&message.text).chars().take(MAX_CAPTION).collect();
    let mut media = json!({ "id": media_id });
    if !caption.trim().is_empty() {
        media["caption"] = json!(caption);
    }
    let kind = if as_image {
        "image"
    } else {
        media["filename"] = json!(file.name);
        "document"
    };
    let mut body = json!({ "messaging_product": "whatsapp", "recipient_type": "individual", "to": message.chat.chat_id, "type": kind });
    body[kind] = media;
    if let Some(id) = message.reply_to.as_deref().filter(|id| !id.is_empty()) {
        body["context"] = json!({ "message_id": id });
    }
    body
}

#[cfg(test)]
mod tests {
    use hermesd_platform::{ChatRef, ChatType, OutboundKind};

    use super::*;

    #[test]
    fn pictures_go_as_images_and_everything_else_as_documents() {
        let message = OutboundMessage {
            chat: ChatRef::new("whatsapp", "1555", ChatType::Dm),
            text: "the **chart**".into(),
            reply_to: None,
            kind: OutboundKind::Reply,
            buttons: Vec::new(),
            chunk: (0, 1),
            file: None,
        };
        let file = |name: &str, mime: &str, kind, size| OutboundFile {
            path: format!("media/outbound/1/{name}"),
            name: name.into(),
            mime: mime.into(),
            kind,
            size,
        };
        let png = payload(&message, &file("c.png", "image/png", AttachmentKind::Image, 1000), "M1");
        assert_eq!((png["type"].as_str(), png["image"]["id"].as_str()), (Some("image"), Some("M1")));
        assert_eq!(png["image"]["caption"], "the *chart*");
        let webp = payload(&message, &file("c.webp", "image/webp", AttachmentKind::Image, 1000), "M2");
        assert_eq!(webp["type"], "document", "WhatsApp images are JPEG or PNG");
        let big = payload(&message, &file("c.jpg", "image/jpeg", AttachmentKind::Image, 6 * 1024 * 1024), "M3");
        assert_eq!(big["type"], "document");
        let pdf = payload(&message, &file("r.pdf", "application/pdf", AttachmentKind::Document, 10), "M4");
        assert_eq!((pdf["document"]["filename"].as_str(), pdf["document"]["id"].as_str()), (Some("r.pdf"), Some("M4")));
    }
}
