//! Telegram `Update` → `InboundEvent`: pure functions, no IO.
//!
//! Files are only described here (`FileRequest`); `media.rs` downloads them. Nothing here may
//! decide who is allowed to talk to the bot: allowlists and pairing belong to the host.
//!
//! It covers chat types (forum topics become threads), mention gating in groups, commands addressed
//! to the bot, callback queries (button presses) and albums (`normalise_album`), and carries the
//! replied-to message's text and author and the chat's title.

use hermesd_platform::{
    AttachmentKind, ChatRef, ChatType, InboundAction, InboundEvent, InboundMessage, ReplyContext, Sender,
};
use teloxide::types::{CallbackQuery, Chat, Message, Update, UpdateKind, User};

use crate::NAME;
use crate::config::TelegramSettings;

/// Who the bot is, from `getMe`; needed to tell mentions and replies to the bot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BotIdentity {
    pub(crate) id: u64,
    pub(crate) username: String,
}

/// The settings that decide which updates become events.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rules {
    pub(crate) require_mention: bool,
    /// Lowercased.
    pub(crate) mention_patterns: Vec<String>,
    pub(crate) channel_posts: bool,
    pub(crate) edited_messages: bool,
}

impl Rules {
    pub(crate) fn from_settings(settings: &TelegramSettings) -> Self {
        Self {
            require_mention: settings.require_mention,
            // A blank pattern would match every message; validation rejects it, this ignores it.
            mention_patterns: settings
                .mention_patterns
                .iter()
                .filter(|p| !p.trim().is_empty())
                .map(|p| p.to_lowercase())
                .collect(),
            channel_posts: settings.channel_posts,
            edited_messages: settings.edited_messages,
        }
    }
}

/// A file a message carries, to be fetched with `getFile` before the event is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileRequest {
    pub(crate) file_id: String,
    pub(crate) unique_id: String,
    pub(crate) kind: AttachmentKind,
    pub(crate) name: String,
    pub(crate) mime: Option<String>,
    /// `None` when Telegram did not say.
    pub(crate) size: Option<u64>,
}

/// An update turned into an event, with what the adapter still has to do for it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Normalised {
    pub(crate) event: InboundEvent,
    /// Files to download into the message's attachments.
    pub(crate) files: Vec<FileRequest>,
    /// A callback query to answer once the event is accepted.
    pub(crate) callback_id: Option<String>,
}

/// Normalises one update; `None` means it is ignored (and its offset may still advance).
pub(crate) fn normalise(update: &Update, bot: &BotIdentity, rules: &Rules) -> Option<Normalised> {
    match &update.kind {
        UpdateKind::Message(message) => normalise_message(message, false, bot, rules),
        UpdateKind::EditedMessage(message) if rules.edited_messages => normalise_message(message, true, bot, rules),
        UpdateKind::ChannelPost(message) if rules.channel_posts => normalise_message(message, false, bot, rules),
        UpdateKind::CallbackQuery(query) => normalise_callback(query, bot),
        _ => None,
    }
}

/// The album an update's message belongs to (`chat:media_group_id`), for new messages and
/// channel posts; edits are never grouped.
pub(crate) fn album_key(update: &Update) -> Option<String> {
    let message = match &update.kind {
        UpdateKind::Message(message) | UpdateKind::ChannelPost(message) => message,
        _ => return None,
    };
    message.media_group_id().map(|group| format!("{}:{}", message.chat.id.0, group.0))
}

/// Normalises an album (several updates sharing a `media_group_id`) into one message carrying
/// every part's files. The caption (Telegram puts it on one part) decides addressing and text;
/// the event and reply target are the first part's, so a re-polled album is a duplicate.
pub(crate) fn normalise_album(updates: &[&Update], bot: &BotIdentity, rules: &Rules) -> Option<Normalised> {
    let messages: Vec<&Message> = updates
        .iter()
        .filter_map(|update| match &update.kind {
            UpdateKind::Message(message) => Some(message),
            UpdateKind::ChannelPost(message) if rules.channel_posts => Some(message),
            _ => None,
        })
        .collect();
    let first = *messages.first()?;
    let lead = messages
        .iter()
        .copied()
        .find(|m| m.caption().or_else(|| m.text()).is_some_and(|c| !c.trim().is_empty()))
        .unwrap_or(first);
    let mut normalised = normalise_message(lead, false, bot, rules)?;
    normalised.files = messages.iter().flat_map(|m| file_requests(m)).collect();
    if let InboundEvent::Message { event_id, message } = &mut normalised.event {
        *event_id = format!("{}:{}", first.chat.id.0, first.id.0);
        message.message_id = first.id.0.to_string();
        message.timestamp_ms = first.date.timestamp_millis();
    }
    Some(normalised)
}

