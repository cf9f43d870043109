//! The `anthropic` dialect: Anthropic's native Messages API (`/v1/messages`).
//!
//! Translates the internal message format at the edge, marks the stable prefix for prompt caching
//! and classifies failures into `ProviderError` kinds; it never retries and never logs the key.
//!
//! Thinking is kept as the message's reasoning; signed and redacted thinking blocks are returned
//! first in the assistant turn they led to.

pub(crate) mod cache;
mod request;
mod stream;
#[cfg(test)]
mod tests;

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;

use super::endpoint::{Endpoint, KeyHeader, transport_error};
use super::{ChatRequest, ChatResponse, DeltaSink, Provider, ProviderError, Usage};
use crate::config::Secret;
use crate::vocab::message::{Message, Reasoning, Role, ToolCall};

/// The API version every request pins; newer versions may change the wire format.
const API_VERSION: &str = "2023-06-01";

/// A client for Anthropic's Messages API (or a server speaking it).
pub struct AnthropicMessages {
    endpoint: Endpoint,
}

impl AnthropicMessages {
    /// A client for `base_url` (e.g. `https://api.anthropic.com`; a trailing `/v1` is accepted).
    pub fn new(
        http: reqwest::Client,
        base_url: &str,
        model: &str,
        key: Option<Secret>,
        timeout: Duration,
        context_length: u64,
    ) -> Self {
        let url = messages_url(base_url);
        Self { endpoint: Endpoint::new(http, url, model, key, timeout, context_length) }
    }

    /// Send images as base64 `image` blocks (the model has vision).
    pub fn with_vision(mut self, vision: bool) -> Self {
        self.endpoint.vision = vision;
        self
    }

    /// Send the call; a non-success status is read and classified here.
    async fn send(&self, body: &Value, stream: bool) -> Result<reqwest::Response, ProviderError> {
        self.endpoint
            .send(body, stream, KeyHeader::Named("x-api-key"), &[("anthropic-version", API_VERSION)], classify)
            .await
    }
}

