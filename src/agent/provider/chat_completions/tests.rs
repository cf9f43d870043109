//! Tests for the `chat_completions` dialect against a local fake endpoint.

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use futures_util::StreamExt;
use serde_json::json;

use super::*;

/// A scripted `/v1/chat/completions` that records the bodies it receives.
struct FakeServer {
    status: u16,
    headers: Vec<(&'static str, String)>,
    chunks: Vec<Bytes>,
    /// End the body with an error (the connection drops) instead of cleanly.
    cut: bool,
}

struct Running {
    url: String,
    requests: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
}

impl FakeServer {
    fn reply(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            headers: vec![("content-type", "application/json".into())],
            chunks: vec![Bytes::from(body.into())],
            cut: false,
        }
    }

    /// A stream of events; each element is sent as its own body chunk.
    fn stream<C: AsRef<[u8]>>(chunks: &[C]) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type", "text/event-stream".into())],
            chunks: chunks.iter().map(|c| Bytes::copy_from_slice(c.as_ref())).collect(),
            cut: false,
        }
    }

    fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_owned()));
        self
    }

    fn cut(mut self) -> Self {
        self.cut = true;
        self
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
                let chunks = futures_util::stream::iter(script.chunks.clone().into_iter().map(Ok));
                let cut = script.cut;
                // The yield lets hyper flush what came before; an error then drops the connection.
                let end = futures_util::stream::once(async move {
                    tokio::task::yield_now().await;
                    if cut { Err(std::io::Error::other("connection reset")) } else { Ok(Bytes::new()) }
                });
                let body = Body::from_stream(chunks.chain(end));
                let mut response = axum::response::Response::new(body);
                *response.status_mut() = StatusCode::from_u16(script.status).expect("valid status");
                for (name, value) in &script.headers {
                    response.headers_mut().insert(*name, value.parse().expect("valid header"));
                }
                response
            }
        };
        let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(handler));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/v1/", listener.local_addr().expect("address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Running { url, requests }
    }
}

impl Running {
    fn provider(&self) -> ChatCompletions {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().build().expect("client");
        ChatCompletions::new(http, &self.url, "test-model", Some(Secret::new("sk-test")), Duration::from_secs(10), 8192)
    }

    fn requests(&self) -> Vec<(HeaderMap, Value)> {
        self.requests.lock().expect("not poisoned").clone()
    }
}

fn streamed_request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::text(Role::System, "be brief"), Message::text(Role::User, "hi")],
        tools: vec![ToolSchema {
            name: "todo".into(),
            description: "manage the todo list".into(),
            parameters: json!({"type": "object", "properties": {"item": {"type": "string"}}}).into(),
        }]
        .into(),
        max_tokens: Some(512),
        stable_prefix: 1,
        stream: true,
    }
}

/// Runs `complete` with a sink and returns the result and the deltas seen.
async fn complete_collecting(
    provider: &ChatCompletions,
    request: &ChatRequest,
) -> (Result<ChatResponse, ProviderError>, Vec<Delta>) {
    let seen = Mutex::new(Vec::new());
    let sink = |delta: Delta| seen.lock().expect("not poisoned").push(delta);
    let result = provider.complete(request, Some(&sink)).await;
    (result, seen.into_inner().expect("not poisoned"))
}

fn chunk(delta: Value) -> String {
    format!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]}))
}

