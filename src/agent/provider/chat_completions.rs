//! The `chat_completions` dialect: any OpenAI-compatible `/chat/completions` endpoint.
//!
//! Translates the internal message format at the edge and classifies HTTP failures into
//! `ProviderError` kinds; it never retries and never logs the key.
//!
//! Streams over SSE, tool-call deltas assembled (`stream.rs`); `cache.rs` marks `cache_control`
//! content parts for Claude models behind routers.

mod cache;
mod stream;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::endpoint::{Endpoint, KeyHeader, is_json, transport_error};
use super::{ChatRequest, ChatResponse, Delta, DeltaSink, Provider, ProviderError, ToolSchema, Usage};
use crate::config::Secret;
use crate::vocab::message::{Message, Reasoning, Role, TOOL_IMAGES_INTRO, ToolCall};

/// A client for one OpenAI-compatible endpoint.
pub struct ChatCompletions {
    endpoint: Endpoint,
}

impl ChatCompletions {
    /// A client for `base_url` (e.g. `https://openrouter.ai/api/v1`).
    pub fn new(
        http: reqwest::Client,
        base_url: &str,
        model: &str,
        key: Option<Secret>,
        timeout: Duration,
        context_length: u64,
    ) -> Self {
        let url = format!("{}/chat/completions", base_url.trim_end_matches('/'));
        Self { endpoint: Endpoint::new(http, url, model, key, timeout, context_length) }
    }

    /// Send images as `image_url` parts (the model has vision).
    pub fn with_vision(mut self, vision: bool) -> Self {
        self.endpoint.vision = vision;
        self
    }

    /// The request body. It borrows the transcript and the tool schemas and is serialised once,
    /// straight into the request: no intermediate JSON tree is built on every call.
    fn body<'a>(&'a self, request: &'a ChatRequest) -> OutRequest<'a> {
        OutRequest {
            model: &self.endpoint.model,
            messages: wire_messages(&request.messages, self.endpoint.vision),
            stream: request.stream,
            stream_options: request.stream.then_some(StreamOptions { include_usage: true }),
            tools: request.tools.iter().map(wire_tool).collect(),
            max_tokens: request.max_tokens,
        }
    }

    /// Send the call; a non-success status is read and classified here.
    async fn send<B: Serialize + Sync>(&self, body: &B, stream: bool) -> Result<reqwest::Response, ProviderError> {
        self.endpoint.send(body, stream, KeyHeader::Bearer, &[], classify).await
    }
}

#[derive(Serialize)]
struct OutRequest<'a> {
    model: &'a str,
    messages: Vec<OutMessage<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<OutTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct OutMessage<'a> {
    role: &'a str,
    content: OutContent<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OutCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

/// A message's content: text (or null), or text and image parts.
#[derive(Serialize)]
#[serde(untagged)]
enum OutContent<'a> {
    Text(Option<Cow<'a, str>>),
    Parts(Vec<OutPart<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutPart<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: OutImageUrl<'a> },
}

#[derive(Serialize)]
struct OutImageUrl<'a> {
    url: &'a str,
}

#[derive(Serialize)]
struct OutCall<'a> {
    id: &'a str,
    r#type: &'static str,
    function: OutFunction<'a>,
}

#[derive(Serialize)]
struct OutFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct OutTool<'a> {
    r#type: &'static str,
    function: OutToolFunction<'a>,
}

#[derive(Serialize)]
struct OutToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// Images go as `image_url` parts with their `data:` URL (a provider cannot reach the daemon's
/// files) in user messages to a model with vision; anything else gets a note naming the path.
fn wire_content(message: &Message, vision: bool) -> OutContent<'_> {
    if message.images.is_empty() {
        return OutContent::Text(message.content.as_deref().map(Cow::Borrowed));
    }
    let vision = vision && message.role == Role::User;
    let text = message.text_with_notes(vision);
    let mut images = message.shown_images(vision).filter_map(|i| i.data.as_deref()).peekable();
    if images.peek().is_none() {
        return OutContent::Text(text.map(Cow::Owned));
    }
    let mut parts: Vec<OutPart<'_>> =
        text.filter(|t| !t.is_empty()).map(|text| OutPart::Text { text: Cow::Owned(text) }).into_iter().collect();
    parts.extend(images.map(|url| OutPart::ImageUrl { image_url: OutImageUrl { url } }));
    OutContent::Parts(parts)
}

