//! The agent loop: `while iterations < max_iterations`, the model proposes and the runtime
//! enforces budgets and guardrails. Every exit path produces text for the user: the answer, a
//! forced summary when the budget runs out, or a clear error.
//!
//! A long turn near the context window compacts the stored history first, then its own live
//! steps (keeping the latest tool calls with their results), and goes on. Past 70 % and 90 % of
//! the iteration budget the last tool result sent to the model carries a budget note; the note
//! is never stored and never part of the cached prefix.
//!
//! The loop holds no state between turns; the transcript lives in the store.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::chain::{ChainError, ChainState, ProviderChain};
use super::compress::Compressor;
use super::sanitize::sanitize;
use super::tokens::messages_tokens;
use crate::agent::media::Media;
use crate::agent::provider::{ChatRequest, Delta, ProviderError, ToolSchema};
use crate::agent::tools::{ExecutorLimits, Registry, ToolContext, run_calls};
use crate::store::TokenTotals;
use crate::vocab::message::{Message, Role};

/// Sent (not stored) when the model returns nothing.
const NUDGE: &str = "Your last reply was empty. Process the tool results above and answer the user.";
/// Sent (not stored) when the iteration budget is used up.
const BUDGET_SUMMARY: &str = "You have reached the step limit for this turn. Without calling tools, tell the user \
what you did, what you found, and what is left to do.";

/// What the gateway hears while a turn runs (the step callback).
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    /// A new iteration began.
    Step {
        /// 1-based iteration.
        iteration: u32,
        /// The budget.
        max: u32,
    },
    /// Tools are about to run.
    ToolsStarted {
        /// Their names, in call order.
        names: Vec<String>,
    },
    /// A tool finished.
    ToolFinished {
        /// Its name.
        name: String,
        /// The start of its result.
        preview: String,
        /// Whether it failed.
        error: bool,
    },
    /// Answer text streamed from the model.
    Delta(String),
    /// Reasoning text streamed from the model, before (or between) its answers.
    Reasoning(String),
    /// History was summarised.
    Compressed {
        /// Messages archived.
        archived: usize,
    },
}

/// Where turn events go; called inline, must not block.
pub type EventSink<'a> = &'a (dyn Fn(TurnEvent) + Send + Sync);

/// Limits of one turn.
#[derive(Debug, Clone, Copy)]
pub struct LoopLimits {
    /// Model calls allowed.
    pub max_iterations: u32,
    /// Nudges after empty replies before falling back.
    pub max_nudges: u32,
    /// Stream answers as deltas.
    pub stream: bool,
}

/// How the turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoopOutcome {
    /// The model answered.
    Answered,
    /// The budget ran out; the text is a forced summary.
    Summarised,
    /// It failed; the text says why.
    Failed,
    /// It was stopped.
    Stopped,
    /// No model is configured; the text says how to configure one.
    NotConfigured,
    /// The model called functions the API client runs itself: the turn ends with the calls
    /// (`LoopResult::client_calls`), and the client's outputs start the next one.
    ClientCalls,
}

/// The end of a turn.
#[derive(Debug)]
pub struct LoopResult {
    /// Messages this turn adds to the transcript (tool calls, results, steers, the answer).
    pub appended: Vec<Message>,
    /// The text for the user.
    pub text: String,
    /// How it ended.
    pub outcome: LoopOutcome,
    /// Prompt tokens of the last model call, when reported.
    pub prompt_tokens: Option<u64>,
    /// Tokens of every model call of the turn, as reported.
    pub usage: TokenTotals,
    /// What those calls cost, each priced by the model entry that served it.
    pub cost: crate::usage::Cost,
    /// The same calls by the model that answered them.
    pub by_model: Vec<crate::usage::ModelUse>,
    /// The calls of the client's functions the turn ended with (`LoopOutcome::ClientCalls`).
    pub client_calls: Vec<crate::vocab::message::ToolCall>,
}

/// Hands the loop text the user sent to steer the running turn (`busy_policy = "steer"`), as
/// one user message, or `None`.
pub type SteerSource<'a> = &'a (dyn Fn() -> Option<Message> + Send + Sync);

/// Everything one turn's loop uses.
pub struct AgentLoop<'a> {
    /// Providers with retries and fallback.
    pub chain: &'a ProviderChain,
    /// The tools this turn may call.
    pub tools: &'a Registry,
    /// What tools may use.
    pub ctx: &'a ToolContext,
    /// Compaction of the stored transcript.
    pub compressor: &'a Compressor,
    /// The step callback.
    pub events: EventSink<'a>,
    /// Steering text from the user.
    pub steer: SteerSource<'a>,
    /// Limits.
    pub limits: LoopLimits,
    /// Loads the images tool results return, for a model with vision; `None` without vision.
    pub media: Option<&'a Media>,
    /// Functions the API client declared and runs itself: offered to the model beside the tools;
    /// a call of one ends the turn.
    pub client_tools: &'a [ToolSchema],
    /// Messages the turn starts with after the transcript and stores with its own (the client's
    /// outputs of the calls the last turn ended with).
    pub resumed: &'a [Message],
}

