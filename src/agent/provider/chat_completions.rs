//! The `chat_completions` dialect: any OpenAI-compatible `/chat/completions` endpoint.
//!
//! Translates the internal message format at the edge and classifies HTTP failures into
//! `ProviderError` kinds; it never retries and never logs the key.

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ChatRequest, ChatResponse, DeltaSink, Provider, ProviderError, Usage};
use crate::agent::message::{Message, Role, ToolCall};
use crate::config::Secret;

/// A client for one OpenAI-compatible endpoint.
pub struct ChatCompletions {
    http: reqwest::Client,
    url: String,
    model: String,
    key: Option<Secret>,
    timeout: Duration,
    context_length: u64,
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
        Self {
            context_length,
            http,
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            model: model.to_owned(),
            key,
            timeout,
        }
    }
}

fn wire_message(message: &Message) -> Value {
    let mut value = json!({ "role": message.role.as_str(), "content": message.content });
    if !message.tool_calls.is_empty() {
        value["tool_calls"] = message
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
    }
    if let Some(id) = &message.tool_call_id {
        value["tool_call_id"] = json!(id);
    }
    value
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
    #[serde(default)]
    tool_calls: Vec<WireToolCall>,
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
}

/// Classify a non-success status and body into what the runtime acts on.
fn classify(status: u16, retry_after: Option<Duration>, body: &str) -> ProviderError {
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

fn parse_retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0).map(Duration::from_secs_f64)
}

#[async_trait]
impl Provider for ChatCompletions {
    fn model(&self) -> &str {
        &self.model
    }

    fn context_length(&self) -> u64 {
        self.context_length
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        _deltas: Option<DeltaSink<'_>>,
    ) -> Result<ChatResponse, ProviderError> {
        let body = json!({
            "model": self.model,
            "messages": request.messages.iter().map(wire_message).collect::<Vec<_>>(),
            "stream": false,
        });
        let mut call = self.http.post(&self.url).json(&body).timeout(self.timeout);
        if let Some(key) = &self.key {
            call = call.bearer_auth(key.expose());
        }
        // reqwest errors can carry the URL but never headers, so the key cannot leak here.
        let response = call.send().await.map_err(|e| {
            if e.is_timeout() {
                ProviderError::Transient("request timed out".into())
            } else {
                ProviderError::Transient(format!("request failed: {}", e.without_url()))
            }
        })?;
        let status = response.status().as_u16();
        let retry_after = parse_retry_after(response.headers());
        let text = response
            .text()
            .await
            .map_err(|e| ProviderError::Transient(format!("reading reply: {}", e.without_url())))?;
        if !(200..300).contains(&status) {
            return Err(classify(status, retry_after, &text));
        }
        let wire: WireResponse =
            serde_json::from_str(&text).map_err(|e| ProviderError::InvalidResponse(e.to_string()))?;
        let choice = wire
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| ProviderError::InvalidResponse("no choices in the reply".into()))?;
        let tool_calls = choice
            .message
            .tool_calls
            .into_iter()
            .map(|c| ToolCall { id: c.id, name: c.function.name, arguments: c.function.arguments })
            .collect();
        Ok(ChatResponse {
            message: Message { role: Role::Assistant, content: choice.message.content, tool_calls, tool_call_id: None },
            usage: wire.usage.map(|u| Usage { prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens }),
            finish_reason: choice.finish_reason,
            reasoning: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_failures() {
        assert!(matches!(
            classify(429, Some(Duration::from_secs(3)), ""),
            ProviderError::RateLimited { retry_after: Some(d) } if d.as_secs() == 3
        ));
        assert!(matches!(classify(401, None, ""), ProviderError::Unauthorized(401)));
        assert!(matches!(
            classify(400, None, r#"{"error":{"message":"maximum context length is 8192"}}"#),
            ProviderError::ContextTooLong
        ));
        assert!(matches!(classify(503, None, "down"), ProviderError::Transient(_)));
        let err = classify(404, None, r#"{"error":{"message":"model not found"}}"#);
        assert!(err.to_string().contains("model not found"), "{err}");
    }
}