fn normalise_message(message: &Message, edited: bool, bot: &BotIdentity, rules: &Rules) -> Option<Normalised> {
    let chat = chat_ref(message)?;
    let sender = match &message.from {
        Some(user) => user_sender(user, bot)?,
        // Only channel posts come without a user; they speak as the channel.
        None if chat.chat_type == ChatType::Channel => {
            let channel = message.sender_chat.as_ref().unwrap_or(&message.chat);
            Sender {
                id: channel.id.0.to_string(),
                name: channel.title().map(str::to_owned),
                is_bot: false,
                roles: Vec::new(),
            }
        }
        None => return None,
    };
    let text = message.text().or_else(|| message.caption()).unwrap_or_default();
    let files = file_requests(message);
    if text.trim().is_empty() && files.is_empty() {
        return None;
    }
    let reply_to = reply_context(message, bot);
    let addressed = match chat.chat_type {
        // A DM is always for the bot; channel posts are handled only when the operator opted in.
        ChatType::Dm | ChatType::Channel => true,
        ChatType::Group | ChatType::Thread => is_addressed(text, reply_to.as_ref(), bot, rules),
    };
    if rules.require_mention && !addressed {
        return None;
    }
    let mut event_id = format!("{}:{}", message.chat.id.0, message.id.0);
    if edited {
        let edit_date = message.edit_date().map_or(0, |date| date.timestamp());
        event_id.push_str(&format!(":e{edit_date}"));
    }
    let message = InboundMessage {
        profile: None,
        message_id: message.id.0.to_string(),
        chat,
        sender,
        text: strip_command_mention(text, &bot.username),
        attachments: Vec::new(),
        reply_to,
        addressed,
        timestamp_ms: message.date.timestamp_millis(),
        history: Vec::new(),
        chat_title: message.chat.title().map(str::to_owned),
        client: None,
    };
    Some(Normalised { event: InboundEvent::Message { event_id, message }, files, callback_id: None })
}

fn normalise_callback(query: &CallbackQuery, bot: &BotIdentity) -> Option<Normalised> {
    let carrier = query.message.as_ref()?;
    let chat = match carrier.regular_message() {
        Some(message) => chat_ref(message)?,
        None => plain_chat_ref(carrier.chat())?,
    };
    let action = InboundAction {
        chat,
        sender: user_sender(&query.from, bot)?,
        message_id: carrier.id().0.to_string(),
        data: query.data.clone().unwrap_or_default(),
    };
    let event = InboundEvent::Action { event_id: format!("cb:{}", query.id.0), action };
    Some(Normalised { event, files: Vec::new(), callback_id: Some(query.id.0.clone()) })
}

/// The chat a message belongs to, with forum topics as threads.
fn chat_ref(message: &Message) -> Option<ChatRef> {
    let mut chat = plain_chat_ref(&message.chat)?;
    if message.chat.is_supergroup()
        && message.is_topic_message
        && let Some(thread) = message.thread_id
    {
        chat.chat_type = ChatType::Thread;
        chat.thread_id = Some(thread.0.0.to_string());
    }
    Some(chat)
}

fn plain_chat_ref(chat: &Chat) -> Option<ChatRef> {
    let chat_type = if chat.is_private() {
        ChatType::Dm
    } else if chat.is_group() || chat.is_supergroup() {
        ChatType::Group
    } else if chat.is_channel() {
        ChatType::Channel
    } else {
        return None;
    };
    Some(ChatRef::new(NAME, chat.id.0.to_string(), chat_type))
}

/// The sender, or `None` for bots (the bot itself included), whose messages are ignored.
fn user_sender(user: &User, bot: &BotIdentity) -> Option<Sender> {
    if user.is_bot || user.id.0 == bot.id {
        return None;
    }
    Some(Sender { id: user.id.0.to_string(), name: Some(display_name(user)), is_bot: false, roles: Vec::new() })
}

/// How a user is named to the host: the name people see in the chat (first and last name),
/// with the @username after it to tell apart two people of the same name.
fn display_name(user: &User) -> String {
    let shown = match &user.last_name {
        Some(last) if !last.trim().is_empty() => format!("{} {}", user.first_name.trim(), last.trim()),
        _ => user.first_name.trim().to_owned(),
    };
    match &user.username {
        Some(username) if shown.is_empty() => format!("@{username}"),
        Some(username) => format!("{shown} (@{username})"),
        None => shown,
    }
}

