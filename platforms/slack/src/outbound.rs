//! `OutboundMessage` → Web API calls: `chat.postMessage` (in the chat's thread, Block Kit buttons),
//! `chat.update` (spaced per channel, no-op edits skipped) and `assistant.threads.setStatus` as
//! the typing indicator where Slack offers it.
//!
//! No retries or chunking here (the host owns both); a 429 comes back as `RateLimited` for the
//! chat's pacer. Error texts never carry a token.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use hermesd_platform::chunk::chunk;
use hermesd_platform::{Button, ChatRef, LengthUnit, MessageRef, OutboundMessage, PlatformError, Redactor};
use slack_morphism::prelude::*;
use tokio::time::Instant;

use crate::api::{Client, api_code, map_error};
use crate::format::markdown_to_mrkdwn;

/// The shortest gap between two `chat.update` calls to one channel (Slack allows about one).
pub(crate) const EDIT_SPACING: Duration = Duration::from_secs(1);

/// What the assistant status line says while a turn runs.
const STATUS_TEXT: &str = "is thinking…";

/// Entries kept in each bounded map before it is pruned.
const MAX_TRACKED: usize = 4096;

/// The most characters Slack takes in a message's `text`.
pub(crate) const SLACK_TEXT_LIMIT: usize = 40_000;

/// Slack's limit for the text of one section block.
const SECTION_LIMIT: usize = 3000;

/// The most blocks one message may carry.
const MAX_BLOCKS: usize = 50;

/// Per-adapter outbound state: edit pacing, last edit texts, threads the bot is in.
#[derive(Debug, Default)]
pub(crate) struct OutboundState {
    /// Channel → when the next `chat.update` to it may go.
    next_edit: Mutex<HashMap<String, Instant>>,
    /// (channel, ts) → the text last set, so a repeat is skipped.
    last_text: Mutex<HashMap<(String, String), String>>,
    /// (channel, thread ts) the bot has posted in, so replies there need no mention.
    threads: Mutex<HashSet<(String, String)>>,
    /// Set once Slack says the assistant status is not available to this app at all.
    status_unavailable: AtomicBool,
}

impl OutboundState {
    /// Whether the bot is known to take part in the thread `(channel, ts)`.
    pub(crate) fn in_thread(&self, channel: &str, ts: &str) -> bool {
        lock(&self.threads).contains(&(channel.to_owned(), ts.to_owned()))
    }

    /// Remembers that the bot takes part in the thread `(channel, ts)`.
    pub(crate) fn joined_thread(&self, channel: &str, ts: &str) {
        let mut threads = lock(&self.threads);
        if threads.len() >= MAX_TRACKED {
            // Forgetting only costs a `conversations.replies` call when the thread speaks again.
            threads.clear();
        }
        threads.insert((channel.to_owned(), ts.to_owned()));
    }

    /// Reserves the next edit slot of `channel` and returns when it may be used.
    fn edit_slot(&self, channel: &str) -> Instant {
        let now = Instant::now();
        let mut next = lock(&self.next_edit);
        if next.len() >= MAX_TRACKED {
            next.retain(|_, at| *at > now);
        }
        let slot = next.get(channel).copied().filter(|at| *at > now).unwrap_or(now);
        next.insert(channel.to_owned(), slot + EDIT_SPACING);
        slot
    }

