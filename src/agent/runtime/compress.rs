//! Compression: when a session nears its model's context window, the middle of its transcript is
//! summarised by a model call and compacted in place — same session id, old rows archived and
//! still searchable, the system prompt rebuilt. The head (first messages) and a token-budgeted
//! tail are kept verbatim, and a tool call is never separated from its results.
//!
//! A long turn can also compress its own live messages (not stored yet): the older steps become
//! one summary message and the latest tool calls stay verbatim with their results, so the turn
//! goes on instead of running out of context.
//!
//! Before stored history is summarised away the compressor tells whoever runs the turn
//! (`BeforeCompaction`): the gateway's turn saves memory there; the runtime knows no more.
//!
//! `Compressor::compact` writes the summary (updating an earlier one) and compacts in place via
//! `Store::compact`. `compact_live` and `plan_live` do the live case: the summary becomes the text
//! of the first kept tool-calling assistant message, and the cut always falls before such a
//! message, so no call is separated from its results.
//!
//! The agent loop compresses before a call would cross the threshold, and once more after a
//! context-overflow error (`ProviderError::ContextTooLong`): the stored history first, then the
//! turn's own live steps with `tight` set, keeping only the last calls.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::chain::{ChainError, ChainState, ProviderChain};
use super::prompt::PromptBuilder;
use super::tokens::message_tokens;
use crate::agent::provider::ChatRequest;
use crate::clock::now_ms;
use crate::store::{Compaction, Store, StoreError, StoredMessage};
use crate::vocab::message::{Message, Role, SUMMARY_PREFIX};

/// Marks the summary of a running turn's own earlier steps (in-turn compression).
pub const TURN_SUMMARY_PREFIX: &str = "[Summary of the earlier steps of this turn]";
/// Messages at the start that are never summarised.
const HEAD: usize = 3;
/// Tail bounds, in messages.
const TAIL_MIN: usize = 8;
const TAIL_MAX: usize = 20;

const SUMMARISER: &str = "You write handover summaries of conversations between a user and an AI assistant, \
so the assistant can continue the work without the original messages.";