#[test]
fn classifies_failures() {
    assert!(matches!(
        classify(429, Some(Duration::from_secs(3)), ""),
        ProviderError::RateLimited { retry_after: Some(d) } if d.as_secs() == 3
    ));
    assert!(matches!(classify(401, None, ""), ProviderError::Unauthorized(401)));
    assert!(matches!(
        classify(400, None, r#"{"error":{"message":"maximum context length is 8192"}}"#),
        ProviderError::ContextTooLong
    ));
    assert!(matches!(classify(503, None, "down"), ProviderError::Transient(_)));
    let err = classify(404, None, r#"{"error":{"message":"model not found"}}"#);
    assert!(err.to_string().contains("model not found"), "{err}");
}

#[tokio::test]
async fn streamed_text_reaches_the_sink_in_order_and_assembles() {
    let first = chunk(json!({"role": "assistant", "reasoning_content": "user greets"}));
    let second = chunk(json!({"content": "Hel"}));
    let third = chunk(json!({"content": "lo, wörld"}));
    // Split chunks mid-line and mid-UTF-8 sequence: the body chunks do not follow event bounds.
    let all = format!(
        ": OPENROUTER PROCESSING\n\n{first}{second}{third}{}{}data: [DONE]\n\n",
        format_args!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
        format_args!("data: {}\n\n", json!({"choices": [], "usage": {"prompt_tokens": 21, "completion_tokens": 4}})),
    );
    let all = all.as_bytes();
    // Inside the two bytes of 'ö'.
    let split_at = all.windows(2).position(|w| w == "ö".as_bytes()).expect("present") + 1;
    let pieces = [&all[..10], &all[10..split_at], &all[split_at..split_at + 1], &all[split_at + 1..]];
    let running = FakeServer::stream(&pieces).start().await;

    let (result, deltas) = complete_collecting(&running.provider(), &streamed_request()).await;
    let reply = result.expect("streamed reply");
    assert_eq!(
        deltas,
        vec![Delta::Reasoning("user greets".into()), Delta::Text("Hel".into()), Delta::Text("lo, wörld".into())]
    );
    assert_eq!(reply.message.content.as_deref(), Some("Hello, wörld"));
    assert_eq!(reply.reasoning.as_deref(), Some("user greets"));
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    assert_eq!(reply.usage, Some(Usage { prompt_tokens: 21, completion_tokens: 4, ..Usage::default() }));
    assert!(reply.message.tool_calls.is_empty());
}

#[tokio::test]
async fn streamed_tool_calls_assemble_per_index() {
    let call = |index: u64, id: Option<&str>, name: Option<&str>, arguments: &str| {
        let mut function = json!({"arguments": arguments});
        if let Some(name) = name {
            function["name"] = json!(name);
        }
        let mut call = json!({"index": index, "type": "function", "function": function});
        if let Some(id) = id {
            call["id"] = json!(id);
        }
        chunk(json!({"tool_calls": [call]}))
    };
    let events = [
        call(0, Some("call_a"), Some("todo"), ""),
        call(0, None, None, "{\"item\":"),
        call(1, Some("call_b"), Some("memory"), "{}"),
        call(0, None, None, " \"milk\"}"),
        format!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
        "data: [DONE]\n\n".to_owned(),
    ];
    let running = FakeServer::stream(&events).start().await;

    let (result, deltas) = complete_collecting(&running.provider(), &streamed_request()).await;
    let reply = result.expect("streamed reply");
    assert!(deltas.is_empty(), "{deltas:?}");
    assert_eq!(
        reply.message.tool_calls,
        vec![
            ToolCall { id: "call_a".into(), name: "todo".into(), arguments: "{\"item\": \"milk\"}".into() },
            ToolCall { id: "call_b".into(), name: "memory".into(), arguments: "{}".into() },
        ]
    );
    assert_eq!(reply.message.content, None);
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(reply.usage, None);
}

#[tokio::test]
async fn a_stream_ending_before_done_is_dropped() {
    let partial = chunk(json!({"content": "partial"}));
    let cases = [
        (FakeServer::stream(&[&partial]), "ended before its final event"),
        (FakeServer::stream(&[partial.as_str(), "data: {\"choi"]).cut(), "reading the stream failed"),
    ];
    for (server, why) in cases {
        let running = server.start().await;
        let (result, deltas) = complete_collecting(&running.provider(), &streamed_request()).await;
        assert!(matches!(&result, Err(ProviderError::StreamDropped(m)) if m.contains(why)), "{result:?}");
        assert_eq!(deltas, vec![Delta::Text("partial".into())]);
    }
}

#[tokio::test]
async fn a_finish_reason_completes_a_stream_without_done() {
    let events = [
        chunk(json!({"content": "ok"})),
        format!("data: {}", json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
    ];
    let running = FakeServer::stream(&events).start().await;
    let (result, _) = complete_collecting(&running.provider(), &streamed_request()).await;
    let reply = result.expect("complete answer");
    assert_eq!(reply.message.content.as_deref(), Some("ok"));
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
}

#[tokio::test]
async fn an_error_inside_the_stream_is_classified() {
    let events = [
        chunk(json!({"content": "par"})),
        format!("data: {}\n\n", json!({"error": {"code": 502, "message": "upstream died"}})),
    ];
    let running = FakeServer::stream(&events).start().await;
    let (result, _) = complete_collecting(&running.provider(), &streamed_request()).await;
    assert!(matches!(&result, Err(ProviderError::Transient(m)) if m.contains("upstream died")), "{result:?}");
}

#[test]
fn retry_after_headers_are_bounded() {
    let parse = |value: &str| {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::RETRY_AFTER, value.parse().unwrap());
        super::super::endpoint::parse_retry_after(&headers)
    };
    assert_eq!(parse("2.5"), Some(Duration::from_millis(2500)));
    // Past u64::MAX seconds `Duration::from_secs_f64` would panic; absurd values are clamped.
    assert_eq!(parse("1e20"), Some(Duration::from_secs(3600)));
    assert_eq!(parse("99999999999"), Some(Duration::from_secs(3600)));
    for ignored in ["-3", "NaN", "inf", "soon"] {
        assert_eq!(parse(ignored), None, "{ignored}");
    }
}

#[tokio::test]
async fn rate_limit_before_the_stream_carries_retry_after() {
    let running =
        FakeServer::reply(429, r#"{"error":{"message":"slow down"}}"#).header("retry-after", "7").start().await;
    let (result, deltas) = complete_collecting(&running.provider(), &streamed_request()).await;
    assert!(
        matches!(result, Err(ProviderError::RateLimited { retry_after: Some(d) }) if d == Duration::from_secs(7)),
        "{result:?}"
    );
    assert!(deltas.is_empty());
}

#[tokio::test]
async fn streamed_request_carries_tools_options_and_key() {
    let running = FakeServer::stream(&["data: [DONE]\n\n"]).start().await;
    let (result, _) = complete_collecting(&running.provider(), &streamed_request()).await;
    result.expect("an empty but finished stream");
    let requests = running.requests();
    let (headers, body) = &requests[0];
    assert_eq!(headers["authorization"], "Bearer sk-test");
    assert_eq!(headers["accept"], "text/event-stream");
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_tokens"], 512);
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "todo",
            "description": "manage the todo list",
            "parameters": {"type": "object", "properties": {"item": {"type": "string"}}},
        }}])
    );
    assert_eq!(body["messages"][1], json!({"role": "user", "content": "hi"}));
}

