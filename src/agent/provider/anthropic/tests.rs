//! Tests for the Anthropic Messages dialect: request translation, and replies from a local fake.

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use serde_json::json;

use super::*;
use crate::agent::provider::{Delta, ToolSchema};

/// A scripted `/v1/messages` that records the requests it receives.
struct FakeServer {
    status: u16,
    headers: Vec<(&'static str, String)>,
    chunks: Vec<String>,
}

struct Running {
    base_url: String,
    requests: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
}

impl FakeServer {
    fn reply(status: u16, body: Value) -> Self {
        Self { status, headers: vec![("content-type", "application/json".into())], chunks: vec![body.to_string()] }
    }

    /// A stream of events named by their `type`, each sent as its own body chunk.
    fn stream(events: &[Value]) -> Self {
        let chunks = events
            .iter()
            .map(|data| format!("event: {}\ndata: {data}\n\n", data["type"].as_str().expect("typed event")))
            .collect();
        Self { status: 200, headers: vec![("content-type", "text/event-stream".into())], chunks }
    }

    async fn start(self) -> Running {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = requests.clone();
        let script = Arc::new(self);
        let handler = move |headers: HeaderMap, body: Bytes| {
            let script = script.clone();
            let recorded = recorded.clone();
            async move {
                let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                recorded.lock().expect("not poisoned").push((headers, body));
                let items: Vec<Result<Bytes, std::io::Error>> =
                    script.chunks.iter().map(|c| Ok(Bytes::from(c.clone()))).collect();
                let mut response = axum::response::Response::new(Body::from_stream(futures_util::stream::iter(items)));
                *response.status_mut() = StatusCode::from_u16(script.status).expect("valid status");
                for (name, value) in &script.headers {
                    response.headers_mut().insert(*name, value.parse().expect("valid header"));
                }
                response
            }
        };
        let app = axum::Router::new().route("/v1/messages", axum::routing::post(handler));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base_url = format!("http://{}", listener.local_addr().expect("address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Running { base_url, requests }
    }
}

impl Running {
    fn provider(&self) -> AnthropicMessages {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().build().expect("client");
        let key = Some(Secret::new("sk-ant-test"));
        AnthropicMessages::new(http, &self.base_url, "claude-test", key, Duration::from_secs(10), 200_000)
    }

    fn requests(&self) -> Vec<(HeaderMap, Value)> {
        self.requests.lock().expect("not poisoned").clone()
    }
}

fn assistant_calling(text: Option<&str>, calls: &[(&str, &str, &str)]) -> Message {
    Message {
        role: Role::Assistant,
        content: text.map(str::to_owned),
        tool_calls: calls
            .iter()
            .map(|(id, name, arguments)| ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*arguments).into(),
            })
            .collect(),
        tool_call_id: None,
        reasoning: None,
        images: Vec::new(),
    }
}

fn tool_result(id: &str, text: &str) -> Message {
    Message {
        role: Role::Tool,
        content: Some(text.into()),
        tool_calls: Vec::new(),
        tool_call_id: Some(id.into()),
        reasoning: None,
        images: Vec::new(),
    }
}

fn request(stream: bool) -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::text(Role::System, "you are hermes"),
            Message::text(Role::System, "tools: todo"),
            Message::text(Role::User, "add milk"),
            Message::text(Role::User, "and eggs"),
            assistant_calling(Some("on it"), &[("tu_1", "todo", r#"{"item":"milk"}"#), ("tu_2", "todo", "{not json")]),
            tool_result("tu_1", "added"),
            tool_result("tu_2", "bad arguments"),
            Message::text(Role::System, "the time is 12:00"),
            Message::text(Role::User, "thanks"),
        ],
        tools: vec![ToolSchema {
            name: "todo".into(),
            description: "manage the todo list".into(),
            parameters: json!({"type": "object", "properties": {"item": {"type": "string"}}}).into(),
        }]
        .into(),
        max_tokens: None,
        stable_prefix: 2,
        stream,
    }
}

async fn complete_collecting(
    provider: &AnthropicMessages,
    request: &ChatRequest,
) -> (Result<ChatResponse, ProviderError>, Vec<Delta>) {
    let seen = Mutex::new(Vec::new());
    let sink = |delta: Delta| seen.lock().expect("not poisoned").push(delta);
    let result = provider.complete(request, Some(&sink)).await;
    (result, seen.into_inner().expect("not poisoned"))
}

#[test]
fn builds_the_messages_url() {
    for base in ["https://api.anthropic.com", "https://api.anthropic.com/", "https://api.anthropic.com/v1/"] {
        assert_eq!(messages_url(base), "https://api.anthropic.com/v1/messages", "{base}");
    }
    assert_eq!(messages_url("http://proxy/anthropic"), "http://proxy/anthropic/v1/messages");
}

#[test]
fn translates_the_transcript() {
    let body = request::body("claude-test", &request(false), false);
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["max_tokens"], 8192);
    assert!(body.get("stream").is_none());
    assert_eq!(
        body["system"],
        json!([
            {"type": "text", "text": "you are hermes"},
            {"type": "text", "text": "tools: todo", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "the time is 12:00"},
        ])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "add milk"},
                {"type": "text", "text": "and eggs", "cache_control": {"type": "ephemeral"}},
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "on it"},
                {"type": "tool_use", "id": "tu_1", "name": "todo", "input": {"item": "milk"}},
                {"type": "tool_use", "id": "tu_2", "name": "todo", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": "added"},
                {"type": "tool_result", "tool_use_id": "tu_2", "content": "bad arguments"},
                {"type": "text", "text": "thanks", "cache_control": {"type": "ephemeral"}},
            ]},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{
            "name": "todo",
            "description": "manage the todo list",
            "input_schema": {"type": "object", "properties": {"item": {"type": "string"}}},
        }])
    );
}

