//! Translates a `ChatRequest` into a Messages API request body.
//!
//! System messages become `system` blocks, tool results become `tool_result` blocks in user
//! messages, and same-role neighbours merge, because the API demands strict user/assistant
//! alternation. The stable prefix's last block carries a `cache_control` breakpoint, and the
//! last user turns carry rolling ones (`cache.rs`).

use serde_json::{Value, json};

use super::cache;
use crate::agent::provider::{ChatRequest, ToolSchema};
use crate::vocab::message::{ImageRef, Message, Role};

/// `max_tokens` is mandatory in this API; this is used when the request sets none.
const DEFAULT_MAX_TOKENS: u32 = 8192;

/// The request body for `model`.
pub(super) fn body(model: &str, request: &ChatRequest, vision: bool) -> Value {
    let (system, messages) = translate(&request.messages, request.stable_prefix, vision);
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "messages": messages,
    });
    if !system.is_empty() {
        body["system"] = Value::Array(system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(wire_tool).collect();
    }
    if request.stream {
        body["stream"] = json!(true);
    }
    body
}

fn wire_tool(tool: &ToolSchema) -> Value {
    json!({ "name": tool.name, "description": tool.description, "input_schema": tool.parameters.as_ref() })
}

/// Where a block went.
#[derive(Clone, Copy)]
enum Place {
    System(usize),
    Message(usize, usize),
}

#[derive(Default)]
struct Builder {
    system: Vec<Value>,
    messages: Vec<(&'static str, Vec<Value>)>,
    last: Option<Place>,
}

impl Builder {
    fn system(&mut self, block: Value) {
        self.system.push(block);
        self.last = Some(Place::System(self.system.len() - 1));
    }

    /// Append a block, to the last message when it has the same role.
    fn block(&mut self, role: &'static str, block: Value) {
        match self.messages.last_mut() {
            Some((last_role, blocks)) if *last_role == role => blocks.push(block),
            _ => self.messages.push((role, vec![block])),
        }
        let index = self.messages.len() - 1;
        self.last = Some(Place::Message(index, self.messages[index].1.len() - 1));
    }

    fn mark_cache(&mut self, place: Place) {
        let block = match place {
            Place::System(i) => &mut self.system[i],
            Place::Message(i, j) => &mut self.messages[i].1[j],
        };
        block["cache_control"] = json!({ "type": "ephemeral" });
    }
}

/// The API rejects empty text blocks, so empty text is left out.
fn text_block(text: Option<&String>) -> Option<Value> {
    text.filter(|t| !t.is_empty()).map(|t| json!({ "type": "text", "text": t }))
}

/// `system` blocks and `messages` for the transcript.
fn translate(transcript: &[Message], stable_prefix: usize, vision: bool) -> (Vec<Value>, Vec<Value>) {
    let mut out = Builder::default();
    let mut prefix_end = None;
    for (index, message) in transcript.iter().enumerate() {
        match message.role {
            Role::System => {
                if let Some(block) = text_block(message.content.as_ref()) {
                    out.system(block);
                }
            }
            Role::User => {
                if let Some(block) = text_block(message.text_with_notes(vision).as_ref()) {
                    out.block("user", block);
                }
                for image in message.shown_images(vision) {
                    if let Some(block) = image_block(image) {
                        out.block("user", block);
                    }
                }
            }
            Role::Assistant => {
                // Signed thinking must open the assistant turn it led to.
                for item in message.reasoning.iter().flat_map(|r| &r.items) {
                    if matches!(item["type"].as_str(), Some("thinking" | "redacted_thinking")) {
                        out.block("assistant", item.clone());
                    }
                }
                if let Some(block) = text_block(message.content.as_ref()) {
                    out.block("assistant", block);
                }
                for call in &message.tool_calls {
                    let input = match serde_json::from_str::<Value>(&call.arguments) {
                        Ok(input) if input.is_object() => input,
                        _ => {
                            // The arguments themselves are not logged: they may hold user data.
                            tracing::warn!(
                                tool = %call.name,
                                call = %call.id,
                                "tool call arguments are not a JSON object; sending {{}} instead"
                            );
                            json!({})
                        }
                    };
                    out.block(
                        "assistant",
                        json!({ "type": "tool_use", "id": call.id, "name": call.name, "input": input }),
                    );
                }
            }
            Role::Tool => out.block("user", tool_result(message, vision)),
        }
        if index < stable_prefix {
            prefix_end = out.last;
        }
    }
    if let Some(place) = prefix_end {
        out.mark_cache(place);
    }
    for (_, blocks) in &mut out.messages {
        // Tool results must open the user message that answers the tool calls.
        blocks.sort_by_key(|b| b["type"] != "tool_result");
    }
    let rolling = if prefix_end.is_some() { cache::ROLLING_BREAKPOINTS } else { cache::MAX_BREAKPOINTS };
    cache::mark_last_user_turns(&mut out.messages, rolling);
    let messages = out.messages.into_iter().map(|(role, blocks)| json!({ "role": role, "content": blocks })).collect();
    (out.system, messages)
}

/// A base64 image block; the API takes the bytes, never a path (it cannot reach the daemon).
fn image_block(image: &ImageRef) -> Option<Value> {
    let data = image.base64()?;
    Some(json!({ "type": "image", "source": { "type": "base64", "media_type": image.mime, "data": data } }))
}

fn tool_result(message: &Message, vision: bool) -> Value {
    let text = message.text_with_notes(vision).unwrap_or_default();
    match &message.tool_call_id {
        Some(id) => {
            let mut block = json!({ "type": "tool_result", "tool_use_id": id });
            let images: Vec<Value> = message.shown_images(vision).filter_map(image_block).collect();
            // An empty result is sent without content; an empty text is refused.
            if !images.is_empty() {
                let text = (!text.is_empty()).then(|| json!({ "type": "text", "text": text }));
                block["content"] = Value::Array(text.into_iter().chain(images).collect());
            } else if !text.is_empty() {
                block["content"] = json!(text);
            }
            block
        }
        // A result that answers no call cannot be a tool_result; keep its text rather than fail the call.
        None => json!({ "type": "text", "text": format!("[tool result] {text}") }),
    }
}
