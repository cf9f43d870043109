//! Tests for the `responses` dialect against a local fake `/v1/responses`.

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use serde_json::json;

use super::*;
use crate::agent::provider::ToolSchema;

/// A scripted `/v1/responses` that records the bodies it receives.
struct FakeServer {
    status: u16,
    content_type: &'static str,
    body: String,
}

struct Running {
    url: String,
    requests: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
}

impl FakeServer {
    fn json(status: u16, body: Value) -> Self {
        Self { status, content_type: "application/json", body: body.to_string() }
    }

    /// A stream of `(event name, data)` pairs.
    fn events(events: &[Value]) -> Self {
        let body =
            events.iter().map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or(""))).collect();
        Self { status: 200, content_type: "text/event-stream", body }
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
                let mut response = axum::response::Response::new(Body::from(script.body.clone()));
                *response.status_mut() = StatusCode::from_u16(script.status).expect("valid status");
                response.headers_mut().insert("content-type", script.content_type.parse().expect("valid header"));
                response
            }
        };
        let app = axum::Router::new().route("/v1/responses", axum::routing::post(handler));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/v1", listener.local_addr().expect("address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Running { url, requests }
    }
}

impl Running {
    fn provider(&self) -> Responses {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().build().expect("client");
        Responses::new(http, &self.url, "gpt-test", Some(Secret::new("sk-test")), Duration::from_secs(10), 8192)
    }

    fn requests(&self) -> Vec<(HeaderMap, Value)> {
        self.requests.lock().expect("not poisoned").clone()
    }
}

fn request(stream: bool) -> ChatRequest {
    ChatRequest {
        messages: vec![Message::text(Role::System, "be brief"), Message::text(Role::User, "add milk")],
        tools: vec![ToolSchema {
            name: "todo".into(),
            description: "manage the todo list".into(),
            parameters: json!({"type": "object", "properties": {"item": {"type": "string"}}}).into(),
        }]
        .into(),
        max_tokens: Some(512),
        stable_prefix: 1,
        stream,
    }
}

async fn complete_collecting(
    provider: &Responses,
    request: &ChatRequest,
) -> (Result<ChatResponse, ProviderError>, Vec<Delta>) {
    let seen = Mutex::new(Vec::new());
    let sink = |delta: Delta| seen.lock().expect("not poisoned").push(delta);
    let result = provider.complete(request, Some(&sink)).await;
    (result, seen.into_inner().expect("not poisoned"))
}

fn reasoning_item() -> Value {
    json!({"type": "reasoning", "id": "rs_1", "status": "completed", "encrypted_content": "gAAA-opaque",
        "summary": [{"type": "summary_text", "text": "They want milk on the list."}]})
}

fn tool_call_output() -> Value {
    json!([
        reasoning_item(),
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "todo",
            "arguments": "{\"item\":\"milk\"}", "status": "completed"},
    ])
}

#[tokio::test]
async fn non_streamed_reply_keeps_reasoning_items_calls_and_cached_tokens() {
    let reply = json!({
        "id": "resp_1", "object": "response", "status": "completed", "output": tool_call_output(),
        "usage": {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 96}, "output_tokens": 30,
            "output_tokens_details": {"reasoning_tokens": 20}, "total_tokens": 150},
    });
    let running = FakeServer::json(200, reply).start().await;
    let reply = running.provider().complete(&request(false), None).await.expect("reply");
    assert_eq!(
        reply.message.tool_calls,
        vec![ToolCall { id: "call_1".into(), name: "todo".into(), arguments: "{\"item\":\"milk\"}".into() }]
    );
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(reply.reasoning.as_deref(), Some("They want milk on the list."));
    let reasoning = reply.message.reasoning.as_ref().expect("reasoning kept on the message");
    assert_eq!(reasoning.items, vec![reasoning_item()]);
    assert_eq!(
        reply.usage,
        Some(Usage { prompt_tokens: 120, completion_tokens: 30, cache_read_tokens: 96, cache_write_tokens: 0 })
    );

    let (headers, body) = &running.requests()[0];
    assert_eq!(headers["authorization"], "Bearer sk-test");
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["store"], false);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["instructions"], "be brief");
    assert_eq!(body["max_output_tokens"], 512);
    assert_eq!(
        body["input"],
        json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "add milk"}]}])
    );
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["name"], "todo");
    assert_eq!(body["tools"][0]["strict"], false);
}