#[test]
fn a_prefix_reaching_into_the_messages_marks_its_last_block() {
    let request = ChatRequest {
        messages: vec![
            Message::text(Role::System, "sys"),
            Message::text(Role::User, "pinned"),
            Message::text(Role::User, ""),
            Message::text(Role::User, "later"),
        ],
        stable_prefix: 3,
        max_tokens: Some(100),
        stream: true,
        ..ChatRequest::default()
    };
    let body = request::body("m", &request, false);
    assert_eq!(body["max_tokens"], 100);
    assert_eq!(body["stream"], true);
    assert!(body.get("tools").is_none());
    assert_eq!(body["system"], json!([{"type": "text", "text": "sys"}]));
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "pinned", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "later", "cache_control": {"type": "ephemeral"}},
        ]}])
    );
}

#[test]
fn rolling_breakpoints_cover_the_system_prompt_and_the_last_three_user_turns() {
    let mut messages = vec![Message::text(Role::System, "sys")];
    for turn in 0..6 {
        messages.push(Message::text(Role::User, format!("question {turn}")));
        messages.push(Message::text(Role::Assistant, format!("answer {turn}")));
    }
    messages.push(assistant_calling(None, &[("tu_1", "todo", "{}")]));
    messages.push(tool_result("tu_1", "done"));
    let request = ChatRequest { messages, stable_prefix: 1, ..ChatRequest::default() };
    let body = request::body("m", &request, false);
    assert_eq!(cache::count_markers(&body), cache::MAX_BREAKPOINTS);
    assert_eq!(body["system"][0]["cache_control"], json!({"type": "ephemeral"}));
    let marked: Vec<Value> = body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["content"].as_array().expect("blocks").iter().any(|b| b.get("cache_control").is_some()))
        .map(|m| m["content"].as_array().expect("blocks").last().cloned().expect("a block"))
        .collect();
    // The tool result is the newest user turn; the two user questions before it follow.
    assert_eq!(marked.len(), 3);
    assert_eq!(marked[0]["text"], "question 4");
    assert_eq!(marked[1]["text"], "question 5");
    assert_eq!(marked[2]["type"], "tool_result");

    // Without a stable prefix the fourth breakpoint rolls too.
    let request = ChatRequest { stable_prefix: 0, ..request };
    let body = request::body("m", &request, false);
    assert_eq!(cache::count_markers(&body), cache::MAX_BREAKPOINTS);
    assert!(body["system"][0].get("cache_control").is_none());
}

#[test]
fn classifies_failures() {
    let retry = Some(Duration::from_secs(4));
    assert!(matches!(classify(429, retry, ""), ProviderError::RateLimited { retry_after } if retry_after == retry));
    assert!(matches!(classify(401, None, ""), ProviderError::Unauthorized(401)));
    assert!(matches!(classify(403, None, ""), ProviderError::Unauthorized(403)));
    let overloaded = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    assert!(matches!(classify(529, None, overloaded), ProviderError::Transient(m) if m.contains("Overloaded")));
    assert!(matches!(classify(500, None, "oops"), ProviderError::Transient(_)));
    let invalid = |message: &str| {
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}).to_string()
    };
    let too_long = invalid("prompt is too long: 210000 tokens > 200000 maximum");
    assert!(matches!(classify(400, None, &too_long), ProviderError::ContextTooLong));
    let exceeds = invalid("input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000");
    assert!(matches!(classify(400, None, &exceeds), ProviderError::ContextTooLong));
    let bad = invalid("messages: roles must alternate");
    assert!(matches!(classify(400, None, &bad), ProviderError::Permanent(m) if m.contains("roles must alternate")));
    assert!(matches!(
        classify_event(&json!({"type": "overloaded_error", "message": "Overloaded"})),
        ProviderError::Transient(_)
    ));
}

