//! `GET /v1/files/{id}/{name}`: a file the agent sent to an API client, served from the copy in
//! `media/outbound/` under the API key (the API delivers files as links). It must never serve
//! anything but such a copy: the id is a bare hex id and the name a plain file name.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::api::{authorized, error};
use crate::agent::tools::send_file::stage::{OUTBOUND_DIR, mime_of, safe_name};

/// The link an API client downloads the stored file `path` (`media/outbound/<id>/<name>`) from.
pub fn link(path: &str) -> Option<String> {
    let rest = path.strip_prefix(OUTBOUND_DIR)?.strip_prefix('/')?;
    let (id, name) = rest.split_once('/')?;
    valid(id, name).then(|| format!("/v1/files/{id}/{name}"))
}

fn valid(id: &str, name: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) && safe_name(name) == name
}

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
    let Ok(bytes) = tokio::fs::read(data_dir.join(OUTBOUND_DIR).join(&id).join(&name)).await else {
        return missing();
    };
    let (mime, _) = mime_of(&name);
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{name}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(mime)),
        (header::CONTENT_DISPOSITION, disposition),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
    ];
    (headers, Body::from(bytes)).into_response()
}
