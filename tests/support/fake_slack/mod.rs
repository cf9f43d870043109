//! A fake Slack on 127.0.0.1:0: the Web API methods hermesd calls (`auth.test`,
//! `apps.connections.open`, `chat.postMessage`, `chat.update`, `conversations.replies`,
//! `assistant.threads.setStatus`) at `/api/{method}` with bearer-token checks, private file
//! downloads at `/files/…`, a Socket Mode websocket (`socket.rs`) that says hello, sends
//! `events_api` envelopes, redelivers unacknowledged ones on the next socket and records acks,
//! and a helper that posts signed (and mis-signed) Events API requests (`events.rs`).
//! Everything hermesd calls is recorded; scripted failures (429 with Retry-After) per method.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::{Value, json};

pub mod events;
pub mod socket;
pub mod upload;

/// The bot's user id, as `auth.test` reports it.
pub const BOT_USER: &str = "UBOT";
/// The bot id its own messages carry.
pub const BOT_ID: &str = "BBOT";

/// A message hermesd posted.
#[derive(Debug, Clone, PartialEq)]
pub struct Posted {
    pub channel: String,
    pub thread_ts: Option<String>,
    pub ts: String,
    pub text: String,
    pub blocks: Option<Value>,
}

/// A `chat.update` hermesd made.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub channel: String,
    pub ts: String,
    pub text: String,
    pub at: std::time::Instant,
}

#[derive(Default)]
pub(crate) struct Store {
    next_ts: u64,
    calls: Vec<(String, Value)>,
    posted: Vec<Posted>,
    updates: Vec<Update>,
    statuses: Vec<Value>,
    failures: HashMap<String, VecDeque<(u16, Option<u64>, Value)>>,
    /// user id → display name, for `users.info` (unknown users get `user_not_found`).
    users: HashMap<String, String>,
    /// (channel, thread ts) → messages in that thread, for `conversations.replies`.
    threads: HashMap<(String, String), Vec<Value>>,
    /// path → bytes, served to the bot token only.
    files: HashMap<String, Vec<u8>>,
    downloads: Vec<String>,
    pub(crate) socket: socket::SocketState,
    /// Files announced by `files.getUploadURLExternal`.
    uploads_pending: Vec<upload::Pending>,
    /// Files shared by `files.completeUploadExternal`.
    uploads_shared: Vec<upload::SharedFile>,
    /// method → how many of its next calls are taken and never answered (a hung Web API).
    hangs: HashMap<String, usize>,
}

