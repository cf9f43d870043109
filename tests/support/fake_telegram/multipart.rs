//! multipart/form-data bodies as the fakes receive them (binary-safe): Telegram's file uploads,
//! and Discord's (the fake Discord borrows this parser).

use axum::http::HeaderMap;

/// One part of a multipart body.
#[derive(Debug, Clone)]
pub struct Part {
    /// The form field name.
    pub name: String,
    /// The file name, for file parts.
    pub filename: Option<String>,
    /// The part's bytes.
    pub data: Vec<u8>,
}

/// Split a multipart/form-data body into its parts (binary-safe).
pub fn parse_multipart(headers: &HeaderMap, body: &[u8]) -> Option<Vec<Part>> {
    let content_type = headers.get("content-type")?.to_str().ok()?;
    let boundary = content_type.split("boundary=").nth(1)?.trim_matches('"');
    let delimiter = format!("--{boundary}").into_bytes();
    let mut parts = Vec::new();
    let mut rest = body;
    while let Some(start) = find(rest, &delimiter) {
        rest = &rest[start + delimiter.len()..];
        if rest.starts_with(b"--") {
            break;
        }
        let rest_body = rest.strip_prefix(b"\r\n").unwrap_or(rest);
        let end = find(rest_body, &delimiter).unwrap_or(rest_body.len());
        let part = &rest_body[..end];
        let head_end = find(part, b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&part[..head_end]);
        let mut data = &part[head_end + 4..];
        data = data.strip_suffix(b"\r\n").unwrap_or(data);
        let field =
            |key: &str| head.split(&format!("{key}=\"")).nth(1).and_then(|r| r.split('"').next()).map(str::to_owned);
        parts.push(Part {
            name: field(" name").or_else(|| field("name"))?,
            filename: field("filename"),
            data: data.to_vec(),
        });
        rest = rest_body;
    }
    Some(parts)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