fn messages_url(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/v1") { format!("{base}/messages") } else { format!("{base}/v1/messages") }
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    content: Vec<WireBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum WireBlock {
    Text {
        // Empty when a streamed block starts; its text follows in deltas.
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        /// Proves the block is the model's own; it must come back with the block.
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Server tool blocks and whatever comes next.
    #[serde(other)]
    Other,
}

/// Token counts; any may be absent or null depending on the event.
#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

impl WireUsage {
    /// Cached and cache-written tokens are prompt tokens too; Anthropic counts them apart.
    fn prompt_tokens(&self) -> Option<u64> {
        let parts = [self.input_tokens, self.cache_read_input_tokens, self.cache_creation_input_tokens];
        parts.iter().any(Option::is_some).then(|| parts.iter().flatten().sum())
    }
}

/// A signed thinking block as it must be returned with the assistant turn it led to (with tool
/// use and extended thinking the API requires it); unsigned thinking cannot be returned.
fn thinking_item(thinking: &str, signature: &str) -> Option<Value> {
    (!signature.is_empty())
        .then(|| serde_json::json!({ "type": "thinking", "thinking": thinking, "signature": signature }))
}

/// A redacted thinking block, returned as it came.
fn redacted_item(data: &str) -> Option<Value> {
    (!data.is_empty()).then(|| serde_json::json!({ "type": "redacted_thinking", "data": data }))
}

/// A tool call's arguments as JSON text.
fn arguments_text(input: &Value) -> String {
    if input.is_null() { "{}".to_owned() } else { input.to_string() }
}

/// Parse a whole (non-streamed) reply.
fn parse_reply(text: &str) -> Result<ChatResponse, ProviderError> {
    let wire: WireResponse = serde_json::from_str(text).map_err(|e| ProviderError::InvalidResponse(e.to_string()))?;
    let mut answer = String::new();
    let mut reasoning = String::new();
    let mut items = Vec::new();
    let mut tool_calls = Vec::new();
    for block in wire.content {
        match block {
            WireBlock::Text { text } => answer.push_str(&text),
            WireBlock::Thinking { thinking, signature } => {
                items.extend(thinking_item(&thinking, &signature));
                reasoning.push_str(&thinking);
            }
            WireBlock::RedactedThinking { data } => items.extend(redacted_item(&data)),
            WireBlock::ToolUse { id, name, input } => {
                tool_calls.push(ToolCall { id, name, arguments: arguments_text(&input) })
            }
            WireBlock::Other => {}
        }
    }
    Ok(ChatResponse {
        message: Message {
            role: Role::Assistant,
            content: Some(answer).filter(|a| !a.is_empty()),
            tool_calls,
            tool_call_id: None,
            reasoning: Reasoning::new(reasoning.clone(), items),
            images: Vec::new(),
        },
        usage: wire.usage.map(|u| Usage {
            prompt_tokens: u.prompt_tokens().unwrap_or_default(),
            completion_tokens: u.output_tokens.unwrap_or_default(),
            cache_read_tokens: u.cache_read_input_tokens.unwrap_or_default(),
            cache_write_tokens: u.cache_creation_input_tokens.unwrap_or_default(),
        }),
        finish_reason: wire.stop_reason,
        reasoning: Some(reasoning).filter(|r| !r.is_empty()),
    })
}

/// Whether an error message says the prompt does not fit the context window.
fn mentions_context(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    ["prompt is too long", "context length", "context_length", "context window", "context limit"]
        .iter()
        .any(|needle| lower.contains(needle))
}

/// The `error.type` and `error.message` of an error body, or a clipped raw body.
fn error_parts(body: &str) -> (String, String) {
    match serde_json::from_str::<Value>(body) {
        Ok(value) => (
            value["error"]["type"].as_str().unwrap_or_default().to_owned(),
            value["error"]["message"].as_str().map_or_else(|| body.chars().take(200).collect(), str::to_owned),
        ),
        Err(_) => (String::new(), body.chars().take(200).collect()),
    }
}

/// Classify a non-success status and body into what the runtime acts on.
fn classify(status: u16, retry_after: Option<Duration>, body: &str) -> ProviderError {
    let (_, message) = error_parts(body);
    match status {
        429 => ProviderError::RateLimited { retry_after },
        401 | 403 => ProviderError::Unauthorized(status),
        400 | 413 if mentions_context(body) => ProviderError::ContextTooLong,
        // 529 is Anthropic's "overloaded".
        408 | 500..=599 => ProviderError::Transient(format!("HTTP {status}: {message}")),
        _ => ProviderError::Permanent(format!("HTTP {status}: {message}")),
    }
}

/// Classify an `error` event that arrived inside a stream (the status was already 200).
fn classify_event(error: &Value) -> ProviderError {
    let kind = error["type"].as_str().unwrap_or_default();
    let message = error["message"].as_str().unwrap_or("unknown error");
    match kind {
        "rate_limit_error" => ProviderError::RateLimited { retry_after: None },
        "authentication_error" => ProviderError::Unauthorized(401),
        "permission_error" => ProviderError::Unauthorized(403),
        "invalid_request_error" | "request_too_large" if mentions_context(message) => ProviderError::ContextTooLong,
        "invalid_request_error" | "request_too_large" | "not_found_error" | "billing_error" => {
            ProviderError::Permanent(format!("{kind}: {message}"))
        }
        // overloaded_error, api_error and anything unknown may pass.
        _ => ProviderError::Transient(format!("{kind}: {message}")),
    }
}

#[async_trait]
impl Provider for AnthropicMessages {
    fn model(&self) -> &str {
        &self.endpoint.model
    }

    fn context_length(&self) -> u64 {
        self.endpoint.context_length
    }

    fn vision(&self) -> bool {
        self.endpoint.vision
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        deltas: Option<DeltaSink<'_>>,
    ) -> Result<ChatResponse, ProviderError> {
        let response =
            self.send(&request::body(&self.endpoint.model, request, self.endpoint.vision), request.stream).await?;
        if request.stream {
            return stream::read(response, deltas).await;
        }
        let text = response.text().await.map_err(transport_error)?;
        parse_reply(&text)
    }
}
