//! Assembles a streamed Responses API reply from its events.
//!
//! Text and reasoning deltas go to the sink as they arrive; the answer itself is built from the
//! finished output items (`response.output_item.done`, or the final `response.completed`). A
//! stream that ends before `response.completed` (or `response.incomplete`) is `StreamDropped`.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use serde_json::{Value, json};

use super::{assemble, classify_event};
use crate::agent::provider::sse::{self, SseEvent, StreamEnd};
use crate::agent::provider::{ChatResponse, Delta, DeltaSink, ProviderError};

/// Read a streamed reply to its end.
pub(super) async fn read(
    response: reqwest::Response,
    deltas: Option<DeltaSink<'_>>,
) -> Result<ChatResponse, ProviderError> {
    let mut assembly = Assembly::default();
    match sse::read_events(response, |event| assembly.apply(&event, deltas)).await? {
        StreamEnd::Finished => assembly.into_response(),
        StreamEnd::Cut(reason) => Err(ProviderError::StreamDropped(reason)),
    }
}

/// What the events have said so far.
#[derive(Default)]
struct Assembly {
    /// Finished output items by their output index.
    items: BTreeMap<u64, Value>,
    /// The final response object, once `response.completed` (or `.incomplete`) arrived.
    done: Option<Value>,
    /// Reasoning text was streamed, so a new summary part starts a new paragraph.
    reasoned: bool,
}

impl Assembly {
    fn apply(&mut self, event: &SseEvent, deltas: Option<DeltaSink<'_>>) -> Result<ControlFlow<()>, ProviderError> {
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(ControlFlow::Continue(()));
        }
        let wire: Value = serde_json::from_str(data)
            .map_err(|e| ProviderError::InvalidResponse(format!("stream event {:?}: {e}", event.event)))?;
        let emit = |delta: Delta| {
            if let Some(sink) = deltas {
                sink(delta);
            }
        };
        let kind = wire["type"].as_str().or(event.event.as_deref()).unwrap_or_default();
        match kind {
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(text) = wire["delta"].as_str().filter(|t| !t.is_empty()) {
                    emit(Delta::Text(text.to_owned()));
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(text) = wire["delta"].as_str().filter(|t| !t.is_empty()) {
                    self.reasoned = true;
                    emit(Delta::Reasoning(text.to_owned()));
                }
            }
            "response.reasoning_summary_part.added" if self.reasoned => emit(Delta::Reasoning("\n\n".into())),
            "response.output_item.done" => {
                let index = wire["output_index"].as_u64().unwrap_or(self.items.len() as u64);
                self.items.insert(index, wire["item"].clone());
            }
            "response.completed" | "response.incomplete" => {
                self.done = Some(wire["response"].clone());
                return Ok(ControlFlow::Break(()));
            }
            "response.failed" => {
                let error = &wire["response"]["error"];
                return Err(if error.is_null() {
                    ProviderError::Transient("the response failed without an error".into())
                } else {
                    classify_event(error)
                });
            }
            "error" => return Err(classify_event(wire.get("error").unwrap_or(&wire))),
            // created, in_progress, added/done markers of parts and arguments, and later events.
            _ => {}
        }
        Ok(ControlFlow::Continue(()))
    }

    fn into_response(self) -> Result<ChatResponse, ProviderError> {
        let Some(mut done) = self.done else {
            return Err(ProviderError::StreamDropped("the stream ended before response.completed".into()));
        };
        // The final event normally repeats every output item; when it does not, the items
        // finished along the way are the answer.
        let empty = done["output"].as_array().is_none_or(Vec::is_empty);
        if empty && !self.items.is_empty() {
            done["output"] = json!(self.items.into_values().collect::<Vec<_>>());
        }
        assemble(&done)
    }
}