#[tokio::test]
async fn parses_a_whole_reply_and_sends_the_headers() {
    let reply = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [
            {"type": "thinking", "thinking": "they want milk", "signature": "sig"},
            {"type": "text", "text": "Adding "},
            {"type": "text", "text": "it."},
            {"type": "tool_use", "id": "tu_9", "name": "todo", "input": {"item": "milk", "qty": 2}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5,
            "output_tokens": 7},
    });
    let running = FakeServer::reply(200, reply).start().await;
    let (result, deltas) = complete_collecting(&running.provider(), &request(false)).await;
    let reply = result.expect("reply");
    assert!(deltas.is_empty());
    assert_eq!(reply.message.content.as_deref(), Some("Adding it."));
    assert_eq!(reply.reasoning.as_deref(), Some("they want milk"));
    assert_eq!(reply.message.tool_calls.len(), 1);
    let call = &reply.message.tool_calls[0];
    assert_eq!((call.id.as_str(), call.name.as_str()), ("tu_9", "todo"));
    assert_eq!(serde_json::from_str::<Value>(&call.arguments).expect("JSON"), json!({"item": "milk", "qty": 2}));
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        reply.usage,
        Some(Usage { prompt_tokens: 115, completion_tokens: 7, cache_read_tokens: 100, cache_write_tokens: 5 })
    );

    let requests = running.requests();
    let (headers, body) = &requests[0];
    assert_eq!(headers["x-api-key"], "sk-ant-test");
    assert_eq!(headers["anthropic-version"], "2023-06-01");
    assert_eq!(headers["content-type"], "application/json");
    assert!(headers.get("authorization").is_none());
    assert_eq!(body["messages"][2]["content"][2]["text"], "thanks");
}

fn block_start(index: u64, block: Value) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": block})
}

fn block_delta(index: u64, delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

fn block_stop(index: u64) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

/// Thinking, text, a tool call with fragmented input and one without input; no `message_stop`.
fn text_stream() -> Vec<Value> {
    let usage = json!({"input_tokens": 20, "cache_read_input_tokens": 80, "output_tokens": 1});
    vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "content": [], "stop_reason": null, "usage": usage}}),
        block_start(0, json!({"type": "thinking", "thinking": ""})),
        block_delta(0, json!({"type": "thinking_delta", "thinking": "list "})),
        json!({"type": "ping"}),
        block_delta(0, json!({"type": "thinking_delta", "thinking": "it"})),
        block_delta(0, json!({"type": "signature_delta", "signature": "abc"})),
        block_stop(0),
        block_start(1, json!({"type": "text", "text": ""})),
        block_delta(1, json!({"type": "text_delta", "text": "Sure, "})),
        block_delta(1, json!({"type": "text_delta", "text": "adding."})),
        block_stop(1),
        block_start(2, json!({"type": "tool_use", "id": "tu_7", "name": "todo", "input": {}})),
        block_delta(2, json!({"type": "input_json_delta", "partial_json": ""})),
        block_delta(2, json!({"type": "input_json_delta", "partial_json": "{\"item\": \"mi"})),
        block_delta(2, json!({"type": "input_json_delta", "partial_json": "lk\"}"})),
        block_stop(2),
        block_start(3, json!({"type": "tool_use", "id": "tu_8", "name": "now", "input": {}})),
        block_stop(3),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
            "usage": {"output_tokens": 42}}),
    ]
}

#[tokio::test]
async fn streams_thinking_text_and_tool_use() {
    let mut events = text_stream();
    events.push(json!({"type": "message_stop"}));
    let running = FakeServer::stream(&events).start().await;
    let (result, deltas) = complete_collecting(&running.provider(), &request(true)).await;
    let reply = result.expect("streamed reply");
    assert_eq!(
        deltas,
        vec![
            Delta::Reasoning("list ".into()),
            Delta::Reasoning("it".into()),
            Delta::Text("Sure, ".into()),
            Delta::Text("adding.".into()),
        ]
    );
    assert_eq!(reply.message.content.as_deref(), Some("Sure, adding."));
    assert_eq!(reply.reasoning.as_deref(), Some("list it"));
    assert_eq!(
        reply.message.tool_calls,
        vec![
            ToolCall { id: "tu_7".into(), name: "todo".into(), arguments: "{\"item\": \"milk\"}".into() },
            ToolCall { id: "tu_8".into(), name: "now".into(), arguments: "{}".into() },
        ]
    );
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        reply.usage,
        Some(Usage { prompt_tokens: 100, completion_tokens: 42, cache_read_tokens: 80, cache_write_tokens: 0 })
    );
    let (headers, body) = &running.requests()[0];
    assert_eq!(body["stream"], true);
    assert_eq!(headers["accept"], "text/event-stream");
}

