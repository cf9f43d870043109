//! Slack event payloads → `InboundEvent`: pure functions, no IO.
//!
//! Payloads are read through small structs that name only the fields used here, so a field Slack
//! adds, renames or omits elsewhere can never make an envelope unreadable (and so lost). Files
//! are only described (`FileRequest`); `media.rs` downloads them. Nothing here may decide who is
//! allowed to talk to the bot: allowlists and pairing belong to the host.
//!
//! Chats: `im` is a DM; channels, private channels and group DMs (`mpim`) are answered in
//! threads: a top-level channel message becomes a thread keyed by its `ts`, so each conversation
//! in a channel is its own session. There a message addresses the bot by a mention, an
//! `app_mention` or being in a thread the bot takes part in (the caller finds out: its cache, then
//! `conversations.replies`); a leading `<@bot>` is stripped from the text. Bots, the bot itself,
//! deletes and (unless `edited_messages`) edits are dropped; `block_actions` become an `Action`.
//! The event id is `{channel}:{ts}` (an edit adds `:e<edit ts>`), so redeliveries and retries
//! deduplicate.

use hermesd_platform::{AttachmentKind, ChatRef, ChatType, InboundAction, InboundEvent, InboundMessage, Sender};
use serde::Deserialize;

use crate::NAME;
use crate::config::SlackSettings;

/// Who the bot is, from `auth.test`; needed to tell mentions and the bot's own messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BotIdentity {
    /// The bot user (`U…`), as mentions name it.
    pub(crate) user_id: String,
    /// The bot id (`B…`) its own messages carry.
    pub(crate) bot_id: Option<String>,
}

/// The settings that decide which events become messages.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rules {
    pub(crate) require_mention: bool,
    pub(crate) allowed_channels: Vec<String>,
    pub(crate) edited_messages: bool,
}

impl Rules {
    pub(crate) fn from_settings(settings: &SlackSettings) -> Self {
        Self {
            require_mention: settings.require_mention,
            allowed_channels: settings.allowed_channels.iter().map(|c| c.trim().to_owned()).collect(),
            edited_messages: settings.edited_messages,
        }
    }
}

/// An `event_callback` body, as the Events API posts it and Socket Mode wraps it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Callback {
    pub(crate) event_id: Option<String>,
    pub(crate) event: RawEvent,
}

/// The fields of a `message` or `app_mention` event that normalisation reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct RawEvent {
    #[serde(rename = "type", default)]
    pub(crate) kind: String,
    pub(crate) subtype: Option<String>,
    pub(crate) user: Option<String>,
    pub(crate) bot_id: Option<String>,
    pub(crate) text: Option<String>,
    pub(crate) ts: Option<String>,
    pub(crate) thread_ts: Option<String>,
    pub(crate) channel: Option<String>,
    pub(crate) channel_type: Option<String>,
    /// The workspace (team) the message was posted in.
    pub(crate) team: Option<String>,
    #[serde(default)]
    pub(crate) files: Vec<RawFile>,
    pub(crate) user_profile: Option<RawProfile>,
    pub(crate) edited: Option<RawEdited>,
    /// The new version of the message, for `message_changed`.
    pub(crate) message: Option<Box<RawEvent>>,
}

/// The display names Slack sometimes sends along with a message.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct RawProfile {
    pub(crate) display_name: Option<String>,
    pub(crate) real_name: Option<String>,
    pub(crate) name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct RawEdited {
    pub(crate) ts: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct RawFile {
    pub(crate) id: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) mimetype: Option<String>,
    pub(crate) size: Option<u64>,
    pub(crate) url_private_download: Option<String>,
    pub(crate) url_private: Option<String>,
}

/// A `block_actions` interaction: a press on one of the bot's buttons.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Interaction {
    #[serde(rename = "type", default)]
    pub(crate) kind: String,
    pub(crate) user: Option<IdName>,
    pub(crate) channel: Option<IdName>,
    pub(crate) container: Option<Container>,
    pub(crate) message: Option<RawEvent>,
    #[serde(default)]
    pub(crate) actions: Vec<RawAction>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct IdName {
    pub(crate) id: String,
    pub(crate) username: Option<String>,
    pub(crate) name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Container {
    pub(crate) channel_id: Option<String>,
    pub(crate) message_ts: Option<String>,
    pub(crate) thread_ts: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct RawAction {
    pub(crate) value: Option<String>,
    pub(crate) action_ts: Option<String>,
}

/// A file a message carries, to be fetched with the bot token before the event is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileRequest {
    pub(crate) id: String,
    pub(crate) url: String,
    pub(crate) kind: AttachmentKind,
    pub(crate) name: String,
    pub(crate) mime: Option<String>,
    pub(crate) size: Option<u64>,
}

/// An event turned into a host event, with what the adapter still has to do for it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Normalised {
    pub(crate) event: InboundEvent,
    /// Files to download into the message's attachments.
    pub(crate) files: Vec<FileRequest>,
}

