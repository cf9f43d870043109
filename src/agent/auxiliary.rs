//! Auxiliary models: small helper models configured under `[auxiliary]`, called once with a
//! timeout and never allowed to fail a turn. This module builds their providers and holds the
//! summary model (`[auxiliary.summary]`) used for session titles and search summaries.

use std::sync::Arc;
use std::time::Duration;

use crate::agent::provider::{AnthropicMessages, ChatCompletions, ChatRequest, Provider, Responses};
use crate::config::{Env, ModelConfig, ProviderKind};
use crate::vocab::message::{Message, Role};

/// A provider for an auxiliary `model` (no fallbacks); its key only from `api_key_env`.
pub fn provider(
    model: &ModelConfig,
    env: &Env,
    http: &reqwest::Client,
    vision: bool,
) -> Result<Arc<dyn Provider>, String> {
    let key = match model.api_key_env.as_deref() {
        Some(var) => env.secret(var).map_err(|e| e.to_string())?,
        None => None,
    };
    let (url, name, timeout, context) = (&model.base_url, &model.name, model.timeout.get(), model.context_length);
    Ok(match model.provider {
        ProviderKind::ChatCompletions => {
            Arc::new(ChatCompletions::new(http.clone(), url, name, key, timeout, context).with_vision(vision))
        }
        ProviderKind::AnthropicMessages => {
            Arc::new(AnthropicMessages::new(http.clone(), url, name, key, timeout, context).with_vision(vision))
        }
        ProviderKind::Responses => {
            Arc::new(Responses::new(http.clone(), url, name, key, timeout, context).with_vision(vision))
        }
    })
}

/// The summary model: one instruction, one text, one short answer.
pub struct Summarizer {
    provider: Arc<dyn Provider>,
    timeout: Duration,
}

impl Summarizer {
    /// Summarise with `provider`, each call bounded by `timeout`.
    pub fn new(provider: Arc<dyn Provider>, timeout: Duration) -> Self {
        Self { provider, timeout }
    }

    /// The summary model `[auxiliary.summary]` configures, if any.
    pub fn from_config(model: Option<&ModelConfig>, env: &Env, http: &reqwest::Client) -> Result<Option<Self>, String> {
        let Some(model) = model else { return Ok(None) };
        Ok(Some(Self::new(provider(model, env, http, false)?, model.timeout.get())))
    }

    /// The model's answer to `instruction` (a system message) about `text`, at most
    /// `max_tokens` long, trimmed; or why there is none (error, timeout, empty answer).
    pub async fn complete(&self, instruction: &str, text: &str, max_tokens: u32) -> Result<String, String> {
        let request = ChatRequest {
            messages: vec![Message::text(Role::System, instruction), Message::text(Role::User, text)],
            max_tokens: Some(max_tokens),
            ..ChatRequest::default()
        };
        let call = self.provider.complete(&request, None);
        let response = match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err(format!("no answer within {} s", self.timeout.as_secs())),
        };
        let text = response.message.content.unwrap_or_default();
        match text.trim() {
            "" => Err("the summary model gave an empty answer".into()),
            text => Ok(text.to_owned()),
        }
    }
}