#[test]
fn reasoning_items_round_trip_before_their_calls_without_ids() {
    let mut assistant = assemble(&json!({"status": "completed", "output": tool_call_output()})).expect("reply").message;
    // An item another provider left (Anthropic thinking) is not ours to send.
    assistant.reasoning.as_mut().expect("reasoning").items.push(json!({"type": "thinking", "thinking": "x"}));
    let result = Message {
        role: Role::Tool,
        content: Some("added".into()),
        tool_calls: Vec::new(),
        tool_call_id: Some("call_1".into()),
        reasoning: None,
        images: Vec::new(),
    };
    let mut next = request(true);
    next.messages.extend([assistant, result]);
    let body = request::body("gpt-test", &next, false);
    assert_eq!(
        body["input"],
        json!([
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "add milk"}]},
            {"type": "reasoning", "encrypted_content": "gAAA-opaque",
                "summary": [{"type": "summary_text", "text": "They want milk on the list."}]},
            {"type": "function_call", "call_id": "call_1", "name": "todo", "arguments": "{\"item\":\"milk\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "added"},
        ])
    );
    assert_eq!(body["stream"], true);
}

#[test]
fn later_system_messages_and_answers_become_message_items() {
    let mut next = request(false);
    next.messages.push(Message::text(Role::Assistant, "Done."));
    next.messages.push(Message::text(Role::System, "note"));
    let body = request::body("m", &next, false);
    assert_eq!(
        body["input"][1],
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]})
    );
    assert_eq!(body["input"][2]["role"], "developer");
}

fn text_stream_events() -> Vec<Value> {
    let message = json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Milk added.", "annotations": []}]});
    let mut output = vec![reasoning_item()];
    output.push(message.clone());
    vec![
        json!({"type": "response.created", "response": {"id": "resp_2", "status": "in_progress", "output": []}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
        json!({"type": "response.reasoning_summary_part.added", "item_id": "rs_1", "output_index": 0, "summary_index": 0}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": "They want "}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": "milk on the list."}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": reasoning_item()}),
        json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "message", "id": "msg_1", "content": []}}),
        json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": "Milk "}),
        json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": "added."}),
        json!({"type": "response.output_item.done", "output_index": 1, "item": message}),
        json!({"type": "response.completed", "response": {"id": "resp_2", "status": "completed", "output": output,
            "usage": {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 9}}}),
    ]
}

#[tokio::test]
async fn streamed_reply_reports_deltas_and_assembles_the_items() {
    let running = FakeServer::events(&text_stream_events()).start().await;
    let (result, deltas) = complete_collecting(&running.provider(), &request(true)).await;
    let reply = result.expect("reply");
    assert_eq!(
        deltas,
        vec![
            Delta::Reasoning("They want ".into()),
            Delta::Reasoning("milk on the list.".into()),
            Delta::Text("Milk ".into()),
            Delta::Text("added.".into()),
        ]
    );
    assert_eq!(reply.message.content.as_deref(), Some("Milk added."));
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    assert_eq!(reply.message.reasoning.expect("reasoning").items, vec![reasoning_item()]);
    assert_eq!(reply.usage.map(|u| u.prompt_tokens), Some(50));
    assert_eq!(running.requests()[0].0["accept"], "text/event-stream");
}

#[tokio::test]
async fn a_final_event_without_output_uses_the_items_finished_on_the_way() {
    let mut events = text_stream_events();
    let last = events.len() - 1;
    events[last]["response"]["output"] = json!([]);
    let running = FakeServer::events(&events).start().await;
    let reply = running.provider().complete(&request(true), None).await.expect("reply");
    assert_eq!(reply.message.content.as_deref(), Some("Milk added."));
    assert_eq!(reply.reasoning.as_deref(), Some("They want milk on the list."));
}

#[tokio::test]
async fn a_stream_without_its_final_event_is_dropped() {
    let mut events = text_stream_events();
    events.pop();
    let running = FakeServer::events(&events).start().await;
    let (result, deltas) = complete_collecting(&running.provider(), &request(true)).await;
    assert!(matches!(result, Err(ProviderError::StreamDropped(_))), "{result:?}");
    assert_eq!(deltas.len(), 4, "what arrived was still reported");
}