#[tokio::test]
async fn non_streamed_reply_parses_reasoning_and_tool_calls() {
    let reply = json!({
        "choices": [{"finish_reason": "tool_calls", "message": {
            "role": "assistant",
            "content": null,
            "reasoning": "needs the list",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "todo", "arguments": "{}"}}],
        }}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3},
    });
    let running = FakeServer::reply(200, reply.to_string()).start().await;
    let request = ChatRequest { stream: false, max_tokens: None, ..streamed_request() };
    let (result, deltas) = complete_collecting(&running.provider(), &request).await;
    let reply = result.expect("reply");
    assert!(deltas.is_empty());
    assert_eq!(reply.reasoning.as_deref(), Some("needs the list"));
    assert_eq!(reply.message.content, None);
    assert_eq!(
        reply.message.tool_calls,
        vec![ToolCall { id: "c1".into(), name: "todo".into(), arguments: "{}".into() }]
    );
    assert_eq!(reply.usage, Some(Usage { prompt_tokens: 9, completion_tokens: 3, ..Usage::default() }));
    let (_, body) = &running.requests()[0];
    assert_eq!(body["stream"], false);
    assert!(body.get("stream_options").is_none());
    assert!(body.get("max_tokens").is_none());
    assert_eq!(body["tools"][0]["function"]["name"], "todo");
}

#[tokio::test]
async fn a_json_reply_to_a_stream_request_still_feeds_the_sink() {
    let reply = json!({"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": "whole"}}]});
    let running = FakeServer::reply(200, reply.to_string()).start().await;
    let (result, deltas) = complete_collecting(&running.provider(), &streamed_request()).await;
    assert_eq!(result.expect("reply").message.content.as_deref(), Some("whole"));
    assert_eq!(deltas, vec![Delta::Text("whole".into())]);
}

#[tokio::test]
async fn claude_models_behind_a_router_get_rolling_cache_breakpoints_and_report_cache_usage() {
    let reply = json!({
        "choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 700, "cache_write_tokens": 150}},
    });
    let running = FakeServer::reply(200, reply.to_string()).start().await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().build().expect("client");
    let claude =
        ChatCompletions::new(http, &running.url, "anthropic/claude-sonnet-4.5", None, Duration::from_secs(10), 8192);
    let mut messages = vec![Message::text(Role::System, "be brief")];
    for turn in 0..5 {
        messages.push(Message::text(Role::User, format!("q{turn}")));
        messages.push(Message::text(Role::Assistant, format!("a{turn}")));
    }
    messages.push(Message::text(Role::User, "last"));
    let request = ChatRequest { messages, stable_prefix: 1, ..ChatRequest::default() };
    let reply = claude.complete(&request, None).await.expect("reply");
    assert_eq!(
        reply.usage,
        Some(Usage { prompt_tokens: 900, completion_tokens: 3, cache_read_tokens: 700, cache_write_tokens: 150 })
    );
    let (_, body) = &running.requests()[0];
    let messages = body["messages"].as_array().expect("messages");
    let marker = json!({"type": "ephemeral"});
    assert_eq!(messages[0]["content"], json!([{"type": "text", "text": "be brief", "cache_control": marker}]));
    let marked: Vec<&str> = messages
        .iter()
        .filter(|m| m["content"][0].get("cache_control").is_some())
        .map(|m| m["content"][0]["text"].as_str().expect("text"))
        .collect();
    assert_eq!(marked, ["be brief", "q3", "q4", "last"]);
    // Unmarked messages keep their plain text content.
    assert_eq!(messages[2], json!({"role": "assistant", "content": "a0"}));

    // Other models are sent exactly as before: no parts, no markers.
    let running = FakeServer::reply(200, reply_json()).start().await;
    running.provider().complete(&request, None).await.expect("reply");
    let (_, body) = &running.requests()[0];
    assert_eq!(body["messages"][0], json!({"role": "system", "content": "be brief"}));
    assert!(!body.to_string().contains("cache_control"));
}

