//! The normalised message model that every platform speaks to the host.
//!
//! Nothing here may carry a platform's own JSON: an adapter translates into these types and the
//! host never looks further.
//!
//! The types: `InboundEvent` (closed: `Message`, a user's message, or `Action`, a button press),
//! `InboundMessage`, `ChatRef`, `ChatType`, `Sender`, `Attachment`, `OutboundMessage` (with an
//! optional `OutboundFile`: a copy under `media/outbound/` sent as a document or photo),
//! `OutboundKind` and `MessageRef`, the platform's id of a sent message.

use serde::{Deserialize, Serialize};

/// How a conversation is shaped on its platform; part of the session key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatType {
    /// A private conversation between one user and the bot.
    Dm,
    /// A group chat with several members.
    Group,
    /// A broadcast or team channel.
    Channel,
    /// A thread inside a group or channel (forum topic, Slack thread, Discord thread).
    Thread,
}

impl ChatType {
    /// The lowercase name used in session keys and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ChatType::Dm => "dm",
            ChatType::Group => "group",
            ChatType::Channel => "channel",
            ChatType::Thread => "thread",
        }
    }
}

/// Where a message lives: platform, chat and optional thread (its identity), and the guild or
/// team the chat belongs to, where the platform has them (a fact about the chat, left out of its
/// identity: a delivery target names a chat without it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChatRef {
    /// The platform's short name (`telegram`, `api`, ...).
    pub platform: String,
    /// The chat's id on that platform.
    pub chat_id: String,
    /// The kind of chat.
    pub chat_type: ChatType,
    /// The thread inside the chat, when the platform has threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The Discord guild or Slack team the chat is in, when the adapter knows it (routes match
    /// on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guild: Option<String>,
}

impl PartialEq for ChatRef {
    fn eq(&self, other: &Self) -> bool {
        (&self.platform, &self.chat_id, self.chat_type, &self.thread_id)
            == (&other.platform, &other.chat_id, other.chat_type, &other.thread_id)
    }
}

impl Eq for ChatRef {}

impl std::hash::Hash for ChatRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.platform, &self.chat_id, self.chat_type, &self.thread_id).hash(state);
    }
}

impl ChatRef {
    /// A chat without a thread.
    pub fn new(platform: impl Into<String>, chat_id: impl Into<String>, chat_type: ChatType) -> Self {
        Self { platform: platform.into(), chat_id: chat_id.into(), chat_type, thread_id: None, guild: None }
    }

    /// A key unique per chat and thread, for pacers and per-chat state.
    pub fn key(&self) -> String {
        match &self.thread_id {
            Some(thread) => format!("{}:{}:{}", self.platform, self.chat_id, thread),
            None => format!("{}:{}", self.platform, self.chat_id),
        }
    }
}

/// Who sent a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sender {
    /// The user's stable id on the platform.
    pub id: String,
    /// A display name, when the platform gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether the sender is a bot (adapters normally drop bot messages before this point).
    #[serde(default)]
    pub is_bot: bool,
    /// Role ids the sender holds in this chat's server (Discord), for role-based allowlists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
}

/// What kind of file came with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachmentKind {
    /// A picture.
    Image,
    /// A voice note or audio file.
    Audio,
    /// A video.
    Video,
    /// Any other file.
    Document,
}

/// A file that came with a message, already downloaded into the data dir by the adapter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// The kind of file.
    pub kind: AttachmentKind,
    /// Where the file was saved, relative to the data dir.
    pub path: String,
    /// The MIME type, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    /// The original file name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The size in bytes.
    pub size: u64,
}

/// The message a user replied to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyContext {
    /// The id of the message replied to.
    pub message_id: String,
    /// Its text, when the platform includes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Whether the message replied to was the bot's own.
    #[serde(default)]
    pub from_bot: bool,
    /// The display name of its author, when the platform includes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
}

/// Conversation the sender supplied along with a message: the API's stateless mode, where the
/// client owns the history. Chat platforms leave it empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

/// A user's message, normalised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboundMessage {
    /// The platform's id for this message (reply target, receipts).
    pub message_id: String,
    /// Where it was sent.
    pub chat: ChatRef,
    /// Who sent it.
    pub sender: Sender,
    /// Its text (captions included), with the bot mention left in place.
    pub text: String,
    /// Files that came with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// The message it replies to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<ReplyContext>,
    /// Whether the bot was addressed (DM, mention, reply to the bot, command).
    pub addressed: bool,
    /// When the platform says it was sent, in Unix milliseconds.
    pub timestamp_ms: i64,
    /// Client-owned history (API stateless mode); empty elsewhere.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryMessage>,
    /// The chat's title (group name, channel name), when the platform gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_title: Option<String>,
    /// The profile the sender asked for by name (the API's `model`); `None`: the host decides
    /// by the adapter's account. Chat adapters leave it `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// What an API client brings besides its words: function tools it runs itself, and the
    /// outputs of their calls an earlier answer asked for (OpenAI's Responses API). Chat
    /// adapters leave it `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<Box<ClientTurn>>,
}

