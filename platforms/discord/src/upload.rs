//! Files to Discord: one attachment per message, sent as multipart with the file in `files[0]`
//! and the message JSON in `payload_json` (which names the attachment), with the same reply
//! reference and users-only `allowed_mentions` as text. At most 10 MiB per file.

use hermesd_platform::{FileLimits, OutboundFile, OutboundMessage, PlatformError};
use serde_json::{Value, json};

use crate::outbound::message_body;

/// What Discord takes from a bot in a server without boosts: 10 MiB per file. Images are
/// attachments like any file (Discord shows them inline).
pub(crate) const LIMITS: FileLimits =
    FileLimits { max_document_bytes: 10 * 1024 * 1024, max_photo_bytes: 10 * 1024 * 1024 };

/// The `payload_json` of a message carrying `file` as attachment 0, captioned by its text.
pub(crate) fn payload(
    message: &OutboundMessage,
    reference: Option<u64>,
    file: &OutboundFile,
) -> Result<Value, PlatformError> {
    let mut body = message_body(message, reference)?;
    if message.text.trim().is_empty()
        && let Some(object) = body.as_object_mut()
    {
        object.remove("content");
    }
    body["attachments"] = json!([{ "id": 0, "filename": file.name }]);
    Ok(body)
}

#[cfg(test)]
mod tests {
    use hermesd_platform::{AttachmentKind, ChatRef, ChatType, OutboundKind};

    use super::*;

    #[test]
    fn the_payload_names_the_attachment_and_keeps_mentions_safe() {
        let file = OutboundFile {
            path: "media/outbound/x/chart.png".into(),
            name: "chart.png".into(),
            mime: "image/png".into(),
            kind: AttachmentKind::Image,
            size: 3,
        };
        let mut message = OutboundMessage {
            chat: ChatRef::new("discord", "5", ChatType::Dm),
            text: String::new(),
            reply_to: None,
            kind: OutboundKind::Reply,
            buttons: Vec::new(),
            chunk: (0, 1),
            file: Some(file.clone()),
        };
        let body = payload(&message, Some(9), &file).unwrap();
        assert_eq!(body["attachments"], json!([{ "id": 0, "filename": "chart.png" }]));
        assert!(body.get("content").is_none(), "{body}");
        assert_eq!(body["message_reference"]["message_id"], "9");
        assert_eq!(body["allowed_mentions"]["parse"], json!(["users"]));
        message.text = "the chart".into();
        assert_eq!(payload(&message, None, &file).unwrap()["content"], "the chart");
    }
}
