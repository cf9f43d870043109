//! A fake WhatsApp Cloud API (Graph API) on 127.0.0.1:0, speaking Meta's wire format: `GET
//! /{version}/{phone-number-id}` (the token check), `POST /{version}/{phone-number-id}/messages`
//! (sends, templates, interactive messages, and `status: read` marks with the typing
//! indicator), `POST /{version}/{phone-number-id}/media` (multipart uploads), `GET
//! /{version}/{media-id}` (the media URL) and the media download itself, all behind the bearer
//! token (a wrong one gets Graph's 401 code 190). Every call is recorded; failures can be
//! scripted per endpoint (Graph error bodies, HTTP 429 with `Retry-After`). `webhook.rs` builds
//! Meta's notification payloads and posts them signed like Meta (`X-Hub-Signature-256`).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

pub mod webhook;

/// The business number's id the fake serves.
pub const PHONE_NUMBER_ID: &str = "106540352242922";
/// The business number as users see it (`metadata.display_phone_number`).
pub const DISPLAY_NUMBER: &str = "15550783881";

/// One call hermesd made, with when it arrived.
#[derive(Debug, Clone)]
pub struct Call {
    /// `messages`, `read`, `media_upload`, `media_lookup`, `download`, `phone`.
    pub endpoint: String,
    pub body: Value,
    pub at: Instant,
}

#[derive(Default)]
struct Store {
    next_id: u64,
    calls: Vec<Call>,
    /// endpoint → scripted answers (status, Retry-After seconds, body), used before the normal one.
    failures: HashMap<String, VecDeque<(u16, Option<u64>, Value)>>,
    /// media id → (mime, bytes).
    media: HashMap<String, (String, Vec<u8>)>,
}

struct Shared {
    token: String,
    /// The business number's id this fake serves.
    number: String,
    addr: Mutex<Option<SocketAddr>>,
    store: Mutex<Store>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A running fake Graph API; clones share it.
#[derive(Clone)]
pub struct FakeWhatsApp {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FakeWhatsApp {
    /// Bind on 127.0.0.1:0 and serve; `token` is the only access token accepted.
    pub async fn start(token: &str) -> FakeWhatsApp {
        Self::start_number(token, PHONE_NUMBER_ID).await
    }

    /// Like `start`, serving the business number `number` instead of `PHONE_NUMBER_ID`.
    pub async fn start_number(token: &str, number: &str) -> FakeWhatsApp {
        let (token, number) = (token.to_owned(), number.to_owned());
        let shared = Arc::new(Shared { token, number, addr: Mutex::new(None), store: Mutex::new(Store::default()) });
        let app = Router::new()
            .route("/{version}/{id}", get(lookup))
            .route("/{version}/{id}/messages", post(messages))
            .route("/{version}/{id}/media", post(upload))
            .route("/media-download/{id}", get(download))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake whatsapp");
        let addr = listener.local_addr().expect("fake whatsapp addr");
        *shared.addr.lock().unwrap() = Some(addr);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeWhatsApp { addr, shared }
    }

    /// `http://127.0.0.1:PORT`: `platforms.whatsapp.api_url`.
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serve media `id` (announced by `GET /{version}/{id}`, downloaded with the token).
    pub fn add_media(&self, id: &str, mime: &str, bytes: &[u8]) {
        self.shared.lock().media.insert(id.to_owned(), (mime.to_owned(), bytes.to_vec()));
    }

    /// Answer the next `count` calls to `endpoint` (`messages`, `phone`, `media_lookup`,
    /// `media_upload`) with `status`, Graph error `code` and an optional `Retry-After`.
    pub fn fail_next(&self, endpoint: &str, count: usize, status: u16, code: i64, retry_after: Option<u64>) {
        let body = json!({ "error": { "message": format!("scripted error {code}"), "type": "OAuthException",
            "code": code, "error_data": { "messaging_product": "whatsapp", "details": "scripted" },
            "fbtrace_id": "AbCdEf" } });
        let mut store = self.shared.lock();
        let queue = store.failures.entry(endpoint.to_owned()).or_default();
        for _ in 0..count {
            queue.push_back((status, retry_after, body.clone()));
        }
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.shared.lock().calls.clone()
    }

    /// Calls to `endpoint`.
    pub fn calls_to(&self, endpoint: &str) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.endpoint == endpoint).collect()
    }

    /// Message payloads accepted (not read marks, not refused ones), in order.
    pub fn sent(&self) -> Vec<Value> {
        self.calls_to("messages")
            .into_iter()
            .filter(|c| c.body["accepted"] == true)
            .map(|c| c.body["payload"].clone())
            .collect()
    }

    /// Message payloads accepted for `to`.
    pub fn sent_to(&self, to: &str) -> Vec<Value> {
        self.sent().into_iter().filter(|p| p["to"] == to).collect()
    }

    /// The text bodies sent to `to` (text messages and interactive bodies), in order.
    pub fn texts(&self, to: &str) -> Vec<String> {
        self.sent_to(to)
            .iter()
            .filter_map(|p| p["text"]["body"].as_str().or(p["interactive"]["body"]["text"].as_str()).map(str::to_owned))
            .collect()
    }

    /// `status: read` marks (with the typing indicator), as posted.
    pub fn reads(&self) -> Vec<Value> {
        self.calls_to("read").into_iter().map(|c| c.body).collect()
    }

    /// The wamid the fake gave the `n`-th accepted message (from 1).
    pub fn wamid(n: u64) -> String {
        format!("wamid.OUT{n}")
    }
}

fn graph_error(status: StatusCode, code: i64, message: &str) -> Response {
    let body =
        json!({ "error": { "message": message, "type": "OAuthException", "code": code, "fbtrace_id": "AbCdEf" } });
    (status, axum::Json(body)).into_response()
}

