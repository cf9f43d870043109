//! `GET /v1/files/{id}/{name}`: a file the agent sent to an API client, served from the copy in
//! `media/outbound/` under the API key (the API delivers files as links,
//! `platforms::api::file_link`). It must never serve anything but such a copy: the id is a bare hex
//! id and the name a plain file name. A copy is streamed from disk in pieces of [`PIECE`] bytes (64
//! KiB) with its `Content-Length`, never read whole into memory: files run to tens of megabytes and
//! several clients may download at once.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use tokio_util::io::ReaderStream;

use super::AppState;
use super::api::{authorized, error};
use crate::agent::tools::send_file::stage::{OUTBOUND_DIR, mime_of};
use crate::platforms::api::is_file_link as valid;

/// The most of a file held in memory per download at a time.
const PIECE: usize = 64 * 1024;

pub(super) async fn download(
    State(state): State<AppState>,
    Path((id, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&state, &headers) {
        return error(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "invalid_api_key",
            "invalid or missing API key",
        );
    }
    let missing = || error(StatusCode::NOT_FOUND, "invalid_request_error", "not_found", "no such file");
    let Some(data_dir) = state.outbox.data_dir().filter(|_| valid(&id, &name)) else { return missing() };
    serve(&data_dir.join(OUTBOUND_DIR).join(&id).join(&name), &name).await.unwrap_or_else(missing)
}

/// The stored copy at `path` as a download named `name`; `None` when there is no such file.
async fn serve(path: &std::path::Path, name: &str) -> Option<Response> {
    let file = tokio::fs::File::open(path).await.ok()?;
    // The length comes from the opened file, so it is the length of what is streamed.
    let meta = file.metadata().await.ok().filter(std::fs::Metadata::is_file)?;
    let (mime, _) = mime_of(name);
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{name}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(mime)),
        (header::CONTENT_DISPOSITION, disposition),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (header::CONTENT_LENGTH, HeaderValue::from(meta.len())),
    ];
    Some((headers, Body::from_stream(ReaderStream::with_capacity(file, PIECE))).into_response())
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    #[tokio::test]
    async fn a_copy_is_streamed_in_pieces_with_its_length() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("big.bin");
        let data: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).expect("write");
        let response = serve(&path, "big.bin").await.expect("served");
        assert_eq!(response.headers()[header::CONTENT_LENGTH], data.len().to_string().as_str());
        let mut pieces = response.into_body().into_data_stream();
        let mut received = Vec::new();
        let mut largest = 0;
        while let Some(piece) = pieces.next().await {
            let piece = piece.expect("piece");
            largest = largest.max(piece.len());
            received.extend_from_slice(&piece);
        }
        assert_eq!(received, data);
        // Never the whole file in memory at once: pieces of at most the stream's buffer.
        assert!(largest <= PIECE, "a piece of {largest} bytes");
    }

    #[tokio::test]
    async fn only_regular_files_are_served() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(serve(&dir.path().join("absent.txt"), "absent.txt").await.is_none());
        std::fs::create_dir(dir.path().join("folder")).expect("mkdir");
        assert!(serve(&dir.path().join("folder"), "folder").await.is_none());
    }
}
