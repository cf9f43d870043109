//! A fake Telegram Bot API on 127.0.0.1:0: `POST /bot{token}/{method}` with JSON bodies (or the
//! multipart form teloxide uses for `setWebhook`; method names matched case-insensitively, as
//! teloxide sends them PascalCase) and `GET /file/bot{token}/{path}`.
//! getUpdates keeps Telegram's offset semantics (an offset confirms and drops every earlier update
//! for good; with nothing pending it long-polls), sent messages get per-chat ids and come back as
//! real `Message` objects, and HTML is checked the way Telegram checks it. Everything the daemon
//! calls is recorded; updates can be queued before the daemon starts.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::Notify;

mod html;
mod model;
pub mod multipart;
pub mod shared;
mod upload;

pub use html::{check_html, visible_text};
pub use model::*;

/// The most UTF-16 units Telegram accepts in a message's visible text.
pub const MAX_TEXT: usize = 4096;

#[derive(Default)]
struct Store {
    next_update_id: i64,
    /// Issued and not yet confirmed, in order.
    pending: VecDeque<Value>,
    confirmed_offset: i64,
    /// Bumped by every getUpdates call: an older call still waiting then ends with 409.
    poll_generation: u64,
    chats: HashMap<i64, Value>,
    next_message_id: HashMap<i64, i64>,
    /// Every message the fake knows, by (chat, id), with the raw text last sent for it.
    messages: HashMap<(i64, i64), (Value, String)>,
    calls: Vec<Call>,
    polls: Vec<Poll>,
    sent: Vec<Sent>,
    edits: Vec<Edit>,
    drafts: Vec<Draft>,
    actions: Vec<Action>,
    callback_answers: Vec<Value>,
    failures: HashMap<String, VecDeque<Value>>,
    /// file_id → (file_path, bytes).
    files: HashMap<String, (String, Vec<u8>)>,
    downloads: Vec<String>,
    webhook: Option<Webhook>,
    next_callback: u64,
    /// Files uploaded and answered.
    uploads: Vec<upload::Upload>,
    /// Upload requests received, answered or not.
    upload_requests: usize,
    /// Whether upload requests wait for `release_uploads`.
    hold_uploads: bool,
    /// Whether held upload requests end unrecorded when released.
    drop_held_uploads: bool,
}

struct Shared {
    token: String,
    bot: Value,
    store: Mutex<Store>,
    new_updates: Notify,
    uploads_released: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Builds a fake Bot API.
pub struct FakeTelegramBuilder {
    token: String,
    username: String,
    bot_id: i64,
}

/// A running fake Bot API; clones share it.
#[derive(Clone)]
pub struct FakeTelegram {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FakeTelegramBuilder {
    /// The only token the fake accepts.
    pub fn token(mut self, token: &str) -> Self {
        token.clone_into(&mut self.token);
        self
    }

    /// The bot's username (without `@`) and user id, as `getMe` reports them.
    pub fn bot(mut self, username: &str, id: i64) -> Self {
        username.clone_into(&mut self.username);
        self.bot_id = id;
        self
    }

    /// Bind 127.0.0.1:0 and serve.
    pub async fn start(self) -> FakeTelegram {
        let bot = json!({"id": self.bot_id, "is_bot": true, "first_name": "Hermes", "username": self.username});
        let shared = Arc::new(Shared {
            token: self.token,
            bot,
            store: Mutex::new(Store::default()),
            new_updates: Notify::new(),
            uploads_released: Notify::new(),
        });
        let app = Router::new()
            .route("/{bot}/{method}", post(method))
            .route("/file/{bot}/{*path}", get(file))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake telegram");
        let addr = listener.local_addr().expect("fake telegram addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeTelegram { addr, shared }
    }
}

impl FakeTelegram {
    /// Start building: token `123:ABC`, bot `@hermes_bot` with id 42.
    pub fn builder() -> FakeTelegramBuilder {
        FakeTelegramBuilder { token: "123:ABC".into(), username: "hermes_bot".into(), bot_id: 42 }
    }

    /// `http://127.0.0.1:PORT`: the daemon's `platforms.telegram.api_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bot's user id.
    pub fn bot_id(&self) -> i64 {
        self.shared.bot["id"].as_i64().unwrap_or_default()
    }

