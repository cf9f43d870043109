//! A fake Bot API on 127.0.0.1 that records what it receives, and an ingress that fails on
//! demand. Method names are matched case-insensitively, as teloxide sends them PascalCase.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use hermesd_platform::conformance::RecordingIngress;
use hermesd_platform::{Accepted, Admission, InboundEvent, Ingress, IngressError};
use hermesd_telegram::{TelegramMode, TelegramSettings};
use serde_json::{Value, json};
use tokio::sync::Notify;

pub(crate) const TOKEN: &str = "123456:TEST-token";
pub(crate) const BOT_ID: u64 = 999;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A file the fake serves: its path, the size getFile reports (which may lie), and its bytes.
type FakeFile = (String, usize, Vec<u8>);

#[derive(Default)]
struct Fake {
    /// Every call: lowercase method name and JSON body.
    calls: Mutex<Vec<(String, Value)>>,
    /// Updates not yet confirmed by an offset past them.
    updates: Mutex<VecDeque<Value>>,
    new_updates: Notify,
    /// Canned answers (status, body) served before the normal behaviour, per lowercase method.
    canned: Mutex<HashMap<String, VecDeque<(u16, Value)>>>,
    files: Mutex<HashMap<String, FakeFile>>,
    downloads: AtomicUsize,
    next_message_id: AtomicI64,
}

/// A running fake; dropped with the test's runtime.
#[derive(Clone)]
pub(crate) struct FakeBotApi {
    state: Arc<Fake>,
    pub(crate) url: String,
}