#[tokio::test]
async fn a_stream_without_message_stop_is_dropped() {
    let running = FakeServer::stream(&text_stream()).start().await;
    let (result, deltas) = complete_collecting(&running.provider(), &request(true)).await;
    assert!(matches!(result, Err(ProviderError::StreamDropped(_))), "{result:?}");
    assert_eq!(deltas.len(), 4, "deltas already sent stay sent: {deltas:?}");
}

#[tokio::test]
async fn an_error_event_is_classified() {
    let mut events = text_stream();
    events.truncate(3);
    events.push(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}));
    let running = FakeServer::stream(&events).start().await;
    let (result, _) = complete_collecting(&running.provider(), &request(true)).await;
    assert!(matches!(&result, Err(ProviderError::Transient(m)) if m.contains("Overloaded")), "{result:?}");
}

#[tokio::test]
async fn overloaded_status_is_transient() {
    let body = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let running = FakeServer::reply(529, body).start().await;
    let (result, _) = complete_collecting(&running.provider(), &request(true)).await;
    assert!(matches!(result, Err(ProviderError::Transient(_))), "{result:?}");
}

#[tokio::test]
async fn a_too_long_prompt_is_context_too_long() {
    let body = json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": "prompt is too long: 201234 tokens > 200000 maximum"}});
    let running = FakeServer::reply(400, body).start().await;
    let (result, _) = complete_collecting(&running.provider(), &request(false)).await;
    assert!(matches!(result, Err(ProviderError::ContextTooLong)), "{result:?}");
}

#[test]
fn signed_thinking_returns_first_in_its_assistant_turn() {
    let reply = json!({
        "content": [
            {"type": "thinking", "thinking": "they want milk", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "tool_use", "id": "tu_1", "name": "todo", "input": {}},
        ],
        "stop_reason": "tool_use",
    });
    let mut assistant = parse_reply(&reply.to_string()).expect("reply").message;
    // A Responses API item from another provider is not sent to Anthropic.
    assistant.reasoning.as_mut().expect("reasoning").items.push(json!({"type": "reasoning", "encrypted_content": "x"}));
    let request = ChatRequest {
        messages: vec![
            Message::text(Role::System, "sys"),
            Message::text(Role::User, "add milk"),
            assistant,
            tool_result("tu_1", "added"),
        ],
        stable_prefix: 1,
        ..ChatRequest::default()
    };
    let body = request::body("m", &request, false);
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "thinking", "thinking": "they want milk", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "tool_use", "id": "tu_1", "name": "todo", "input": {}},
        ])
    );
}

/// Remove every `cache_control` marker, for assertions about the rest of a body.
fn strip_cache_control(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.remove("cache_control");
            map.values_mut().for_each(strip_cache_control);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_cache_control),
        _ => {}
    }
}

fn with_image(role: Role, id: Option<&str>) -> Message {
    let mut image = crate::vocab::message::ImageRef::new("media/mcp/shot.png", "image/png");
    image.data = Some("data:image/png;base64,iVBORw0K".into());
    Message { images: vec![image], tool_call_id: id.map(Into::into), ..Message::text(role, "look") }
}

#[test]
fn images_become_base64_blocks_for_a_vision_model() {
    let request = ChatRequest {
        messages: vec![
            with_image(Role::User, None),
            assistant_calling(None, &[("c1", "shot", "{}")]),
            with_image(Role::Tool, Some("c1")),
        ],
        ..ChatRequest::default()
    };
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}});
    let mut body = request::body("m", &request, true);
    // The user turns carry rolling cache breakpoints on their last blocks; the rest is the subject.
    assert_eq!(body["messages"][0]["content"][1]["cache_control"], json!({"type": "ephemeral"}));
    strip_cache_control(&mut body);
    assert_eq!(body["messages"][0]["content"], json!([{"type": "text", "text": "look"}, image]));
    assert_eq!(
        body["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "look"}, image]})
    );
    let mut body = request::body("m", &request, false);
    strip_cache_control(&mut body);
    let note = "look\n[image media/mcp/shot.png not shown to this model]";
    assert_eq!(body["messages"][0]["content"], json!([{"type": "text", "text": note}]));
    // A tool result names its images in its own text: no note is added.
    assert_eq!(body["messages"][2]["content"][0]["content"], json!("look"));
}
