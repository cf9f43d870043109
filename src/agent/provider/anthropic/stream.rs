//! Assembles a streamed Messages API reply from its events.
//!
//! Deltas go to the sink as they arrive; a stream that ends before `message_stop` is
//! `StreamDropped`, never a partial answer.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use serde::Deserialize;
use serde_json::Value;

use super::{WireBlock, WireUsage, arguments_text, classify_event, redacted_item, thinking_item};
use crate::agent::provider::sse::{self, SseEvent, StreamEnd};
use crate::agent::provider::{ChatResponse, Delta, DeltaSink, ProviderError, Usage};
use crate::vocab::message::{Message, Reasoning, Role, ToolCall};

/// Read a streamed reply to its end.
pub(super) async fn read(
    response: reqwest::Response,
    deltas: Option<DeltaSink<'_>>,
) -> Result<ChatResponse, ProviderError> {
    let mut assembly = Assembly::default();
    match sse::read_events(response, |event| assembly.apply(&event, deltas)).await? {
        StreamEnd::Finished => Ok(assembly.into_response()),
        StreamEnd::Cut(reason) => Err(ProviderError::StreamDropped(reason)),
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: StartedMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: BlockDelta,
    },
    MessageDelta {
        delta: MessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        error: Value,
    },
    /// `ping`, `content_block_stop` and event types added later.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct StartedMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    /// `citations_delta` and later additions.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

enum Block {
    Text(String),
    Thinking { text: String, signature: String },
    Redacted(String),
    ToolUse { id: String, name: String, input: Value, json: String },
    Other,
}

/// What the events have said so far.
#[derive(Default)]
struct Assembly {
    blocks: BTreeMap<u64, Block>,
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    cache_read_tokens: Option<u64>,
    cache_write_tokens: Option<u64>,
    stop_reason: Option<String>,
}

impl Assembly {
    fn apply(&mut self, event: &SseEvent, deltas: Option<DeltaSink<'_>>) -> Result<ControlFlow<()>, ProviderError> {
        let wire: WireEvent = serde_json::from_str(&event.data)
            .map_err(|e| ProviderError::InvalidResponse(format!("stream event {:?}: {e}", event.event)))?;
        let emit = |delta: Delta| {
            if let Some(sink) = deltas {
                sink(delta);
            }
        };
        match wire {
            WireEvent::MessageStart { message } => self.usage(message.usage),
            WireEvent::ContentBlockStart { index, content_block } => {
                let block = match content_block {
                    WireBlock::Text { text } => {
                        if !text.is_empty() {
                            emit(Delta::Text(text.clone()));
                        }
                        Block::Text(text)
                    }
                    WireBlock::Thinking { thinking, signature } => {
                        if !thinking.is_empty() {
                            emit(Delta::Reasoning(thinking.clone()));
                        }
                        Block::Thinking { text: thinking, signature }
                    }
                    WireBlock::RedactedThinking { data } => Block::Redacted(data),
                    WireBlock::ToolUse { id, name, input } => Block::ToolUse { id, name, input, json: String::new() },
                    WireBlock::Other => Block::Other,
                };
                self.blocks.insert(index, block);
            }
            WireEvent::ContentBlockDelta { index, delta } => match (self.blocks.get_mut(&index), delta) {
                (Some(Block::Text(text)), BlockDelta::TextDelta { text: more }) => {
                    text.push_str(&more);
                    emit(Delta::Text(more));
                }
                (Some(Block::Thinking { signature, .. }), BlockDelta::SignatureDelta { signature: more }) => {
                    signature.push_str(&more);
                }
                (Some(Block::Thinking { text: thinking, .. }), BlockDelta::ThinkingDelta { thinking: more }) => {
                    thinking.push_str(&more);
                    emit(Delta::Reasoning(more));
                }
                (Some(Block::ToolUse { json, .. }), BlockDelta::InputJsonDelta { partial_json }) => {
                    json.push_str(&partial_json);
                }
                (_, BlockDelta::Other) | (Some(Block::Other | Block::Redacted(_)), _) => {}
                (_, _) => {
                    return Err(ProviderError::InvalidResponse(format!(
                        "stream delta does not match content block {index}"
                    )));
                }
            },
            WireEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                self.usage(usage);
            }
            WireEvent::MessageStop => return Ok(ControlFlow::Break(())),
            WireEvent::Error { error } => return Err(classify_event(&error)),
            WireEvent::Other => {}
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Later reports supersede earlier ones: `message_delta` counts are cumulative.
    fn usage(&mut self, usage: Option<WireUsage>) {
        let Some(usage) = usage else { return };
        if let Some(prompt) = usage.prompt_tokens() {
            self.prompt_tokens = Some(prompt);
        }
        if let Some(output) = usage.output_tokens {
            self.completion_tokens = Some(output);
        }
        if let Some(read) = usage.cache_read_input_tokens {
            self.cache_read_tokens = Some(read);
        }
        if let Some(write) = usage.cache_creation_input_tokens {
            self.cache_write_tokens = Some(write);
        }
    }

    fn into_response(self) -> ChatResponse {
        let mut answer = String::new();
        let mut reasoning = String::new();
        let mut items = Vec::new();
        let mut tool_calls = Vec::new();
        for block in self.blocks.into_values() {
            match block {
                Block::Text(text) => answer.push_str(&text),
                Block::Thinking { text, signature } => {
                    items.extend(thinking_item(&text, &signature));
                    reasoning.push_str(&text);
                }
                Block::Redacted(data) => items.extend(redacted_item(&data)),
                Block::ToolUse { id, name, input, json } => {
                    // A call without arguments streams no fragments; its start block holds `{}`.
                    let arguments = if json.trim().is_empty() { arguments_text(&input) } else { json };
                    tool_calls.push(ToolCall { id, name, arguments });
                }
                Block::Other => {}
            }
        }
        let usage = (self.prompt_tokens.is_some() || self.completion_tokens.is_some()).then(|| Usage {
            prompt_tokens: self.prompt_tokens.unwrap_or_default(),
            completion_tokens: self.completion_tokens.unwrap_or_default(),
            cache_read_tokens: self.cache_read_tokens.unwrap_or_default(),
            cache_write_tokens: self.cache_write_tokens.unwrap_or_default(),
        });
        ChatResponse {
            message: Message {
                role: Role::Assistant,
                content: Some(answer).filter(|a| !a.is_empty()),
                tool_calls,
                tool_call_id: None,
                reasoning: Reasoning::new(reasoning.clone(), items),
                images: Vec::new(),
            },
            usage,
            finish_reason: self.stop_reason,
            reasoning: Some(reasoning).filter(|r| !r.is_empty()),
        }
    }
}