#[tokio::test]
async fn failures_are_classified() {
    let failed = json!({"type": "response.failed", "response": {"status": "failed",
        "error": {"code": "rate_limit_exceeded", "message": "slow down"}}});
    let running = FakeServer::events(&[failed]).start().await;
    let result = running.provider().complete(&request(true), None).await;
    assert!(matches!(result, Err(ProviderError::RateLimited { .. })), "{result:?}");

    let error = json!({"type": "error", "code": "server_error", "message": "try again"});
    let running = FakeServer::events(&[error]).start().await;
    let result = running.provider().complete(&request(true), None).await;
    assert!(matches!(result, Err(ProviderError::Transient(_))), "{result:?}");

    let too_long = json!({"error": {"message": "Your input exceeds the context window of this model.",
        "type": "invalid_request_error", "code": "context_length_exceeded"}});
    let running = FakeServer::json(400, too_long).start().await;
    let result = running.provider().complete(&request(false), None).await;
    assert!(matches!(result, Err(ProviderError::ContextTooLong)), "{result:?}");

    let running = FakeServer::json(401, json!({"error": {"message": "bad key"}})).start().await;
    let result = running.provider().complete(&request(false), None).await;
    assert!(matches!(result, Err(ProviderError::Unauthorized(401))), "{result:?}");
}

#[tokio::test]
async fn an_incomplete_response_reports_why() {
    let reply = json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
        "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Half"}]}]});
    let running = FakeServer::json(200, reply).start().await;
    let reply = running.provider().complete(&request(false), None).await.expect("reply");
    assert_eq!(reply.message.content.as_deref(), Some("Half"));
    assert_eq!(reply.finish_reason.as_deref(), Some("max_output_tokens"));
    assert!(reply.message.reasoning.is_none());
}

#[test]
fn images_become_input_image_parts_for_a_vision_model_and_notes_otherwise() {
    let mut image = crate::vocab::message::ImageRef::new("media/telegram/42/p_photo.png", "image/png");
    image.data = Some("data:image/png;base64,iVBORw0K".into());
    let user = Message { images: vec![image], ..Message::text(Role::User, "what is this?") };
    let request = ChatRequest { messages: vec![Message::text(Role::System, "sys"), user], ..ChatRequest::default() };
    let body = request::body("m", &request, true);
    assert_eq!(
        body["input"][0]["content"],
        json!([
            {"type": "input_text", "text": "what is this?"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0K"},
        ])
    );
    let body = request::body("m", &request, false);
    let content = &body["input"][0]["content"];
    assert_eq!(content.as_array().map(Vec::len), Some(1), "{content}");
    let text = content[0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("what is this?\n[image media/") && text.contains("not shown"), "{text}");
}

#[test]
fn tool_images_follow_the_function_call_outputs_for_a_vision_model() {
    let mut image = crate::vocab::message::ImageRef::new("media/api/c/mcp_s_1.png", "image/png");
    image.data = Some("data:image/png;base64,iVBORw0K".into());
    let call = crate::vocab::message::ToolCall { id: "a".into(), name: "mcp_s_shot".into(), arguments: "{}".into() };
    let result = Message {
        tool_call_id: Some("a".into()),
        images: vec![image],
        ..Message::text(Role::Tool, "[image image/png, 9 bytes, saved as media/mcp_s_1.png]")
    };
    let messages = vec![
        Message::text(Role::User, "show me"),
        Message { tool_calls: vec![call], content: None, ..Message::text(Role::Assistant, "") },
        result,
    ];
    let request = ChatRequest { messages, ..ChatRequest::default() };
    let body = request::body("m", &request, true);
    let input = body["input"].as_array().unwrap();
    assert_eq!(input.len(), 4, "{body}");
    assert_eq!(input[2]["output"], "[image image/png, 9 bytes, saved as media/mcp_s_1.png]");
    assert_eq!(
        input[3]["content"],
        json!([
            {"type": "input_text", "text": crate::vocab::message::TOOL_IMAGES_INTRO},
            {"type": "input_text", "text": "media/mcp_s_1.png"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0K"},
        ])
    );
    let body = request::body("m", &request, false);
    assert_eq!(body["input"].as_array().unwrap().len(), 3, "no images without vision: {body}");
}
