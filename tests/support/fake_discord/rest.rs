//! The fake's REST API: Discord's routes under `/api/v10`, the bot token checked on each, answers
//! shaped like Discord's (snowflakes as strings, `{code, message}` errors, 429 with `retry_after`).

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{Edit, Sent, Shared, Store};
use crate::support::fake_discord::OpenedThread;

/// Discord's message length limit, in characters.
pub const MAX_CONTENT: usize = 2000;

pub(super) fn answer(status: u16, body: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if body.is_null() { status.into_response() } else { (status, axum::Json(body)).into_response() }
}

pub(super) fn error(status: u16, code: u64, message: &str) -> Response {
    answer(status, json!({ "code": code, "message": message }))
}

fn id(text: &str) -> u64 {
    text.parse().unwrap_or(0)
}

/// Every `/api/v10/...` call.
pub async fn api(
    State(shared): State<Arc<Shared>>,
    method: Method,
    Path(path): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let multipart = crate::support::fake_telegram::multipart::parse_multipart(&headers, &body);
    let body: Value = match &multipart {
        Some(parts) => parts
            .iter()
            .find(|p| p.name == "payload_json")
            .and_then(|p| serde_json::from_slice(&p.data).ok())
            .unwrap_or(Value::Null),
        None => serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let mut store = shared.lock();
    store.calls.push(format!("{method} /{path}"));
    let authorised =
        headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bot {}", shared.token));
    let segments: Vec<&str> = path.split('/').collect();
    let interaction_callback = matches!(segments.as_slice(), ["interactions", _, _, "callback"]);
    if !authorised && !interaction_callback {
        return error(401, 0, "401: Unauthorized");
    }
    let operation = match (&method, segments.as_slice()) {
        (&Method::POST, ["channels", _, "messages"]) => "create_message",
        (&Method::PATCH, ["channels", _, "messages", _]) => "edit_message",
        (&Method::POST, ["channels", _, "typing"]) => "typing",
        (&Method::POST, ["channels", _, "messages", _, "threads"]) => "start_thread",
        (&Method::GET, ["channels", _]) => "channel",
        _ => "other",
    };
    if let Some((status, canned)) = store.failures.get_mut(operation).and_then(|queue| queue.pop_front()) {
        return answer(status, canned);
    }
    match (&method, segments.as_slice()) {
        (&Method::GET, ["gateway"]) => {
            let url = shared.base().replacen("http://", "ws://", 1);
            answer(200, json!({ "url": format!("{url}/gateway") }))
        }
        (&Method::GET, ["users", "@me"]) => answer(200, shared.bot.json()),
        (&Method::GET, ["channels", channel]) => match store.channels.get(&id(channel)) {
            Some(channel) => answer(200, channel.json()),
            None => error(404, 10003, "Unknown Channel"),
        },
        (&Method::GET, ["guilds", guild, "members", user]) => {
            let known =
                if id(user) == shared.bot.id { Some(shared.bot.clone()) } else { store.users.get(&id(user)).cloned() };
            match known {
                Some(known) => {
                    let mut member = known.member();
                    member["user"] = known.json();
                    member["guild_id"] = json!(guild);
                    answer(200, member)
                }
                None => error(404, 10007, "Unknown Member"),
            }
        }
        (&Method::GET, ["channels", channel, "messages"]) => {
            let after = query_value(query.as_deref(), "after").map_or(0, |a| id(&a));
            let limit = query_value(query.as_deref(), "limit").map_or(50, |l| l.parse().unwrap_or(50));
            let mut found: Vec<Value> = store
                .messages
                .values()
                .filter(|m| m["channel_id"].as_str() == Some(*channel) && m["id"].as_str().map_or(0, id) > after)
                .cloned()
                .collect();
            // Newest first, as Discord answers; REST messages carry neither guild nor member.
            found.sort_by_key(|m| std::cmp::Reverse(m["id"].as_str().map_or(0, id)));
            found.truncate(limit);
            for message in &mut found {
                if let Some(object) = message.as_object_mut() {
                    object.remove("guild_id");
                    object.remove("member");
                }
            }
            answer(200, Value::Array(found))
        }
        (&Method::POST, ["channels", channel, "messages"]) => match &multipart {
            Some(parts) => super::upload::create_with_files(&shared, &mut store, id(channel), &body, parts),
            None => create_message(&shared, &mut store, id(channel), &body),
        },
        (&Method::PATCH, ["channels", channel, "messages", message]) => {
            let content = body["content"].as_str().unwrap_or_default().to_owned();
            if content.chars().count() > MAX_CONTENT {
                return error(400, 50035, "Invalid Form Body");
            }
            store.edits.push(Edit {
                channel: id(channel),
                message: id(message),
                content,
                allowed_mentions: body["allowed_mentions"].clone(),
                at: Instant::now(),
            });
            match store.messages.get(&id(message)) {
                Some(message) => answer(200, message.clone()),
                None => error(404, 10008, "Unknown Message"),
            }
        }
        (&Method::POST, ["channels", channel, "typing"]) => {
            store.typing.push(id(channel));
            answer(204, Value::Null)
        }
        (&Method::POST, ["channels", channel, "messages", message, "threads"]) => {
            start_thread(&shared, &mut store, id(channel), id(message), &body)
        }
        (&Method::PUT, ["channels", channel, "messages", message, "reactions", emoji, "@me"]) => {
            let emoji = percent_decode(emoji);
            store.reactions.push((id(channel), id(message), emoji));
            answer(204, Value::Null)
        }
        (&Method::POST, ["interactions", interaction, _token, "callback"]) => {
            store.callbacks.push((id(interaction), body));
            answer(204, Value::Null)
        }
        _ => error(404, 0, "404: Not Found"),
    }
}

/// How long Discord holds a nonce for `enforce_nonce` ("the past few minutes").
const NONCE_WINDOW: std::time::Duration = std::time::Duration::from_secs(120);

fn create_message(shared: &Shared, store: &mut Store, channel: u64, body: &Value) -> Response {
    if !store.channels.contains_key(&channel) {
        return error(404, 10003, "Unknown Channel");
    }
    let content = body["content"].as_str().unwrap_or_default().to_owned();
    if content.is_empty() || content.chars().count() > MAX_CONTENT {
        return error(400, 50035, "Invalid Form Body: content must be 1-2000 characters");
    }
    // As Discord does: with `enforce_nonce`, a nonce the bot used in the past few minutes
    // returns the message it created then, and creates nothing.
    let nonce = body["nonce"].as_str().map(str::to_owned);
    if let Some(nonce) = &nonce {
        store.nonces.push(nonce.clone());
    }
    if body["enforce_nonce"] == true
        && let Some(nonce) = &nonce
        && let Some((existing, at)) = store.created_by_nonce.get(nonce)
        && at.elapsed() < NONCE_WINDOW
        && let Some(message) = store.messages.get(existing)
    {
        return answer(200, message.clone());
    }
    let reference = body["message_reference"]["message_id"].as_str().map(id);
    let message_id = store.id();
    if let Some(nonce) = &nonce {
        store.created_by_nonce.insert(nonce.clone(), (message_id, Instant::now()));
    }
    let mut message = json!({ "id": message_id.to_string(), "channel_id": channel.to_string(),
        "author": shared.bot.json(), "content": content, "timestamp": chrono::Utc::now().to_rfc3339(),
        "edited_timestamp": null, "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [],
        "attachments": [], "embeds": [], "pinned": false, "type": if reference.is_some() { 19 } else { 0 },
        "components": body["components"].clone() });
    if let Some(guild) = store.channels.get(&channel).and_then(|c| c.guild_id) {
        message["guild_id"] = json!(guild.to_string());
    }
    store.messages.insert(message_id, message.clone());
    // Discord dispatches the bot's own messages too; the adapter must ignore them.
    store.dispatch("MESSAGE_CREATE", message.clone());
    store.sent.push(Sent {
        channel,
        id: message_id,
        content,
        reference,
        components: body["components"].clone(),
        allowed_mentions: body["allowed_mentions"].clone(),
        at: Instant::now(),
    });
    answer(200, message)
}

fn start_thread(shared: &Shared, store: &mut Store, channel: u64, message: u64, body: &Value) -> Response {
    let Some(parent) = store.channels.get(&channel).cloned() else { return error(404, 10003, "Unknown Channel") };
    if !store.messages.contains_key(&message) {
        return error(404, 10008, "Unknown Message");
    }
    // As on Discord, a thread opened on a message takes the message's id, once.
    if store.channels.contains_key(&message) {
        return error(400, 160_004, "A thread has already been created for this message");
    }
    let thread = super::Channel::thread(&parent, message, shared.bot.id);
    store.channels.insert(message, thread.clone());
    let name = body["name"].as_str().unwrap_or_default().to_owned();
    store.threads.push(OpenedThread { channel, message, name });
    answer(201, thread.json())
}

/// A file attached to an incoming message.
pub async fn attachment(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    let mut store = shared.lock();
    store.calls.push(format!("GET /attachments/{name}"));
    match store.files.get(&name) {
        Some(bytes) => (StatusCode::OK, bytes.clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

fn query_value(query: Option<&str>, key: &str) -> Option<String> {
    query?.split('&').filter_map(|pair| pair.split_once('=')).find(|(k, _)| *k == key).map(|(_, v)| v.to_owned())
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