impl FakeBotApi {
    pub(crate) async fn start() -> Self {
        let state = Arc::new(Fake { next_message_id: AtomicI64::new(1000), ..Fake::default() });
        let app = Router::new()
            .route("/{bot}/{method}", post(method))
            .route("/file/{bot}/{*path}", get(file))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the fake");
        let url = format!("http://{}", listener.local_addr().expect("fake address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { state, url }
    }

    /// Queues updates for `getUpdates`.
    pub(crate) fn push_updates(&self, updates: impl IntoIterator<Item = Value>) {
        lock(&self.state.updates).extend(updates);
        self.state.new_updates.notify_waiters();
    }

    /// The next `times` calls of `method` get this answer instead of the normal one.
    pub(crate) fn answer_next(&self, method: &str, times: usize, status: u16, body: Value) {
        let mut canned = lock(&self.state.canned);
        canned.entry(method.to_lowercase()).or_default().extend(std::iter::repeat_n((status, body), times));
    }

    /// Serves `bytes` for `file_id`; getFile claims `reported_size`, which may lie.
    pub(crate) fn add_file(&self, file_id: &str, path: &str, reported_size: usize, bytes: &[u8]) {
        lock(&self.state.files).insert(file_id.into(), (path.into(), reported_size, bytes.to_vec()));
    }

    /// Bodies of every call of `method` so far.
    pub(crate) fn calls(&self, method: &str) -> Vec<Value> {
        let method = method.to_lowercase();
        lock(&self.state.calls).iter().filter(|(m, _)| *m == method).map(|(_, body)| body.clone()).collect()
    }

    pub(crate) fn downloads(&self) -> usize {
        self.state.downloads.load(Ordering::SeqCst)
    }

    /// Waits until `method` was called at least `n` times.
    pub(crate) async fn wait_calls(&self, method: &str, n: usize, timeout: Duration) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let calls = self.calls(method);
            if calls.len() >= n || tokio::time::Instant::now() >= deadline {
                return calls;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn method(
    State(fake): State<Arc<Fake>>,
    Path((bot, method)): Path<(String, String)>,
    headers: HeaderMap,
    body: String,
) -> (StatusCode, String) {
    let method = method.to_lowercase();
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let body = match content_type.split_once("boundary=") {
        Some((_, boundary)) => form_fields(&body, boundary),
        None => serde_json::from_str(&body).unwrap_or(Value::Null),
    };
    lock(&fake.calls).push((method.clone(), body.clone()));
    if bot != format!("bot{TOKEN}") {
        return answer(401, json!({"ok": false, "error_code": 401, "description": "Unauthorized"}));
    }
    let canned = lock(&fake.canned).get_mut(&method).and_then(VecDeque::pop_front);
    if let Some((status, body)) = canned {
        return answer(status, body);
    }
    let result = match method.as_str() {
        "getme" => json!({"id": BOT_ID, "is_bot": true, "first_name": "Hermes", "username": "hermes_bot",
            "can_join_groups": true, "can_read_all_group_messages": false, "supports_inline_queries": false,
            "has_main_web_app": false}),
        "getupdates" => get_updates(&fake, &body).await,
        "sendmessage" | "editmessagetext" => {
            let id = body.get("message_id").and_then(Value::as_i64);
            let id = id.unwrap_or_else(|| fake.next_message_id.fetch_add(1, Ordering::SeqCst));
            json!({"message_id": id, "date": 1_700_000_000, "text": body["text"],
                "chat": {"id": body["chat_id"], "type": "private", "first_name": "Ann"}})
        }
        "getfile" => {
            let id = body["file_id"].as_str().unwrap_or_default().to_owned();
            match lock(&fake.files).get(&id) {
                Some((path, size, _)) => json!({"file_id": id, "file_unique_id": format!("u-{id}"),
                    "file_size": size, "file_path": path}),
                None => {
                    return answer(
                        400,
                        json!({"ok": false, "error_code": 400, "description": "Bad Request: invalid file id"}),
                    );
                }
            }
        }
        _ => json!(true),
    };
    answer(200, json!({"ok": true, "result": result}))
}

/// Telegram's semantics: an offset confirms every earlier update; with none pending, wait up to
/// `timeout` seconds for one.
async fn get_updates(fake: &Fake, body: &Value) -> Value {
    let offset = body.get("offset").and_then(Value::as_i64);
    let timeout = Duration::from_secs(body.get("timeout").and_then(Value::as_u64).unwrap_or(0));
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let waiting = fake.new_updates.notified();
        {
            let mut updates = lock(&fake.updates);
            if let Some(offset) = offset {
                updates.retain(|u| u["update_id"].as_i64().is_some_and(|id| id >= offset));
            }
            if !updates.is_empty() || tokio::time::Instant::now() >= deadline {
                return Value::Array(updates.iter().cloned().collect());
            }
        }
        let _ = tokio::time::timeout_at(deadline, waiting).await;
    }
}

async fn file(State(fake): State<Arc<Fake>>, Path((_bot, path)): Path<(String, String)>) -> (StatusCode, Vec<u8>) {
    fake.downloads.fetch_add(1, Ordering::SeqCst);
    let files = lock(&fake.files);
    match files.values().find(|(p, _, _)| *p == path) {
        Some((_, _, bytes)) => (StatusCode::OK, bytes.clone()),
        None => (StatusCode::NOT_FOUND, Vec::new()),
    }
}

/// The fields of a multipart form (teloxide sends `setWebhook` that way), values read as JSON
/// where they parse and as strings otherwise.
fn form_fields(body: &str, boundary: &str) -> Value {
    let mut fields = serde_json::Map::new();
    for part in body.split(&format!("--{boundary}")) {
        let Some((head, value)) = part.split_once("\r\n\r\n") else { continue };
        let Some(name) = head.split("name=\"").nth(1).and_then(|rest| rest.split('"').next()) else { continue };
        let value = value.strip_suffix("\r\n").unwrap_or(value);
        let parsed = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
        fields.insert(name.to_owned(), parsed);
    }
    Value::Object(fields)
}

fn answer(status: u16, body: Value) -> (StatusCode, String) {
    (StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), body.to_string())
}

/// Settings pointing at the fake, polling with a short timeout.
pub(crate) fn settings(fake: &FakeBotApi, media_dir: &std::path::Path) -> TelegramSettings {
    TelegramSettings {
        token: TOKEN.into(),
        api_url: fake.url.clone(),
        mode: TelegramMode::Polling,
        media_dir: media_dir.to_path_buf(),
        poll_timeout: Duration::from_secs(1),
        ..TelegramSettings::default()
    }
}

/// A private text message update from user 42.
pub(crate) fn dm_update(update_id: i64, message_id: i64, text: &str) -> Value {
    json!({"update_id": update_id, "message": {"message_id": message_id, "date": 1_700_000_000,
        "chat": {"id": 42, "type": "private", "first_name": "Ann"},
        "from": {"id": 42, "is_bot": false, "first_name": "Ann"}, "text": text}})
}

/// An ingress that logs every call in order and refuses the next `fail` accepts.
pub(crate) struct FlakyIngress {
    pub(crate) inner: Arc<RecordingIngress>,
    fail: AtomicUsize,
    log: Mutex<Vec<String>>,
}

impl FlakyIngress {
    pub(crate) fn new(fail: usize) -> Arc<Self> {
        Arc::new(Self { inner: RecordingIngress::new(), fail: AtomicUsize::new(fail), log: Mutex::default() })
    }

    /// `accept <event id>`, `refuse <event id>`, `cursor <value>`, in call order.
    pub(crate) fn log(&self) -> Vec<String> {
        lock(&self.log).clone()
    }
}

#[async_trait]
impl Ingress for FlakyIngress {
    async fn admit(&self, event: &InboundEvent) -> Result<Admission, IngressError> {
        self.inner.admit(event).await
    }

    async fn accept(&self, event: InboundEvent) -> Result<Accepted, IngressError> {
        let refuse = self.fail.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        let verb = if refuse { "refuse" } else { "accept" };
        lock(&self.log).push(format!("{verb} {}", event.event_id()));
        if refuse {
            return Err(IngressError("store unavailable".into()));
        }
        self.inner.accept(event).await
    }

    async fn load_cursor(&self, platform: &str) -> Result<Option<String>, IngressError> {
        self.inner.load_cursor(platform).await
    }

    async fn save_cursor(&self, platform: &str, cursor: &str) -> Result<(), IngressError> {
        lock(&self.log).push(format!("cursor {cursor}"));
        self.inner.save_cursor(platform, cursor).await
    }
}