/// A channel thread whose replies count as addressed only if the bot takes part in it: the
/// caller finds out (cache, then `conversations.replies`) before calling [`normalise`].
pub(crate) fn thread_to_check(callback: &Callback, bot: &BotIdentity) -> Option<(String, String)> {
    let event = message_of(&callback.event)?;
    let channel = callback.event.channel.as_deref()?;
    let thread = event.thread_ts.as_deref()?;
    let is_reply = event.ts.as_deref() != Some(thread);
    let chat_type = chat_type(channel, callback.event.channel_type.as_deref());
    (is_reply && chat_type != ChatType::Dm && callback.event.kind == "message" && !mentions(event, bot))
        .then(|| (channel.to_owned(), thread.to_owned()))
}

/// Normalises one event callback; `None` means it is ignored (and is acknowledged all the same).
/// `bot_in_thread` says whether the bot takes part in the thread the message replies in.
pub(crate) fn normalise(
    callback: &Callback,
    bot: &BotIdentity,
    rules: &Rules,
    bot_in_thread: bool,
) -> Option<Normalised> {
    let outer = &callback.event;
    if outer.kind != "message" && outer.kind != "app_mention" {
        return None;
    }
    let event = message_of(outer)?;
    let edited = outer.subtype.as_deref() == Some("message_changed");
    // Link unfurls also arrive as `message_changed`, without an `edited` mark: not an edit.
    if edited && (!rules.edited_messages || event.edited.is_none()) {
        return None;
    }
    let user = event.user.as_deref().filter(|u| !u.is_empty())?;
    let is_bot = event.bot_id.is_some() || event.subtype.as_deref() == Some("bot_message");
    if is_bot || user == bot.user_id {
        return None;
    }
    let channel = outer.channel.as_deref().filter(|c| !c.is_empty())?;
    let ts = event.ts.as_deref().filter(|t| !t.is_empty())?;
    let chat_type = chat_type(channel, outer.channel_type.as_deref());
    let in_channel = chat_type != ChatType::Dm;
    if in_channel && !rules.allowed_channels.is_empty() && !rules.allowed_channels.iter().any(|c| c == channel) {
        return None;
    }
    let raw_text = event.text.as_deref().unwrap_or_default();
    let files = file_requests(event);
    if raw_text.trim().is_empty() && files.is_empty() {
        return None;
    }
    let addressed = !in_channel || outer.kind == "app_mention" || mentions(event, bot) || bot_in_thread;
    if in_channel && rules.require_mention && !addressed {
        return None;
    }
    let thread_id = match (chat_type, event.thread_ts.as_deref()) {
        // A top-level channel message starts a thread: the reply goes into it, and the thread is
        // the session, so later replies in it find the same conversation.
        (ChatType::Thread, thread) => Some(thread.unwrap_or(ts).to_owned()),
        (_, thread) => thread.map(str::to_owned),
    };
    let guild = outer.team.clone().or_else(|| event.team.clone());
    let chat = ChatRef { platform: NAME.to_owned(), chat_id: channel.to_owned(), chat_type, thread_id, guild };
    let mut event_id = format!("{channel}:{ts}");
    if edited {
        let edit_ts = event.edited.as_ref().and_then(|e| e.ts.as_deref()).unwrap_or("0");
        event_id.push_str(&format!(":e{edit_ts}"));
    }
    let text = unescape(&strip_leading_mention(raw_text, &bot.user_id));
    let message = InboundMessage {
        profile: None,
        message_id: ts.to_owned(),
        chat,
        sender: Sender { id: user.to_owned(), name: display_name(event), is_bot: false, roles: Vec::new() },
        text,
        attachments: Vec::new(),
        reply_to: None,
        addressed,
        timestamp_ms: ts_millis(ts),
        history: Vec::new(),
        chat_title: None,
        client: None,
    };
    Some(Normalised { event: InboundEvent::Message { event_id, message }, files })
}