/// The transcript on the wire: each message, and after a run of tool results that returned
/// images, one user message showing them (a `tool` message takes text only).
fn wire_messages(messages: &[Message], vision: bool) -> Vec<OutMessage<'_>> {
    let mut out = Vec::with_capacity(messages.len());
    for (at, message) in messages.iter().enumerate() {
        out.push(wire_message(message, vision));
        let images = Message::tool_images_after(messages, at, vision);
        if images.is_empty() {
            continue;
        }
        let mut parts = vec![OutPart::Text { text: Cow::Borrowed(TOOL_IMAGES_INTRO) }];
        for image in images {
            let Some(url) = image.data.as_deref() else { continue };
            parts.push(OutPart::Text { text: Cow::Owned(image.model_path()) });
            parts.push(OutPart::ImageUrl { image_url: OutImageUrl { url } });
        }
        out.push(OutMessage {
            role: "user",
            content: OutContent::Parts(parts),
            tool_calls: Vec::new(),
            tool_call_id: None,
        });
    }
    out
}

fn wire_message(message: &Message, vision: bool) -> OutMessage<'_> {
    OutMessage {
        role: message.role.as_str(),
        content: wire_content(message, vision),
        tool_calls: message
            .tool_calls
            .iter()
            .map(|c| OutCall {
                id: &c.id,
                r#type: "function",
                function: OutFunction { name: &c.name, arguments: &c.arguments },
            })
            .collect(),
        tool_call_id: message.tool_call_id.as_deref(),
    }
}

fn wire_tool(tool: &ToolSchema) -> OutTool<'_> {
    OutTool {
        r#type: "function",
        function: OutToolFunction { name: &tool.name, description: &tool.description, parameters: &tool.parameters },
    }
}

#[derive(Deserialize)]
struct WireResponse {
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    /// DeepSeek, vLLM and others.
    #[serde(default)]
    reasoning_content: Option<String>,
    /// OpenRouter and others.
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    id: String,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    /// OpenAI's `cached_tokens`; OpenRouter adds `cache_write_tokens` for Claude models.
    #[serde(default)]
    prompt_tokens_details: Option<WirePromptDetails>,
}

#[derive(Deserialize, Default)]
struct WirePromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    cache_write_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        let details = u.prompt_tokens_details.unwrap_or_default();
        Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cache_read_tokens: details.cached_tokens.unwrap_or_default(),
            cache_write_tokens: details.cache_write_tokens.unwrap_or_default(),
        }
    }
}

/// Parse a whole (non-streamed) reply.
fn parse_reply(text: &str) -> Result<ChatResponse, ProviderError> {
    let wire: WireResponse = serde_json::from_str(text).map_err(|e| ProviderError::InvalidResponse(e.to_string()))?;
    let choice = wire
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| ProviderError::InvalidResponse("no choices in the reply".into()))?;
    let message = choice.message;
    let tool_calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|c| ToolCall { id: c.id, name: c.function.name, arguments: c.function.arguments })
        .collect();
    let reasoning = message.reasoning_content.or(message.reasoning).filter(|r| !r.is_empty());
    Ok(ChatResponse {
        message: Message {
            role: Role::Assistant,
            content: message.content,
            tool_calls,
            tool_call_id: None,
            reasoning: reasoning.clone().and_then(|text| Reasoning::new(text, Vec::new())),
            images: Vec::new(),
        },
        usage: wire.usage.map(Usage::from),
        finish_reason: choice.finish_reason,
        reasoning,
    })
}

/// Classify a non-success status and body into what the runtime acts on.
pub(super) fn classify(status: u16, retry_after: Option<Duration>, body: &str) -> ProviderError {
    let lower = body.to_ascii_lowercase();
    let detail = || {
        serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| body.chars().take(200).collect())
    };
    match status {
        429 => ProviderError::RateLimited { retry_after },
        401 | 403 => ProviderError::Unauthorized(status),
        400 | 413
            if lower.contains("context_length") || lower.contains("context length") || lower.contains("too long") =>
        {
            ProviderError::ContextTooLong
        }
        408 | 500..=599 => ProviderError::Transient(format!("HTTP {status}: {}", detail())),
        _ => ProviderError::Permanent(format!("HTTP {status}: {}", detail())),
    }
}

#[async_trait]
impl Provider for ChatCompletions {
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
        let body = self.body(request);
        let response = if cache::is_claude(&self.endpoint.model) {
            // Claude behind a router caches only what is marked.
            let mut body =
                serde_json::to_value(&body).map_err(|e| ProviderError::Permanent(format!("request: {e}")))?;
            cache::mark(&mut body, request.stable_prefix);
            self.send(&body, request.stream).await?
        } else {
            self.send(&body, request.stream).await?
        };
        if request.stream && !is_json(&response) {
            return stream::read(response, deltas).await;
        }
        let text = response.text().await.map_err(transport_error)?;
        let reply = parse_reply(&text)?;
        // A server that ignored `stream` still owes the sink the whole answer, once.
        if let (true, Some(sink)) = (request.stream, deltas) {
            if let Some(reasoning) = &reply.reasoning {
                sink(Delta::Reasoning(reasoning.clone()));
            }
            if let Some(text) = reply.message.content.as_ref().filter(|t| !t.is_empty()) {
                sink(Delta::Text(text.clone()));
            }
        }
        Ok(reply)
    }
}