/// An API client's function tools and the outputs of their calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientTurn {
    /// Tools the model may call, which the client runs: the answer ends with the call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ClientTool>,
    /// Outputs of calls an earlier answer ended with, by call id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<ClientOutput>,
}

/// A function tool an API client declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientTool {
    /// Its name.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// JSON schema of its arguments.
    pub parameters: serde_json::Value,
}

/// The output of a function call, from the client that ran it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientOutput {
    /// The call it answers.
    pub call_id: String,
    /// What the function returned.
    pub output: String,
}

/// A press on a button the bot sent (approvals, clarify choices).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboundAction {
    /// Where the button was.
    pub chat: ChatRef,
    /// Who pressed it.
    pub sender: Sender,
    /// The message carrying the button.
    pub message_id: String,
    /// The button's data, as the host set it.
    pub data: String,
}

/// Everything a platform can hand to the host. Closed on purpose: the router matches on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InboundEvent {
    /// A user's message.
    Message {
        /// The platform's event id, the deduplication key together with the platform.
        event_id: String,
        /// The message.
        message: InboundMessage,
    },
    /// A button press.
    Action {
        /// The platform's event id.
        event_id: String,
        /// The press.
        action: InboundAction,
    },
}

impl InboundEvent {
    /// The platform's short name.
    pub fn platform(&self) -> &str {
        &self.chat().platform
    }

    /// The platform's event id.
    pub fn event_id(&self) -> &str {
        match self {
            InboundEvent::Message { event_id, .. } | InboundEvent::Action { event_id, .. } => event_id,
        }
    }

    /// The chat the event belongs to.
    pub fn chat(&self) -> &ChatRef {
        match self {
            InboundEvent::Message { message, .. } => &message.chat,
            InboundEvent::Action { action, .. } => &action.chat,
        }
    }

    /// Where it happened, to change (an adapter naming its account).
    pub fn chat_mut(&mut self) -> &mut ChatRef {
        match self {
            InboundEvent::Message { message, .. } => &mut message.chat,
            InboundEvent::Action { action, .. } => &mut action.chat,
        }
    }

    /// Who caused the event.
    pub fn sender(&self) -> &Sender {
        match self {
            InboundEvent::Message { message, .. } => &message.sender,
            InboundEvent::Action { action, .. } => &action.sender,
        }
    }
}

/// A message the bot sent, as the platform identifies it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageRef {
    /// Where it is.
    pub chat: ChatRef,
    /// The platform's id for it.
    pub message_id: String,
}

/// What an outbound message is for; adapters may treat kinds differently (the API only answers
/// its request with a final reply, for instance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutboundKind {
    /// The answer to a turn (or part of it, when chunked).
    Reply,
    /// A turn that ended in an error the user must see.
    Error,
    /// A short notice from the gateway: "queued (2)", command answers.
    Notice,
    /// A progress line that may be edited later.
    Progress,
}

/// A button to attach to a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Button {
    /// What the user sees.
    pub label: String,
    /// What comes back in an `InboundAction` when pressed.
    pub data: String,
}

/// A message for the platform to send. The host has already chunked `text` to the platform's
/// limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboundMessage {
    /// Where to send it.
    pub chat: ChatRef,
    /// The text, in the model's markdown; the adapter converts it to its dialect.
    pub text: String,
    /// The message to reply to, when the platform supports replies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// What the message is for.
    pub kind: OutboundKind,
    /// Buttons under the message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buttons: Vec<Button>,
    /// Chunk index (from 0) and count, so an adapter can tell the last chunk: `(n - 1, n)`.
    pub chunk: (u32, u32),
    /// A file to send with `text` as its caption; the host hands its bytes to
    /// `Platform::send_file` instead of calling `send`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<OutboundFile>,
}

/// A file the bot sends, already copied into the data dir when its message was stored, so a
/// resend after a crash sends the same bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboundFile {
    /// Where the copy lives, relative to the data dir (`media/outbound/<id>/<name>`).
    pub path: String,
    /// The file name the recipient sees.
    pub name: String,
    /// The MIME type, guessed from the name.
    pub mime: String,
    /// `Image` for pictures a platform may show as photos, `Document` otherwise.
    pub kind: AttachmentKind,
    /// The size in bytes.
    pub size: u64,
}
