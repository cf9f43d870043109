//! The fake's file uploads: `POST /channels/{id}/messages` as multipart/form-data, the message
//! JSON in `payload_json` and each file in `files[n]`, checked against the payload's
//! `attachments` (id and filename), as Discord checks them.

use std::time::Instant;

use axum::response::Response;
use serde_json::{Value, json};

use super::rest::{MAX_CONTENT, answer, error};
use super::{FakeDiscord, Shared, Store};
use crate::support::fake_telegram::multipart::Part;

/// A message with a file the bot sent.
#[derive(Debug, Clone)]
pub struct Upload {
    /// Where.
    pub channel: u64,
    /// The message id the fake gave it.
    pub id: u64,
    /// The file name.
    pub filename: String,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The caption (`content`), if any.
    pub content: Option<String>,
    /// The message it replies to.
    pub reference: Option<u64>,
    /// Its `allowed_mentions`.
    pub allowed_mentions: Value,
    /// When the fake received it.
    pub at: Instant,
}

/// Create a message with attachments from a multipart request.
pub(super) fn create_with_files(
    shared: &Shared,
    store: &mut Store,
    channel: u64,
    payload: &Value,
    parts: &[Part],
) -> Response {
    if !store.channels.contains_key(&channel) {
        return error(404, 10003, "Unknown Channel");
    }
    let content = payload["content"].as_str().map(str::to_owned);
    if content.as_ref().is_some_and(|c| c.chars().count() > MAX_CONTENT) {
        return error(400, 50035, "Invalid Form Body: content must be at most 2000 characters");
    }
    let declared = payload["attachments"].as_array().cloned().unwrap_or_default();
    let mut files = Vec::new();
    for attachment in &declared {
        let index = attachment["id"].as_u64().or_else(|| attachment["id"].as_str().and_then(|s| s.parse().ok()));
        let part = index.and_then(|i| parts.iter().find(|p| p.name == format!("files[{i}]")));
        match part {
            Some(part) => files.push((attachment["filename"].as_str().unwrap_or_default().to_owned(), part)),
            None => return error(400, 50035, "Invalid Form Body: attachment without a file"),
        }
    }
    if files.is_empty() {
        return error(400, 50006, "Cannot send an empty message");
    }
    let reference = payload["message_reference"]["message_id"].as_str().map(|r| r.parse().unwrap_or(0));
    let message_id = store.id();
    let attachments: Vec<Value> = files
        .iter()
        .map(|(name, part)| {
            json!({"id": store.next_id.to_string(), "filename": name, "size": part.data.len(),
            "url": format!("{}/attachments/out-{message_id}-{name}", shared.base())})
        })
        .collect();
    let mut message = json!({ "id": message_id.to_string(), "channel_id": channel.to_string(),
        "author": shared.bot.json(), "content": content.clone().unwrap_or_default(),
        "timestamp": chrono::Utc::now().to_rfc3339(), "edited_timestamp": null, "tts": false,
        "mention_everyone": false, "mentions": [], "mention_roles": [], "attachments": attachments,
        "embeds": [], "pinned": false, "type": if reference.is_some() { 19 } else { 0 } });
    if let Some(guild) = store.channels.get(&channel).and_then(|c| c.guild_id) {
        message["guild_id"] = json!(guild.to_string());
    }
    store.messages.insert(message_id, message.clone());
    store.dispatch("MESSAGE_CREATE", message.clone());
    for (filename, part) in files {
        store.uploads.push(Upload {
            channel,
            id: message_id,
            filename,
            bytes: part.data.clone(),
            content: content.clone(),
            reference,
            allowed_mentions: payload["allowed_mentions"].clone(),
            at: Instant::now(),
        });
    }
    answer(200, message)
}

impl FakeDiscord {
    /// Files the bot sent, in order.
    pub fn uploads(&self) -> Vec<Upload> {
        self.shared.lock().uploads.clone()
    }
}
