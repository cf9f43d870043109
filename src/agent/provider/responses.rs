//! The `responses` dialect: OpenAI's Responses API (`/responses`), Hermes' `codex_responses` mode.
//!
//! Stateless on the server (`store: false`): every call sends the whole transcript as input
//! items, and reasoning items come back with `encrypted_content` so they can be returned on the
//! next call. Classifies failures into `ProviderError` kinds; never retries, never logs the key.

mod request;
mod stream;
#[cfg(test)]
mod tests;

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::chat_completions::classify;
use super::endpoint::{Endpoint, KeyHeader, is_json, transport_error};
use super::{ChatRequest, ChatResponse, Delta, DeltaSink, Provider, ProviderError, Usage};
use crate::config::Secret;
use crate::vocab::message::{Message, Reasoning, Role, ToolCall};

/// A client for one Responses API endpoint.
pub struct Responses {
    endpoint: Endpoint,
}

impl Responses {
    /// A client for `base_url` (e.g. `https://api.openai.com/v1`).
    pub fn new(
        http: reqwest::Client,
        base_url: &str,
        model: &str,
        key: Option<Secret>,
        timeout: Duration,
        context_length: u64,
    ) -> Self {
        let url = format!("{}/responses", base_url.trim_end_matches('/'));
        Self { endpoint: Endpoint::new(http, url, model, key, timeout, context_length) }
    }

    /// Send images as `input_image` parts (the model has vision).
    pub fn with_vision(mut self, vision: bool) -> Self {
        self.endpoint.vision = vision;
        self
    }

    /// Send the call; a non-success status is read and classified here.
    async fn send(&self, body: &Value, stream: bool) -> Result<reqwest::Response, ProviderError> {
        self.endpoint.send(body, stream, KeyHeader::Bearer, &[], classify).await
    }
}

/// The answer a finished response holds: its output items, status and usage.
fn assemble(response: &Value) -> Result<ChatResponse, ProviderError> {
    if let Some(error) = response.get("error").filter(|e| !e.is_null()) {
        return Err(classify_event(error));
    }
    let mut answer = String::new();
    let mut reasoning = String::new();
    let mut items = Vec::new();
    let mut tool_calls = Vec::new();
    for item in response["output"].as_array().map(Vec::as_slice).unwrap_or_default() {
        match item["type"].as_str().unwrap_or_default() {
            "message" => {
                for part in item["content"].as_array().map(Vec::as_slice).unwrap_or_default() {
                    // A refusal is the model's answer too; it is shown rather than dropped.
                    let text = part["text"].as_str().or_else(|| part["refusal"].as_str()).unwrap_or_default();
                    answer.push_str(text);
                }
            }
            "reasoning" => {
                append_reasoning(&mut reasoning, item);
                // Only an item carrying its encrypted content can be sent back with `store: false`.
                if item["encrypted_content"].as_str().is_some_and(|c| !c.is_empty()) {
                    items.push(item.clone());
                }
            }
            "function_call" => {
                let id = item["call_id"].as_str().or_else(|| item["id"].as_str()).unwrap_or_default();
                let name = item["name"].as_str().unwrap_or_default();
                if name.is_empty() {
                    return Err(ProviderError::InvalidResponse("a function call without a name".into()));
                }
                let arguments = item["arguments"].as_str().unwrap_or("{}");
                tool_calls.push(ToolCall { id: id.to_owned(), name: name.to_owned(), arguments: arguments.to_owned() });
            }
            // Built-in tool calls (web search, file search) and later item types.
            _ => {}
        }
    }
    let finish_reason = if !tool_calls.is_empty() {
        Some("tool_calls".to_owned())
    } else {
        match response["status"].as_str() {
            Some("incomplete") => {
                Some(response["incomplete_details"]["reason"].as_str().unwrap_or("incomplete").to_owned())
            }
            Some("completed") | None => Some("stop".to_owned()),
            Some(other) => Some(other.to_owned()),
        }
    };
    let text = Some(reasoning.clone()).filter(|r| !r.is_empty());
    Ok(ChatResponse {
        message: Message {
            role: Role::Assistant,
            content: Some(answer).filter(|a| !a.is_empty()),
            tool_calls,
            tool_call_id: None,
            images: Vec::new(),
            reasoning: Reasoning::new(reasoning, items),
        },
        usage: usage(&response["usage"]),
        finish_reason,
        reasoning: text,
    })
}

/// A reasoning item's readable text: its summary parts, or its raw reasoning text (open models).
fn append_reasoning(out: &mut String, item: &Value) {
    for key in ["summary", "content"] {
        for part in item[key].as_array().map(Vec::as_slice).unwrap_or_default() {
            if let Some(text) = part["text"].as_str().filter(|t| !t.is_empty()) {
                if !out.is_empty() {
                    out.push_str("\n\n");
                }
                out.push_str(text);
            }
        }
    }
}

/// The usage report; `input_tokens` already include the cached ones.
fn usage(value: &Value) -> Option<Usage> {
    value.as_object()?;
    let count = |v: &Value| v.as_u64().unwrap_or_default();
    Some(Usage {
        prompt_tokens: count(&value["input_tokens"]),
        completion_tokens: count(&value["output_tokens"]),
        cache_read_tokens: count(&value["input_tokens_details"]["cached_tokens"]),
        cache_write_tokens: 0,
    })
}

/// Classify an `error` object reported with a 200 (in a stream or a failed response).
fn classify_event(error: &Value) -> ProviderError {
    let code = error["code"].as_str().or_else(|| error["type"].as_str()).unwrap_or_default();
    let message = error["message"].as_str().unwrap_or("unknown error");
    match code {
        "rate_limit_exceeded" | "rate_limit_error" => ProviderError::RateLimited { retry_after: None },
        "context_length_exceeded" => ProviderError::ContextTooLong,
        "invalid_api_key" | "authentication_error" => ProviderError::Unauthorized(401),
        "invalid_request_error" | "invalid_prompt" | "model_not_found" | "insufficient_quota" => {
            ProviderError::Permanent(format!("{code}: {message}"))
        }
        // server_error, vector store and image failures, and anything unknown may pass.
        _ => ProviderError::Transient(format!("{code}: {message}")),
    }
}

#[async_trait]
impl Provider for Responses {
    fn model(&self) -> &str {
        &self.endpoint.model
    }

    fn vision(&self) -> bool {
        self.endpoint.vision
    }

    fn context_length(&self) -> u64 {
        self.endpoint.context_length
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        deltas: Option<DeltaSink<'_>>,
    ) -> Result<ChatResponse, ProviderError> {
        let response =
            self.send(&request::body(&self.endpoint.model, request, self.endpoint.vision), request.stream).await?;
        if request.stream && !is_json(&response) {
            return stream::read(response, deltas).await;
        }
        let text = response.text().await.map_err(transport_error)?;
        let value: Value =
            serde_json::from_str(&text).map_err(|e| ProviderError::InvalidResponse(format!("response body: {e}")))?;
        let reply = assemble(&value)?;
        // A server that ignored `stream` still owes the sink the whole answer, once.
        if let (true, Some(sink)) = (request.stream, deltas) {
            if let Some(reasoning) = &reply.reasoning {
                sink(Delta::Reasoning(reasoning.clone()));
            }
            if let Some(text) = reply.message.content.as_ref() {
                sink(Delta::Text(text.clone()));
            }
        }
        Ok(reply)
    }
}
