//! `cache_control` for Claude models reached through OpenAI-compatible routers (OpenRouter and
//! others pass it on to Anthropic): the stable prefix and the last user turns are marked on
//! their content parts, as the native provider marks them (`anthropic/cache.rs`).
//!
//! Works on the serialised body, so it stays independent of how message content is mapped.

use serde_json::Value;

use crate::agent::provider::anthropic::cache::{MAX_BREAKPOINTS, ROLLING_BREAKPOINTS, marker};

/// Whether `model` is served by Anthropic behind the router (e.g. `anthropic/claude-sonnet-4.5`).
pub(super) fn is_claude(model: &str) -> bool {
    model.to_ascii_lowercase().contains("claude")
}

/// Mark the last message of the stable prefix and the last user (or tool result) messages
/// after it; at most four breakpoints in all.
pub(super) fn mark(body: &mut Value, stable_prefix: usize) {
    let Some(messages) = body["messages"].as_array_mut() else { return };
    let prefix = stable_prefix.min(messages.len());
    let prefix_marked = prefix > 0 && mark_message(&mut messages[prefix - 1]);
    let mut rolling = if prefix_marked { ROLLING_BREAKPOINTS } else { MAX_BREAKPOINTS };
    for message in messages[prefix..].iter_mut().rev() {
        if rolling == 0 {
            break;
        }
        if matches!(message["role"].as_str(), Some("user" | "tool")) && mark_message(message) {
            rolling -= 1;
        }
    }
}

/// Put the marker on the message's last content part, turning text content into one part;
/// false when there is nothing to mark (no content).
fn mark_message(message: &mut Value) -> bool {
    let content = &mut message["content"];
    if let Some(text) = content.as_str().filter(|t| !t.is_empty()) {
        *content = serde_json::json!([{ "type": "text", "text": text, "cache_control": marker() }]);
        return true;
    }
    match content.as_array_mut().and_then(|parts| parts.last_mut()) {
        Some(part) if part.is_object() => {
            part["cache_control"] = marker();
            true
        }
        _ => false,
    }
}