impl AgentLoop<'_> {
    /// Run the turn over `system` + `transcript` (which ends with the user's message).
    pub async fn run(&self, system: String, transcript: Vec<Message>, stop: &CancellationToken) -> LoopResult {
        let mut state = self.chain.start_turn();
        let mut result = self.run_on(&mut state, system, transcript, stop).await;
        let usage = &state.usage;
        result.usage = TokenTotals {
            calls: state.calls,
            prompt: usage.prompt_tokens,
            completion: usage.completion_tokens,
            cache_read: usage.cache_read_tokens,
            cache_write: usage.cache_write_tokens,
        };
        result.cost = state.cost;
        result.by_model = std::mem::take(&mut state.by_model);
        result
    }

    /// The loop, on the turn's chain state (which counts the calls' usage).
    async fn run_on(
        &self,
        state: &mut ChainState,
        mut system: String,
        mut transcript: Vec<Message>,
        stop: &CancellationToken,
    ) -> LoopResult {
        // Built once per turn and shared by every call's request.
        let schemas: Arc<[ToolSchema]> =
            self.tools.schemas().into_iter().chain(self.client_tools.iter().cloned()).collect();
        let schema_tokens = self.tools.schema_tokens();
        let mut appended: Vec<Message> = self.resumed.to_vec();
        let mut nudges = 0;
        let mut compressed_on_error = false;
        let mut prompt_tokens = None;
        let context = self.chain.current(state).context_length();
        let mut iteration = 0;
        loop {
            if stop.is_cancelled() {
                return self.end(appended, "Stopped.", LoopOutcome::Stopped, prompt_tokens);
            }
            if iteration >= self.limits.max_iterations {
                return self.summarise(state, &system, &transcript, appended, stop, prompt_tokens).await;
            }
            iteration += 1;
            (self.events)(TurnEvent::Step { iteration, max: self.limits.max_iterations });

            let mut extra: Vec<Message> = Vec::new();
            if nudges > 0 {
                extra.push(Message::text(Role::User, NUDGE));
            }
            let mut messages = request_messages(&system, &transcript, &appended, &extra);
            if self.compressor.over_threshold(messages_tokens(&messages) + schema_tokens, context) {
                if self.compress(&mut system, &mut transcript, state, stop).await {
                    messages = request_messages(&system, &transcript, &appended, &extra);
                }
                if self.compressor.over_threshold(messages_tokens(&messages) + schema_tokens, context)
                    && self.compress_live(&mut appended, state, stop, false).await
                {
                    messages = request_messages(&system, &transcript, &appended, &extra);
                }
            }
            if let Some(note) = budget_note(iteration, self.limits.max_iterations) {
                add_to_last_tool_result(&mut messages, &note);
            }
            let request = ChatRequest {
                messages: sanitize(messages),
                tools: schemas.clone(),
                stable_prefix: 1,
                stream: self.limits.stream,
                ..Default::default()
            };
            let on_delta = |delta: Delta| match delta {
                Delta::Text(text) => (self.events)(TurnEvent::Delta(text)),
                Delta::Reasoning(text) => (self.events)(TurnEvent::Reasoning(text)),
            };
            let response = match self.chain.call(state, &request, Some(&on_delta), stop).await {
                Ok(response) => response,
                Err(ChainError::Cancelled) => {
                    return self.end(appended, "Stopped.", LoopOutcome::Stopped, prompt_tokens);
                }
                Err(ChainError::Provider(ProviderError::ContextTooLong)) if !compressed_on_error => {
                    compressed_on_error = true;
                    let stored = self.compress(&mut system, &mut transcript, state, stop).await;
                    // Whatever the stored history gave, the turn's own steps are the rest.
                    let live = self.compress_live(&mut appended, state, stop, true).await;
                    if stored || live {
                        iteration -= 1;
                        continue;
                    }
                    let text = "Sorry, this conversation no longer fits the model's context window. Send /new to start a fresh session.";
                    return self.end(appended, text, LoopOutcome::Failed, prompt_tokens);
                }
                Err(e @ ChainError::Provider(ProviderError::NotConfigured)) => {
                    return self.end(appended, &e.to_string(), LoopOutcome::NotConfigured, prompt_tokens);
                }
                Err(e) => return self.end(appended, &failure_text(&e), LoopOutcome::Failed, prompt_tokens),
            };
            prompt_tokens = response.usage.map(|u| u.prompt_tokens).or(prompt_tokens);
            let message = response.message;
            if !message.tool_calls.is_empty() {
                nudges = 0;
                let is_client = |name: &str| self.client_tools.iter().any(|t| t.name == name);
                let client: Vec<_> = message.tool_calls.iter().filter(|c| is_client(&c.name)).cloned().collect();
                let text = message.content.clone().unwrap_or_default();
                self.run_tools(message, &mut appended, &is_client).await;
                if !client.is_empty() {
                    let mut result = self.end(appended, &text, LoopOutcome::ClientCalls, prompt_tokens);
                    result.client_calls = client;
                    return result;
                }
                continue;
            }
            let text = message.content.clone().unwrap_or_default();
            if text.trim().is_empty() {
                nudges += 1;
                if nudges > self.limits.max_nudges {
                    if !self.chain.advance(state) {
                        let text =
                            "Sorry, the model returned an empty answer several times. Try rephrasing, or /retry.";
                        return self.end(appended, text, LoopOutcome::Failed, prompt_tokens);
                    }
                    nudges = 0;
                }
                continue;
            }
            appended.push(message);
            // Steering text that arrived after the last tool call still deserves an answer.
            if let Some(steer) = (self.steer)() {
                appended.push(steer);
                continue;
            }
            return self.end(appended, &text, LoopOutcome::Answered, prompt_tokens);
        }
    }

    /// Run the tool calls of the assistant `message`, appending it and their results (with the
    /// images they return, for a model with vision) and any steering text that came meanwhile.
    async fn run_tools(
        &self,
        mut message: Message,
        appended: &mut Vec<Message>,
        is_client: &(dyn Fn(&str) -> bool + Sync),
    ) {
        // The client's own functions are not run here: the turn ends with their calls.
        let calls: Vec<_> = message.tool_calls.iter().filter(|c| !is_client(&c.name)).cloned().collect();
        let names: Vec<String> = calls.iter().map(|c| c.name.clone()).collect();
        if !names.is_empty() {
            (self.events)(TurnEvent::ToolsStarted { names });
        }
        if message.content.as_deref().is_some_and(|c| c.trim().is_empty()) {
            message.content = None;
        }
        appended.push(message);
        let outcomes = run_calls(self.tools, self.ctx, &calls, ExecutorLimits::default()).await;
        let results_from = appended.len();
        for outcome in outcomes {
            (self.events)(TurnEvent::ToolFinished {
                name: outcome.name.clone(),
                preview: outcome.content.chars().take(120).collect(),
                error: outcome.error,
            });
            appended.push(Message {
                role: Role::Tool,
                content: Some(outcome.content),
                tool_calls: Vec::new(),
                tool_call_id: Some(outcome.call_id),
                reasoning: None,
                images: outcome.images,
            });
        }
        if let Some(media) = self.media {
            media.load_images(&mut appended[results_from..]).await;
        }
        appended.extend((self.steer)());
    }

    /// Compact the stored transcript; true when it shrank.
    async fn compress(
        &self,
        system: &mut String,
        transcript: &mut Vec<Message>,
        state: &mut ChainState,
        stop: &CancellationToken,
    ) -> bool {
        match self.compressor.compact(self.chain, state, stop, false).await {
            Ok(Some(done)) => {
                (self.events)(TurnEvent::Compressed { archived: done.archived });
                *system = done.system_prompt;
                *transcript = done.transcript;
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %e, "compression failed; continuing without it");
                false
            }
        }
    }

    /// Compact this turn's own live steps; true when they shrank.
    async fn compress_live(
        &self,
        appended: &mut Vec<Message>,
        state: &mut ChainState,
        stop: &CancellationToken,
        tight: bool,
    ) -> bool {
        match self.compressor.compact_live(self.chain, state, stop, appended, tight).await {
            Ok(Some(compacted)) => {
                let archived = appended.len() - compacted.len();
                (self.events)(TurnEvent::Compressed { archived });
                *appended = compacted;
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %e, "compressing the turn's own steps failed; continuing without it");
                false
            }
        }
    }

    async fn summarise(
        &self,
        state: &mut ChainState,
        system: &str,
        transcript: &[Message],
        mut appended: Vec<Message>,
        stop: &CancellationToken,
        prompt_tokens: Option<u64>,
    ) -> LoopResult {
        let extra = [Message::text(Role::User, BUDGET_SUMMARY)];
        let request = ChatRequest {
            messages: sanitize(request_messages(system, transcript, &appended, &extra)),
            stable_prefix: 1,
            ..Default::default()
        };
        match self.chain.call(state, &request, None, stop).await {
            Ok(response) => {
                let text = response.message.content.clone().unwrap_or_default();
                let text = if text.trim().is_empty() {
                    format!(
                        "I used all {} steps of this turn without finishing. Send a follow-up to continue.",
                        self.limits.max_iterations
                    )
                } else {
                    text
                };
                appended.push(Message::text(Role::Assistant, text.clone()));
                self.end(
                    appended,
                    &text,
                    LoopOutcome::Summarised,
                    response.usage.map(|u| u.prompt_tokens).or(prompt_tokens),
                )
            }
            Err(ChainError::Cancelled) => self.end(appended, "Stopped.", LoopOutcome::Stopped, prompt_tokens),
            Err(e) => {
                let text = format!(
                    "I used all {} steps of this turn without finishing, and the summary call failed: {e}",
                    self.limits.max_iterations
                );
                self.end(appended, &text, LoopOutcome::Failed, prompt_tokens)
            }
        }
    }

    fn end(&self, appended: Vec<Message>, text: &str, outcome: LoopOutcome, prompt_tokens: Option<u64>) -> LoopResult {
        LoopResult {
            appended,
            text: text.to_owned(),
            outcome,
            prompt_tokens,
            usage: TokenTotals::default(),
            cost: crate::usage::Cost::default(),
            by_model: Vec::new(),
            client_calls: Vec::new(),
        }
    }
}

