//! Discord gateway payloads (`MESSAGE_CREATE`, `INTERACTION_CREATE`) → `InboundEvent`: pure
//! functions, no IO.
//!
//! Where a message was (DM, text channel, thread) is resolved by the adapter first and passed in
//! as a `Place`; files are only described here (`FileRequest`), `media.rs` downloads them. Nothing
//! here decides who may talk to the bot: allowlists and pairing belong to the host.
//!
//! DMs; text channels, where a mention of the bot's user or one of its roles, or a reply to the
//! bot, addresses it; threads and forum posts as `Thread` chats keyed by the thread id (one the bot
//! opened needs no mention); with `auto_thread` a mention in a channel asks for a thread on the
//! message, which the adapter opens before accept; channel allow and ignore lists; member roles
//! into `Sender.roles`. The event id is the message id (`ia:<id>` for a button press), never the
//! gateway's sequence number, so a dispatch replayed after RESUME, dispatched twice or read back
//! over REST is one event.

use hermesd_platform::{
    AttachmentKind, ChatRef, ChatType, InboundAction, InboundEvent, InboundMessage, ReplyContext, Sender,
};
use serenity::model::application::ComponentInteraction;
use serenity::model::channel::{Message, MessageType};
use serenity::model::user::User;

use crate::NAME;
use crate::config::DiscordSettings;

/// Who the bot is: its user id (from `users/@me`) and, per guild, its role ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BotIdentity {
    pub(crate) id: u64,
    pub(crate) name: String,
    /// The bot's roles in the message's guild; a mention of one addresses the bot.
    pub(crate) roles: Vec<u64>,
}

/// Where a message was posted, as the adapter resolved it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// A direct message.
    Dm,
    /// A guild text or announcement channel.
    Channel,
    /// A thread (or forum post); `bot_owned` when the bot opened it, so no mention is needed.
    Thread { parent: Option<u64>, bot_owned: bool },
}

/// The settings that decide which messages become events.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rules {
    pub(crate) require_mention: bool,
    pub(crate) auto_thread: bool,
    pub(crate) allowed_channels: Vec<u64>,
    pub(crate) ignored_channels: Vec<u64>,
}

impl Rules {
    pub(crate) fn from_settings(settings: &DiscordSettings) -> Self {
        let ids = |list: &[String]| list.iter().filter_map(|id| id.trim().parse().ok()).collect();
        Self {
            require_mention: settings.require_mention,
            auto_thread: settings.auto_thread,
            allowed_channels: ids(&settings.allowed_channels),
            ignored_channels: ids(&settings.ignored_channels),
        }
    }

    /// Whether a guild channel (or a thread under `parent`) is served at all.
    pub(crate) fn serves(&self, channel: u64, parent: Option<u64>) -> bool {
        let listed = |list: &[u64]| list.contains(&channel) || parent.is_some_and(|p| list.contains(&p));
        !listed(&self.ignored_channels) && (self.allowed_channels.is_empty() || listed(&self.allowed_channels))
    }
}

/// An attachment to download before the event is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileRequest {
    pub(crate) id: u64,
    pub(crate) url: String,
    pub(crate) name: String,
    pub(crate) mime: Option<String>,
    pub(crate) size: u64,
    pub(crate) kind: AttachmentKind,
}

/// A message turned into an event, with what the adapter still has to do for it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Normalised {
    pub(crate) event: InboundEvent,
    pub(crate) files: Vec<FileRequest>,
    /// A mention in a text channel with `auto_thread`: open a thread on the message and move the
    /// event into it before accepting.
    pub(crate) open_thread: bool,
}

