//! The fake's external upload flow, as Slack runs it: `files.getUploadURLExternal` (filename,
//! length) answers an upload URL and a file id; the bytes are POSTed to that URL (answered
//! `OK - <n>` as text, like Slack); `files.completeUploadExternal` shares uploaded files into a
//! channel (and thread) with an optional `initial_comment`. A file whose bytes never arrived, or
//! whose length differs from the one announced, is refused.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{FakeSlack, Shared, Store, ok, slack_error};

/// A file announced by `files.getUploadURLExternal`.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    file_id: String,
    filename: String,
    length: usize,
    bytes: Option<Vec<u8>>,
}

/// A file shared into a chat by `files.completeUploadExternal`.
#[derive(Debug, Clone)]
pub struct SharedFile {
    /// The file id.
    pub file_id: String,
    /// Where.
    pub channel: String,
    /// The thread, if any.
    pub thread_ts: Option<String>,
    /// The name given to `getUploadURLExternal`.
    pub filename: String,
    /// The bytes uploaded.
    pub bytes: Vec<u8>,
    /// The comment shared with it.
    pub initial_comment: Option<String>,
    /// When it was shared.
    pub at: std::time::Instant,
}

/// `files.getUploadURLExternal`.
pub(crate) fn get_upload_url(store: &mut Store, base: &str, args: &Value) -> Response {
    let filename = args["filename"].as_str().unwrap_or_default().to_owned();
    let length =
        args["length"].as_str().and_then(|l| l.parse().ok()).or_else(|| args["length"].as_u64().map(|l| l as usize));
    let Some(length) = length.filter(|&l| l > 0) else { return slack_error("invalid_arguments") };
    if filename.is_empty() {
        return slack_error("invalid_arguments");
    }
    let file_id = format!("F{:06}", store.uploads_pending.len() + 1);
    store.uploads_pending.push(Pending { file_id: file_id.clone(), filename, length, bytes: None });
    ok(json!({ "upload_url": format!("{base}/upload/{file_id}"), "file_id": file_id }))
}

/// The upload URL: stores the bytes for the file id.
pub(crate) async fn receive(State(shared): State<Arc<Shared>>, Path(file_id): Path<String>, body: Bytes) -> Response {
    let mut store = shared.lock();
    match store.uploads_pending.iter_mut().find(|p| p.file_id == file_id) {
        Some(pending) => {
            pending.bytes = Some(body.to_vec());
            (StatusCode::OK, [("content-type", "text/plain")], format!("OK - {}", body.len())).into_response()
        }
        None => (StatusCode::NOT_FOUND, "no such upload").into_response(),
    }
}

/// `files.completeUploadExternal`.
pub(crate) fn complete(store: &mut Store, args: &Value) -> Response {
    // JSON bodies carry an array; form bodies a JSON string.
    let files = match &args["files"] {
        Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        other => other.clone(),
    };
    let Some(files) = files.as_array().filter(|f| !f.is_empty()) else { return slack_error("invalid_arguments") };
    let channel = args["channel_id"].as_str().or_else(|| args["channels"].as_str()).unwrap_or_default().to_owned();
    let mut shared = Vec::new();
    let mut answer = Vec::new();
    for file in files {
        let id = file["id"].as_str().unwrap_or_default();
        let Some(pending) = store.uploads_pending.iter().find(|p| p.file_id == id) else {
            return slack_error("file_not_found");
        };
        let Some(bytes) = pending.bytes.clone().filter(|b| b.len() == pending.length) else {
            return slack_error("file_upload_size_mismatch");
        };
        answer.push(json!({ "id": id, "name": pending.filename, "title": file["title"] }));
        shared.push(SharedFile {
            file_id: id.to_owned(),
            channel: channel.clone(),
            thread_ts: args["thread_ts"].as_str().map(str::to_owned),
            filename: pending.filename.clone(),
            bytes,
            initial_comment: args["initial_comment"].as_str().map(str::to_owned),
            at: std::time::Instant::now(),
        });
    }
    store.uploads_shared.extend(shared);
    ok(json!({ "files": answer }))
}

impl FakeSlack {
    /// Files shared into chats, in order.
    pub fn shared_files(&self) -> Vec<SharedFile> {
        self.shared.lock().uploads_shared.clone()
    }
}