    /// Build the update for `incoming` without queueing it (to POST it to a webhook yourself).
    pub fn build(&self, incoming: Incoming) -> (Injected, Value) {
        let mut store = self.shared.lock();
        let message = user_message(&mut store, &incoming);
        let update_id = issue_update_id(&mut store);
        let injected =
            Injected { update_id, chat_id: incoming.chat.id, message_id: message["message_id"].as_i64().unwrap_or(0) };
        (injected, json!({"update_id": update_id, "message": message}))
    }

    /// Queue `incoming` for getUpdates.
    pub fn push(&self, incoming: Incoming) -> Injected {
        let (injected, update) = self.build(incoming);
        self.enqueue(update);
        injected
    }

    /// Queue a text message from `from` in `chat`.
    pub fn push_message(&self, chat: &Chat, from: &User, text: &str) -> Injected {
        self.push(Incoming::text(chat, from, text))
    }

    /// Queue a text message replying to `reply_to` in the same chat.
    pub fn push_reply(&self, chat: &Chat, from: &User, text: &str, reply_to: i64) -> Injected {
        self.push(Incoming::text(chat, from, text).reply_to(reply_to))
    }

    /// Queue a press by `from` of a button with `data` on message `message_id` of `chat_id`.
    pub fn push_callback(&self, from: &User, chat_id: i64, message_id: i64, data: &str) -> Injected {
        let mut store = self.shared.lock();
        let message = store.messages.get(&(chat_id, message_id)).map(|(m, _)| m.clone());
        let message =
            message.unwrap_or_else(|| panic!("no message {message_id} in chat {chat_id} to press a button on"));
        store.next_callback += 1;
        let query = json!({"id": format!("cbq-{}", store.next_callback), "from": from.json,
            "message": message, "chat_instance": format!("ci{chat_id}"), "data": data});
        let update_id = issue_update_id(&mut store);
        drop(store);
        self.enqueue(json!({"update_id": update_id, "callback_query": query}));
        Injected { update_id, chat_id, message_id }
    }

    /// Open a forum topic in `chat` (queued as the service message Telegram sends); returns its
    /// thread id.
    pub fn create_topic(&self, chat: &Chat, from: &User, name: &str) -> i64 {
        let mut store = self.shared.lock();
        store.chats.insert(chat.id, chat.json.clone());
        let id = next_message_id(&mut store, chat.id);
        let message = json!({"message_id": id, "date": now(), "chat": chat.json, "from": from.json,
            "message_thread_id": id, "is_topic_message": true,
            "forum_topic_created": {"name": name, "icon_color": 7_322_096}});
        store.messages.insert((chat.id, id), (message.clone(), String::new()));
        let update_id = issue_update_id(&mut store);
        drop(store);
        self.enqueue(json!({"update_id": update_id, "message": message}));
        id
    }

    /// Queue a raw update; its `update_id` is assigned here.
    pub fn push_raw(&self, mut update: Value) -> i64 {
        let update_id = issue_update_id(&mut self.shared.lock());
        update["update_id"] = json!(update_id);
        self.enqueue(update);
        update_id
    }

    fn enqueue(&self, update: Value) {
        self.shared.lock().pending.push_back(update);
        self.shared.new_updates.notify_waiters();
    }

    /// Make the next call of `method` answer `error` (e.g. a 429 with `parameters.retry_after`);
    /// the HTTP status is its `error_code`.
    pub fn fail_next(&self, method: &str, error: Value) {
        self.shared.lock().failures.entry(method.to_lowercase()).or_default().push_back(error);
    }

    /// Serve `bytes` as `file_id` (getFile, then `GET /file/bot{token}/{path}`).
    pub fn add_file(&self, file_id: &str, file_name: &str, bytes: &[u8]) {
        let path = format!("documents/{file_id}_{file_name}");
        self.shared.lock().files.insert(file_id.to_owned(), (path, bytes.to_vec()));
    }

    /// File paths downloaded so far.
    pub fn downloads(&self) -> Vec<String> {
        self.shared.lock().downloads.clone()
    }

    /// Delivered messages, in order of arrival.
    pub fn sent(&self) -> Vec<Sent> {
        self.shared.lock().sent.clone()
    }

    /// Delivered messages from the `from`-th on (a poller reading only what is new).
    pub fn sent_since(&self, from: usize) -> Vec<Sent> {
        self.shared.lock().sent.get(from..).map(<[Sent]>::to_vec).unwrap_or_default()
    }

    /// Delivered messages in one chat.
    pub fn sent_to(&self, chat_id: i64) -> Vec<Sent> {
        self.sent().into_iter().filter(|s| s.chat_id == chat_id).collect()
    }