/// Normalises a button press on one of the bot's messages; other interactions are ignored.
pub(crate) fn normalise_interaction(interaction: &Interaction, bot: &BotIdentity) -> Option<InboundEvent> {
    if interaction.kind != "block_actions" {
        return None;
    }
    let user = interaction.user.as_ref().filter(|u| !u.id.is_empty() && u.id != bot.user_id)?;
    let container = interaction.container.clone().unwrap_or_default();
    let channel = interaction.channel.as_ref().map(|c| c.id.clone()).or(container.channel_id)?;
    let message = interaction.message.clone().unwrap_or_default();
    let message_ts = message.ts.or(container.message_ts)?;
    let action = interaction.actions.first()?;
    let data = action.value.clone()?;
    let chat_type = chat_type(&channel, None);
    let thread = message.thread_ts.or(container.thread_ts);
    let thread_id = match chat_type {
        ChatType::Thread => Some(thread.unwrap_or_else(|| message_ts.clone())),
        _ => thread,
    };
    let event_id = format!("act:{channel}:{message_ts}:{}:{}", user.id, action.action_ts.as_deref().unwrap_or("0"));
    let name = user.username.clone().or_else(|| user.name.clone());
    Some(InboundEvent::Action {
        event_id,
        action: InboundAction {
            chat: ChatRef { platform: NAME.to_owned(), chat_id: channel, chat_type, thread_id, guild: None },
            sender: Sender { id: user.id.clone(), name, is_bot: false, roles: Vec::new() },
            message_id: message_ts,
            data,
        },
    })
}

/// The message an event is about: the event itself, or the new version inside an edit.
fn message_of(event: &RawEvent) -> Option<&RawEvent> {
    match event.subtype.as_deref() {
        None | Some("file_share" | "thread_broadcast" | "me_message") => Some(event),
        Some("message_changed") => event.message.as_deref(),
        // Deletions, joins, topic changes and the like are never messages to answer.
        Some(_) => None,
    }
}

/// DMs are `im`; everything else (public and private channels, group DMs) is answered in threads.
fn chat_type(channel: &str, channel_type: Option<&str>) -> ChatType {
    match channel_type {
        Some("im") => ChatType::Dm,
        Some(_) => ChatType::Thread,
        // `app_mention` and interactions carry no channel type; DM ids start with `D`.
        None if channel.starts_with('D') => ChatType::Dm,
        None => ChatType::Thread,
    }
}

fn mentions(event: &RawEvent, bot: &BotIdentity) -> bool {
    let text = event.text.as_deref().unwrap_or_default();
    !bot.user_id.is_empty()
        && (text.contains(&format!("<@{}>", bot.user_id)) || text.contains(&format!("<@{}|", bot.user_id)))
}

/// `<@BOT> !stop` → `!stop`, so the host's command parser sees the command; other text as typed.
fn strip_leading_mention(text: &str, bot_user: &str) -> String {
    let trimmed = text.trim_start();
    let Some(rest) = trimmed.strip_prefix("<@") else { return text.to_owned() };
    let Some(end) = rest.find('>') else { return text.to_owned() };
    let id = rest[..end].split('|').next().unwrap_or_default();
    if bot_user.is_empty() || id != bot_user {
        return text.to_owned();
    }
    rest[end + 1..].trim_start_matches([':', ',']).trim_start().to_owned()
}

/// Slack escapes `&`, `<` and `>` in message text; the model should read them as typed.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

fn display_name(event: &RawEvent) -> Option<String> {
    let profile = event.user_profile.as_ref()?;
    [&profile.display_name, &profile.real_name, &profile.name]
        .into_iter()
        .flatten()
        .find(|n| !n.trim().is_empty())
        .cloned()
}

/// `1700000000.000100` → Unix milliseconds; 0 when unreadable.
pub(crate) fn ts_millis(ts: &str) -> i64 {
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, "0"));
    let secs: i64 = secs.parse().unwrap_or(0);
    let millis: i64 = frac.chars().chain(std::iter::repeat('0')).take(3).collect::<String>().parse().unwrap_or(0);
    secs.saturating_mul(1000).saturating_add(millis)
}

fn file_requests(event: &RawEvent) -> Vec<FileRequest> {
    event
        .files
        .iter()
        .filter_map(|file| {
            let url = file.url_private_download.clone().or_else(|| file.url_private.clone())?;
            let mime = file.mimetype.clone();
            let kind = match mime.as_deref().and_then(|m| m.split('/').next()) {
                Some("image") => AttachmentKind::Image,
                Some("audio") => AttachmentKind::Audio,
                Some("video") => AttachmentKind::Video,
                _ => AttachmentKind::Document,
            };
            Some(FileRequest {
                id: file.id.clone().unwrap_or_else(|| "file".to_owned()),
                url,
                kind,
                name: file.name.clone().unwrap_or_else(|| "file".to_owned()),
                mime,
                size: file.size,
            })
        })
        .collect()
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests;
