//! Assembles a streamed `/chat/completions` reply from its SSE chunks.
//!
//! Deltas go to the sink as they arrive; a stream that ends before `[DONE]` or a finish reason is
//! `StreamDropped`, never a partial answer.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use serde::Deserialize;
use serde_json::Value;

use super::{WireUsage, classify};
use crate::agent::provider::sse::{self, StreamEnd};
use crate::agent::provider::{ChatResponse, Delta, DeltaSink, ProviderError, Usage};
use crate::vocab::message::{Message, Reasoning, Role, ToolCall};

/// Read a streamed reply to its end.
pub(super) async fn read(
    response: reqwest::Response,
    deltas: Option<DeltaSink<'_>>,
) -> Result<ChatResponse, ProviderError> {
    let mut assembly = Assembly::default();
    let end = sse::read_events(response, |event| {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(ControlFlow::Break(()));
        }
        if !data.is_empty() {
            let chunk: WireChunk =
                serde_json::from_str(data).map_err(|e| ProviderError::InvalidResponse(format!("stream chunk: {e}")))?;
            assembly.apply(chunk, deltas)?;
        }
        Ok(ControlFlow::Continue(()))
    })
    .await?;
    match end {
        StreamEnd::Cut(reason) if assembly.finish_reason.is_none() => Err(ProviderError::StreamDropped(reason)),
        // A finish reason means the answer is whole; only a trailing usage chunk may be missing.
        StreamEnd::Cut(_) | StreamEnd::Finished => Ok(assembly.into_response()),
    }
}

#[derive(Deserialize)]
struct WireChunk {
    #[serde(default)]
    choices: Option<Vec<WireChunkChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    /// OpenRouter and some proxies report failures inside the stream.
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireChunkChoice {
    #[serde(default)]
    delta: Option<WireDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCallDelta>>,
}

#[derive(Deserialize)]
struct WireToolCallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunctionDelta>,
}

#[derive(Deserialize)]
struct WireFunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// What the chunks have said so far.
#[derive(Default)]
struct Assembly {
    content: String,
    reasoning: String,
    calls: BTreeMap<u64, PartialCall>,
    /// The slot the last index-less tool-call fragment went to.
    last_call: Option<u64>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

impl Assembly {
    fn apply(&mut self, chunk: WireChunk, deltas: Option<DeltaSink<'_>>) -> Result<(), ProviderError> {
        if let Some(error) = chunk.error {
            return Err(stream_error(&error));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        // Only `n = 1` is ever requested, so the first choice is the answer.
        let Some(choice) = chunk.choices.and_then(|c| c.into_iter().next()) else { return Ok(()) };
        if let Some(delta) = choice.delta {
            if let Some(text) = delta.reasoning_content.or(delta.reasoning).filter(|t| !t.is_empty()) {
                self.reasoning.push_str(&text);
                if let Some(sink) = deltas {
                    sink(Delta::Reasoning(text));
                }
            }
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                self.content.push_str(&text);
                if let Some(sink) = deltas {
                    sink(Delta::Text(text));
                }
            }
            for fragment in delta.tool_calls.unwrap_or_default() {
                self.add_fragment(fragment);
            }
        }
        if choice.finish_reason.is_some() {
            self.finish_reason = choice.finish_reason;
        }
        Ok(())
    }

    fn add_fragment(&mut self, fragment: WireToolCallDelta) {
        // The index is what ties fragments together. A few servers omit it: a fragment with a
        // new id then opens the next call, and one without continues the last.
        let index = fragment.index.unwrap_or_else(|| {
            let last = self.last_call.and_then(|i| self.calls.get(&i).map(|c| (i, c)));
            match (last, &fragment.id) {
                (Some((i, call)), Some(id)) if call.id != *id => i + 1,
                (Some((i, _)), _) => i,
                (None, _) => self.calls.keys().next_back().map_or(0, |i| i + 1),
            }
        });
        self.last_call = Some(index);
        let call = self.calls.entry(index).or_default();
        if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
            call.id = id;
        }
        if let Some(function) = fragment.function {
            if let Some(name) = function.name {
                call.name.push_str(&name);
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    fn into_response(self) -> ChatResponse {
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, call)| ToolCall {
                id: if call.id.is_empty() { format!("call_{index}") } else { call.id },
                name: call.name,
                arguments: call.arguments,
            })
            .collect();
        ChatResponse {
            message: Message {
                role: Role::Assistant,
                content: Some(self.content).filter(|c| !c.is_empty()),
                tool_calls,
                tool_call_id: None,
                reasoning: Reasoning::new(self.reasoning.clone(), Vec::new()),
                images: Vec::new(),
            },
            usage: self.usage,
            finish_reason: self.finish_reason,
            reasoning: Some(self.reasoning).filter(|r| !r.is_empty()),
        }
    }
}

/// An error reported inside the stream, classified by its HTTP-like code when it has one.
fn stream_error(error: &Value) -> ProviderError {
    let message = error["message"].as_str().unwrap_or("unknown error").to_owned();
    let code = error["code"].as_u64().or_else(|| error["code"].as_str().and_then(|c| c.parse().ok()));
    match code.and_then(|c| u16::try_from(c).ok()).filter(|c| (400..600).contains(c)) {
        Some(status) => classify(status, None, &serde_json::json!({ "error": error }).to_string()),
        None => ProviderError::Transient(format!("error in stream: {message}")),
    }
}
