//! A fake signal-cli HTTP daemon (`signal-cli -a ACCOUNT daemon --http`) on 127.0.0.1:0, speaking
//! its wire format: `GET /api/v1/events` (server-sent events, `event:receive` + `data:<json>`,
//! `:` keepalive comments), `POST /api/v1/rpc` (JSON-RPC 2.0, `application/json` only, errors as
//! JSON-RPC error objects with HTTP 200), `GET /api/v1/check`.
//!
//! It records every call and every hand-over (when an event was written to a stream: the moment
//! signal-cli would have acknowledged it to Signal). Like `--receive-mode=manual`, events pushed
//! while no stream is connected wait for the next one. A stream can be wedged: kept open while
//! nothing more is written to it (events written to it then are lost, as on a real dead link).

pub mod envelopes;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// One open event stream.
struct Stream {
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    wedged: Arc<AtomicBool>,
    /// Ends the response body (the keepalive task holds a sender, so dropping ours is not enough).
    close: Arc<tokio::sync::Notify>,
}

/// A canned JSON-RPC error: code, message, data.
type Canned = (i64, String, Value);

#[derive(Default)]
struct Inner {
    /// Every JSON-RPC call: method, params, when.
    calls: Vec<(String, Value, Instant)>,
    streams: Vec<Stream>,
    /// Streams opened so far.
    connections: usize,
    /// Events waiting for a stream (manual receive mode keeps them at Signal).
    pending: VecDeque<Value>,
    /// Events written to a stream: `<sourceUuid>:<timestamp>` and when.
    handed: Vec<(String, Instant)>,
    /// Events written to a wedged stream (lost, as signal-cli already acknowledged them).
    swallowed: Vec<String>,
    canned: HashMap<String, VecDeque<Canned>>,
    attachments: HashMap<String, Vec<u8>>,
}

struct Shared {
    inner: Mutex<Inner>,
    keepalive: Mutex<Duration>,
    next_timestamp: AtomicI64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running fake signal-cli; clones share it.
#[derive(Clone)]
pub struct FakeSignal {
    shared: Arc<Shared>,
    url: String,
}

fn event_key(payload: &Value) -> String {
    let envelope = &payload["envelope"];
    format!("{}:{}", envelope["sourceUuid"].as_str().unwrap_or_default(), envelope["timestamp"])
}

fn frame(payload: &Value) -> Bytes {
    Bytes::from(format!("event:receive\ndata:{payload}\n\n"))
}

impl FakeSignal {
    /// Bind 127.0.0.1:0 and serve, with signal-cli's 15 s keepalive.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared {
            inner: Mutex::default(),
            keepalive: Mutex::new(Duration::from_secs(15)),
            next_timestamp: AtomicI64::new(1_800_000_000_000),
        });
        let app = Router::new()
            .route("/api/v1/rpc", post(rpc))
            .route("/api/v1/events", get(events))
            .route("/api/v1/check", get(|| async { StatusCode::OK }))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake signal-cli");
        let url = format!("http://{}", listener.local_addr().expect("fake signal-cli addr"));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeSignal { shared, url }
    }

    /// `http://127.0.0.1:PORT`: the daemon's `platforms.signal.http_url`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// How often open streams get a `:` keepalive (from the next one on).
    pub fn set_keepalive(&self, every: Duration) {
        *self.shared.keepalive.lock().unwrap_or_else(PoisonError::into_inner) = every;
    }

    /// Write a `receive` payload to the newest stream, or keep it until one connects.
    pub fn push(&self, payload: Value) {
        let mut inner = self.shared.lock();
        inner.pending.push_back(payload);
        flush(&mut inner);
    }

    /// Streams opened so far.
    pub fn connections(&self) -> usize {
        self.shared.lock().connections
    }

    /// Keep every open stream open but write nothing more to it, keepalives included.
    pub fn wedge(&self) {
        for stream in &self.shared.lock().streams {
            stream.wedged.store(true, Ordering::SeqCst);
        }
    }

    /// Close every open stream.
    pub fn drop_streams(&self) {
        for stream in self.shared.lock().streams.drain(..) {
            stream.close.notify_one();
        }
    }

    /// Events written to a stream (`<sourceUuid>:<timestamp>`) and when.
    pub fn handed_over(&self) -> Vec<(String, Instant)> {
        self.shared.lock().handed.clone()
    }

    /// Events written to a wedged stream.
    pub fn swallowed(&self) -> Vec<String> {
        self.shared.lock().swallowed.clone()
    }

    /// Params of every call of `method`.
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.shared.lock().calls.iter().filter(|(m, ..)| m == method).map(|(_, p, _)| p.clone()).collect()
    }

    /// When each call of `method` arrived.
    pub fn call_times(&self, method: &str) -> Vec<Instant> {
        self.shared.lock().calls.iter().filter(|(m, ..)| m == method).map(|(.., at)| *at).collect()
    }

    /// `send` calls whose text contains `needle`.
    pub fn sent_containing(&self, needle: &str) -> Vec<Value> {
        self.calls("send").into_iter().filter(|p| p["message"].as_str().is_some_and(|m| m.contains(needle))).collect()
    }

    /// Answer the next `times` calls of `method` with JSON-RPC error `code`.
    pub fn fail_next(&self, method: &str, times: usize, code: i64, message: &str, data: Value) {
        let mut inner = self.shared.lock();
        let queue = inner.canned.entry(method.to_owned()).or_default();
        for _ in 0..times {
            queue.push_back((code, message.to_owned(), data.clone()));
        }
    }

    /// Rate-limit the next `send`, as signal-cli reports it: error -5, the wait in the results.
    pub fn rate_limit_next_send(&self, retry_after_secs: u64) {
        let data = json!({"response": {"timestamp": 1, "results": [{"recipientAddress": {"uuid": null, "number": null},
            "type": "RATE_LIMIT_FAILURE", "retryAfterSeconds": retry_after_secs}]}});
        self.fail_next("send", 1, -5, "Failed to send message due to rate limiting", data);
    }

    /// Serve `bytes` for `getAttachment` of `id`.
    pub fn add_attachment(&self, id: &str, bytes: Vec<u8>) {
        self.shared.lock().attachments.insert(id.to_owned(), bytes);
    }
}

