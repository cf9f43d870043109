//! The `Provider` boundary: one LLM API dialect each, speaking the internal message format.
//!
//! Providers do not retry; the runtime owns retries, fallback and deadlines.
//!
//! `Provider`: `complete(request, deltas)` streams deltas to the sink and reports `Usage`, cache
//! read and write tokens included; `context_length`; `vision()`. The dialects: `ChatCompletions`,
//! `AnthropicMessages`, `Responses`, and `NotConfigured`; each sends through `endpoint.rs`'s
//! `Endpoint` (model, key, timeout, the call and its failure classification) and reads streams
//! through `sse.rs` (over `hermesd_platform::sse`'s decoder). With
//! vision, image parts go as `image_url` data URLs (chat completions), `input_image` parts
//! (Responses) or base64 `image` blocks (Anthropic, also inside `tool_result`); without it, a note
//! naming the path. Opaque reasoning items go back only to the dialect that made them (Responses
//! `reasoning` items, Anthropic's signed thinking); chat-completions models never get reasoning
//! back.

mod anthropic;
mod chat_completions;
mod endpoint;
/// The SSE decoder's contract for the fuzz target (tests/fuzz).
#[cfg(any(fuzzing, test))]
pub(crate) mod fuzz;
mod responses;
mod sse;

use std::time::Duration;

use async_trait::async_trait;

pub use crate::usage::Usage;
use crate::vocab::message::Message;

pub use anthropic::AnthropicMessages;
pub use chat_completions::ChatCompletions;
pub use responses::Responses;

/// A tool as a provider advertises it to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSchema {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON schema of its arguments object (shared: built once when the tool is registered).
    pub parameters: std::sync::Arc<serde_json::Value>,
}

/// What a model call sends.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    /// The transcript, system prompt first.
    pub messages: Vec<Message>,
    /// Tools the model may call (empty: a tool-less call, e.g. the final summary).
    pub tools: std::sync::Arc<[ToolSchema]>,
    /// Cap on generated tokens, when set.
    pub max_tokens: Option<u32>,
    /// How many leading messages form the stable, cacheable prefix (the system prompt). Providers
    /// with explicit caching (Anthropic `cache_control`) mark its end.
    pub stable_prefix: usize,
    /// Stream the answer, reporting deltas as they arrive.
    pub stream: bool,
}

/// A piece of a streamed answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    /// Answer text.
    Text(String),
    /// Reasoning ("thinking") text, not part of the answer.
    Reasoning(String),
}

/// Where streamed deltas go. Called from the provider's task; must not block.
pub type DeltaSink<'a> = &'a (dyn Fn(Delta) + Send + Sync);

/// What a model call returns.
#[derive(Debug, Clone)]
pub struct ChatResponse {
    /// The assistant message.
    pub message: Message,
    /// Usage, when reported.
    pub usage: Option<Usage>,
    /// Why generation stopped, as reported.
    pub finish_reason: Option<String>,
    /// Reasoning or thinking text the model produced, kept apart from the answer.
    pub reasoning: Option<String>,
}

/// Provider failures, by what the runtime does about them.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// No model is configured at all.
    #[error("no model provider configured: add a [model] section to config.toml (see deploy/hermesd.example.toml)")]
    NotConfigured,
    /// 429; wait `retry_after` when given.
    #[error("rate limited by the model provider{}", retry_after.map(|d| format!(" (retry after {}s)", d.as_secs())).unwrap_or_default())]
    RateLimited {
        /// The provider's Retry-After.
        retry_after: Option<Duration>,
    },
    /// 401/403: the key was refused.
    #[error("the model provider refused the API key ({0})")]
    Unauthorized(u16),
    /// The prompt does not fit the model's context window.
    #[error("the conversation is too long for the model's context window")]
    ContextTooLong,
    /// 5xx, network failure or timeout; may pass.
    #[error("the model provider is unavailable: {0}")]
    Transient(String),
    /// A 4xx other than the above; retrying will not help.
    #[error("the model provider rejected the request: {0}")]
    Permanent(String),
    /// The reply could not be understood.
    #[error("the model provider sent a reply hermesd could not read: {0}")]
    InvalidResponse(String),
    /// A stream ended before its final event; the partial answer must be discarded.
    #[error("the model's answer stream was cut off: {0}")]
    StreamDropped(String),
}

impl ProviderError {
    /// Whether the same call may succeed if retried on the same provider.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ProviderError::RateLimited { .. }
                | ProviderError::Transient(_)
                | ProviderError::StreamDropped(_)
                | ProviderError::InvalidResponse(_)
        )
    }

    /// Whether the turn should move to the next provider in the fallback chain.
    pub fn warrants_fallback(&self) -> bool {
        matches!(
            self,
            ProviderError::RateLimited { .. }
                | ProviderError::Transient(_)
                | ProviderError::StreamDropped(_)
                | ProviderError::InvalidResponse(_)
                | ProviderError::Unauthorized(_)
        )
    }
}

/// An LLM API dialect.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The model name, for logs and `/status`.
    fn model(&self) -> &str;

    /// The model's context window in tokens.
    fn context_length(&self) -> u64;

    /// Whether the model takes images (`vision = true` in its config); without it, images are
    /// sent as text notes naming their paths.
    fn vision(&self) -> bool {
        false
    }

    /// One model call. With `request.stream` and a sink, deltas are reported as they arrive and
    /// the assembled response is returned at the end; a stream that ends early is
    /// `StreamDropped`. Providers never retry.
    async fn complete(
        &self,
        request: &ChatRequest,
        deltas: Option<DeltaSink<'_>>,
    ) -> Result<ChatResponse, ProviderError>;
}

/// The provider used when `[model]` is absent: every call says so plainly.
#[derive(Debug, Default)]
pub struct NotConfigured;

#[async_trait]
impl Provider for NotConfigured {
    fn model(&self) -> &str {
        "none"
    }

    fn context_length(&self) -> u64 {
        128_000
    }

    async fn complete(
        &self,
        _request: &ChatRequest,
        _deltas: Option<DeltaSink<'_>>,
    ) -> Result<ChatResponse, ProviderError> {
        Err(ProviderError::NotConfigured)
    }
}
