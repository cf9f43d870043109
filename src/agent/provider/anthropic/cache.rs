//! Prompt-caching breakpoints for Anthropic models: the stable prefix (tools and system) plus
//! rolling breakpoints on the last user turns, at most four in all (the API's limit).
//!
//! Each call moves the rolling breakpoints forward, so the next call (the turn's next step, or
//! the next turn) reads everything up to the previous user turn from the cache. Shared by the
//! native Messages API and by `chat_completions` for Claude models behind routers.

use serde_json::{Value, json};

/// Anthropic accepts at most this many `cache_control` breakpoints per request.
pub(crate) const MAX_BREAKPOINTS: usize = 4;

/// Rolling breakpoints placed on the last user turns when the prefix holds one.
pub(crate) const ROLLING_BREAKPOINTS: usize = MAX_BREAKPOINTS - 1;

/// The breakpoint marker.
pub(crate) fn marker() -> Value {
    json!({ "type": "ephemeral" })
}

/// Mark the last block of each of the last `count` user messages (`(role, blocks)` pairs, tool
/// results included, as they form the user side of the conversation).
pub(super) fn mark_last_user_turns(messages: &mut [(&'static str, Vec<Value>)], count: usize) {
    let users = messages.iter_mut().rev().filter(|(role, _)| *role == "user");
    for (_, blocks) in users.take(count) {
        if let Some(block) = blocks.last_mut() {
            block["cache_control"] = marker();
        }
    }
}

/// How many `cache_control` markers a request body carries, wherever they sit.
#[cfg(test)]
pub(crate) fn count_markers(value: &Value) -> usize {
    match value {
        Value::Object(map) => {
            usize::from(map.contains_key("cache_control")) + map.values().map(count_markers).sum::<usize>()
        }
        Value::Array(items) => items.iter().map(count_markers).sum(),
        _ => 0,
    }
}