pub(crate) struct Shared {
    bot_token: String,
    app_token: String,
    store: Mutex<Store>,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A running fake Slack; clones share it.
#[derive(Clone)]
pub struct FakeSlack {
    addr: SocketAddr,
    socket_addr: SocketAddr,
    pub(crate) shared: Arc<Shared>,
}

impl FakeSlack {
    /// Bind the Web API and the Socket Mode listener on 127.0.0.1:0 and serve.
    pub async fn start(bot_token: &str, app_token: &str) -> FakeSlack {
        let shared = Arc::new(Shared {
            bot_token: bot_token.to_owned(),
            app_token: app_token.to_owned(),
            store: Mutex::new(Store::default()),
        });
        let app = Router::new()
            .route("/api/{method}", any(method))
            .route("/files/{*path}", get(file))
            .route("/upload/{file_id}", axum::routing::post(upload::receive))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake slack");
        let addr = listener.local_addr().expect("fake slack addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let socket_addr = socket::listen(shared.clone()).await;
        FakeSlack { addr, socket_addr, shared }
    }

    /// `http://127.0.0.1:PORT/api`: the daemon's `platforms.slack.api_url`.
    pub fn api_url(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    /// A private file URL served to the bot token.
    pub fn add_file(&self, path: &str, bytes: &[u8]) -> String {
        self.shared.lock().files.insert(path.to_owned(), bytes.to_vec());
        format!("http://{}/files/{path}", self.addr)
    }

    /// Paths of files downloaded.
    pub fn downloads(&self) -> Vec<String> {
        self.shared.lock().downloads.clone()
    }

    /// A fresh message timestamp, increasing.
    pub fn next_ts(&self) -> String {
        next_ts(&mut self.shared.lock())
    }

    /// A user's `message` event (as Slack sends it), remembered for `conversations.replies`.
    pub fn user_message(&self, channel: &str, user: &str, text: &str, thread_ts: Option<&str>) -> Value {
        let ts = self.next_ts();
        let channel_type = if channel.starts_with('D') { "im" } else { "channel" };
        let mut event = json!({
            "type": "message", "channel": channel, "channel_type": channel_type, "user": user, "text": text,
            "ts": ts, "team": "T1", "client_msg_id": format!("m-{ts}"),
        });
        if let Some(thread) = thread_ts {
            event["thread_ts"] = json!(thread);
        }
        let thread = thread_ts.unwrap_or(&ts).to_owned();
        let stored = json!({"type": "message", "ts": ts, "user": user, "text": text, "thread_ts": thread});
        self.shared.lock().threads.entry((channel.to_owned(), thread)).or_default().push(stored);
        event
    }

    /// Give `user` a display name, which `users.info` then reports.
    pub fn add_user(&self, user: &str, display_name: &str) {
        self.shared.lock().users.insert(user.to_owned(), display_name.to_owned());
    }

    /// Fail the next call of `method` with HTTP `status`, an optional Retry-After and `body`.
    pub fn fail_next(&self, method: &str, status: u16, retry_after: Option<u64>, body: Value) {
        self.shared.lock().failures.entry(method.to_owned()).or_default().push_back((status, retry_after, body));
    }

    /// Take the next `n` calls of `method` (they are recorded) and never answer them.
    pub fn hang_next(&self, method: &str, n: usize) {
        *self.shared.lock().hangs.entry(method.to_owned()).or_default() += n;
    }

    /// Every message posted, in order.
    pub fn posted(&self) -> Vec<Posted> {
        self.shared.lock().posted.clone()
    }

    /// Messages posted to `channel`.
    pub fn posted_to(&self, channel: &str) -> Vec<Posted> {
        self.posted().into_iter().filter(|p| p.channel == channel).collect()
    }

    /// Texts posted to `channel`.
    pub fn texts(&self, channel: &str) -> Vec<String> {
        self.posted_to(channel).into_iter().map(|p| p.text).collect()
    }

    /// Every `chat.update`, in order.
    pub fn updates(&self) -> Vec<Update> {
        self.shared.lock().updates.clone()
    }

    /// Every `assistant.threads.setStatus` body.
    pub fn statuses(&self) -> Vec<Value> {
        self.shared.lock().statuses.clone()
    }

    /// (method, arguments) of every Web API call, in order.
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.shared.lock().calls.iter().filter(|(m, _)| m == method).map(|(_, v)| v.clone()).collect()
    }
}

fn next_ts(store: &mut Store) -> String {
    store.next_ts += 1;
    format!("1700000{:03}.{:06}", store.next_ts / 1000, store.next_ts % 1000 * 100)
}

fn ok(body: Value) -> Response {
    let mut body = body;
    body["ok"] = json!(true);
    (StatusCode::OK, axum::Json(body)).into_response()
}

fn slack_error(code: &str) -> Response {
    (StatusCode::OK, axum::Json(json!({"ok": false, "error": code}))).into_response()
}

/// The arguments of a call: JSON body, form body or query string.
fn arguments(query: Option<&str>, headers: &HeaderMap, body: &Bytes) -> Value {
    let json_body = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|t| t.contains("json"));
    if json_body {
        return serde_json::from_slice(body).unwrap_or(Value::Null);
    }
    let pairs = if body.is_empty() { query.unwrap_or_default().as_bytes().to_vec() } else { body.to_vec() };
    let map: serde_json::Map<String, Value> =
        form_pairs(&pairs).into_iter().map(|(k, v)| (k, Value::String(v))).collect();
    Value::Object(map)
}

fn form_pairs(raw: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(raw);
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

pub(crate) fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn method(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let args = arguments(query.as_deref(), &headers, &body);
    let bearer = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let wanted = if method == "apps.connections.open" { &shared.app_token } else { &shared.bot_token };
    if bearer != format!("Bearer {wanted}") {
        return slack_error("invalid_auth");
    }
    let hang = {
        let mut store = shared.lock();
        let hang = store.hangs.get_mut(&method).filter(|left| **left > 0).map(|left| *left -= 1).is_some();
        if hang {
            store.calls.push((method.clone(), args.clone()));
        }
        hang
    };
    if hang {
        return std::future::pending().await;
    }
    let mut store = shared.lock();
    store.calls.push((method.clone(), args.clone()));
    if let Some((status, retry_after, body)) = store.failures.get_mut(&method).and_then(VecDeque::pop_front) {
        let mut response = (StatusCode::from_u16(status).unwrap_or(StatusCode::OK), axum::Json(body)).into_response();
        if let Some(secs) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, secs.to_string().parse().expect("a header value"));
        }
        return response;
    }
    let text = |v: &Value| v["text"].as_str().unwrap_or_default().to_owned();
    match method.as_str() {
        "auth.test" => ok(json!({
            "url": "https://fake.slack.com/", "team": "Fake", "user": "hermes", "team_id": "T1",
            "user_id": BOT_USER, "bot_id": BOT_ID,
        })),
        "apps.connections.open" => {
            let url = format!("ws://{}/link?ticket={}", store.socket.addr_text(), store.socket.opens + 1);
            store.socket.opens += 1;
            ok(json!({ "url": url }))
        }
        "chat.postMessage" => {
            let channel = args["channel"].as_str().unwrap_or_default().to_owned();
            if channel.is_empty() {
                return slack_error("channel_not_found");
            }
            let ts = next_ts(&mut store);
            let thread_ts = args["thread_ts"].as_str().map(str::to_owned);
            let posted = Posted {
                channel: channel.clone(),
                thread_ts: thread_ts.clone(),
                ts: ts.clone(),
                text: text(&args),
                blocks: args.get("blocks").cloned(),
            };
            store.posted.push(posted);
            let message = json!({"type": "message", "ts": ts, "text": text(&args), "user": BOT_USER, "bot_id": BOT_ID});
            let thread = thread_ts.unwrap_or_else(|| ts.clone());
            store.threads.entry((channel.clone(), thread)).or_default().push(message.clone());
            ok(json!({ "channel": channel, "ts": ts, "message": message }))
        }
        "chat.update" => {
            let (channel, ts) = (args["channel"].as_str().unwrap_or_default(), args["ts"].as_str().unwrap_or_default());
            if !store.posted.iter().any(|p| p.channel == channel && p.ts == ts) {
                return slack_error("message_not_found");
            }
            let update = Update {
                channel: channel.to_owned(),
                ts: ts.to_owned(),
                text: text(&args),
                at: std::time::Instant::now(),
            };
            store.updates.push(update);
            ok(
                json!({ "channel": channel, "ts": ts, "text": text(&args), "message": {"text": text(&args), "user": BOT_USER} }),
            )
        }
        "assistant.threads.setStatus" => {
            store.statuses.push(args);
            ok(json!({}))
        }
        "conversations.replies" => {
            let key = (
                args["channel"].as_str().unwrap_or_default().to_owned(),
                args["ts"].as_str().unwrap_or_default().to_owned(),
            );
            match store.threads.get(&key) {
                Some(messages) => ok(json!({ "messages": messages, "has_more": false })),
                None => slack_error("thread_not_found"),
            }
        }
        "users.info" => {
            let id = args["user"].as_str().unwrap_or_default().to_owned();
            match store.users.get(&id) {
                Some(name) => ok(json!({ "user": {
                    "id": id, "team_id": "T1", "name": name.to_lowercase(), "real_name": name,
                    "profile": { "display_name": name, "real_name": name }
                }})),
                None => slack_error("user_not_found"),
            }
        }
        "files.getUploadURLExternal" => {
            let base = headers.get(header::HOST).and_then(|h| h.to_str().ok()).map(|h| format!("http://{h}"));
            upload::get_upload_url(&mut store, &base.unwrap_or_default(), &args)
        }
        "files.completeUploadExternal" => upload::complete(&mut store, &args),
        _ => slack_error("unknown_method"),
    }
}

async fn file(State(shared): State<Arc<Shared>>, Path(path): Path<String>, headers: HeaderMap) -> Response {
    let bearer = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if bearer != format!("Bearer {}", shared.bot_token) {
        return (StatusCode::FORBIDDEN, "not signed in").into_response();
    }
    let mut store = shared.lock();
    store.downloads.push(path.clone());
    match store.files.get(&path) {
        Some(bytes) => bytes.clone().into_response(),
        None => (StatusCode::NOT_FOUND, "no such file").into_response(),
    }
}
