//! The OpenAI Responses API: `POST /v1/responses`, `GET` and `DELETE /v1/responses/{id}`.
//!
//! A request runs as a turn of an API chat, as `POST /v1/chat/completions` does: same key,
//! limits, idempotency and usage. `previous_response_id` continues the chat the named response
//! was given in (its session holds the history); without it a response starts a chat of its own,
//! with the input's earlier messages as client history. `instructions` reach the model as a
//! system message of this request only. With `store` (the default) the response is kept for
//! `GET` and `previous_response_id` (`[retention] responses`); `store: false` keeps nothing to
//! retrieve. Streaming sends the Responses events (`response.created` … `response.output_text.delta`
//! … `response.completed`), each with its `sequence_number`.
//!
//! Function tools the client declares are offered to the model beside hermesd's own; a call of
//! one ends the response with a `function_call` item (hermesd's own calls of that step run first),
//! and a request with the `function_call_output` items and `previous_response_id` continues the
//! turn from there. Other tool types are refused: hermesd brings its own tools.
//!
//! A conversation continues from its newest stored response only: hermesd keeps one history per
//! chat, so a branch from an older response is refused (409) rather than silently merged.

use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hermesd_platform::{
    ChatRef, ChatType, ClientOutput, ClientTool, ClientTurn, HistoryMessage, InboundEvent, InboundMessage, Sender,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::api::{SESSION_HEADER, admit, authorized, content_text, error, not_found, read_json};
use super::response_events::stream;
use super::{AppState, api_media, idempotency};
use crate::clock::now_ms;
use crate::platforms::api::{NAME, ReplyMeta, ReplyShape, ResponseMeta, completion, response_id, stored_response};

#[derive(Deserialize)]
struct ResponsesRequest {
    #[serde(default)]
    model: Option<String>,
    input: Value,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    previous_response_id: Option<String>,
    #[serde(default)]
    store: Option<bool>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default)]
    tools: Vec<Value>,
    #[serde(default)]
    text: Option<Value>,
    #[serde(default)]
    tool_choice: Option<Value>,
}

/// Why a request asks for something hermesd does not do, rather than answer it differently.
fn unsupported(request: &ResponsesRequest) -> Option<String> {
    let format = request.text.as_ref().and_then(|t| t["format"]["type"].as_str());
    if let Some(kind @ ("json_schema" | "json_object")) = format {
        return Some(format!("text.format {kind:?} (structured output) is not supported; ask for JSON in the input"));
    }
    match &request.tool_choice {
        None => None,
        Some(Value::String(choice)) if choice == "auto" => None,
        Some(choice) => Some(format!("tool_choice {choice} is not supported; the model chooses (\"auto\")")),
    }
}

/// The input as hermesd takes it: the user's words now (text and the content whose image parts
/// are saved), and the messages before them.
struct Input {
    text: String,
    content: Value,
    earlier: Vec<HistoryMessage>,
    /// Outputs of the function calls the previous response ended with.
    outputs: Vec<ClientOutput>,
}

fn bad_request(code: &str, message: impl Into<String>) -> Box<Response> {
    Box::new(error(StatusCode::BAD_REQUEST, "invalid_request_error", code, message))
}