fn reply_context(message: &Message, bot: &BotIdentity) -> Option<ReplyContext> {
    let replied = message.reply_to_message()?;
    // In a forum topic every message "replies" to the topic's first message; that is not a reply.
    if message.is_topic_message && message.thread_id.is_some_and(|thread| thread.0 == replied.id) {
        return None;
    }
    Some(ReplyContext {
        message_id: replied.id.0.to_string(),
        text: replied.text().or_else(|| replied.caption()).map(str::to_owned),
        from_bot: replied.from.as_ref().is_some_and(|user| user.id.0 == bot.id),
        author: replied.from.as_ref().map(display_name),
    })
}

/// Whether a group message is for the bot: a mention, a command, a reply to it, or a pattern.
fn is_addressed(text: &str, reply_to: Option<&ReplyContext>, bot: &BotIdentity, rules: &Rules) -> bool {
    if reply_to.is_some_and(|reply| reply.from_bot) {
        return true;
    }
    if let Some(command) = text.strip_prefix('/').and_then(|rest| rest.split_whitespace().next()) {
        let (name, target) = command.split_once('@').map_or((command, None), |(name, target)| (name, Some(target)));
        // Telegram command names are [A-Za-z0-9_]; "/tmp/x is full" is not a command.
        if !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return target.is_none_or(|target| target.eq_ignore_ascii_case(&bot.username));
        }
    }
    let lower = text.to_lowercase();
    mentions(&lower, &bot.username.to_lowercase()) || rules.mention_patterns.iter().any(|p| lower.contains(p.as_str()))
}

/// Whether `text` (lowercased) contains `@username` as a whole mention, not a prefix of another.
fn mentions(text: &str, username: &str) -> bool {
    if username.is_empty() {
        return false;
    }
    let needle = format!("@{username}");
    text.match_indices(&needle).any(|(at, _)| {
        let next = text[at + needle.len()..].chars().next();
        next.is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    })
}

/// `/cmd@botname args` → `/cmd args`, so the host's command parser sees plain commands.
fn strip_command_mention(text: &str, username: &str) -> String {
    let Some(rest) = text.strip_prefix('/') else { return text.to_owned() };
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    match rest[..end].split_once('@') {
        Some((command, target)) if !username.is_empty() && target.eq_ignore_ascii_case(username) => {
            format!("/{command}{}", &rest[end..])
        }
        _ => text.to_owned(),
    }
}

fn file_requests(message: &Message) -> Vec<FileRequest> {
    let request = |meta: &teloxide::types::FileMeta, kind, name: String, mime: Option<String>| FileRequest {
        file_id: meta.id.0.clone(),
        unique_id: meta.unique_id.0.clone(),
        kind,
        name,
        mime,
        // teloxide fills a missing size with u32::MAX.
        size: (meta.size != u32::MAX).then_some(u64::from(meta.size)),
    };
    let mut files = Vec::new();
    if let Some(photo) =
        message.photo().and_then(|sizes| sizes.iter().max_by_key(|p| u64::from(p.width) * u64::from(p.height)))
    {
        files.push(request(&photo.file, AttachmentKind::Image, "photo.jpg".into(), Some("image/jpeg".into())));
    }
    if let Some(doc) = message.document() {
        let name = doc.file_name.clone().unwrap_or_else(|| "document".into());
        files.push(request(&doc.file, AttachmentKind::Document, name, doc.mime_type.as_ref().map(ToString::to_string)));
    }
    if let Some(voice) = message.voice() {
        let mime = voice.mime_type.as_ref().map_or_else(|| "audio/ogg".to_owned(), ToString::to_string);
        files.push(request(&voice.file, AttachmentKind::Audio, "voice.ogg".into(), Some(mime)));
    }
    if let Some(audio) = message.audio() {
        let name = audio.file_name.clone().unwrap_or_else(|| "audio".into());
        files.push(request(
            &audio.file,
            AttachmentKind::Audio,
            name,
            audio.mime_type.as_ref().map(ToString::to_string),
        ));
    }
    if let Some(video) = message.video() {
        let name = video.file_name.clone().unwrap_or_else(|| "video.mp4".into());
        files.push(request(
            &video.file,
            AttachmentKind::Video,
            name,
            video.mime_type.as_ref().map(ToString::to_string),
        ));
    }
    files
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests;
