//! Images for the model: the type sniffed from the bytes (never trusted from a file name or a
//! platform), a size cap, and the `data:` URL built only for the call that sends it.

use std::path::Path;
use std::sync::Arc;

use base64::Engine;

/// Largest image sent to a model (Anthropic's per-image limit; OpenAI's is higher). Larger
/// images are named by path instead; downscaling is left to the model's own file tools.
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;

/// The image types every vision API takes, by their magic bytes.
pub fn sniff(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// Why an image cannot be sent.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// Over `MAX_IMAGE_BYTES`.
    #[error("the image is {0} bytes, over the {MAX_IMAGE_BYTES}-byte limit for models")]
    TooLarge(u64),
    /// Not PNG, JPEG, GIF or WebP.
    #[error("not an image type models take (PNG, JPEG, GIF, WebP)")]
    Unsupported,
    /// The file cannot be read.
    #[error("cannot read the image: {0}")]
    Read(#[from] std::io::Error),
}

/// The type of the image at `file`, read from its first bytes, and its size; checks the cap.
pub async fn probe(file: &Path) -> Result<(&'static str, u64), ImageError> {
    use tokio::io::AsyncReadExt;
    let mut handle = tokio::fs::File::open(file).await?;
    let size = handle.metadata().await?.len();
    let mut head = [0u8; 16];
    let mut read = 0;
    while read < head.len() {
        let n = handle.read(&mut head[read..]).await?;
        if n == 0 {
            break;
        }
        read += n;
    }
    let mime = sniff(&head[..read]).ok_or(ImageError::Unsupported)?;
    if size > MAX_IMAGE_BYTES {
        return Err(ImageError::TooLarge(size));
    }
    Ok((mime, size))
}

/// The `data:` URL of the image at `file` (type sniffed, size capped).
pub async fn data_url(file: &Path) -> Result<Arc<str>, ImageError> {
    let (_, size) = probe(file).await?;
    let bytes = tokio::fs::read(file).await?;
    // The file may have grown since the probe.
    if bytes.len() as u64 > MAX_IMAGE_BYTES {
        return Err(ImageError::TooLarge(size.max(bytes.len() as u64)));
    }
    let mime = sniff(&bytes).ok_or(ImageError::Unsupported)?;
    let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(Arc::from(format!("data:{mime};base64,{encoded}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_come_from_the_bytes() {
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
        assert_eq!(sniff(b"\xff\xd8\xff\xe0"), Some("image/jpeg"));
        assert_eq!(sniff(b"GIF89a"), Some("image/gif"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff(b"%PDF-1.7"), None);
        assert_eq!(sniff(b""), None);
    }

    #[tokio::test]
    async fn data_urls_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("a.png");
        std::fs::write(&small, b"\x89PNG\r\n\x1a\nabc").unwrap();
        assert_eq!(&*data_url(&small).await.unwrap(), "data:image/png;base64,iVBORw0KGgphYmM=");
        let big = dir.path().join("b.png");
        let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
        bytes.resize(usize::try_from(MAX_IMAGE_BYTES).unwrap() + 1, 0);
        std::fs::write(&big, bytes).unwrap();
        assert!(matches!(data_url(&big).await, Err(ImageError::TooLarge(_))));
        let text = dir.path().join("c.png");
        std::fs::write(&text, b"hello").unwrap();
        assert!(matches!(data_url(&text).await, Err(ImageError::Unsupported)));
    }
}
