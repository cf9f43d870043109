//! `POST /v1/chat/completions` and `GET /v1/models`: the OpenAI-compatible API platform.
//!
//! A request becomes an inbound event through the same ingress as every chat platform; the
//! handler waits for the reply the outbox hands to `ApiPlatform::send`. Errors are OpenAI-shaped
//! JSON; the bearer key is compared in constant time and never logged.

use std::convert::Infallible;
use std::sync::Arc;

use futures_util::StreamExt;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use hermesd_platform::{Accepted, ChatRef, ChatType, HistoryMessage, InboundEvent, InboundMessage, Ingress, Sender};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{AppState, api_media, idempotency};
use crate::clock::now_ms;
use crate::platforms::api::{ApiReply, NAME, ReplyMeta, ReplyShape, StreamBuffer, completion, usage_json};
use crate::store::{IdempotencyClaim, IdempotentAccept};

/// Header carrying server-side session continuity.
pub(super) const SESSION_HEADER: &str = "x-hermes-session-id";

#[derive(Deserialize)]
struct CompletionRequest {
    #[serde(default)]
    model: Option<String>,
    messages: Vec<WireMessage>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

/// `stream_options`: with `include_usage`, a last chunk (`choices: []`) carries the turn's
/// usage and every other chunk has `"usage": null`, as OpenAI streams it.
#[derive(Deserialize, Default)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

#[derive(Deserialize)]
struct WireMessage {
    role: String,
    #[serde(default)]
    content: Value,
}

pub(super) fn error(status: StatusCode, kind: &str, code: &str, message: impl Into<String>) -> Response {
    let body = json!({ "error": { "message": message.into(), "type": kind, "code": code } });
    (status, Json(body)).into_response()
}

/// Text of a message's content: a string, or the text parts of an array.
pub(super) fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    }
}

pub(super) fn authorized(state: &AppState, headers: &HeaderMap) -> bool {
    if state.api_key.is_none() {
        return true;
    }
    holds_a_key(state, headers)
}

/// Whether the request's bearer is `API_SERVER_KEY` or the home's local key.
pub(super) fn holds_a_key(state: &AppState, headers: &HeaderMap) -> bool {
    bearer_holder(state, headers).is_some()
}

/// Which key the request's bearer is (`api` or `local`), if it is one.
pub(super) fn bearer_holder(state: &AppState, headers: &HeaderMap) -> Option<&'static str> {
    let given = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))?;
    key_holder(state, given)
}

/// Which key `given` is (`api`: `API_SERVER_KEY`, `local`: the home's local key), compared in
/// constant time with both.
pub(super) fn key_holder(state: &AppState, given: &str) -> Option<&'static str> {
    let given = given.trim().as_bytes();
    let api = state.api_key.as_ref().is_some_and(|key| constant_time_eq(given, key.expose().as_bytes()));
    let local = state.local_key.as_ref().is_some_and(|key| constant_time_eq(given, key.expose().as_bytes()));
    match (api, local) {
        (true, _) => Some("api"),
        (false, true) => Some("local"),
        _ => None,
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, byte) in a.iter().enumerate() {
        diff |= usize::from(byte ^ b.get(i % b.len().max(1)).copied().unwrap_or(0));
    }
    diff == 0
}

pub(super) async fn models(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if !authorized(&state, &headers) {
        return error(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "invalid_api_key",
            "invalid or missing API key",
        );
    }
    let data: Vec<Value> = state
        .models
        .get()
        .listed()
        .map(|id| json!({ "id": id, "object": "model", "created": 0, "owned_by": "hermesd" }))
        .collect();
    Json(json!({ "object": "list", "data": data })).into_response()
}

pub(super) async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "invalid_request_error", "not_found", "no such route")
}