    /// Records `text` for a message; `false` when it is what the message already says.
    fn changes(&self, channel: &str, ts: &str, text: &str) -> bool {
        let mut last = lock(&self.last_text);
        let key = (channel.to_owned(), ts.to_owned());
        if last.get(&key).is_some_and(|previous| previous == text) {
            return false;
        }
        if last.len() >= MAX_TRACKED {
            last.clear();
        }
        last.insert(key, text.to_owned());
        true
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Posts one message into the chat (and its thread), with buttons as an actions block under its
/// last part. A chunk whose mrkdwn outgrew Slack's limit (escaping lengthens `&`, `<`, `>`) goes
/// out in several posts rather than being refused; the first post's id is returned.
pub(crate) async fn send(
    client: &Client,
    token: &SlackApiToken,
    state: &OutboundState,
    redactor: &Redactor,
    message: &OutboundMessage,
) -> Result<MessageRef, PlatformError> {
    let channel = &message.chat.chat_id;
    let parts = mrkdwn_parts(&message.text);
    let last = parts.len().saturating_sub(1);
    let mut first = None;
    for (index, text) in parts.into_iter().enumerate() {
        let mut content = SlackMessageContent::new().with_text(text.clone());
        if index == last && !message.buttons.is_empty() {
            content = content.with_blocks(blocks(&text, &message.buttons));
        }
        let mut request = SlackApiChatPostMessageRequest::new(SlackChannelId(channel.clone()), content);
        if let Some(thread) = &message.chat.thread_id {
            request = request.with_thread_ts(SlackTs(thread.clone()));
        }
        let sent = client
            .open_session(token)
            .chat_post_message(&request)
            .await
            .map_err(|e| map_error(&e, &format!("chat.postMessage to {channel}"), redactor))?;
        state.changes(channel, &sent.ts.0, &text);
        first.get_or_insert(sent.ts.0);
    }
    if let Some(thread) = &message.chat.thread_id {
        state.joined_thread(channel, thread);
    }
    let message_id = first.ok_or_else(|| PlatformError::Permanent(format!("nothing to send to {channel}")))?;
    Ok(MessageRef { chat: message.chat.clone(), message_id })
}

/// The mrkdwn of `markdown` in parts of at most [`SLACK_TEXT_LIMIT`] characters: one part
/// unless escaping made it longer, then the markdown is split (fences kept balanced) until every
/// part fits.
fn mrkdwn_parts(markdown: &str) -> Vec<String> {
    let mut limit = markdown.chars().count().max(1);
    loop {
        let parts: Vec<String> =
            chunk(markdown, limit, LengthUnit::Chars).iter().map(|piece| markdown_to_mrkdwn(piece)).collect();
        if limit <= 64 || parts.iter().all(|p| p.chars().count() <= SLACK_TEXT_LIMIT) {
            return if parts.is_empty() { vec![markdown_to_mrkdwn(markdown)] } else { parts };
        }
        limit /= 2;
    }
}

/// `text` cut to Slack's limit, for edits of progress lines (never final replies).
fn fit(text: String) -> String {
    if text.chars().count() <= SLACK_TEXT_LIMIT {
        return text;
    }
    let mut cut: String = text.chars().take(SLACK_TEXT_LIMIT - 1).collect();
    cut.push('…');
    cut
}

/// Replaces a sent message's text, at most one edit per channel per [`EDIT_SPACING`]; an edit
/// that changes nothing is not sent.
pub(crate) async fn edit(
    client: &Client,
    token: &SlackApiToken,
    state: &OutboundState,
    redactor: &Redactor,
    target: &MessageRef,
    text: &str,
) -> Result<(), PlatformError> {
    let channel = &target.chat.chat_id;
    let text = fit(markdown_to_mrkdwn(text));
    if !state.changes(channel, &target.message_id, &text) {
        return Ok(());
    }
    tokio::time::sleep_until(state.edit_slot(channel)).await;
    let content = SlackMessageContent::new().with_text(text);
    let request =
        SlackApiChatUpdateRequest::new(SlackChannelId(channel.clone()), content, SlackTs(target.message_id.clone()));
    let updated = client.open_session(token).chat_update(&request).await;
    updated.map(drop).map_err(|e| {
        // The text was not set after all: a retry of the same text must not be skipped.
        lock(&state.last_text).remove(&(channel.clone(), target.message_id.clone()));
        map_error(&e, &format!("chat.update in {channel}"), redactor)
    })
}

/// Sets the assistant status line of the chat's thread. Slack has no typing indicator for bots
/// elsewhere, so without a thread (or where the app lacks the assistant feature) this does
/// nothing.
pub(crate) async fn typing(
    client: &Client,
    token: &SlackApiToken,
    state: &OutboundState,
    redactor: &Redactor,
    chat: &ChatRef,
) -> Result<(), PlatformError> {
    let Some(thread) = &chat.thread_id else { return Ok(()) };
    if state.status_unavailable.load(Ordering::Relaxed) {
        return Ok(());
    }
    let request = SlackApiAssistantThreadsSetStatusRequest::new(
        SlackChannelId(chat.chat_id.clone()),
        STATUS_TEXT.to_owned(),
        SlackTs(thread.clone()),
    );
    match client.open_session(token).assistant_threads_set_status(&request).await {
        Ok(_) => Ok(()),
        Err(error) => match api_code(&error) {
            // The app has no assistant feature or scope: stop asking, typing is only a nicety.
            Some("missing_scope" | "unknown_method" | "not_allowed_token_type" | "method_deprecated") => {
                tracing::debug!(platform = crate::NAME, "assistant status unavailable; typing indicator off");
                state.status_unavailable.store(true, Ordering::Relaxed);
                Ok(())
            }
            // Not an assistant thread (an ordinary channel thread): nothing to show there.
            Some(_) => Ok(()),
            None => Err(map_error(&error, &format!("assistant.threads.setStatus in {}", chat.chat_id), redactor)),
        },
    }
}

/// Asks Slack whether the bot has posted in the thread `(channel, ts)`; `false` when unsure.
pub(crate) async fn bot_in_thread(
    client: &Client,
    token: &SlackApiToken,
    redactor: &Redactor,
    channel: &str,
    ts: &str,
    bot_user: &str,
) -> bool {
    let request = SlackApiConversationsRepliesRequest::new(SlackChannelId(channel.to_owned()), SlackTs(ts.to_owned()))
        .with_limit(200);
    match client.open_session(token).conversations_replies(&request).await {
        Ok(replies) => replies.messages.iter().any(|m| m.sender.user.as_ref().is_some_and(|user| user.0 == bot_user)),
        Err(error) => {
            let error = map_error(&error, &format!("conversations.replies in {channel}"), redactor);
            tracing::warn!(platform = crate::NAME, %error, "cannot tell whether the bot is in a thread");
            false
        }
    }
}

/// The first message of the thread `(channel, ts)` — what a reply in it answers — as a reply
/// context; `None` when Slack cannot say (the message is then handled without it).
pub(crate) async fn thread_parent(
    client: &Client,
    token: &SlackApiToken,
    redactor: &Redactor,
    channel: &str,
    ts: &str,
    bot_user: &str,
) -> Option<hermesd_platform::ReplyContext> {
    let request = SlackApiConversationsRepliesRequest::new(SlackChannelId(channel.to_owned()), SlackTs(ts.to_owned()))
        .with_limit(1);
    match client.open_session(token).conversations_replies(&request).await {
        Ok(replies) => {
            let parent = replies.messages.into_iter().find(|m| m.origin.ts.0 == ts)?;
            let author = parent.sender.user.as_ref().map(|user| user.0.clone());
            Some(hermesd_platform::ReplyContext {
                message_id: ts.to_owned(),
                text: parent.content.text.clone().filter(|text| !text.trim().is_empty()),
                from_bot: author.as_deref() == Some(bot_user),
                author: parent.sender.username.clone().or(author),
            })
        }
        Err(error) => {
            let error = map_error(&error, &format!("conversations.replies in {channel}"), redactor);
            tracing::warn!(platform = crate::NAME, %error, "cannot read the thread's first message");
            None
        }
    }
}

/// The message text as section blocks (split to Slack's per-block limit) and one actions block.
fn blocks(text: &str, buttons: &[Button]) -> Vec<SlackBlock> {
    let chars: Vec<char> = text.chars().collect();
    let mut blocks: Vec<SlackBlock> = chars
        .chunks(SECTION_LIMIT)
        .take(MAX_BLOCKS - 1)
        .map(|piece| SlackSectionBlock::new().with_text(md!(piece.iter().collect::<String>())).into())
        .collect();
    let elements = buttons
        .iter()
        .enumerate()
        .map(|(index, button)| {
            let label = SlackBlockPlainTextOnly::from(button.label.clone());
            let element = SlackBlockButtonElement::new(label)
                .with_action_id(SlackActionId(format!("hermesd:{index}")))
                .with_value(button.data.clone());
            SlackActionBlockElement::Button(element)
        })
        .collect();
    blocks.push(SlackActionsBlock::new(elements).into());
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn edits_to_one_channel_are_spaced_and_others_are_not() {
        let state = OutboundState::default();
        let start = Instant::now();
        assert_eq!(state.edit_slot("C1"), start);
        assert_eq!(state.edit_slot("C1"), start + EDIT_SPACING);
        assert_eq!(state.edit_slot("C1"), start + EDIT_SPACING * 2);
        assert_eq!(state.edit_slot("C2"), start, "another channel has its own pace");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(state.edit_slot("C1"), start + Duration::from_secs(10), "an idle channel edits at once");
    }

    #[test]
    fn repeated_texts_are_not_changes() {
        let state = OutboundState::default();
        assert!(state.changes("C1", "1.1", "working"));
        assert!(!state.changes("C1", "1.1", "working"));
        assert!(state.changes("C1", "1.2", "working"), "another message");
        assert!(state.changes("C1", "1.1", "done"));
    }

    #[test]
    fn buttons_become_an_actions_block_after_the_text() {
        let buttons = [
            Button { label: "Approve".into(), data: "approve".into() },
            Button { label: "Deny".into(), data: "deny".into() },
        ];
        let text = "x".repeat(SECTION_LIMIT + 1);
        let json = serde_json::to_value(blocks(&text, &buttons)).expect("blocks serialise");
        let kinds: Vec<_> = json.as_array().into_iter().flatten().map(|b| b["type"].clone()).collect();
        assert_eq!(kinds, ["section", "section", "actions"]);
        assert_eq!(json[2]["elements"][1]["value"], "deny");
        assert_eq!(json[2]["elements"][0]["text"]["text"], "Approve");
        assert_eq!(json[2]["elements"][0]["action_id"], "hermesd:0");
    }

    #[test]
    fn text_that_escaping_lengthened_is_split_to_fit() {
        assert_eq!(mrkdwn_parts("**hi** & bye"), ["*hi* &amp; bye"]);
        let angle = "<tag> & ".repeat(4_000);
        let parts = mrkdwn_parts(&angle);
        assert!(parts.len() > 1, "{} parts", parts.len());
        assert!(parts.iter().all(|p| p.chars().count() <= SLACK_TEXT_LIMIT));
        let rejoined: String = parts.concat();
        assert_eq!(rejoined.matches("&lt;tag&gt;").count(), 4_000, "nothing was lost");
        let long = fit("x".repeat(SLACK_TEXT_LIMIT + 5));
        assert_eq!(long.chars().count(), SLACK_TEXT_LIMIT);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn threads_are_remembered() {
        let state = OutboundState::default();
        assert!(!state.in_thread("C1", "1.0"));
        state.joined_thread("C1", "1.0");
        assert!(state.in_thread("C1", "1.0") && !state.in_thread("C2", "1.0"));
    }
}