/// A message item's content as chat-completions parts (`text`, `image_url`), which the rest of
/// the API speaks.
fn as_chat_parts(content: &Value) -> Value {
    match content {
        Value::Array(parts) => Value::Array(
            parts
                .iter()
                .map(|part| match part["type"].as_str() {
                    Some("input_text" | "output_text" | "text") => json!({ "type": "text", "text": part["text"] }),
                    Some("input_image") => {
                        let url = part["image_url"].as_str().or_else(|| part["image_url"]["url"].as_str());
                        json!({ "type": "image_url", "image_url": { "url": url } })
                    }
                    _ => part.clone(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Split `input` into the last user message and the messages before it.
fn read_input(input: &Value) -> Result<Input, Box<Response>> {
    let items = match input {
        Value::String(text) => {
            return Ok(Input {
                text: text.clone(),
                content: Value::String(text.clone()),
                earlier: Vec::new(),
                outputs: Vec::new(),
            });
        }
        Value::Array(items) => items,
        _ => return Err(bad_request("invalid_input", "input must be a string or an array of input items")),
    };
    let mut messages: Vec<(String, Value)> = Vec::new();
    let mut outputs = Vec::new();
    let mut echoed_calls = false;
    for item in items {
        match item["type"].as_str() {
            None | Some("message") => {
                let role = item["role"].as_str().unwrap_or("user");
                let role = if role == "developer" { "system" } else { role };
                if !matches!(role, "user" | "assistant" | "system") {
                    return Err(bad_request("invalid_input", format!("unknown message role {role:?}")));
                }
                messages.push((role.to_owned(), as_chat_parts(&item["content"])));
            }
            Some("function_call_output") => {
                let Some(call_id) = item["call_id"].as_str().filter(|c| !c.is_empty()) else {
                    return Err(bad_request("invalid_input", "a function_call_output needs its call_id"));
                };
                let output = match &item["output"] {
                    Value::String(text) => text.clone(),
                    Value::Null => String::new(),
                    other => {
                        let text = content_text(&as_chat_parts(other));
                        if text.is_empty() { other.to_string() } else { text }
                    }
                };
                outputs.push(ClientOutput { call_id: call_id.to_owned(), output });
            }
            // The calls themselves, sent back by a client that keeps its own history: the
            // conversation already holds them.
            Some("function_call") => echoed_calls = true,
            Some(other) => return Err(bad_request("invalid_input", format!("unsupported input item type {other:?}"))),
        }
    }
    if !outputs.is_empty() {
        if messages.iter().any(|(role, _)| role == "user") {
            return Err(bad_request(
                "invalid_input",
                "send the function_call_output items alone; a user message can follow in the next request",
            ));
        }
        return Ok(Input { text: String::new(), content: Value::Null, earlier: Vec::new(), outputs });
    }
    let Some(last) = messages.iter().rposition(|(role, _)| role == "user") else {
        return Err(bad_request("no_user_message", "input must contain a user message"));
    };
    if echoed_calls {
        return Err(bad_request(
            "invalid_input",
            "function_call items cannot start a conversation; continue it with previous_response_id",
        ));
    }
    let content = messages[last].1.clone();
    let earlier = messages[..last]
        .iter()
        .map(|(role, content)| HistoryMessage { role: role.clone(), content: content_text(content) })
        .collect();
    Ok(Input { text: content_text(&content), content, earlier, outputs })
}

/// The function tools a request declares (only functions: hermesd brings its own tools).
fn read_tools(tools: &[Value]) -> Result<Vec<ClientTool>, Box<Response>> {
    let mut out: Vec<ClientTool> = Vec::new();
    for tool in tools {
        if tool["type"] != "function" {
            return Err(bad_request(
                "unsupported_tool",
                format!(
                    "tool type {} is not supported: hermesd brings its own tools; declare functions only",
                    tool["type"]
                ),
            ));
        }
        let name = tool["name"].as_str().or_else(|| tool["function"]["name"].as_str()).unwrap_or_default();
        let valid =
            (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(bad_request(
                "invalid_tool",
                format!("function name {name:?}: 1-64 letters, digits, '_' or '-'"),
            ));
        }
        if out.iter().any(|t| t.name == name) {
            return Err(bad_request("invalid_tool", format!("function {name:?} is declared twice")));
        }
        let parameters = match &tool["parameters"] {
            Value::Null => json!({ "type": "object", "properties": {} }),
            schema => schema.clone(),
        };
        let description = tool["description"].as_str().unwrap_or_default().to_owned();
        out.push(ClientTool { name: name.to_owned(), description, parameters });
    }
    Ok(out)
}

/// The chat a request continues: the one its previous response was given in (which must be that
/// chat's newest stored response), the session header's, or a new one.
async fn chat_for(state: &AppState, headers: &HeaderMap, previous: Option<&str>) -> Result<Chat, Box<Response>> {
    if let Some(previous) = previous {
        let found = state.store.api_response(previous).await.map_err(|e| {
            Box::new(error(StatusCode::SERVICE_UNAVAILABLE, "server_error", "store_unavailable", e.to_string()))
        })?;
        let Some(found) = found else {
            return Err(Box::new(error(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                "previous_response_not_found",
                format!("Previous response with id '{previous}' not found."),
            )));
        };
        let latest = state.store.latest_response(&found.chat_id).await.map_err(|e| {
            Box::new(error(StatusCode::SERVICE_UNAVAILABLE, "server_error", "store_unavailable", e.to_string()))
        })?;
        // A retry under an Idempotency-Key finds its own answer newest: it continued `previous`,
        // and the key's record replays it.
        let retried = match (&latest, headers.contains_key(idempotency::HEADER)) {
            (Some(newest), true) => state
                .store
                .api_response(newest)
                .await
                .ok()
                .flatten()
                .and_then(|r| serde_json::from_str::<Value>(&r.body).ok())
                .is_some_and(|body| body["previous_response_id"] == previous),
            _ => false,
        };
        if latest.as_deref() != Some(previous) && !retried {
            return Err(Box::new(error(
                StatusCode::CONFLICT,
                "invalid_request_error",
                "not_latest_response",
                "hermesd continues a conversation from its newest response only; use that one's id",
            )));
        }
        let previous: Option<Value> = serde_json::from_str(&found.body).ok();
        if previous.as_ref().is_some_and(|p| p["status"] == "in_progress") {
            return Err(Box::new(error(
                StatusCode::CONFLICT,
                "invalid_request_error",
                "response_in_progress",
                format!("Response '{}' is still in progress; continue it once it has completed.", found.id),
            )));
        }
        return Ok(Chat { id: found.chat_id, continued: true, previous, context: found.context });
    }
    let header = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::trim).filter(|s| !s.is_empty());
    let (id, continued) = match header {
        Some(session) => (session.to_owned(), true),
        None => (format!("resp:{}", uuid::Uuid::now_v7().simple()), false),
    };
    Ok(Chat { id, continued, previous: None, context: Vec::new() })
}

/// The API chat a request talks in.
struct Chat {
    /// Its id.
    id: String,
    /// Whether it has a history in hermesd (a previous response, or a named session).
    continued: bool,
    /// The response it continues, as the client got it.
    previous: Option<Value>,
    /// The messages the conversation opened with, which the model sees before its transcript.
    context: Vec<HistoryMessage>,
}

/// `POST /v1/responses`.
pub(super) async fn create(State(state): State<AppState>, request: Request) -> Response {
    let headers = request.headers().clone();
    let (request, raw) = match read_json::<ResponsesRequest>(&state, &headers, request).await {
        Ok(read) => read,
        Err(response) => return *response,
    };
    if let Some(why) = unsupported(&request) {
        return *bad_request("unsupported_parameter", why);
    }
    let tools = match read_tools(&request.tools) {
        Ok(tools) => tools,
        Err(response) => return *response,
    };
    let input = match read_input(&request.input) {
        Ok(input) => input,
        Err(response) => return *response,
    };
    if input.outputs.is_empty() && input.text.trim().is_empty() && !api_media::has_images(&input.content) {
        return *bad_request("empty_message", "the last user message is empty");
    }
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
    let models = state.models.get();
    let profile = match models.profile(request.model.as_deref()) {
        Ok(profile) => profile.to_owned(),
        Err(e) => return error(StatusCode::NOT_FOUND, "invalid_request_error", "model_not_found", e),
    };
    let Chat { id: chat_id, continued, previous, context } =
        match chat_for(&state, &headers, request.previous_response_id.as_deref()).await {
            Ok(chat) => chat,
            Err(response) => return *response,
        };
    // A continued conversation stays with the profile it started with (its history and memory
    // are that profile's): a request naming no model takes it, one naming another is refused.
    let started_with = previous.as_ref().and_then(|p| p["model"].as_str().map(str::to_owned));
    let model = request.model.clone().or_else(|| started_with.clone());
    let profile = match started_with.as_deref().map(|m| models.profile(Some(m))) {
        Some(Ok(first)) if request.model.is_none() => first.to_owned(),
        Some(Ok(first)) if first != profile => {
            return *bad_request(
                "model_mismatch",
                format!(
                    "this conversation belongs to model {:?} (profile {first}); continue it with that model, or start a new one",
                    started_with.unwrap_or_default()
                ),
            );
        }
        _ => profile,
    };
    if let Some(previous) = &previous {
        let asked: Vec<&str> = previous["output"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|item| item["type"] == "function_call")
            .filter_map(|item| item["call_id"].as_str())
            .collect();
        if let Some(stray) = input.outputs.iter().find(|o| !asked.contains(&o.call_id.as_str())) {
            return *bad_request(
                "invalid_input",
                format!("function_call_output {:?} answers no function call of the previous response", stray.call_id),
            );
        }
    }
    if !input.outputs.is_empty() && !continued {
        return *bad_request(
            "invalid_input",
            "function_call_output continues a response: name it with previous_response_id",
        );
    }
    let request_id = uuid::Uuid::now_v7().to_string();
    let attachments = match api.media() {
        Some(media) => match api_media::save_images(&input.content, media, &chat_id, &request_id).await {
            Ok(attachments) => attachments,
            Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_request_error", "invalid_image", e.to_string()),
        },
        None => Vec::new(),
    };
    // Instructions are this request's only. A new chat opens with the input's earlier messages,
    // which its responses carry (`context`) so that every continuation gives them to the model
    // again before the transcript hermesd keeps; a continued chat's own words are in its session.
    let context = if continued { context } else { input.earlier };
    let history: Vec<HistoryMessage> = request
        .instructions
        .iter()
        .filter(|i| !i.trim().is_empty())
        .map(|i| HistoryMessage { role: "system".into(), content: i.clone() })
        .chain(context.iter().cloned())
        .collect();
    let user_id = request.user.clone().filter(|u| !u.trim().is_empty()).unwrap_or_else(|| chat_id.clone());
    let event = InboundEvent::Message {
        event_id: request_id.clone(),
        message: InboundMessage {
            profile: (profile != crate::config::DEFAULT_PROFILE).then_some(profile),
            message_id: request_id.clone(),
            chat: ChatRef::new(NAME, chat_id.clone(), ChatType::Dm),
            sender: Sender { id: user_id, name: None, is_bot: false, roles: Vec::new() },
            text: input.text,
            attachments,
            reply_to: None,
            addressed: true,
            timestamp_ms: now_ms(),
            history,
            chat_title: None,
            client: (!tools.is_empty() || !input.outputs.is_empty())
                .then(|| Box::new(ClientTurn { tools: tools.clone(), outputs: input.outputs })),
        },
    };
    let response_meta = ResponseMeta {
        id: response_id(&request_id),
        chat_id: chat_id.clone(),
        store: request.store.unwrap_or(true),
        previous_response_id: request.previous_response_id.clone(),
        instructions: request.instructions.clone(),
        user: request.user.clone(),
        metadata: request.metadata.clone().unwrap_or_else(|| json!({})),
        tools: Value::Array(request.tools.clone()),
        context,
    };
    let meta = ReplyMeta {
        model: model.unwrap_or_else(|| state.model_id.clone()),
        created: now_ms() / 1000,
        idempotent: idempotency_key.is_some(),
        shape: ReplyShape::Response(Box::new(response_meta.clone())),
    };
    let (waiter, buffer) = if request.stream {
        let (waiter, buffer) = api.register_stream(&request_id, meta.clone());
        (waiter, Some(buffer))
    } else {
        (api.register(&request_id, meta.clone()), None)
    };
    // A key's scope: the chat a request continues; a request starting a chat has none of its own.
    let continuity = if continued { format!("responses:{chat_id}") } else { "responses:new".to_owned() };
    let keyed = idempotency::Keyed::new(idempotency_key, &state, &continuity, &raw);
    let claim = keyed.as_ref().map(|keyed| keyed.claim(&request_id));
    // The response's row, `in_progress` until its answer: a continuation waits for it, and an
    // answer that comes after a restart (nobody waiting) is shaped and kept as this request asked.
    let pending = stored_response(&meta, &response_meta, None);
    if let Err(e) = state.store.save_response(&pending).await {
        api.forget(&request_id);
        return error(StatusCode::SERVICE_UNAVAILABLE, "server_error", "store_unavailable", e.to_string());
    }
    let mut response = match admit(&state, event, claim.as_ref(), request.stream).await {
        Some(early) => {
            api.forget(&request_id);
            if let Err(e) = state.store.delete_response(&pending.id).await {
                tracing::warn!(error = %e, "a refused request's response row stays until retention");
            }
            early
        }
        None => match buffer {
            Some(buffer) => stream(waiter, buffer, meta, response_meta, state.sse_keepalive),
            None => match waiter.await {
                Ok(reply) => {
                    let stored = completion(&reply, &meta, &request_id);
                    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                    (status, [(axum::http::header::CONTENT_TYPE, "application/json")], stored.body).into_response()
                }
                Err(_) => error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "server_error",
                    "restarting",
                    "hermesd is restarting; this message was saved and will be answered in its session after the restart",
                ),
            },
        },
    };
    if let Ok(value) = HeaderValue::from_str(&chat_id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

fn unauthorized() -> Response {
    error(StatusCode::UNAUTHORIZED, "invalid_request_error", "invalid_api_key", "invalid or missing API key")
}

fn no_such_response(id: &str) -> Response {
    error(StatusCode::NOT_FOUND, "invalid_request_error", "not_found", format!("Response with id '{id}' not found."))
}

/// `GET /v1/responses/{id}`.
pub(super) async fn retrieve(State(state): State<AppState>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if !authorized(&state, &headers) {
        return unauthorized();
    }
    match state.store.api_response(&id).await {
        // A response the client asked not to store has a row only while it runs.
        Ok(Some(found)) if serde_json::from_str::<Value>(&found.body).is_ok_and(|body| body["store"] != false) => {
            (StatusCode::OK, [(axum::http::header::CONTENT_TYPE, "application/json")], found.body).into_response()
        }
        Ok(_) => no_such_response(&id),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, "server_error", "store_unavailable", e.to_string()),
    }
}

/// `DELETE /v1/responses/{id}`.
pub(super) async fn delete(State(state): State<AppState>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if !authorized(&state, &headers) {
        return unauthorized();
    }
    match state.store.delete_response(&id).await {
        Ok(true) => axum::Json(json!({ "id": id, "object": "response.deleted", "deleted": true })).into_response(),
        Ok(false) => no_such_response(&id),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, "server_error", "store_unavailable", e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_items_split_into_the_last_user_message_and_history() {
        let input = read_input(&json!([
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
            {"role": "user", "content": "and now?"},
        ]))
        .ok()
        .unwrap();
        assert_eq!(input.text, "and now?");
        let roles: Vec<_> = input.earlier.iter().map(|m| (m.role.as_str(), m.content.as_str())).collect();
        assert_eq!(roles, [("system", "be brief"), ("user", "hi"), ("assistant", "hello")]);
        assert!(read_input(&json!(42)).is_err());
        assert!(read_input(&json!([{"role": "assistant", "content": "x"}])).is_err());
        let outputs =
            read_input(&json!([{"type": "function_call_output", "call_id": "c", "output": "1"}])).ok().unwrap();
        assert_eq!(outputs.outputs, vec![ClientOutput { call_id: "c".into(), output: "1".into() }]);
        assert!(read_input(&json!([{"type": "function_call_output", "output": "1"}])).is_err(), "no call id");
        let both =
            json!([{"type": "function_call_output", "call_id": "c", "output": "1"}, {"role": "user", "content": "hi"}]);
        assert!(read_input(&both).is_err());
        assert!(read_tools(&[json!({"type": "web_search_preview"})]).is_err());
        assert!(read_tools(&[json!({"type": "function", "name": "bad name"})]).is_err());
        let tools = read_tools(&[json!({"type": "function", "name": "get_weather"})]).ok().unwrap();
        assert_eq!(tools[0].parameters["type"], "object");
    }

    #[test]
    fn image_parts_become_chat_parts() {
        let parts = as_chat_parts(&json!([{"type": "input_image", "image_url": "data:image/png;base64,AA"}]));
        assert_eq!(parts[0]["image_url"]["url"], "data:image/png;base64,AA");
    }
}