/// Writes pending events to the newest open stream.
fn flush(inner: &mut Inner) {
    inner.streams.retain(|s| !s.tx.is_closed());
    let Some(stream) = inner.streams.last() else { return };
    let (tx, wedged) = (stream.tx.clone(), stream.wedged.load(Ordering::SeqCst));
    while let Some(payload) = inner.pending.pop_front() {
        let key = event_key(&payload);
        if wedged {
            inner.swallowed.push(key);
            continue;
        }
        if tx.try_send(Ok(frame(&payload))).is_err() {
            inner.pending.push_front(payload);
            return;
        }
        inner.handed.push((key, Instant::now()));
    }
}

async fn events(State(shared): State<Arc<Shared>>) -> Response {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(1024);
    let wedged = Arc::new(AtomicBool::new(false));
    let close = Arc::new(tokio::sync::Notify::new());
    {
        let mut inner = shared.lock();
        inner.connections += 1;
        inner.streams.push(Stream { tx: tx.clone(), wedged: wedged.clone(), close: close.clone() });
        flush(&mut inner);
    }
    let keepalive = shared.clone();
    tokio::spawn(async move {
        loop {
            let every = *keepalive.keepalive.lock().unwrap_or_else(PoisonError::into_inner);
            tokio::time::sleep(every).await;
            if tx.is_closed() {
                return;
            }
            if !wedged.load(Ordering::SeqCst) && tx.send(Ok(Bytes::from_static(b":\n"))).await.is_err() {
                return;
            }
        }
    });
    let body = futures_util::stream::unfold((rx, close), |(mut rx, close)| async move {
        let item = tokio::select! {
            item = rx.recv() => item,
            () = close.notified() => None,
        };
        item.map(|item| (item, (rx, close)))
    });
    ([(header::CONTENT_TYPE, "text/event-stream")], Body::from_stream(body)).into_response()
}

async fn rpc(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let json_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json_body {
        return StatusCode::UNSUPPORTED_MEDIA_TYPE.into_response();
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return answer(
            json!({"jsonrpc": "2.0", "error": {"code": -32700, "message": "parse error", "data": null}, "id": null}),
        );
    };
    let id = request["id"].clone();
    let Some(method) = request["method"].as_str().map(str::to_owned) else {
        return answer(
            json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "method field must be set", "data": null}, "id": id}),
        );
    };
    let params = request.get("params").cloned().unwrap_or(Value::Null);
    let canned = {
        let mut inner = shared.lock();
        inner.calls.push((method.clone(), params.clone(), Instant::now()));
        inner.canned.get_mut(&method).and_then(VecDeque::pop_front)
    };
    if let Some((code, message, data)) = canned {
        return answer(json!({"jsonrpc": "2.0", "error": {"code": code, "message": message, "data": data}, "id": id}));
    }
    let result = match method.as_str() {
        "send" | "sendReaction" => {
            if params.get("recipient").is_none() && params.get("groupId").is_none() {
                return answer(
                    json!({"jsonrpc": "2.0", "error": {"code": -1, "message": "No recipients given", "data": null}, "id": id}),
                );
            }
            let timestamp = shared.next_timestamp.fetch_add(1, Ordering::SeqCst);
            json!({"timestamp": timestamp, "results": [{"recipientAddress": {"uuid": null, "number": null}, "type": "SUCCESS"}]})
        }
        "sendTyping" => json!({}),
        "getAttachment" => {
            let key = params["id"].as_str().unwrap_or_default().to_owned();
            match shared.lock().attachments.get(&key) {
                Some(bytes) => json!({"data": base64::engine::general_purpose::STANDARD.encode(bytes)}),
                None => {
                    let message = format!("Could not find attachment with ID: {key}");
                    return answer(
                        json!({"jsonrpc": "2.0", "error": {"code": -1, "message": message, "data": null}, "id": id}),
                    );
                }
            }
        }
        "version" => json!({"version": "0.13.99"}),
        "listGroups" => json!([]),
        other => {
            let message = format!("Method not implemented: {other}");
            return answer(
                json!({"jsonrpc": "2.0", "error": {"code": -32601, "message": message, "data": null}, "id": id}),
            );
        }
    };
    answer(json!({"jsonrpc": "2.0", "result": result, "id": id}))
}

fn answer(body: Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}