/// Normalises one `MESSAGE_CREATE`; `None` means it is ignored.
pub(crate) fn normalise_message(
    message: &Message,
    place: Place,
    bot: &BotIdentity,
    rules: &Rules,
) -> Option<Normalised> {
    if message.author.bot || message.author.id.get() == bot.id || message.webhook_id.is_some() {
        return None;
    }
    if !matches!(message.kind, MessageType::Regular | MessageType::InlineReply) {
        return None;
    }
    let channel = message.channel_id.get();
    let (chat_type, parent) = match place {
        Place::Dm => (ChatType::Dm, None),
        Place::Channel => (ChatType::Group, None),
        Place::Thread { parent, .. } => (ChatType::Thread, parent),
    };
    if place != Place::Dm && !rules.serves(channel, parent) {
        return None;
    }
    let files = file_requests(message);
    // A message that is only a mention of the bot says nothing once the mention is removed.
    let text = clean_text(&message.content, bot);
    if text.trim().is_empty() && files.is_empty() {
        return None;
    }
    let reply_to = message.referenced_message.as_deref().map(|replied| ReplyContext {
        message_id: replied.id.get().to_string(),
        text: Some(replied.content.clone()).filter(|text| !text.is_empty()),
        from_bot: replied.author.id.get() == bot.id,
        author: Some(display_name(&replied.author)),
    });
    let mentioned = is_mentioned(message, bot) || reply_to.as_ref().is_some_and(|reply| reply.from_bot);
    let addressed = match place {
        Place::Dm => true,
        Place::Thread { bot_owned: true, .. } => true,
        Place::Thread { bot_owned: false, .. } | Place::Channel => mentioned,
    };
    if rules.require_mention && !addressed {
        return None;
    }
    let open_thread = place == Place::Channel && rules.auto_thread && mentioned;
    let roles = message.member.as_ref().map(|member| member.roles.iter().map(|r| r.get().to_string()).collect());
    let inbound = InboundMessage {
        profile: None,
        message_id: message.id.get().to_string(),
        chat: ChatRef {
            guild: message.guild_id.map(|guild| guild.get().to_string()),
            ..ChatRef::new(NAME, channel.to_string(), chat_type)
        },
        sender: sender(&message.author, roles.unwrap_or_default()),
        text,
        attachments: Vec::new(),
        reply_to,
        addressed,
        timestamp_ms: message.timestamp.unix_timestamp() * 1000,
        history: Vec::new(),
        chat_title: None,
        client: None,
    };
    // The message id is the event id: a dispatch replayed after a resume, or twice, is one event.
    let event = InboundEvent::Message { event_id: message.id.get().to_string(), message: inbound };
    Some(Normalised { event, files, open_thread })
}

/// Moves a message event into the thread opened on it.
pub(crate) fn move_into_thread(event: &mut InboundEvent, thread: u64) {
    if let InboundEvent::Message { message, .. } = event {
        let guild = message.chat.guild.take();
        message.chat =
            ChatRef { guild, ..ChatRef::new(message.chat.platform.clone(), thread.to_string(), ChatType::Thread) };
    }
}

/// Normalises a button press; `None` for other components or presses by bots.
pub(crate) fn normalise_press(press: &ComponentInteraction, place: Place) -> Option<InboundEvent> {
    let (user, roles) = match &press.member {
        Some(member) => (&member.user, member.roles.iter().map(|r| r.get().to_string()).collect()),
        None => (&press.user, Vec::new()),
    };
    if user.bot {
        return None;
    }
    let chat_type = match place {
        Place::Dm => ChatType::Dm,
        Place::Channel => ChatType::Group,
        Place::Thread { .. } => ChatType::Thread,
    };
    let action = InboundAction {
        chat: ChatRef {
            guild: press.guild_id.map(|guild| guild.get().to_string()),
            ..ChatRef::new(NAME, press.channel_id.get().to_string(), chat_type)
        },
        sender: sender(user, roles),
        message_id: press.message.id.get().to_string(),
        data: press.data.custom_id.clone(),
    };
    Some(InboundEvent::Action { event_id: format!("ia:{}", press.id.get()), action })
}

fn sender(user: &User, roles: Vec<String>) -> Sender {
    Sender { id: user.id.get().to_string(), name: Some(display_name(user)), is_bot: false, roles }
}

/// How a user is named to the host: the global display name, else the user name.
fn display_name(user: &User) -> String {
    user.global_name.clone().unwrap_or_else(|| user.name.clone())
}

/// A mention of the bot's user or of one of its roles (never `@everyone`).
fn is_mentioned(message: &Message, bot: &BotIdentity) -> bool {
    message.mentions.iter().any(|user| user.id.get() == bot.id)
        || message.mention_roles.iter().any(|role| bot.roles.contains(&role.get()))
}

/// Drops a leading mention of the bot, so `@bot /status` reaches the host as `/status`, and shows
/// other mentions of the bot by name.
fn clean_text(content: &str, bot: &BotIdentity) -> String {
    let forms = [format!("<@{}>", bot.id), format!("<@!{}>", bot.id)];
    let trimmed = content.trim_start();
    let rest = forms.iter().find_map(|form| trimmed.strip_prefix(form.as_str()));
    let text = rest.map_or(content, str::trim_start);
    let name = format!("@{}", bot.name);
    forms.iter().fold(text.to_owned(), |text, form| text.replace(form.as_str(), &name))
}

fn file_requests(message: &Message) -> Vec<FileRequest> {
    message
        .attachments
        .iter()
        .map(|file| {
            let mime = file.content_type.clone();
            let kind = match mime.as_deref().and_then(|m| m.split('/').next()) {
                Some("image") => AttachmentKind::Image,
                Some("audio") => AttachmentKind::Audio,
                Some("video") => AttachmentKind::Video,
                _ => AttachmentKind::Document,
            };
            FileRequest {
                id: file.id.get(),
                url: file.url.clone(),
                name: file.filename.clone(),
                mime,
                size: u64::from(file.size),
                kind,
            }
        })
        .collect()
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests;
