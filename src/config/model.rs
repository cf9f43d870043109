//! `[model]` (and its fallbacks), `[agent]` and `[compression]`: which models answer, and how
//! a turn runs on them.

use serde::{Deserialize, Serialize};

use super::{HumanDuration, ModelPrices};

/// Which API dialect a model endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI-compatible `/chat/completions` (OpenAI, OpenRouter, vLLM, llama.cpp, Ollama).
    ChatCompletions,
    /// Anthropic's native Messages API.
    AnthropicMessages,
    /// OpenAI's Responses API (`/responses`, stateless, reasoning items returned encrypted).
    Responses,
}

/// `[model]` and each `[[model.fallback]]` (same keys; fallbacks cannot nest).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The API dialect.
    pub provider: ProviderKind,
    /// The endpoint's base URL (`.../v1` for chat_completions).
    pub base_url: String,
    /// The model name sent to the endpoint.
    pub name: String,
    /// Name of the environment variable that holds the API key (unset: no key is sent).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The model's context window in tokens.
    #[serde(default = "default_context_length")]
    pub context_length: u64,
    /// Per-request timeout.
    #[serde(default = "default_model_timeout")]
    pub timeout: HumanDuration,
    /// The model takes images: they are sent as image parts (base64 `data:` URLs or blocks).
    /// Without it, images are described by `[auxiliary.vision]` or named by path.
    #[serde(default)]
    pub vision: bool,
    /// Endpoints tried in order when this one fails.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<ModelConfig>,
    /// Price of uncached prompt tokens, USD per million (absent: cost unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_per_mtok: Option<f64>,
    /// Price of completion tokens, USD per million (absent: cost unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_per_mtok: Option<f64>,
    /// Price of prompt tokens read from the provider's cache, USD per million (absent: the
    /// input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_per_mtok: Option<f64>,
    /// Price of prompt tokens written to the provider's cache, USD per million (absent: the
    /// input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
}

impl ModelConfig {
    /// This model and its fallbacks, in order.
    pub fn chain(&self) -> Vec<&ModelConfig> {
        std::iter::once(self).chain(&self.fallback).collect()
    }

    /// This entry's prices, for the usage of the calls it serves.
    pub fn prices(&self) -> ModelPrices {
        ModelPrices {
            input: self.input_per_mtok,
            output: self.output_per_mtok,
            cache_read: self.cache_read_per_mtok,
            cache_write: self.cache_write_per_mtok,
        }
    }
}

fn default_context_length() -> u64 {
    128_000
}

fn default_model_timeout() -> HumanDuration {
    HumanDuration::secs(120)
}

/// What to do with a message that arrives while its session's turn runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BusyPolicy {
    /// Run it after the current turn (FIFO), acknowledging "queued (n)" at once.
    #[default]
    Queue,
    /// Cancel the running turn at its next safe point, then run the new message.
    Interrupt,
    /// Inject the text into the running turn after its next tool call.
    Steer,
}

/// `[agent]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// Model calls allowed in one turn.
    pub max_iterations: u32,
    /// Policy for messages arriving mid-turn.
    pub busy_policy: BusyPolicy,
    /// Turns running at once across all sessions (the worker pool size).
    pub max_concurrent_turns: usize,
    /// Turns that may wait for a person (approval, clarifying question) without holding a worker
    /// permit; a wait beyond this keeps its permit.
    pub max_parked_turns: usize,
    /// Interval of "still working" notices during long turns.
    pub heartbeat_interval: HumanDuration,
    /// Replaces the built-in identity part of the system prompt.
    pub system_prompt: Option<String>,
    /// Messages a session may hold waiting behind its running turn.
    pub max_queued_per_session: usize,
    /// How long an idle session actor lives before it exits (its state is in the store).
    pub session_idle: HumanDuration,
    /// On shutdown, how long running turns may take to finish before they are persisted for the
    /// next start.
    pub drain_timeout: HumanDuration,
    /// A turn with no step for this long is stopped and the user told.
    pub inactivity_timeout: HumanDuration,
    /// Budget of model time for one turn: time spent in model calls (retries, their waits and
    /// fallbacks included), summed; tool runs and approval waits between calls do not count.
    pub model_deadline: HumanDuration,
    /// Attempts per provider for a retryable failure (429, 5xx, dropped stream).
    pub retry_attempts: u32,
    /// Show a progress message (tool names, short previews) on platforms that can edit messages.
    pub progress: bool,
    /// Model calls a `delegate_task` child agent may make.
    pub delegate_max_iterations: u32,
    /// On chat platforms, messages from one sender arriving within this window of each other
    /// before their turn starts become one turn (`0s` turns batching off; never the API,
    /// webhooks or cron).
    pub batch_window: HumanDuration,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            max_iterations: 90,
            busy_policy: BusyPolicy::Queue,
            max_concurrent_turns: 16,
            max_parked_turns: 64,
            heartbeat_interval: HumanDuration::secs(180),
            system_prompt: None,
            max_queued_per_session: 32,
            session_idle: HumanDuration::secs(120),
            drain_timeout: HumanDuration::secs(20),
            inactivity_timeout: HumanDuration::secs(30 * 60),
            model_deadline: HumanDuration::secs(600),
            retry_attempts: 3,
            progress: true,
            delegate_max_iterations: 30,
            batch_window: HumanDuration(std::time::Duration::from_millis(500)),
        }
    }
}

/// `[compression]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompressionConfig {
    /// Fraction of the context window at which history is summarised.
    pub threshold: f64,
}

impl Default for CompressionConfig {
    fn default() -> Self {
        Self { threshold: 0.85 }
    }
}
