//! The `Provider` boundary: one LLM API dialect each, speaking the internal message format.
//!
//! Providers do not retry; the runtime owns retries, fallback and deadlines.

mod chat_completions;

use std::time::Duration;

use async_trait::async_trait;

use super::message::Message;

pub use chat_completions::ChatCompletions;

/// What a model call sends.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// The transcript, system prompt first.
    pub messages: Vec<Message>,
}

/// Token usage as the provider reported it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

/// What a model call returns.
#[derive(Debug, Clone)]
pub struct ChatResponse {
    /// The assistant message.
    pub message: Message,
    /// Usage, when reported.
    pub usage: Option<Usage>,
    /// Why generation stopped, as reported.
    pub finish_reason: Option<String>,
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
}

/// An LLM API dialect.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The model name, for logs and `/status`.
    fn model(&self) -> &str;

    /// One non-streaming model call.
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError>;
}

/// The provider used when `[model]` is absent: every call says so plainly.
#[derive(Debug, Default)]
pub struct NotConfigured;

#[async_trait]
impl Provider for NotConfigured {
    fn model(&self) -> &str {
        "none"
    }

    async fn complete(&self, _request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        Err(ProviderError::NotConfigured)
    }
}