fn authorised(shared: &Shared, headers: &HeaderMap) -> bool {
    let expected = format!("Bearer {}", shared.token);
    headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) == Some(expected.as_str())
}

/// A scripted answer for `endpoint`, recorded with `body`, if one is queued.
fn scripted(shared: &Shared, endpoint: &str, body: &Value) -> Option<Response> {
    let mut store = shared.lock();
    let (status, retry_after, error) = store.failures.get_mut(endpoint)?.pop_front()?;
    store.calls.push(Call {
        endpoint: endpoint.to_owned(),
        body: json!({ "accepted": false, "payload": body }),
        at: Instant::now(),
    });
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    let mut response = (status, axum::Json(error)).into_response();
    if let Some(secs) = retry_after {
        response.headers_mut().insert(header::RETRY_AFTER, secs.to_string().parse().expect("header value"));
    }
    Some(response)
}

fn record(shared: &Shared, endpoint: &str, body: Value) {
    shared.lock().calls.push(Call { endpoint: endpoint.to_owned(), body, at: Instant::now() });
}

async fn lookup(
    State(shared): State<Arc<Shared>>,
    Path((_version, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if !authorised(&shared, &headers) {
        return graph_error(StatusCode::UNAUTHORIZED, 190, "Invalid OAuth access token - Cannot parse access token");
    }
    if id == shared.number {
        if let Some(response) = scripted(&shared, "phone", &json!({})) {
            return response;
        }
        record(&shared, "phone", json!({}));
        return axum::Json(json!({ "verified_name": "Hermes Test", "code_verification_status": "VERIFIED",
            "display_phone_number": "+1 555-078-3881", "quality_rating": "GREEN", "id": shared.number }))
        .into_response();
    }
    if let Some(response) = scripted(&shared, "media_lookup", &json!({ "id": id })) {
        return response;
    }
    let found = shared.lock().media.get(&id).map(|(mime, bytes)| (mime.clone(), bytes.len()));
    record(&shared, "media_lookup", json!({ "id": id }));
    let Some((mime, size)) = found else {
        return graph_error(StatusCode::BAD_REQUEST, 100, "Unsupported get request. Object with ID does not exist");
    };
    let addr = shared.addr.lock().unwrap().expect("bound");
    axum::Json(json!({ "messaging_product": "whatsapp", "url": format!("http://{addr}/media-download/{id}"),
        "mime_type": mime, "sha256": "c0ffee", "file_size": size, "id": id }))
    .into_response()
}

async fn download(State(shared): State<Arc<Shared>>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    if !authorised(&shared, &headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    record(&shared, "download", json!({ "id": id }));
    match shared.lock().media.get(&id) {
        Some((mime, bytes)) => ([(header::CONTENT_TYPE, mime.clone())], bytes.clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn messages(
    State(shared): State<Arc<Shared>>,
    Path((_version, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorised(&shared, &headers) {
        return graph_error(StatusCode::UNAUTHORIZED, 190, "Invalid OAuth access token");
    }
    if id != shared.number {
        return graph_error(StatusCode::BAD_REQUEST, 100, "Unsupported post request");
    }
    let Ok(payload) = serde_json::from_slice::<Value>(&body) else {
        return graph_error(StatusCode::BAD_REQUEST, 100, "Invalid JSON");
    };
    if payload["messaging_product"] != "whatsapp" {
        return graph_error(StatusCode::BAD_REQUEST, 100, "The parameter messaging_product is required.");
    }
    if payload["status"] == "read" {
        record(&shared, "read", payload);
        return axum::Json(json!({ "success": true })).into_response();
    }
    if let Some(response) = scripted(&shared, "messages", &payload) {
        return response;
    }
    let to = payload["to"].as_str().unwrap_or_default().to_owned();
    let wamid = {
        let mut store = shared.lock();
        store.next_id += 1;
        let wamid = FakeWhatsApp::wamid(store.next_id);
        store.calls.push(Call {
            endpoint: "messages".into(),
            body: json!({ "accepted": true, "payload": payload, "id": wamid }),
            at: Instant::now(),
        });
        wamid
    };
    axum::Json(json!({ "messaging_product": "whatsapp", "contacts": [{ "input": to, "wa_id": to }],
        "messages": [{ "id": wamid }] }))
    .into_response()
}

async fn upload(
    State(shared): State<Arc<Shared>>,
    Path((_version, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorised(&shared, &headers) {
        return graph_error(StatusCode::UNAUTHORIZED, 190, "Invalid OAuth access token");
    }
    if id != shared.number {
        return graph_error(StatusCode::BAD_REQUEST, 100, "Unsupported post request");
    }
    let text = String::from_utf8_lossy(&body);
    let field = |name: &str| {
        let marker = format!("name=\"{name}\"\r\n\r\n");
        text.find(&marker).map(|at| text[at + marker.len()..].split("\r\n").next().unwrap_or_default().to_owned())
    };
    let filename = text.split("filename=\"").nth(1).and_then(|rest| rest.split('"').next()).map(str::to_owned);
    let info = json!({ "messaging_product": field("messaging_product"), "type": field("type"), "filename": filename,
        "bytes": body.len() });
    if let Some(response) = scripted(&shared, "media_upload", &info) {
        return response;
    }
    let media_id = {
        let mut store = shared.lock();
        store.next_id += 1;
        format!("MEDIA{}", store.next_id)
    };
    record(&shared, "media_upload", json!({ "accepted": true, "payload": info, "id": media_id }));
    axum::Json(json!({ "id": media_id })).into_response()
}