pub(super) async fn chat_completions(State(state): State<AppState>, request: Request) -> Response {
    let headers = request.headers().clone();
    let (request, raw) = match read_request(&state, &headers, request).await {
        Ok(read) => read,
        Err(response) => return *response,
    };
    let (last_user, text) = match last_user_message(&request) {
        Ok(found) => found,
        Err(response) => return *response,
    };
    let Some(api) = state.api.clone() else {
        return not_found().await;
    };
    if state.ingress.is_closed() {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "shutting_down",
            "hermesd is shutting down; retry shortly",
        );
    }
    let idempotency_key = match idempotency::key(&headers) {
        Ok(key) => key,
        Err(e) => {
            return error(StatusCode::BAD_REQUEST, "invalid_request_error", "invalid_idempotency_key", e.to_string());
        }
    };
    let profile = match state.models.get().profile(request.model.as_deref()) {
        Ok(profile) => profile.to_owned(),
        Err(e) => return error(StatusCode::NOT_FOUND, "invalid_request_error", "model_not_found", e),
    };
    let (chat_id, history, continuity) = continuity(&headers, &request, last_user);
    // The request id is also the event id: unique per request. A retried request is caught by
    // its Idempotency-Key record, claimed in the same transaction that stores the event.
    let request_id = uuid::Uuid::now_v7().to_string();
    let content = &request.messages[last_user].content;
    let attachments = match api.media() {
        Some(media) => match api_media::save_images(content, media, &chat_id, &request_id).await {
            Ok(attachments) => attachments,
            Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_request_error", "invalid_image", e.to_string()),
        },
        None => Vec::new(),
    };
    let user_id = request.user.clone().unwrap_or_else(|| chat_id.clone());
    let event = InboundEvent::Message {
        event_id: request_id.clone(),
        message: InboundMessage {
            profile: (profile != crate::config::DEFAULT_PROFILE).then_some(profile),
            message_id: request_id.clone(),
            chat: ChatRef::new(NAME, chat_id.clone(), ChatType::Dm),
            sender: Sender { id: user_id, name: None, is_bot: false, roles: Vec::new() },
            text,
            attachments,
            reply_to: None,
            addressed: true,
            timestamp_ms: now_ms(),
            history,
            chat_title: None,
            client: None,
        },
    };
    let model = request.model.clone().unwrap_or_else(|| state.model_id.clone());
    let meta = ReplyMeta {
        model: model.clone(),
        created: now_ms() / 1000,
        idempotent: idempotency_key.is_some(),
        shape: ReplyShape::ChatCompletion,
    };
    let (waiter, buffer) = if request.stream {
        let (waiter, buffer) = api.register_stream(&request_id, meta.clone());
        (waiter, Some(buffer))
    } else {
        (api.register(&request_id, meta.clone()), None)
    };
    let session_header = HeaderValue::from_str(&chat_id).ok();
    let keyed = idempotency::Keyed::new(idempotency_key, &state, &continuity, &raw);
    let claim = keyed.as_ref().map(|keyed| keyed.claim(&request_id));
    let mut response = match admit(&state, event, claim.as_ref(), request.stream).await {
        Some(early) => {
            api.forget(&request_id);
            early
        }
        None => match buffer {
            Some(buffer) => {
                let include_usage = request.stream_options.as_ref().is_some_and(|o| o.include_usage);
                stream_response(waiter, buffer, StreamMeta { model, request_id, include_usage }, state.sse_keepalive)
            }
            None => match waiter.await {
                Ok(reply) => complete_response(&reply, &meta, &request_id),
                Err(_) => error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "server_error",
                    "restarting",
                    "hermesd is restarting; this message was saved and will be answered in its session after the restart",
                ),
            },
        },
    };
    if let Some(value) = session_header {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

/// The request's body, read only once the key checked out (a client without it cannot hold
/// the handler by sending slowly), parsed; `Err` is the error response.
async fn read_request(
    state: &AppState,
    headers: &HeaderMap,
    request: Request,
) -> Result<(CompletionRequest, Value), Box<Response>> {
    read_json(state, headers, request).await
}

/// A request body of shape `T` (and as JSON, for its fingerprint), read only once the key checked
/// out; `Err` is the error response.
pub(super) async fn read_json<T: serde::de::DeserializeOwned>(
    state: &AppState,
    headers: &HeaderMap,
    request: Request,
) -> Result<(T, Value), Box<Response>> {
    if !authorized(state, headers) {
        return Err(Box::new(error(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "invalid_api_key",
            "invalid or missing API key",
        )));
    }
    let body = match Bytes::from_request(request, state).await {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return Err(Box::new(error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                "body_too_large",
                "request body is too large",
            )));
        }
        Err(rejection) => {
            return Err(Box::new(error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_body",
                rejection.body_text(),
            )));
        }
    };
    serde_json::from_slice::<Value>(&body)
        .and_then(|value| T::deserialize(&value).map(|request| (request, value)))
        .map_err(|e| {
            Box::new(error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_json",
                format!("malformed JSON body: {e}"),
            ))
        })
}

