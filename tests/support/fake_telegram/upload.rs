//! The fake Bot API's file uploads: `sendDocument` and `sendPhoto` as multipart/form-data (the
//! file in the `document` or `photo` part with a filename, the other fields as text parts),
//! answered with a real `Message` carrying a `document` or `photo`. Uploads can be held (the
//! request is read and counted, then left unanswered until released) to crash a daemon between
//! storing a file message and its receipt.

use std::sync::Arc;
use std::time::Instant;

use axum::http::HeaderMap;
use serde_json::json;

use super::multipart::parse_multipart;
use super::{Answer, FakeTelegram, Shared, chat_id_of, error, next_message_id, now};

/// A file the daemon uploaded and the fake accepted.
#[derive(Debug, Clone)]
pub struct Upload {
    /// When it arrived.
    pub at: Instant,
    /// `senddocument` or `sendphoto`.
    pub method: String,
    /// The chat.
    pub chat_id: i64,
    /// The message id given to it.
    pub message_id: i64,
    /// The file name the daemon gave.
    pub file_name: String,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The caption, if any.
    pub caption: Option<String>,
}

/// Handle `sendDocument` / `sendPhoto`.
pub(super) async fn send_file(shared: &Arc<Shared>, method: &str, headers: &HeaderMap, raw: &[u8]) -> Answer {
    let Some(parts) = parse_multipart(headers, raw) else {
        return Err(error(400, "Bad Request: there is no file in the request"));
    };
    let field = if method == "sendphoto" { "photo" } else { "document" };
    // The file is the `document`/`photo` part itself, or the part that field names as
    // `attach://<name>` (how teloxide sends it).
    let attached = parts
        .iter()
        .find(|p| p.name == field && p.filename.is_none())
        .and_then(|p| String::from_utf8_lossy(&p.data).strip_prefix("attach://").map(str::to_owned));
    let wanted = attached.as_deref().unwrap_or(field);
    let Some(file) = parts.iter().find(|p| p.name == wanted && p.filename.is_some()) else {
        return Err(error(400, &format!("Bad Request: there is no {field} in the request")));
    };
    let text =
        |name: &str| parts.iter().find(|p| p.name == name).map(|p| String::from_utf8_lossy(&p.data).into_owned());
    let chat_id = chat_id_of(&json!({"chat_id": text("chat_id").unwrap_or_default()}));
    let hold = {
        let mut store = shared.lock();
        store.upload_requests += 1;
        store.hold_uploads
    };
    if hold {
        // Held until released; a daemon killed meanwhile never gets an answer.
        loop {
            let released = shared.uploads_released.notified();
            if !shared.lock().hold_uploads {
                break;
            }
            released.await;
        }
        if shared.lock().drop_held_uploads {
            // Its sender is gone (killed): nothing was delivered.
            return Err(error(500, "Internal Server Error: the request was dropped"));
        }
    }
    let at = Instant::now();
    let mut store = shared.lock();
    let Some(chat_id) = chat_id else { return Err(error(400, "Bad Request: chat_id is empty")) };
    let Some(chat) = store.chats.get(&chat_id).cloned() else { return Err(error(400, "Bad Request: chat not found")) };
    let message_id = next_message_id(&mut store, chat_id);
    let file_name = file.filename.clone().unwrap_or_default();
    let file_id = format!("out-{chat_id}-{message_id}");
    let mut message = json!({"message_id": message_id, "from": shared.bot, "chat": chat, "date": now()});
    if method == "sendphoto" {
        message["photo"] = json!([{"file_id": file_id, "file_unique_id": format!("u{file_id}"),
            "width": 640, "height": 480, "file_size": file.data.len()}]);
    } else {
        message["document"] = json!({"file_id": file_id, "file_unique_id": format!("u{file_id}"),
            "file_name": file_name, "file_size": file.data.len()});
    }
    let caption = text("caption");
    if let Some(caption) = &caption {
        message["caption"] = json!(caption);
    }
    store.messages.insert((chat_id, message_id), (message.clone(), caption.clone().unwrap_or_default()));
    store.uploads.push(Upload {
        at,
        method: method.to_owned(),
        chat_id,
        message_id,
        file_name,
        bytes: file.data.clone(),
        caption,
    });
    Ok(message)
}

impl FakeTelegram {
    /// Files uploaded and answered, in order.
    pub fn uploads(&self) -> Vec<Upload> {
        self.shared.lock().uploads.clone()
    }

    /// Upload requests received, answered or not.
    pub fn upload_requests(&self) -> usize {
        self.shared.lock().upload_requests
    }

    /// Leave upload requests unanswered until `release_uploads`.
    pub fn hold_uploads(&self) {
        self.shared.lock().hold_uploads = true;
    }

    /// End held upload requests unanswered and unrecorded (their sender was killed); later
    /// uploads are answered.
    pub fn drop_held_uploads(&self) {
        let mut store = self.shared.lock();
        store.drop_held_uploads = true;
        store.hold_uploads = false;
        drop(store);
        self.shared.uploads_released.notify_waiters();
    }

    /// Answer held upload requests (and later ones) again.
    pub fn release_uploads(&self) {
        self.shared.lock().hold_uploads = false;
        self.shared.uploads_released.notify_waiters();
    }
}
