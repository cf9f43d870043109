//! The fake Bot API's data: users and chats to inject from, updates to inject, and the records of
//! what the daemon called (sent messages, edits, chat actions, polls, the webhook).

use std::time::Instant;

use serde_json::{Value, json};

use super::html::visible_text;

/// A Telegram user.
#[derive(Debug, Clone)]
pub struct User {
    /// The user id (also the id of the private chat with the bot).
    pub id: i64,
    pub(super) json: Value,
}

impl User {
    /// A human user with this id and first name; the username is the name lowercased.
    pub fn new(id: i64, first_name: &str) -> Self {
        let json = json!({"id": id, "is_bot": false, "first_name": first_name,
            "username": first_name.to_lowercase(), "language_code": "en"});
        Self { id, json }
    }
}

/// A Telegram chat.
#[derive(Debug, Clone)]
pub struct Chat {
    /// The chat id (negative for groups).
    pub id: i64,
    pub(super) json: Value,
}

impl Chat {
    /// The private chat between `user` and the bot.
    pub fn private(user: &User) -> Self {
        let json = json!({"id": user.id, "type": "private", "first_name": user.json["first_name"],
            "username": user.json["username"]});
        Self { id: user.id, json }
    }

    /// A basic group.
    pub fn group(id: i64, title: &str) -> Self {
        Self { id, json: json!({"id": id, "type": "group", "title": title}) }
    }

    /// A supergroup.
    pub fn supergroup(id: i64, title: &str) -> Self {
        Self { id, json: json!({"id": id, "type": "supergroup", "title": title}) }
    }

    /// A supergroup with topics.
    pub fn forum(id: i64, title: &str) -> Self {
        Self { id, json: json!({"id": id, "type": "supergroup", "title": title, "is_forum": true}) }
    }
}

/// A message a user sends, to be turned into an update.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub(super) chat: Chat,
    pub(super) from: User,
    pub(super) text: String,
    pub(super) reply_to: Option<i64>,
    pub(super) topic: Option<i64>,
    pub(super) photo: Option<String>,
    pub(super) document: Option<(String, String, String)>,
    pub(super) voice: Option<String>,
}

impl Incoming {
    /// A text message from `from` in `chat`.
    pub fn text(chat: &Chat, from: &User, text: &str) -> Self {
        Self {
            chat: chat.clone(),
            from: from.clone(),
            text: text.to_owned(),
            reply_to: None,
            topic: None,
            photo: None,
            document: None,
            voice: None,
        }
    }

    /// Replying to message `message_id` of the same chat (one the fake knows: a user's or the bot's).
    pub fn reply_to(mut self, message_id: i64) -> Self {
        self.reply_to = Some(message_id);
        self
    }

    /// Posted in the forum topic `thread_id` (see [`FakeTelegram::create_topic`]).
    pub fn topic(mut self, thread_id: i64) -> Self {
        self.topic = Some(thread_id);
        self
    }

    /// Carrying a photo; the text becomes its caption. Register the bytes with `add_file`.
    pub fn photo(mut self, file_id: &str) -> Self {
        self.photo = Some(file_id.to_owned());
        self
    }

    /// Carrying a voice note (OGG/Opus); the text becomes its caption. Register the bytes with `add_file`.
    pub fn voice(mut self, file_id: &str) -> Self {
        self.voice = Some(file_id.to_owned());
        self
    }

    /// Carrying a document; the text becomes its caption. Register the bytes with `add_file`.
    pub fn document(mut self, file_id: &str, file_name: &str, mime: &str) -> Self {
        self.document = Some((file_id.to_owned(), file_name.to_owned(), mime.to_owned()));
        self
    }
}

/// An update the fake created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Injected {
    /// Its update_id.
    pub update_id: i64,
    /// The chat of its message (0 for updates without one).
    pub chat_id: i64,
    /// Its message's id (for a callback query: the id of the message the button belongs to).
    pub message_id: i64,
}

/// One request to the Bot API, as received.
#[derive(Debug, Clone)]
pub struct Call {
    /// When it arrived.
    pub at: Instant,
    /// Lowercase method name.
    pub method: String,
    /// The JSON body (`{}` when there was none).
    pub body: Value,
}

/// A delivered `sendMessage` (refused ones are only in [`FakeTelegram::calls`]).
#[derive(Debug, Clone)]
pub struct Sent {
    /// When it arrived.
    pub at: Instant,
    /// The chat.
    pub chat_id: i64,
    /// The id the fake gave the message.
    pub message_id: i64,
    /// The text as sent (HTML when `parse_mode` says so).
    pub text: String,
    /// `parse_mode`, as sent.
    pub parse_mode: Option<String>,
    /// The message it replies to (`reply_parameters.message_id` or `reply_to_message_id`).
    pub reply_to: Option<i64>,
    /// `message_thread_id`.
    pub thread_id: Option<i64>,
    /// `reply_markup`, as sent.
    pub reply_markup: Option<Value>,
}

impl Sent {
    /// Callback data of every inline keyboard button.
    pub fn button_data(&self) -> Vec<String> {
        let rows =
            self.reply_markup.as_ref().and_then(|m| m["inline_keyboard"].as_array()).cloned().unwrap_or_default();
        rows.iter()
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|b| b["callback_data"].as_str().map(str::to_owned))
            .collect()
    }

    /// The text a user sees: tags removed, entities decoded.
    pub fn visible(&self) -> String {
        if self.is_html() { visible_text(&self.text) } else { self.text.clone() }
    }

    /// Whether `parse_mode` is HTML.
    pub fn is_html(&self) -> bool {
        self.parse_mode.as_deref().is_some_and(|m| m.eq_ignore_ascii_case("html"))
    }
}

/// An `editMessageText` call, including refused ones.
#[derive(Debug, Clone)]
pub struct Edit {
    /// When it arrived.
    pub at: Instant,
    /// The chat.
    pub chat_id: i64,
    /// The edited message.
    pub message_id: i64,
    /// The new text, as sent.
    pub text: String,
    /// Refused with "message is not modified": the text was the one already shown.
    pub unchanged: bool,
}

/// A `sendMessageDraft` call that Telegram accepted (a message streamed into a private chat).
#[derive(Debug, Clone)]
pub struct Draft {
    /// When it arrived.
    pub at: Instant,
    /// The private chat.
    pub chat_id: i64,
    /// The draft's id (non-zero; one per streamed answer).
    pub draft_id: i64,
    /// The text, as sent.
    pub text: String,
    /// The visible text (markup removed).
    pub visible: String,
}

/// A `sendChatAction` call.
#[derive(Debug, Clone)]
pub struct Action {
    /// When it arrived.
    pub at: Instant,
    /// The chat.
    pub chat_id: i64,
    /// `typing`, `upload_photo`, ...
    pub action: String,
    /// `message_thread_id`.
    pub thread_id: Option<i64>,
}

/// A `getUpdates` call: the offset it confirmed and what it returned.
#[derive(Debug, Clone)]
pub struct Poll {
    /// When it arrived.
    pub at: Instant,
    /// The `offset` parameter.
    pub offset: Option<i64>,
    /// The highest update_id the fake had issued when the call arrived (0: none).
    pub issued: i64,
    /// update_ids returned (empty for a timeout or an error).
    pub returned: Vec<i64>,
}

/// What `setWebhook` registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// The public URL.
    pub url: String,
    /// `secret_token`.
    pub secret: Option<String>,
    /// Why Telegram's last delivery to it failed, as `getWebhookInfo` says it.
    pub last_error: Option<String>,
}