    /// Visible texts of the messages delivered to one chat.
    pub fn texts(&self, chat_id: i64) -> Vec<String> {
        self.sent_to(chat_id).iter().map(Sent::visible).collect()
    }

    /// Every editMessageText call.
    pub fn edits(&self) -> Vec<Edit> {
        self.shared.lock().edits.clone()
    }

    /// Every accepted sendMessageDraft call.
    pub fn drafts(&self) -> Vec<Draft> {
        self.shared.lock().drafts.clone()
    }

    /// Every sendChatAction call.
    pub fn actions(&self) -> Vec<Action> {
        self.shared.lock().actions.clone()
    }

    /// Bodies of every answerCallbackQuery call.
    pub fn callback_answers(&self) -> Vec<Value> {
        self.shared.lock().callback_answers.clone()
    }

    /// Every call of `method` (any case), refused ones included.
    pub fn calls(&self, method: &str) -> Vec<Call> {
        let method = method.to_lowercase();
        self.shared.lock().calls.iter().filter(|c| c.method == method).cloned().collect()
    }

    /// Every getUpdates call.
    pub fn polls(&self) -> Vec<Poll> {
        self.shared.lock().polls.clone()
    }

    /// The highest offset any getUpdates call confirmed (0: none).
    pub fn confirmed_offset(&self) -> i64 {
        self.shared.lock().confirmed_offset
    }

    /// Updates issued and not yet confirmed.
    pub fn pending(&self) -> usize {
        self.shared.lock().pending.len()
    }

