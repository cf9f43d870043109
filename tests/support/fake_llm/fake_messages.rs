//! The fake LLM's Anthropic Messages API (`POST /v1/messages`).

use super::*;

/// Prompt tokens read from the cache in every answer.
pub const CACHE_READ: u64 = 300;
/// Prompt tokens written to the cache in every answer.
pub const CACHE_WRITE: u64 = 50;

fn markers(value: &Value) -> usize {
    match value {
        Value::Object(map) => usize::from(map.contains_key("cache_control")) + map.values().map(markers).sum::<usize>(),
        Value::Array(items) => items.iter().map(markers).sum(),
        _ => 0,
    }
}

pub(super) async fn messages(State(shared): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    shared.requests.lock().unwrap().push(body.clone());
    if markers(&body) > 4 {
        let error = json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": "A maximum of 4 blocks with cache_control may be provided."}});
        return (StatusCode::BAD_REQUEST, Json(error)).into_response();
    }
    let is_summary = body["system"].to_string().contains("handover summaries");
    let (delay, step) = if is_summary {
        (Duration::ZERO, Step::Reply(SUMMARY.into()))
    } else {
        shared.script.lock().unwrap().pop_front().unwrap_or((Duration::ZERO, Step::Echo))
    };
    tokio::time::sleep(shared.latency + delay).await;
    let mut content = Vec::new();
    let mut stop = "end_turn";
    match step {
        Step::Reply(text) | Step::ReplyWithUsage(text, _) => content.push(json!({"type": "text", "text": text})),
        Step::Reasoned(thinking, text) => {
            content.push(json!({"type": "thinking", "thinking": thinking, "signature": "sig"}));
            content.push(json!({"type": "text", "text": text}));
        }
        Step::ToolCalls(calls) => {
            stop = "tool_use";
            for (i, (name, arguments)) in calls.iter().enumerate() {
                let input: Value = serde_json::from_str(arguments).unwrap_or(json!({}));
                content.push(json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": input}));
            }
        }
        Step::Echo => {
            let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
            let text =
                last["content"].as_array().and_then(|blocks| blocks.iter().rev().find_map(|b| b["text"].as_str()));
            content.push(json!({"type": "text", "text": format!("echo: {}", text.unwrap_or(""))}));
        }
        Step::Status(code, body, _) => return (StatusCode::from_u16(code).unwrap(), body).into_response(),
        other => {
            return (StatusCode::NOT_IMPLEMENTED, format!("{other:?} is not scripted for /v1/messages"))
                .into_response();
        }
    }
    let usage = json!({"input_tokens": 20, "cache_read_input_tokens": CACHE_READ,
        "cache_creation_input_tokens": CACHE_WRITE, "output_tokens": 7});
    let message = json!({"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"],
        "content": content, "stop_reason": stop, "usage": usage});
    if !body["stream"].as_bool().unwrap_or(false) {
        return Json(message).into_response();
    }
    let mut events = vec![json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message",
        "role": "assistant", "content": [], "stop_reason": null, "usage": usage}})];
    for (index, block) in message["content"].as_array().into_iter().flatten().enumerate() {
        let (start, delta) = match block["type"].as_str() {
            Some("text") => (json!({"type": "text", "text": ""}), json!({"type": "text_delta", "text": block["text"]})),
            Some("thinking") => (
                json!({"type": "thinking", "thinking": ""}),
                json!({"type": "thinking_delta", "thinking": block["thinking"]}),
            ),
            _ => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            ),
        };
        events.push(json!({"type": "content_block_start", "index": index, "content_block": start}));
        events.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 7}}));
    events.push(json!({"type": "message_stop"}));
    paced(events.iter().map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or(""))).collect())
}