/// The index and text of the request's last user message, which must say something (text or
/// an image); `Err` is the error response.
fn last_user_message(request: &CompletionRequest) -> Result<(usize, String), Box<Response>> {
    let Some(last_user) = request.messages.iter().rposition(|m| m.role == "user") else {
        return Err(Box::new(error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "no_user_message",
            "messages must contain a user message",
        )));
    };
    let content = &request.messages[last_user].content;
    let text = content_text(content);
    if text.trim().is_empty() && !api_media::has_images(content) {
        return Err(Box::new(error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "empty_message",
            "the last user message is empty",
        )));
    }
    Ok((last_user, text))
}

/// Continuity: a session header or the `user` field keep history server-side; otherwise the
/// request is stateless and its own messages are the history. Returns the chat id, the history
/// the request carries, and the continuity label its idempotency scope hashes.
fn continuity(
    headers: &HeaderMap,
    request: &CompletionRequest,
    last_user: usize,
) -> (String, Vec<HistoryMessage>, String) {
    let header_session =
        headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::trim).filter(|s| !s.is_empty());
    match (header_session, request.user.as_deref()) {
        (Some(session), _) => (session.to_owned(), Vec::new(), format!("session:{session}")),
        (None, Some(user)) if !user.trim().is_empty() => {
            (format!("user:{}", user.trim()), Vec::new(), format!("user:{}", user.trim()))
        }
        _ => {
            let history = request.messages[..last_user]
                .iter()
                .filter(|m| matches!(m.role.as_str(), "system" | "user" | "assistant"))
                .map(|m| HistoryMessage { role: m.role.clone(), content: content_text(&m.content) })
                .collect();
            (uuid::Uuid::now_v7().to_string(), history, "stateless".to_owned())
        }
    }
}

/// Hand the event to the ingress, claiming its Idempotency-Key when it has one. `None`: a turn
/// was started and its reply will come; `Some`: the answer, as no turn starts for this request.
pub(super) async fn admit(
    state: &AppState,
    event: InboundEvent,
    claim: Option<&IdempotencyClaim<'_>>,
    stream: bool,
) -> Option<Response> {
    let accepted = match claim {
        None => state.ingress.accept(event).await.map(|accepted| match accepted {
            Accepted::New => IdempotentAccept::New { seq: 0 },
            // The event id is fresh per request, so this cannot repeat; treat it as running.
            Accepted::Duplicate => IdempotentAccept::InProgress,
        }),
        Some(claim) => state.ingress.accept_idempotent(event, claim).await,
    };
    match accepted {
        Ok(IdempotentAccept::New { .. }) => None,
        Ok(IdempotentAccept::Replay(stored)) => Some(idempotency::replay(stored, stream)),
        Ok(IdempotentAccept::InProgress) => Some(error(
            StatusCode::CONFLICT,
            "invalid_request_error",
            "request_in_progress",
            "a request with this Idempotency-Key is still running; retry after it finished",
        )),
        Ok(IdempotentAccept::Mismatch) => Some(error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request_error",
            "idempotency_key_reused",
            "this Idempotency-Key was used with a different request body",
        )),
        Err(e) => {
            tracing::warn!(error = %e, "api request not accepted");
            Some(error(StatusCode::SERVICE_UNAVAILABLE, "server_error", "not_accepted", e.to_string()))
        }
    }
}

fn complete_response(reply: &ApiReply, meta: &ReplyMeta, request_id: &str) -> Response {
    let stored = completion(reply, meta, request_id);
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(axum::http::header::CONTENT_TYPE, "application/json")], stored.body).into_response()
}