/// Why compaction failed (the turn goes on without it).
#[derive(Debug, thiserror::Error)]
pub enum CompressError {
    /// The summary call failed.
    #[error("summary call: {0}")]
    Model(#[from] ChainError),
    /// The model returned no summary.
    #[error("the model returned an empty summary")]
    Empty,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A finished compaction.
#[derive(Debug)]
pub struct Compacted {
    /// The rebuilt system prompt.
    pub system_prompt: String,
    /// The live transcript after compaction.
    pub transcript: Vec<Message>,
    /// How many messages were archived.
    pub archived: usize,
}

/// Told before a session's stored history is summarised away, so its details can be saved
/// first (the turn runs the memory flush).
#[async_trait::async_trait]
pub trait BeforeCompaction: Send + Sync {
    /// The history of the compressor's session is about to be compacted.
    async fn history_compacting(&self);
}

/// Compacts one session.
pub struct Compressor {
    /// The store.
    pub store: Arc<dyn Store>,
    /// The session.
    pub session_id: String,
    /// Fraction of the context window that triggers compression.
    pub threshold: f64,
    /// Rebuilds the system prompt.
    pub prompts: PromptBuilder,
    /// The toolset of each of the session's tools (part of the rebuilt prompt).
    pub toolsets: Vec<&'static str>,
    /// Told before the stored history is summarised (`None`: nobody, as for a delegated
    /// child, which has no stored history).
    pub before: Option<Arc<dyn BeforeCompaction>>,
}

impl Compressor {
    /// Whether `tokens` crosses the threshold of a `context`-token window.
    pub fn over_threshold(&self, tokens: u64, context: u64) -> bool {
        tokens as f64 >= self.threshold * context as f64
    }

    /// Summarise and compact the stored transcript. `None` when there is too little to compact.
    /// `forced` (`/compress`) keeps only the shortest tail.
    pub async fn compact(
        &self,
        chain: &ProviderChain,
        state: &mut ChainState,
        stop: &CancellationToken,
        forced: bool,
    ) -> Result<Option<Compacted>, CompressError> {
        let stored = self.store.load_transcript(&self.session_id).await?;
        let context = chain.current(state).context_length();
        let Some((start, end)) = plan(&stored, context, forced) else { return Ok(None) };
        if let Some(before) = &self.before {
            // The summary keeps the thread, not the details: those are saved first.
            before.history_compacting().await;
        }
        let middle = &stored[start..end];
        let request = ChatRequest {
            messages: vec![Message::text(Role::System, SUMMARISER), Message::text(Role::User, summary_prompt(middle))],
            ..Default::default()
        };
        let response = chain.call(state, &request, None, stop).await?;
        let text = response.message.content.unwrap_or_default();
        if text.trim().is_empty() {
            return Err(CompressError::Empty);
        }
        let summary = Message::text(Role::User, format!("{SUMMARY_PREFIX}\n{}", text.trim()));
        let system_prompt = self.prompts.build(&self.toolsets, chrono::Utc::now().date_naive());
        let compaction = Compaction {
            from: middle[0].position,
            to: middle[middle.len() - 1].position,
            summary: &summary,
            system_prompt: &system_prompt,
        };
        self.store.compact(&self.session_id, &compaction, now_ms()).await?;
        tracing::info!(session = %self.session_id, archived = middle.len(), "history compacted");
        let transcript = self.store.load_transcript(&self.session_id).await?.into_iter().map(|m| m.message).collect();
        Ok(Some(Compacted { system_prompt, transcript, archived: middle.len() }))
    }

    /// Summarise the older steps of a running turn's live messages (`live`, not stored yet),
    /// keeping the latest tool calls verbatim with their results. `None` when too little lies
    /// before them. `tight` keeps only the last calls (after a context-overflow error).
    pub async fn compact_live(
        &self,
        chain: &ProviderChain,
        state: &mut ChainState,
        stop: &CancellationToken,
        live: &[Message],
        tight: bool,
    ) -> Result<Option<Vec<Message>>, CompressError> {
        let context = chain.current(state).context_length();
        let Some(cut) = plan_live(live, context, tight) else { return Ok(None) };
        let request = ChatRequest {
            messages: vec![
                Message::text(Role::System, SUMMARISER),
                Message::text(Role::User, summary_prompt_of(live[..cut].iter(), None)),
            ],
            ..Default::default()
        };
        let response = chain.call(state, &request, None, stop).await?;
        let text = response.message.content.unwrap_or_default();
        if text.trim().is_empty() {
            return Err(CompressError::Empty);
        }
        tracing::info!(session = %self.session_id, summarised = cut, "the turn's earlier steps compacted");
        // The summary becomes the text of the first kept assistant message (the one that calls
        // tools), so roles still alternate and no second user message is stored for the event.
        let mut compacted = live[cut..].to_vec();
        let first = &mut compacted[0];
        let said = first.content.take().filter(|c| !c.trim().is_empty());
        let mut text = format!("{TURN_SUMMARY_PREFIX}\n{}", text.trim());
        if let Some(said) = said {
            text.push_str("\n\n");
            text.push_str(&said);
        }
        first.content = Some(text);
        Ok(Some(compacted))
    }
}

/// Where to cut a running turn's live messages: everything before the returned index is
/// summarised. The cut always falls on an assistant message that calls tools, so a call keeps
/// its results; the latest such group is always kept, earlier ones while they fit a fifth of
/// the window (unless `tight`). `None` when fewer than two messages would be summarised.
pub fn plan_live(live: &[Message], context: u64, tight: bool) -> Option<usize> {
    let starts_group = |m: &Message| m.role == Role::Assistant && !m.tool_calls.is_empty();
    let mut cut = live.iter().rposition(starts_group)?;
    if !tight {
        let budget = context / 5;
        let mut tokens: u64 = live[cut..].iter().map(message_tokens).sum();
        while let Some(previous) = live[..cut].iter().rposition(starts_group) {
            let cost: u64 = live[previous..cut].iter().map(message_tokens).sum();
            if tokens + cost > budget {
                break;
            }
            tokens += cost;
            cut = previous;
        }
    }
    (cut >= 2).then_some(cut)
}

/// Choose the span `[start, end)` to summarise, or `None` when nothing worth it lies between the
/// protected head and tail. `forced` keeps the shortest tail allowed.
pub fn plan(stored: &[StoredMessage], context: u64, forced: bool) -> Option<(usize, usize)> {
    let tail_max = if forced { TAIL_MIN } else { TAIL_MAX };
    let len = stored.len();
    let mut head = HEAD.min(len);
    // Results belong with the call that asked for them.
    while head < len && stored[head].message.role == Role::Tool {
        head += 1;
    }
    let budget = context / 5;
    let (mut tail, mut tokens, mut count) = (len, 0u64, 0usize);
    while tail > head {
        let cost = message_tokens(&stored[tail - 1].message);
        if count >= tail_max || (count >= TAIL_MIN && tokens + cost > budget) {
            break;
        }
        tokens += cost;
        count += 1;
        tail -= 1;
    }
    while tail > head && tail < len && stored[tail].message.role == Role::Tool {
        tail -= 1;
    }
    (tail >= head + 2).then_some((head, tail))
}

fn summary_prompt(middle: &[StoredMessage]) -> String {
    let previous =
        middle.iter().find_map(|m| m.message.content.as_deref().and_then(|c| c.strip_prefix(SUMMARY_PREFIX)));
    summary_prompt_of(middle.iter().map(|m| &m.message), previous)
}

fn summary_prompt_of<'a>(middle: impl Iterator<Item = &'a Message>, previous: Option<&str>) -> String {
    let mut prompt = String::from(
        "Summarise the conversation below so the work can continue without it. Use exactly these sections:\n\
         ## Goal\n## Progress\n## Decisions\n## Files\n## Next steps\n\
         Be specific: names, paths, numbers, commands, open questions. Leave a section empty rather than guess.\n",
    );
    if let Some(previous) = previous {
        prompt.push_str("\nAn earlier summary exists. Update it with the newer messages rather than starting over:\n");
        prompt.push_str(previous.trim());
        prompt.push('\n');
    }
    prompt.push_str("\n<conversation>\n");
    for m in middle {
        if m.content.as_deref().is_some_and(|c| c.starts_with(SUMMARY_PREFIX)) {
            continue;
        }
        let text = m.content.as_deref().unwrap_or("");
        let calls = m.tool_calls.iter().map(|c| format!(" [calls {}({})]", c.name, c.arguments)).collect::<String>();
        prompt.push_str(&format!("[{}] {text}{calls}\n", m.role.as_str()));
    }
    prompt.push_str("</conversation>");
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::message::ToolCall;

    fn stored(messages: Vec<Message>) -> Vec<StoredMessage> {
        messages
            .into_iter()
            .enumerate()
            .map(|(i, message)| StoredMessage {
                id: i as i64,
                position: i as f64,
                message,
                created_at: 0,
                archived: false,
            })
            .collect()
    }

    fn call(id: &str) -> Message {
        Message {
            role: Role::Assistant,
            content: None,
            tool_calls: vec![ToolCall { id: id.into(), name: "t".into(), arguments: "{}".into() }],
            tool_call_id: None,
            reasoning: None,
            images: Vec::new(),
        }
    }

    fn result(id: &str) -> Message {
        Message {
            role: Role::Tool,
            content: Some("r".into()),
            tool_calls: vec![],
            tool_call_id: Some(id.into()),
            reasoning: None,
            images: Vec::new(),
        }
    }

    #[test]
    fn plan_protects_head_and_tail_and_pairs() {
        let mut messages = Vec::new();
        for i in 0..40 {
            messages.push(Message::text(if i % 2 == 0 { Role::User } else { Role::Assistant }, "x".repeat(400)));
        }
        let (start, end) = plan(&stored(messages.clone()), 200_000, false).unwrap();
        assert_eq!(start, 3);
        assert_eq!(40 - end, TAIL_MAX, "a large window keeps the longest tail");
        let (_, end) = plan(&stored(messages.clone()), 2_000, false).unwrap();
        assert_eq!(40 - end, TAIL_MIN, "a small window keeps the shortest tail");
        let (_, end) = plan(&stored(messages), 200_000, true).unwrap();
        assert_eq!(40 - end, TAIL_MIN, "a forced compaction keeps the shortest tail");

        // A tail that would start on a tool result moves back to include its call.
        let mut messages: Vec<Message> = (0..10).map(|_| Message::text(Role::User, "u")).collect();
        messages.push(call("a"));
        messages.extend((0..8).map(|_| result("a")));
        // A 200-token window budgets 40 tokens of tail: eight results, which start mid-pair.
        let (_, end) = plan(&stored(messages.clone()), 200, false).unwrap();
        assert_eq!(messages[end].role, Role::Assistant, "tail starts at the call");
        // Too short to be worth it.
        assert!(plan(&stored((0..10).map(|_| Message::text(Role::User, "u")).collect()), 1_000, false).is_none());
    }

    #[test]
    fn live_plan_keeps_the_latest_calls_with_their_results() {
        let mut live = Vec::new();
        for i in 0..6 {
            let id = format!("c{i}");
            live.push(call(&id));
            live.push(Message { content: Some("r".repeat(400)), ..result(&id) });
            live.push(Message { content: Some("r".repeat(400)), ..result(&id) });
        }
        // Tight: only the last call and its two results stay.
        assert_eq!(plan_live(&live, 200_000, true), Some(15));
        // A 2,000-token window budgets 400 tokens of tail: two groups of ~210 do not both fit.
        let cut = plan_live(&live, 2_000, false).unwrap();
        assert_eq!(cut, 15);
        // A large window keeps everything: nothing to summarise.
        assert_eq!(plan_live(&live, 200_000, false), None);
        // Every cut starts a group, so no call is separated from its results.
        for context in [500, 3_000, 6_000] {
            if let Some(cut) = plan_live(&live, context, false) {
                assert!(!live[cut].tool_calls.is_empty(), "cut {cut} at {context}");
            }
        }
        // Too few messages before the last group.
        assert_eq!(plan_live(&live[..6], 200_000, true), Some(3));
        assert_eq!(plan_live(&[Message::text(Role::User, "steer"), call("a"), result("a")], 100, true), None);
    }

    #[test]
    fn summary_prompt_updates_an_earlier_summary() {
        let middle = stored(vec![
            Message::text(Role::User, format!("{SUMMARY_PREFIX}\n## Goal\nship it")),
            Message::text(Role::User, "now add tests"),
        ]);
        let prompt = summary_prompt(&middle);
        assert!(prompt.contains("Update it") && prompt.contains("ship it"), "{prompt}");
        assert!(prompt.contains("[user] now add tests"));
        assert_eq!(prompt.matches(SUMMARY_PREFIX).count(), 0, "the old summary is not repeated as a message");
    }
}
