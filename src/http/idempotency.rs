//! `Idempotency-Key` on `POST /v1/chat/completions` and `POST /v1/responses`, as the IETF httpapi draft describes it: the
//! key's value, its scope (API key + session, `user`, or the stateless scope — two clients'
//! keys never meet), the request fingerprint, replaying a stored response (as SSE for a
//! `stream: true` retry), and the background pruning of expired records.
//!
//! Only hashes reach the store: never the API key, never the body.
//!
//! A retry while the first request runs gets 409, another body under the same key 422; the response
//! is stored before the client sees it (`platforms::api`), so a retry replays it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::clock::now_ms;
use crate::config::Secret;
use crate::store::{Store, StoredResponse};

/// The request header.
pub(super) const HEADER: &str = "idempotency-key";
/// Marks a response that was replayed from the store.
pub(super) const REPLAYED: &str = "idempotent-replayed";
/// Longest key accepted.
const MAX_KEY_LEN: usize = 255;
/// Records deleted per statement when pruning, so the writer is never held long.
const PRUNE_BATCH: u32 = 500;

/// Why a key header is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum KeyError {
    /// Empty, too long, or not printable ASCII.
    #[error("Idempotency-Key must be 1 to 255 printable ASCII characters")]
    Malformed,
}

/// The key of a request, if it sent one. The draft's structured-field form (`"abc"`) and the
/// common bare form (`abc`) name the same key.
pub(super) fn key(headers: &HeaderMap) -> Result<Option<String>, KeyError> {
    let Some(value) = headers.get(HEADER) else { return Ok(None) };
    let text = value.to_str().map_err(|_| KeyError::Malformed)?.trim();
    let text = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')).unwrap_or(text);
    let printable = text.bytes().all(|b| (0x20..0x7f).contains(&b));
    if text.is_empty() || text.len() > MAX_KEY_LEN || !printable {
        return Err(KeyError::Malformed);
    }
    Ok(Some(text.to_owned()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The scope of a key: the API key (hashed; empty without one) and the conversation.
pub(super) fn scope(api_key: Option<&Secret>, continuity: &str) -> String {
    let mut hash = Sha256::new();
    let key_id = api_key.map(|k| hex(&Sha256::digest(k.expose().as_bytes()))).unwrap_or_default();
    hash.update(key_id.as_bytes());
    hash.update(b"\n");
    hash.update(continuity.as_bytes());
    hex(&hash.finalize())
}

/// The fingerprint of a request body: its canonical JSON (keys sorted) without the fields that
/// only choose how the answer is delivered (`stream`, `stream_options`).
pub(super) fn fingerprint(body: &Value) -> String {
    let mut body = body.clone();
    if let Value::Object(map) = &mut body {
        map.remove("stream");
        map.remove("stream_options");
    }
    let mut canonical = String::new();
    write_canonical(&body, &mut canonical);
    hex(&Sha256::digest(canonical.as_bytes()))
}

/// A request's Idempotency-Key with what its record is claimed under: the key's scope (API key
/// and continuity), the body's fingerprint, and the age past which an old record is replaced.
pub(super) struct Keyed {
    key: String,
    scope: String,
    fingerprint: String,
    expires_before: i64,
}

impl Keyed {
    /// `key` (the request's header, if any) for a request of `continuity` with body `raw`.
    pub(super) fn new(key: Option<String>, state: &super::AppState, continuity: &str, raw: &Value) -> Option<Self> {
        let ttl_ms = i64::try_from(state.idempotency_ttl.as_millis()).unwrap_or(i64::MAX);
        key.map(|key| Self {
            key,
            scope: scope(state.api_key.as_ref(), continuity),
            fingerprint: fingerprint(raw),
            expires_before: now_ms().saturating_sub(ttl_ms),
        })
    }

    /// The claim the request `request_id` makes in the transaction that stores its event.
    pub(super) fn claim<'a>(&'a self, request_id: &'a str) -> crate::store::IdempotencyClaim<'a> {
        crate::store::IdempotencyClaim {
            scope: &self.scope,
            key: &self.key,
            fingerprint: &self.fingerprint,
            request_id,
            expires_before: self.expires_before,
        }
    }
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (name, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(name.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// A stored response, again: as it was, or as server-sent events for a streaming retry.
pub(super) fn replay(stored: StoredResponse, stream: bool) -> Response {
    let body: Value = serde_json::from_str(&stored.body).unwrap_or(Value::Null);
    let mut response = if stream && body["object"] == "response" {
        let events = super::response_events::replay_events(&body);
        let stream = futures_util::stream::iter(
            events.into_iter().map(|(kind, data)| Ok::<_, Infallible>(Event::default().event(kind).data(data))),
        );
        Sse::new(stream).into_response()
    } else if stream {
        let events = replay_events(&stored);
        let stream =
            futures_util::stream::iter(events.into_iter().map(|data| Ok::<_, Infallible>(Event::default().data(data))));
        Sse::new(stream).into_response()
    } else {
        let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, [(header::CONTENT_TYPE, "application/json")], stored.body).into_response()
    };
    response.headers_mut().insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

/// The SSE data lines of a stored response: role, content, stop, `[DONE]` — or the stored error.
fn replay_events(stored: &StoredResponse) -> Vec<String> {
    let body: Value = serde_json::from_str(&stored.body).unwrap_or(Value::Null);
    let mut events = Vec::new();
    if stored.status == 200 {
        let chunk = |delta: Value, finish: Option<&str>| {
            json!({
                "id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"],
                "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
            })
            .to_string()
        };
        events.push(chunk(json!({ "role": "assistant" }), None));
        let text = body["choices"][0]["message"]["content"].as_str().unwrap_or_default();
        if !text.is_empty() {
            events.push(chunk(json!({ "content": text }), None));
        }
        events.push(chunk(json!({}), Some("stop")));
    } else {
        events.push(stored.body.clone());
    }
    events.push("[DONE]".to_owned());
    events
}

/// Delete expired records in small batches, now and then every `ttl / 8` (at least a minute, at
/// most an hour), until `cancel`. Expired records are already ignored by lookups; this only keeps
/// the table from growing.
pub async fn prune(store: Arc<dyn Store>, ttl: Duration, cancel: CancellationToken) {
    prune_every("idempotency records", ttl, cancel, |before| {
        let store = store.clone();
        async move { store.prune_idempotency(before, PRUNE_BATCH).await }
    })
    .await;
}

/// Delete Responses API responses older than `ttl`, as `prune` does idempotency records.
pub async fn prune_responses(store: Arc<dyn Store>, ttl: Duration, cancel: CancellationToken) {
    prune_every("stored responses", ttl, cancel, |before| {
        let store = store.clone();
        async move { store.prune_responses(before, PRUNE_BATCH).await }
    })
    .await;
}

/// Run `op(before)` (one batch of deletions older than `ttl`) until a batch comes back short, now
/// and every `ttl / 8` (at least a minute, at most an hour), until `cancel`.
async fn prune_every<F, Fut>(what: &str, ttl: Duration, cancel: CancellationToken, op: F)
where
    F: Fn(i64) -> Fut,
    Fut: std::future::Future<Output = crate::store::StoreResult<u64>>,
{
    let every = (ttl / 8).clamp(Duration::from_secs(60), Duration::from_secs(3600));
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    loop {
        let before = now_ms().saturating_sub(ttl_ms);
        loop {
            match op(before).await {
                Ok(n) if n == u64::from(PRUNE_BATCH) => tokio::task::yield_now().await,
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "pruning {what} failed");
                    break;
                }
            }
            if cancel.is_cancelled() {
                return;
            }
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = cancel.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Outlive;

    #[test]
    fn keys_bare_or_quoted_and_malformed_ones() {
        let mut headers = HeaderMap::new();
        assert_eq!(key(&headers), Ok(None));
        headers.insert(HEADER, HeaderValue::from_static("\"8e03978e-40d5\""));
        assert_eq!(key(&headers), Ok(Some("8e03978e-40d5".into())));
        headers.insert(HEADER, HeaderValue::from_static("abc"));
        assert_eq!(key(&headers), Ok(Some("abc".into())));
        for bad in ["", "\"\"", &"x".repeat(256)] {
            headers.insert(HEADER, HeaderValue::from_str(bad).unwrap());
            assert_eq!(key(&headers), Err(KeyError::Malformed), "{bad:?}");
        }
    }

    #[test]
    fn fingerprints_ignore_key_order_and_delivery_mode_only() {
        let a = json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] });
        let b = json!({ "messages": [{ "content": "hi", "role": "user" }], "model": "m", "stream": true });
        let c = json!({ "model": "m", "messages": [{ "role": "user", "content": "hi!" }] });
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&c));
    }

    #[test]
    fn scopes_separate_keys_and_sessions() {
        let one = Secret::new("key-one");
        let two = Secret::new("key-two");
        let s = scope(Some(&one), "session:a");
        assert_eq!(s, scope(Some(&one), "session:a"));
        assert_ne!(s, scope(Some(&two), "session:a"));
        assert_ne!(s, scope(Some(&one), "session:b"));
        assert_ne!(s, scope(None, "session:a"));
        assert!(!s.contains("key-one"));
    }

    #[tokio::test]
    async fn pruning_removes_expired_records_only() {
        use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, Sender};

        use crate::store::{IdempotencyClaim, IdempotentAccept, SqliteStore};
        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteStore::open(&dir.path().join("t.db"), Duration::from_secs(1), 1).await.unwrap();
        let store: Arc<dyn Store> = Arc::new(sqlite);
        let ttl = Duration::from_secs(3600);
        let now = now_ms();
        for (id, key, at) in [("r-old", "old", now - 2 * 3_600_000), ("r-new", "new", now - 60_000)] {
            let event = InboundEvent::Message {
                event_id: id.into(),
                message: InboundMessage {
                    profile: None,
                    message_id: id.into(),
                    chat: ChatRef::new("api", "c", ChatType::Dm),
                    sender: Sender { id: "u".into(), name: None, is_bot: false, roles: Vec::new() },
                    text: "hi".into(),
                    attachments: Vec::new(),
                    reply_to: None,
                    addressed: true,
                    timestamp_ms: at,
                    history: Vec::new(),
                    chat_title: None,
                    client: None,
                },
            };
            let claim = IdempotencyClaim { scope: "s", key, fingerprint: "f", request_id: id, expires_before: 0 };
            assert!(matches!(
                store.accept_idempotent(&event, &claim, at, Outlive::PowerCut).await.unwrap(),
                IdempotentAccept::New { .. }
            ));
        }
        // A cancelled token still lets the first pass run, then returns.
        let cancel = CancellationToken::new();
        cancel.cancel();
        prune(store.clone(), ttl, cancel).await;
        assert_eq!(store.prune_idempotency(now + 1, 10).await.unwrap(), 1, "only the fresh record was left");
    }

    #[test]
    fn a_stored_answer_replays_as_chunks() {
        let stored = StoredResponse {
            status: 200,
            body: json!({ "id": "chatcmpl-1", "created": 5, "model": "m",
                "choices": [{ "message": { "content": "hello" } }] })
            .to_string(),
        };
        let events = replay_events(&stored);
        assert_eq!(events.len(), 4);
        assert!(events[1].contains("\"content\":\"hello\"") && events[1].contains("chatcmpl-1"));
        assert!(events[2].contains("\"finish_reason\":\"stop\""));
        assert_eq!(events[3], "[DONE]");
        let failed = StoredResponse { status: 502, body: "{\"error\":{}}".into() };
        assert_eq!(replay_events(&failed), ["{\"error\":{}}", "[DONE]"]);
    }
}