/// What a streamed answer's chunks name, and whether they carry usage.
struct StreamMeta {
    model: String,
    request_id: String,
    include_usage: bool,
}

fn stream_response(
    waiter: tokio::sync::oneshot::Receiver<ApiReply>,
    buffer: Arc<StreamBuffer>,
    meta: StreamMeta,
    keepalive: std::time::Duration,
) -> Response {
    let StreamMeta { model, request_id, include_usage } = meta;
    let id = format!("chatcmpl-{request_id}");
    let frame = move |choices: Value, usage: Option<Value>| {
        let mut chunk = json!({
            "id": id, "object": "chat.completion.chunk", "created": now_ms() / 1000, "model": model,
            "choices": choices,
        });
        if include_usage {
            chunk["usage"] = usage.unwrap_or(Value::Null);
        }
        chunk.to_string()
    };
    let usage_chunk = {
        let frame = frame.clone();
        move |reply: &ApiReply| frame(json!([]), Some(usage_json(reply.usage.as_ref())))
    };
    let chunk = move |delta: Value, finish: Option<&str>| {
        frame(json!([{ "index": 0, "delta": delta, "finish_reason": finish }]), None)
    };
    // Deltas go out as the model writes them; the final reply only adds what was not streamed
    // (all of it when the model did not stream, e.g. a command's answer or an error).
    let (tx, rx) = tokio::sync::mpsc::channel::<String>(64);
    tokio::spawn(async move {
        let mut waiter = waiter;
        let mut streamed = String::new();
        let _ = tx.send(chunk(json!({ "role": "assistant" }), None)).await;
        let reply = loop {
            tokio::select! {
                reply = &mut waiter => break reply,
                _ = buffer.ready.notified() => {
                    // Reasoning comes before the answer text it led to, as DeepSeek-style
                    // `reasoning_content` deltas that plain clients ignore.
                    let reasoning = buffer.take_reasoning();
                    if !reasoning.is_empty() && tx.send(chunk(json!({ "reasoning_content": reasoning }), None)).await.is_err() {
                        return;
                    }
                    let text = buffer.take();
                    if !text.is_empty() {
                        streamed.push_str(&text);
                        if tx.send(chunk(json!({ "content": text }), None)).await.is_err() {
                            return;
                        }
                    }
                }
            }
        };
        let reasoning = buffer.take_reasoning();
        if !reasoning.is_empty() {
            let _ = tx.send(chunk(json!({ "reasoning_content": reasoning }), None)).await;
        }
        let tail = buffer.take();
        if !tail.is_empty() {
            streamed.push_str(&tail);
            let _ = tx.send(chunk(json!({ "content": tail }), None)).await;
        }
        let events = match reply {
            Ok(reply) if !reply.error => {
                let rest = reply.text.strip_prefix(streamed.as_str()).unwrap_or(if streamed.is_empty() { &reply.text } else { "" });
                let mut events = Vec::new();
                if !rest.is_empty() {
                    events.push(chunk(json!({ "content": rest }), None));
                }
                events.push(chunk(json!({}), Some("stop")));
                if include_usage {
                    events.push(usage_chunk(&reply));
                }
                events
            }
            Ok(reply) => vec![json!({ "error": { "message": reply.text, "type": "server_error", "code": "turn_failed" } }).to_string()],
            Err(_) => vec![json!({ "error": { "message": "hermesd is restarting; this message was saved and will be answered after the restart", "type": "server_error", "code": "restarting" } }).to_string()],
        };
        for event in events.into_iter().chain(std::iter::once("[DONE]".to_owned())) {
            if tx.send(event).await.is_err() {
                return;
            }
        }
    });
    let stream =
        tokio_stream::wrappers::ReceiverStream::new(rx).map(|data| Ok::<_, Infallible>(Event::default().data(data)));
    Sse::new(stream).keep_alive(KeepAlive::new().interval(keepalive).text("keepalive")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_compare() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    #[test]
    fn content_parts() {
        assert_eq!(content_text(&json!("hi")), "hi");
        assert_eq!(
            content_text(&json!([{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}])),
            "a\nb"
        );
        assert_eq!(content_text(&json!(null)), "");
    }
}
