//! Image parts of `/v1/chat/completions` content. An `image_url` part with a base64 `data:` URL
//! is saved under `media/api/<chat>/` and becomes an attachment of the message, like a photo
//! sent on a chat platform. Remote URLs are refused (hermesd does not fetch on a client's
//! behalf), as are parts that are not PNG, JPEG, GIF or WebP, or are over the image cap —
//! each with a clear 400, never silently dropped.

use base64::Engine;
use hermesd_platform::media::MediaDir;
use hermesd_platform::{Attachment, AttachmentKind};
use serde_json::Value;

use crate::agent::media::image::{MAX_IMAGE_BYTES, sniff};

/// Why an image part was refused.
#[derive(Debug, thiserror::Error)]
pub(super) enum ImagePartError {
    /// An http(s) or other non-`data:` URL.
    #[error("image part {0}: only base64 data: URLs are accepted (hermesd does not fetch remote images)")]
    Remote(usize),
    /// Not `data:<type>;base64,<data>`, or bad base64.
    #[error("image part {0}: not a valid base64 data: URL")]
    Malformed(usize),
    /// The bytes are not an image type models take.
    #[error("image part {0}: not a PNG, JPEG, GIF or WebP image")]
    NotImage(usize),
    /// Over the cap.
    #[error("image part {0}: larger than the {MAX_IMAGE_BYTES}-byte limit")]
    TooLarge(usize),
    /// The file could not be saved.
    #[error("image part {0}: could not be stored")]
    Save(usize),
}

/// The URLs of the `image_url` parts of a message's content (the string or `{url}` forms).
fn image_urls(content: &Value) -> Vec<Option<&str>> {
    let Value::Array(parts) = content else { return Vec::new() };
    parts
        .iter()
        .filter(|p| p["type"] == "image_url")
        .map(|p| p["image_url"]["url"].as_str().or_else(|| p["image_url"].as_str()))
        .collect()
}

/// Whether the content holds image parts.
pub(super) fn has_images(content: &Value) -> bool {
    !image_urls(content).is_empty()
}

/// Decode every image part first (so nothing is saved for a request that is refused), then
/// save each as `<request id>_<n>.<ext>` in the chat's media folder.
pub(super) async fn save_images(
    content: &Value,
    media: &MediaDir,
    chat_id: &str,
    request_id: &str,
) -> Result<Vec<Attachment>, ImagePartError> {
    let mut decoded = Vec::new();
    for (i, url) in image_urls(content).into_iter().enumerate() {
        let n = i + 1;
        let url = url.ok_or(ImagePartError::Malformed(n))?;
        let Some(rest) = url.strip_prefix("data:") else { return Err(ImagePartError::Remote(n)) };
        let (_, data) = rest.split_once(";base64,").ok_or(ImagePartError::Malformed(n))?;
        // Checked before decoding: base64 holds 3 bytes in every 4 characters.
        if data.len() as u64 / 4 * 3 > MAX_IMAGE_BYTES + 3 {
            return Err(ImagePartError::TooLarge(n));
        }
        let bytes =
            base64::engine::general_purpose::STANDARD.decode(data.trim()).map_err(|_| ImagePartError::Malformed(n))?;
        if bytes.len() as u64 > MAX_IMAGE_BYTES {
            return Err(ImagePartError::TooLarge(n));
        }
        let mime = sniff(&bytes).ok_or(ImagePartError::NotImage(n))?;
        decoded.push((n, mime, bytes));
    }
    let mut attachments = Vec::new();
    for (n, mime, bytes) in decoded {
        let ext = mime.trim_start_matches("image/");
        let name = format!("image{n}.{ext}");
        let dest = media.destination(chat_id, request_id, &name).await.map_err(|_| ImagePartError::Save(n))?;
        let partial = MediaDir::partial(&dest);
        if tokio::fs::write(&partial, &bytes).await.is_err() || MediaDir::complete(&partial, &dest).await.is_err() {
            MediaDir::abandon(&partial).await;
            return Err(ImagePartError::Save(n));
        }
        attachments.push(Attachment {
            kind: AttachmentKind::Image,
            path: media.relative(&dest),
            mime: Some(mime.to_owned()),
            name: Some(name),
            size: bytes.len() as u64,
        });
    }
    Ok(attachments)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\npixels";

    fn part(url: &str) -> Value {
        json!({"type": "image_url", "image_url": {"url": url}})
    }

    #[tokio::test]
    async fn data_urls_are_saved_and_everything_else_refused() {
        let home = tempfile::tempdir().unwrap();
        let media = MediaDir::new(home.path().join("media/api"), MAX_IMAGE_BYTES);
        let png = format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(PNG));
        let content = json!([{"type": "text", "text": "look"}, part(&png)]);
        assert!(has_images(&content) && !has_images(&json!("text")));
        let saved = save_images(&content, &media, "s1", "r1").await.unwrap();
        assert_eq!(saved.len(), 1);
        assert_eq!(saved[0].path, "media/api/s1/r1_image1.png");
        assert_eq!(saved[0].mime.as_deref(), Some("image/png"));
        assert_eq!(std::fs::read(home.path().join(&saved[0].path)).unwrap(), PNG);

        let text = format!("data:text/plain;base64,{}", base64::engine::general_purpose::STANDARD.encode("hi"));
        let big =
            format!("data:image/png;base64,{}", "A".repeat(usize::try_from(MAX_IMAGE_BYTES).unwrap() / 3 * 4 + 16));
        let cases = [
            (part("https://example.com/cat.png"), "only base64 data: URLs"),
            (part("data:image/png;base64,@@@"), "not a valid base64"),
            (part("data:image/png,rawbytes"), "not a valid base64"),
            (part(&text), "not a PNG"),
            (part(&big), "larger than"),
            (json!({"type": "image_url", "image_url": {}}), "not a valid base64"),
        ];
        for (bad, needle) in cases {
            // A good image before the bad one is not saved either.
            let content = json!([part(&png), bad]);
            let err = save_images(&content, &media, "s2", "r2").await.unwrap_err().to_string();
            assert!(err.starts_with("image part 2: ") && err.contains(needle), "{err}");
        }
        assert!(!home.path().join("media/api/s2").exists(), "nothing saved for refused requests");
    }
}