    /// The webhook `setWebhook` registered, until `deleteWebhook`.
    pub fn webhook(&self) -> Option<Webhook> {
        self.shared.lock().webhook.clone()
    }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn issue_update_id(store: &mut Store) -> i64 {
    // Real update ids start somewhere large; so do these, to catch 32-bit truncation early.
    if store.next_update_id == 0 {
        store.next_update_id = 700_000_000;
    }
    store.next_update_id += 1;
    store.next_update_id
}

fn next_message_id(store: &mut Store, chat_id: i64) -> i64 {
    let next = store.next_message_id.entry(chat_id).or_insert(0);
    *next += 1;
    *next
}

/// A message as it appears nested in another (Telegram nests one level only).
fn nested(message: &Value) -> Value {
    let mut message = message.clone();
    if let Some(object) = message.as_object_mut() {
        object.remove("reply_to_message");
    }
    message
}

/// The `Message` object of an incoming message, stored so replies and buttons can refer to it.
fn user_message(store: &mut Store, incoming: &Incoming) -> Value {
    let chat_id = incoming.chat.id;
    store.chats.insert(chat_id, incoming.chat.json.clone());
    let id = next_message_id(store, chat_id);
    let mut message = json!({"message_id": id, "date": now(), "chat": incoming.chat.json, "from": incoming.from.json});
    let captioned = incoming.photo.is_some() || incoming.document.is_some() || incoming.voice.is_some();
    if !incoming.text.is_empty() {
        message[if captioned { "caption" } else { "text" }] = json!(incoming.text);
    }
    if !captioned && incoming.text.starts_with('/') {
        let len = incoming.text.split_whitespace().next().map_or(0, |c| c.encode_utf16().count());
        message["entities"] = json!([{"type": "bot_command", "offset": 0, "length": len}]);
    }
    let size = |file_id: &str| store.files.get(file_id).map_or(0, |(_, bytes)| bytes.len());
    if let Some(file_id) = &incoming.photo {
        message["photo"] = json!([
            {"file_id": format!("{file_id}-thumb"), "file_unique_id": format!("u{file_id}t"), "width": 90, "height": 60, "file_size": 900},
            {"file_id": file_id, "file_unique_id": format!("u{file_id}"), "width": 1280, "height": 853, "file_size": size(file_id)},
        ]);
    }
    if let Some((file_id, name, mime)) = &incoming.document {
        message["document"] = json!({"file_id": file_id, "file_unique_id": format!("u{file_id}"),
            "file_name": name, "mime_type": mime, "file_size": size(file_id)});
    }
    if let Some(file_id) = &incoming.voice {
        message["voice"] = json!({"file_id": file_id, "file_unique_id": format!("u{file_id}"),
            "duration": 2, "mime_type": "audio/ogg", "file_size": size(file_id)});
    }
    if let Some(thread) = incoming.topic {
        message["message_thread_id"] = json!(thread);
        message["is_topic_message"] = json!(true);
        // In a topic, a message that replies to nothing replies to the topic's opening message.
        if incoming.reply_to.is_none()
            && let Some((opening, _)) = store.messages.get(&(chat_id, thread))
        {
            message["reply_to_message"] = nested(opening);
        }
    }
    if let Some(reply_to) = incoming.reply_to {
        let (replied, _) = store
            .messages
            .get(&(chat_id, reply_to))
            .unwrap_or_else(|| panic!("no message {reply_to} in chat {chat_id} to reply to"));
        message["reply_to_message"] = nested(replied);
    }
    store.messages.insert((chat_id, id), (message.clone(), incoming.text.clone()));
    message
}

/// A request body as JSON: JSON as is, and multipart/form-data (teloxide's `setWebhook`) as an
/// object of its text fields, JSON-looking values parsed.
fn parse_body(headers: &HeaderMap, body: &[u8]) -> Value {
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let Some(boundary) =
        content_type.strip_prefix("multipart/form-data").and_then(|rest| rest.split("boundary=").nth(1))
    else {
        return serde_json::from_slice(body).unwrap_or_else(|_| json!({}));
    };
    let text = String::from_utf8_lossy(body);
    let mut fields = serde_json::Map::new();
    for part in text.split(&format!("--{}", boundary.trim_matches('"'))) {
        let Some((head, value)) = part.split_once("\r\n\r\n") else { continue };
        let Some(name) = head.split("name=\"").nth(1).and_then(|rest| rest.split('"').next()) else { continue };
        let value = value.strip_suffix("\r\n").unwrap_or(value);
        let parsed = match value.chars().next() {
            Some('[' | '{') => serde_json::from_str(value).ok(),
            _ if value == "true" || value == "false" => Some(json!(value == "true")),
            _ => None,
        };
        fields.insert(name.to_owned(), parsed.unwrap_or_else(|| json!(value)));
    }
    Value::Object(fields)
}

type Answer = Result<Value, Value>;

fn error(code: u16, description: &str) -> Value {
    json!({"ok": false, "error_code": code, "description": description})
}

fn reply(answer: Answer) -> Response {
    match answer {
        Ok(result) => axum::Json(json!({"ok": true, "result": result})).into_response(),
        Err(body) => {
            let code = body["error_code"].as_u64().and_then(|c| u16::try_from(c).ok()).unwrap_or(400);
            (StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST), axum::Json(body)).into_response()
        }
    }
}

async fn method(
    State(shared): State<Arc<Shared>>,
    Path((bot, method)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let method = method.to_lowercase();
    let raw = body;
    let body = parse_body(&headers, &raw);
    if bot.strip_prefix("bot") != Some(shared.token.as_str()) {
        return reply(Err(error(401, "Unauthorized")));
    }
    let failure = {
        let mut store = shared.lock();
        let at = Instant::now();
        store.calls.push(Call { at, method: method.clone(), body: body.clone() });
        let failure = store.failures.get_mut(&method).and_then(VecDeque::pop_front);
        if failure.is_some() && method == "getupdates" {
            let issued = store.next_update_id;
            store.polls.push(Poll { at, offset: body["offset"].as_i64(), issued, returned: vec![] });
        }
        failure
    };
    if let Some(failure) = failure {
        return reply(Err(failure));
    }
    let answer = match method.as_str() {
        "getme" => {
            let mut me = shared.bot.clone();
            for (key, value) in [
                ("can_join_groups", true),
                ("can_read_all_group_messages", false),
                ("supports_inline_queries", false),
                ("can_connect_to_business", false),
                ("has_main_web_app", false),
            ] {
                me[key] = json!(value);
            }
            Ok(me)
        }
        "getupdates" => get_updates(&shared, &body).await,
        "sendmessage" => send_message(&shared, &body),
        "senddocument" | "sendphoto" => upload::send_file(&shared, &method, &headers, &raw).await,
        "editmessagetext" => edit_message_text(&shared, &body),
        "sendmessagedraft" => send_message_draft(&shared, &body),
        "sendchataction" => {
            let action = Action {
                at: Instant::now(),
                chat_id: body["chat_id"].as_i64().unwrap_or_default(),
                action: body["action"].as_str().unwrap_or_default().to_owned(),
                thread_id: body["message_thread_id"].as_i64(),
            };
            shared.lock().actions.push(action);
            Ok(json!(true))
        }
        "answercallbackquery" => {
            shared.lock().callback_answers.push(body);
            Ok(json!(true))
        }
        "setwebhook" => {
            let url = body["url"].as_str().unwrap_or_default().to_owned();
            let secret = body["secret_token"].as_str().map(str::to_owned);
            shared.lock().webhook = (!url.is_empty()).then_some(Webhook { url, secret, last_error: None });
            Ok(json!(true))
        }
        "deletewebhook" => {
            let mut store = shared.lock();
            store.webhook = None;
            if body["drop_pending_updates"].as_bool() == Some(true) {
                store.pending.clear();
            }
            Ok(json!(true))
        }
        "getwebhookinfo" => Ok(shared::webhook_info(&shared.lock())),
        "getfile" => {
            let file_id = body["file_id"].as_str().unwrap_or_default();
            match shared.lock().files.get(file_id) {
                Some((path, bytes)) => Ok(json!({"file_id": file_id, "file_unique_id": format!("u{file_id}"),
                    "file_size": bytes.len(), "file_path": path})),
                None => Err(error(400, "Bad Request: invalid file id")),
            }
        }
        _ => Err(error(404, "Not Found")),
    };
    reply(answer)
}

/// Telegram's long poll: `offset` confirms (and forgets) every update below it; up to `limit`
/// pending updates of the `allowed_updates` kinds are returned at once, or the call waits up to
/// `timeout` seconds for one. A newer call ends an older one still waiting with a 409.
async fn get_updates(shared: &Shared, body: &Value) -> Answer {
    let offset = body["offset"].as_i64();
    let limit = usize::try_from(body["limit"].as_u64().unwrap_or(100).clamp(1, 100)).unwrap_or(100);
    let timeout = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
    let allowed: Vec<String> = body["allowed_updates"]
        .as_array()
        .map(|kinds| kinds.iter().filter_map(|k| k.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let is_allowed = |update: &Value| {
        allowed.is_empty() || update.as_object().is_some_and(|o| o.keys().any(|k| allowed.contains(k)))
    };
    let (generation, poll_index) = {
        let mut store = shared.lock();
        let issued = store.next_update_id;
        store.polls.push(Poll { at: Instant::now(), offset, issued, returned: vec![] });
        let poll_index = store.polls.len() - 1;
        if store.webhook.is_some() {
            return Err(error(
                409,
                "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook first",
            ));
        }
        if let Some(offset) = offset.filter(|&o| o > 0) {
            store.pending.retain(|u| u["update_id"].as_i64().is_some_and(|id| id >= offset));
            store.confirmed_offset = store.confirmed_offset.max(offset);
        }
        store.poll_generation += 1;
        (store.poll_generation, poll_index)
    };
    // Wake an older call still waiting so it sees it was superseded.
    shared.new_updates.notify_waiters();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let notified = shared.new_updates.notified();
        {
            let mut store = shared.lock();
            if store.poll_generation != generation {
                return Err(error(
                    409,
                    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                ));
            }
            let batch: Vec<Value> = store.pending.iter().filter(|u| is_allowed(u)).take(limit).cloned().collect();
            if !batch.is_empty() || tokio::time::Instant::now() >= deadline {
                store.polls[poll_index].returned = batch.iter().filter_map(|u| u["update_id"].as_i64()).collect();
                return Ok(Value::Array(batch));
            }
        }
        let _ = tokio::time::timeout_at(deadline, notified).await;
    }
}

fn chat_id_of(body: &Value) -> Option<i64> {
    body["chat_id"].as_i64().or_else(|| body["chat_id"].as_str().and_then(|s| s.parse().ok()))
}

/// Checks `text` the way Telegram does for its `parse_mode`; `Err` is the error description.
fn check_text(text: &str, parse_mode: Option<&str>) -> Result<String, String> {
    let html = parse_mode.is_some_and(|m| m.eq_ignore_ascii_case("html"));
    if html {
        check_html(text).map_err(|e| format!("Bad Request: can't parse entities: {e}"))?;
    }
    let visible = if html { visible_text(text) } else { text.to_owned() };
    if visible.trim().is_empty() {
        return Err("Bad Request: message text is empty".into());
    }
    if visible.encode_utf16().count() > MAX_TEXT {
        return Err("Bad Request: message is too long".into());
    }
    Ok(visible)
}

fn send_message(shared: &Shared, body: &Value) -> Answer {
    let at = Instant::now();
    let mut store = shared.lock();
    let Some(chat_id) = chat_id_of(body) else { return Err(error(400, "Bad Request: chat_id is empty")) };
    let Some(chat) = store.chats.get(&chat_id).cloned() else { return Err(error(400, "Bad Request: chat not found")) };
    let text = body["text"].as_str().unwrap_or_default().to_owned();
    let parse_mode = body["parse_mode"].as_str().map(str::to_owned);
    let visible = check_text(&text, parse_mode.as_deref()).map_err(|e| error(400, &e))?;
    let reply_to = body["reply_parameters"]["message_id"].as_i64().or_else(|| body["reply_to_message_id"].as_i64());
    let without_reply = body["reply_parameters"]["allow_sending_without_reply"].as_bool().unwrap_or(false)
        || body["allow_sending_without_reply"].as_bool().unwrap_or(false);
    let replied = reply_to.and_then(|r| store.messages.get(&(chat_id, r)).map(|(m, _)| nested(m)));
    if reply_to.is_some() && replied.is_none() && !without_reply {
        return Err(error(400, "Bad Request: message to be replied not found"));
    }
    let thread_id = body["message_thread_id"].as_i64();
    let message_id = next_message_id(&mut store, chat_id);
    let mut message =
        json!({"message_id": message_id, "from": shared.bot, "chat": chat, "date": now(), "text": visible});
    if let Some(replied) = replied {
        message["reply_to_message"] = replied;
    }
    if let Some(thread) = thread_id {
        message["message_thread_id"] = json!(thread);
        message["is_topic_message"] = json!(true);
    }
    if !body["reply_markup"].is_null() {
        message["reply_markup"] = body["reply_markup"].clone();
    }
    store.messages.insert((chat_id, message_id), (message.clone(), text.clone()));
    store.sent.push(Sent {
        at,
        chat_id,
        message_id,
        text,
        parse_mode,
        reply_to,
        thread_id,
        reply_markup: (!body["reply_markup"].is_null()).then(|| body["reply_markup"].clone()),
    });
    Ok(message)
}

fn edit_message_text(shared: &Shared, body: &Value) -> Answer {
    let at = Instant::now();
    let mut store = shared.lock();
    let chat_id = chat_id_of(body).unwrap_or_default();
    let message_id = body["message_id"].as_i64().unwrap_or_default();
    let text = body["text"].as_str().unwrap_or_default().to_owned();
    let Some((message, shown)) = store.messages.get(&(chat_id, message_id)).cloned() else {
        return Err(error(400, "Bad Request: message to edit not found"));
    };
    if message["from"]["id"] != shared.bot["id"] {
        return Err(error(400, "Bad Request: message can't be edited"));
    }
    let unchanged = shown == text;
    store.edits.push(Edit { at, chat_id, message_id, text: text.clone(), unchanged });
    if unchanged {
        return Err(error(
            400,
            "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
        ));
    }
    let visible = check_text(&text, body["parse_mode"].as_str()).map_err(|e| error(400, &e))?;
    let mut edited = message;
    edited["text"] = json!(visible);
    edited["edit_date"] = json!(now());
    store.messages.insert((chat_id, message_id), (edited.clone(), text));
    Ok(edited)
}

/// Telegram's `sendMessageDraft`: private chats only, a non-zero `draft_id`, text checked like a
/// message's (0 characters are allowed: Telegram then shows "Thinking…").
fn send_message_draft(shared: &Shared, body: &Value) -> Answer {
    let at = Instant::now();
    let mut store = shared.lock();
    let Some(chat_id) = chat_id_of(body) else { return Err(error(400, "Bad Request: chat_id is empty")) };
    let Some(chat) = store.chats.get(&chat_id).cloned() else { return Err(error(400, "Bad Request: chat not found")) };
    if chat["type"] != "private" {
        return Err(error(400, "Bad Request: draft can be sent only to private chats"));
    }
    let draft_id = body["draft_id"].as_i64().unwrap_or_default();
    if draft_id == 0 {
        return Err(error(400, "Bad Request: draft_id must be non-zero"));
    }
    let text = body["text"].as_str().unwrap_or_default().to_owned();
    let visible = if text.is_empty() {
        String::new()
    } else {
        check_text(&text, body["parse_mode"].as_str()).map_err(|e| error(400, &e))?
    };
    store.drafts.push(Draft { at, chat_id, draft_id, text, visible });
    Ok(json!(true))
}

async fn file(State(shared): State<Arc<Shared>>, Path((bot, path)): Path<(String, String)>) -> Response {
    if bot.strip_prefix("bot") != Some(shared.token.as_str()) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let mut store = shared.lock();
    let bytes = store.files.values().find(|(p, _)| *p == path).map(|(_, bytes)| bytes.clone());
    match bytes {
        Some(bytes) => {
            store.downloads.push(path);
            (StatusCode::OK, bytes).into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