fn request_messages(system: &str, transcript: &[Message], appended: &[Message], extra: &[Message]) -> Vec<Message> {
    let mut messages = Vec::with_capacity(1 + transcript.len() + appended.len() + extra.len());
    messages.push(Message::text(Role::System, system));
    messages.extend_from_slice(transcript);
    messages.extend_from_slice(appended);
    messages.extend_from_slice(extra);
    messages
}

/// The budget note for the call of `iteration` (1-based) out of `max`: from 70 % of the budget
/// a reminder to wrap up, from 90 % a demand to answer.
fn budget_note(iteration: u32, max: u32) -> Option<String> {
    let (used, max) = (u64::from(iteration), u64::from(max));
    let left = max.saturating_sub(used);
    if used * 10 >= max * 9 {
        Some(format!(
            "[Budget: step {used} of {max}, {left} left. Stop exploring: answer the user now with what you have,              or make at most one more essential tool call.]"
        ))
    } else if used * 10 >= max * 7 {
        Some(format!(
            "[Budget: step {used} of {max}, {left} left. Start wrapping up: finish only the essential work and              prepare your answer.]"
        ))
    } else {
        None
    }
}

/// Append `note` to the last message when it is a tool result (the copy sent, never stored).
fn add_to_last_tool_result(messages: &mut [Message], note: &str) {
    if let Some(last) = messages.last_mut().filter(|m| m.role == Role::Tool) {
        let content = last.content.get_or_insert_with(String::new);
        content.push_str("\n\n");
        content.push_str(note);
    }
}

