//! How a turn's reasoning is shown in chat when the session asked for it (`/reasoning on`): a
//! short quoted block before the answer, built from the reasoning stored with the turn's
//! assistant messages. Never shown when off (the default), and never on the API, which streams
//! reasoning apart as `reasoning_content`.
//!
//! The quote is capped. Reasoning is stored with the assistant message that followed it and never
//! rewritten: `/reasoning on|off` only changes what later replies show. `ReasoningStream` masks
//! streamed reasoning as answer text is masked before a platform gets it
//! (`Platform::stream_reasoning`).

use std::sync::Mutex;

use hermesd_platform::Platform;

use crate::redact::StreamMask;
use crate::store::ExtrasStore;
use crate::vocab::message::{Message, Role};
use crate::vocab::origin::Origin;

/// The text a turn answers with: `answer`, with the reasoning of the turn's `messages` quoted
/// before it when the session shows reasoning. The setting is read only when there is reasoning.
pub async fn reply_text(
    store: &dyn ExtrasStore,
    session_id: &str,
    platform: &str,
    messages: &[Message],
    answer: &str,
) -> String {
    // The API gets reasoning as `reasoning_content` instead (see `platforms::api`).
    let Some(reasoning) = of_turn(messages).filter(|_| Origin::of(platform) != Origin::Api) else {
        return answer.to_owned();
    };
    match store.show_reasoning(session_id).await {
        Ok(true) => prepend(&reasoning, answer),
        Ok(false) => answer.to_owned(),
        Err(e) => {
            tracing::warn!(error = %e, "reasoning setting unreadable; answering without reasoning");
            answer.to_owned()
        }
    }
}

/// The most reasoning text shown before an answer, in characters; the rest is cut with "…".
pub const SHOWN_CHARS: usize = 1200;

/// The readable reasoning of a turn's new messages, joined in order; `None` when the model gave
/// none.
pub fn of_turn(messages: &[Message]) -> Option<String> {
    let parts: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .filter_map(|m| m.reasoning.as_ref())
        .map(|r| r.text.trim())
        .filter(|t| !t.is_empty())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// `answer` with `reasoning` quoted before it, capped at [`SHOWN_CHARS`].
pub fn prepend(reasoning: &str, answer: &str) -> String {
    let mut shown: String = reasoning.chars().take(SHOWN_CHARS).collect();
    if reasoning.chars().count() > SHOWN_CHARS {
        shown = shown.trim_end().to_owned();
        shown.push('…');
    }
    let mut out = String::from("> Reasoning:\n");
    for line in shown.lines() {
        let line = line.trim_end();
        out.push_str(if line.is_empty() { ">" } else { "> " });
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out.push_str(answer);
    out
}

/// Streams a turn's reasoning to a platform that consumes it, masked like answer text: a
/// secret split across deltas is still caught, and the held-back tail goes out once anything
/// else happens in the turn (`flush`).
pub struct ReasoningStream {
    mask: Mutex<StreamMask>,
}

impl ReasoningStream {
    /// A stream masked by `mask`.
    pub fn new(mask: StreamMask) -> Self {
        Self { mask: Mutex::new(mask) }
    }

    /// Forward a reasoning delta for message `reply_to`.
    pub fn push(&self, platform: &dyn Platform, reply_to: &str, text: &str) {
        let safe = self.mask.lock().unwrap_or_else(|e| e.into_inner()).push(text);
        if !safe.is_empty() {
            platform.stream_reasoning(reply_to, &safe);
        }
    }

    /// Send what the mask still holds (the reasoning paused: text, tools or the end follow).
    pub fn flush(&self, platform: &dyn Platform, reply_to: &str) {
        let tail = self.mask.lock().unwrap_or_else(|e| e.into_inner()).finish();
        if !tail.is_empty() {
            platform.stream_reasoning(reply_to, &tail);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::message::Reasoning;

    fn reasoned(text: &str) -> Message {
        let mut message = Message::text(Role::Assistant, "answer");
        message.reasoning = Reasoning::new(text.into(), Vec::new());
        message
    }

    #[test]
    fn joins_the_turns_reasoning_and_quotes_it_before_the_answer() {
        let messages =
            [reasoned("first step"), Message::text(Role::Tool, "result"), reasoned("then\n\nanswer"), reasoned(" ")];
        let reasoning = of_turn(&messages).expect("reasoning");
        assert_eq!(reasoning, "first step\n\nthen\n\nanswer");
        assert_eq!(prepend(&reasoning, "Done."), "> Reasoning:\n> first step\n>\n> then\n>\n> answer\n\nDone.");
        assert_eq!(of_turn(&[Message::text(Role::Assistant, "plain")]), None);
    }

    #[test]
    fn long_reasoning_is_cut() {
        let long = "é".repeat(SHOWN_CHARS + 50);
        let shown = prepend(&long, "ok");
        assert!(shown.contains('…'));
        assert_eq!(shown.chars().filter(|c| *c == 'é').count(), SHOWN_CHARS);
        assert!(shown.ends_with("\n\nok"));
    }
}
