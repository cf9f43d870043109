//! Translates a `ChatRequest` into a Responses API request body.
//!
//! Leading system messages become `instructions`; the rest of the transcript becomes input
//! items: `message`s, the assistant's stored `reasoning` items (without their ids: nothing is
//! stored server-side), `function_call`s and `function_call_output`s, in transcript order; the
//! images a run of tool results returned follow it as one user message (vision only).

use serde_json::{Value, json};

use crate::agent::provider::{ChatRequest, ToolSchema};
use crate::vocab::message::{ImageRef, Message, Role, TOOL_IMAGES_INTRO};

/// The request body for `model`.
pub(super) fn body(model: &str, request: &ChatRequest, vision: bool) -> Value {
    let leading = request.messages.iter().take_while(|m| m.role == Role::System).count();
    let instructions: Vec<&str> =
        request.messages[..leading].iter().filter_map(|m| m.content.as_deref()).filter(|t| !t.is_empty()).collect();
    let mut input = Vec::new();
    let rest = &request.messages[leading..];
    for (at, message) in rest.iter().enumerate() {
        push_items(&mut input, message, vision);
        let images = Message::tool_images_after(rest, at, vision);
        if !images.is_empty() {
            input.push(tool_images(&images));
        }
    }
    let mut body = json!({
        "model": model,
        "input": input,
        // Stateless: the transcript lives in hermesd's store, so nothing is kept by the provider,
        // and reasoning comes back encrypted to be returned on the next call.
        "store": false,
        "include": ["reasoning.encrypted_content"],
        "reasoning": { "summary": "auto" },
        "stream": request.stream,
    });
    if !instructions.is_empty() {
        body["instructions"] = json!(instructions.join("\n\n"));
    }
    if !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(wire_tool).collect();
    }
    if let Some(max) = request.max_tokens {
        body["max_output_tokens"] = json!(max);
    }
    body
}

/// Tools are not strict: hermesd's schemas (MCP servers' included) are not all written for
/// strict mode, which the Responses API would otherwise assume.
fn wire_tool(tool: &ToolSchema) -> Value {
    json!({
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": false,
    })
}

/// A user message: its text (with a note for each image the model is not shown), then its
/// loaded images as `input_image` parts with data URLs for a model with vision.
fn user_message(message: &Message, vision: bool) -> Value {
    let text = message.text_with_notes(vision).filter(|t| !t.is_empty()).unwrap_or_else(|| " ".to_owned());
    let mut content = vec![json!({ "type": "input_text", "text": text })];
    for image in message.shown_images(vision) {
        if let Some(data) = &image.data {
            content.push(json!({ "type": "input_image", "image_url": data.as_ref() }));
        }
    }
    json!({ "type": "message", "role": "user", "content": content })
}

/// The user message that shows a run of tool results' images (an output item takes text only).
fn tool_images(images: &[&ImageRef]) -> Value {
    let mut content = vec![json!({ "type": "input_text", "text": TOOL_IMAGES_INTRO })];
    for image in images {
        if let Some(data) = &image.data {
            content.push(json!({ "type": "input_text", "text": image.model_path() }));
            content.push(json!({ "type": "input_image", "image_url": data.as_ref() }));
        }
    }
    json!({ "type": "message", "role": "user", "content": content })
}

fn text_message(role: &str, part: &str, text: &str) -> Value {
    json!({ "type": "message", "role": role, "content": [{ "type": part, "text": text }] })
}

/// The input items of one transcript message.
fn push_items(input: &mut Vec<Value>, message: &Message, vision: bool) {
    let text = message.content.as_deref().filter(|t| !t.is_empty());
    match message.role {
        Role::System => {
            if let Some(text) = text {
                input.push(text_message("developer", "input_text", text));
            }
        }
        Role::User => input.push(user_message(message, vision)),
        Role::Assistant => {
            // A reasoning item must come right before the output it led to.
            for item in message.reasoning.iter().flat_map(|r| &r.items) {
                if let Some(item) = returnable(item) {
                    input.push(item);
                }
            }
            if let Some(text) = text {
                input.push(text_message("assistant", "output_text", text));
            }
            for call in &message.tool_calls {
                input.push(json!({
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                }));
            }
        }
        Role::Tool => match &message.tool_call_id {
            Some(id) => input.push(json!({
                "type": "function_call_output",
                "call_id": id,
                "output": message.content.as_deref().unwrap_or_default(),
            })),
            // A result that answers no call cannot be an output item; keep its text.
            None => input.push(text_message("user", "input_text", &format!("[tool result] {}", text.unwrap_or("")))),
        },
    }
}

/// A stored reasoning item as it is sent back: ours only (other providers' items are skipped),
/// with its encrypted content, without its id (with `store: false` an id makes the API look the
/// item up and fail), and with the `summary` the API requires.
fn returnable(item: &Value) -> Option<Value> {
    if item["type"] != "reasoning" || item["encrypted_content"].as_str().is_none_or(str::is_empty) {
        return None;
    }
    let mut item = item.clone();
    let object = item.as_object_mut()?;
    object.remove("id");
    object.remove("status");
    object.entry("summary").or_insert_with(|| json!([]));
    Some(item)
}