fn failure_text(error: &ChainError) -> String {
    match error {
        ChainError::Deadline { .. } => format!("Sorry, I could not get an answer in time: {error}."),
        _ => format!("Sorry, this turn failed: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_notes_start_at_seventy_and_ninety_percent() {
        assert_eq!(budget_note(62, 90), None);
        assert!(budget_note(63, 90).unwrap().contains("Start wrapping up"));
        assert!(budget_note(80, 90).unwrap().contains("Start wrapping up"));
        let late = budget_note(81, 90).unwrap();
        assert!(late.contains("step 81 of 90, 9 left") && late.contains("answer the user now"), "{late}");
        assert_eq!(budget_note(6, 10).as_deref().map(|n| n.contains("wrapping")), None);
        assert!(budget_note(7, 10).is_some());
    }

    #[test]
    fn the_note_goes_only_on_a_last_tool_result() {
        let result = Message {
            role: Role::Tool,
            content: Some("42".into()),
            tool_calls: vec![],
            tool_call_id: Some("c".into()),
            reasoning: None,
            images: Vec::new(),
        };
        let mut messages = vec![Message::text(Role::User, "q"), result.clone()];
        add_to_last_tool_result(&mut messages, "[Budget: x]");
        assert_eq!(messages[1].content.as_deref(), Some("42\n\n[Budget: x]"));
        let mut messages = vec![result, Message::text(Role::User, "steer")];
        add_to_last_tool_result(&mut messages, "[Budget: x]");
        assert_eq!(messages[0].content.as_deref(), Some("42"), "an earlier result is left alone");
        assert_eq!(messages[1].content.as_deref(), Some("steer"));
    }
}