fn reply_json() -> String {
    json!({"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]}).to_string()
}

fn with_image(role: Role, loaded: bool) -> Message {
    let mut image = crate::vocab::message::ImageRef::new("media/telegram/42/p_photo.png", "image/png");
    if loaded {
        image.data = Some("data:image/png;base64,iVBORw0K".into());
    }
    Message { images: vec![image], ..Message::text(role, "look") }
}

#[test]
fn images_become_data_url_parts_for_a_vision_model() {
    let message = with_image(Role::User, true);
    let wire = serde_json::to_value(wire_message(&message, true)).unwrap();
    assert_eq!(
        wire["content"],
        json!([
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
        ])
    );
    // The stored form keeps the reference only, never the bytes.
    let stored = serde_json::to_value(&message).unwrap();
    assert_eq!(stored["images"], json!([{"path": "media/telegram/42/p_photo.png", "mime": "image/png"}]));
}

#[test]
fn images_become_notes_without_vision_or_bytes() {
    for (loaded, vision) in [(true, false), (false, true), (false, false)] {
        let wire = serde_json::to_value(wire_message(&with_image(Role::User, loaded), vision)).unwrap();
        assert_eq!(
            wire["content"],
            json!("look\n[image media/p_photo.png not shown to this model]"),
            "{loaded} {vision}"
        );
    }
    // A plain text message is unchanged (a string, not parts).
    let wire = serde_json::to_value(wire_message(&Message::text(Role::User, "hi"), true)).unwrap();
    assert_eq!(wire["content"], json!("hi"));
}

/// An assistant call, then two tool results (the first with an image), then `next`.
fn tool_run(loaded: bool, next: Role) -> Vec<Message> {
    let call =
        |id: &str| crate::vocab::message::ToolCall { id: id.into(), name: "mcp_s_shot".into(), arguments: "{}".into() };
    let result = |id: &str, text: &str| Message { tool_call_id: Some(id.into()), ..Message::text(Role::Tool, text) };
    let mut shot = with_image(Role::Tool, loaded);
    shot.content = Some("[image image/png, 9 bytes, saved as media/p_photo.png]".into());
    shot.tool_call_id = Some("a".into());
    vec![
        Message { tool_calls: vec![call("a"), call("b")], content: None, ..Message::text(Role::Assistant, "") },
        shot,
        result("b", "no image"),
        Message::text(next, "go on"),
    ]
}

#[test]
fn tool_images_follow_their_run_of_results_for_a_vision_model() {
    let messages = tool_run(true, Role::User);
    let wire = serde_json::to_value(wire_messages(&messages, true)).unwrap();
    let roles: Vec<&str> = wire.as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["assistant", "tool", "tool", "user", "user"], "{wire}");
    assert_eq!(
        wire[1]["content"],
        json!("[image image/png, 9 bytes, saved as media/p_photo.png]"),
        "no note: the text names it"
    );
    assert_eq!(
        wire[3]["content"],
        json!([
            {"type": "text", "text": TOOL_IMAGES_INTRO},
            {"type": "text", "text": "media/p_photo.png"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
        ])
    );
    // Without vision, or with the image not loaded, the transcript goes as it is.
    for (loaded, vision) in [(true, false), (false, true)] {
        let wire = serde_json::to_value(wire_messages(&tool_run(loaded, Role::User), vision)).unwrap();
        assert_eq!(wire.as_array().unwrap().len(), 4, "{loaded} {vision}: {wire}");
        assert_eq!(wire[1]["content"], json!("[image image/png, 9 bytes, saved as media/p_photo.png]"));
    }
}
