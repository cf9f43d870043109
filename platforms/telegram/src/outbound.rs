//! `OutboundMessage` → Bot API calls, and Telegram's errors → `PlatformError`.
//!
//! No retries or pacing here (the host owns both), with one exception: text whose HTML Telegram
//! cannot parse is sent once more as plain text. Error texts must never carry the bot token.
//!
//! Covers `send`, `edit` and `typing`; a 429's `retry_after` becomes `RateLimited`.

use hermesd_platform::{Button, ChatRef, MessageRef, OutboundMessage, PlatformError, Redactor, clamp_retry_after};
use teloxide::prelude::*;
use teloxide::types::{
    ChatAction, InlineKeyboardButton, InlineKeyboardMarkup, MessageId, ParseMode, Recipient, ReplyParameters, ThreadId,
};
use teloxide::{ApiError, RequestError};

use crate::format::markdown_to_html;

/// Maps a teloxide error to what the host acts on; `context` says what was being done.
pub(crate) fn map_error(error: &RequestError, context: &str, redactor: &Redactor) -> PlatformError {
    let detail = |what: &dyn std::fmt::Display| format!("{context}: {}", redactor.redact(&what.to_string()));
    match error {
        RequestError::RetryAfter(wait) => {
            PlatformError::RateLimited { retry_after: clamp_retry_after(wait.duration()) }
        }
        RequestError::Network(source) => PlatformError::Transient(detail(&format_args!("network error: {source}"))),
        // A proxy or an overloaded server answering HTML instead of JSON.
        RequestError::InvalidJson { .. } => PlatformError::Transient(detail(&"unexpected non-JSON answer")),
        RequestError::Io(source) => PlatformError::Transient(detail(source)),
        RequestError::MigrateToChatId(to) => {
            PlatformError::Permanent(detail(&format_args!("group migrated to supergroup {to}")))
        }
        RequestError::Api(api) => map_api_error(api, &detail(api)),
    }
}

fn map_api_error(error: &ApiError, detail: &str) -> PlatformError {
    match error {
        ApiError::InvalidToken => PlatformError::Unauthorized(detail.to_owned()),
        ApiError::TerminatedByOtherGetUpdates => PlatformError::Transient(detail.to_owned()),
        ApiError::Unknown(description) if is_transient(description) => PlatformError::Transient(detail.to_owned()),
        _ => PlatformError::Permanent(detail.to_owned()),
    }
}

/// Descriptions Telegram gives for 5xx, 409 and 429-without-parameters answers.
fn is_transient(description: &str) -> bool {
    const PREFIXES: [&str; 6] = [
        "Internal Server Error",
        "Bad Gateway",
        "Service Unavailable",
        "Gateway Timeout",
        "Conflict",
        "Too Many Requests",
    ];
    PREFIXES.iter().any(|prefix| description.starts_with(prefix))
}

/// Whether the error is the 409 of another `getUpdates` caller (or an active webhook).
pub(crate) fn is_conflict(error: &RequestError) -> bool {
    match error {
        RequestError::Api(ApiError::TerminatedByOtherGetUpdates | ApiError::CantGetUpdates) => true,
        RequestError::Api(ApiError::Unknown(description)) => description.starts_with("Conflict"),
        _ => false,
    }
}

/// Sends one message as Telegram HTML, falling back to plain text if Telegram refuses the markup.
pub(crate) async fn send(
    bot: &Bot,
    redactor: &Redactor,
    message: &OutboundMessage,
) -> Result<MessageRef, PlatformError> {
    let context = || format!("send to chat {}", message.chat.chat_id);
    let recipient = recipient(&message.chat)?;
    let thread = thread_id(&message.chat)?;
    let reply = message.reply_to.as_deref().map(message_id).transpose()?;
    let request = |text: String, html: bool| {
        let mut request = bot.send_message(recipient.clone(), text);
        if html {
            request = request.parse_mode(ParseMode::Html);
        }
        if let Some(thread) = thread {
            request = request.message_thread_id(thread);
        }
        if let Some(reply) = reply {
            request = request.reply_parameters(ReplyParameters::new(reply).allow_sending_without_reply());
        }
        if !message.buttons.is_empty() {
            request = request.reply_markup(keyboard(&message.buttons));
        }
        request
    };
    let sent = match request(markdown_to_html(&message.text), true).await {
        Err(RequestError::Api(ApiError::CantParseEntities(reason))) => {
            tracing::debug!(platform = crate::NAME, %reason, "telegram refused the html; sending plain text");
            request(message.text.clone(), false).await
        }
        other => other,
    };
    let sent = sent.map_err(|error| map_error(&error, &context(), redactor))?;
    Ok(MessageRef { chat: message.chat.clone(), message_id: sent.id.0.to_string() })
}

/// Replaces a sent message's text; "message is not modified" counts as success.
pub(crate) async fn edit(bot: &Bot, redactor: &Redactor, target: &MessageRef, text: &str) -> Result<(), PlatformError> {
    let recipient = recipient(&target.chat)?;
    let id = message_id(&target.message_id)?;
    let request = |body: String, html: bool| {
        let request = bot.edit_message_text(recipient.clone(), id, body);
        if html { request.parse_mode(ParseMode::Html) } else { request }
    };
    let edited = match request(markdown_to_html(text), true).await {
        Err(RequestError::Api(ApiError::CantParseEntities(_))) => request(text.to_owned(), false).await,
        other => other,
    };
    match edited {
        Ok(_) => Ok(()),
        Err(error) if is_not_modified(&error) => Ok(()),
        Err(error) => {
            Err(map_error(&error, &format!("edit message {} in chat {}", id.0, target.chat.chat_id), redactor))
        }
    }
}

fn is_not_modified(error: &RequestError) -> bool {
    match error {
        RequestError::Api(ApiError::MessageNotModified) => true,
        RequestError::Api(ApiError::Unknown(description)) => description.contains("message is not modified"),
        _ => false,
    }
}

/// Shows "typing…" in a chat (and its topic).
pub(crate) async fn typing(bot: &Bot, redactor: &Redactor, chat: &ChatRef) -> Result<(), PlatformError> {
    let mut request = bot.send_chat_action(recipient(chat)?, ChatAction::Typing);
    if let Some(thread) = thread_id(chat)? {
        request = request.message_thread_id(thread);
    }
    request.await.map(drop).map_err(|error| map_error(&error, &format!("typing in chat {}", chat.chat_id), redactor))
}

fn keyboard(buttons: &[Button]) -> InlineKeyboardMarkup {
    let row: Vec<_> = buttons
        .iter()
        .map(|button| InlineKeyboardButton::callback(button.label.clone(), button.data.clone()))
        .collect();
    InlineKeyboardMarkup::new([row])
}

/// A numeric chat id, or an `@channel` username.
pub(crate) fn recipient(chat: &ChatRef) -> Result<Recipient, PlatformError> {
    if let Ok(id) = chat.chat_id.parse::<i64>() {
        return Ok(Recipient::Id(ChatId(id)));
    }
    if chat.chat_id.starts_with('@') && chat.chat_id.len() > 1 {
        return Ok(Recipient::ChannelUsername(chat.chat_id.clone()));
    }
    Err(PlatformError::Permanent(format!("chat id `{}` is not a telegram chat id", chat.chat_id)))
}

pub(crate) fn thread_id(chat: &ChatRef) -> Result<Option<ThreadId>, PlatformError> {
    chat.thread_id.as_deref().map(|thread| message_id(thread).map(ThreadId)).transpose()
}

pub(crate) fn message_id(id: &str) -> Result<MessageId, PlatformError> {
    id.parse::<i32>()
        .map(MessageId)
        .map_err(|_| PlatformError::Permanent(format!("message id `{id}` is not a telegram message id")))
}

#[cfg(test)]
mod tests {
    use hermesd_platform::ChatType;
    use hermesd_platform::MAX_RETRY_AFTER;
    use teloxide::types::Seconds;

    use super::*;

    #[test]
    fn errors_map_to_what_the_host_acts_on() {
        let table = [
            (RequestError::Api(ApiError::InvalidToken), "unauthorized"),
            (RequestError::Api(ApiError::BotBlocked), "permanent"),
            (RequestError::Api(ApiError::ChatNotFound), "permanent"),
            (RequestError::Api(ApiError::MessageIsTooLong), "permanent"),
            (RequestError::Api(ApiError::Unknown("Forbidden: whatever".into())), "permanent"),
            (RequestError::Api(ApiError::Unknown("Internal Server Error".into())), "transient"),
            (RequestError::Api(ApiError::Unknown("Bad Gateway".into())), "transient"),
            (RequestError::Api(ApiError::TerminatedByOtherGetUpdates), "transient"),
            (RequestError::MigrateToChatId(ChatId(-100)), "permanent"),
            (RequestError::Io(std::sync::Arc::new(std::io::Error::other("disk"))), "transient"),
        ];
        let redactor = Redactor::new("<token>", &["123:secret"]);
        for (error, want) in table {
            let mapped = map_error(&error, "send to chat 1", &redactor);
            assert_eq!(mapped.kind(), want, "{error:?} → {mapped:?}");
            assert!(mapped.to_string().contains("send to chat 1"), "{mapped}");
        }
        let limited = map_error(&RequestError::RetryAfter(Seconds::from_seconds(3)), "x", &redactor);
        assert!(matches!(limited, PlatformError::RateLimited { retry_after } if retry_after.as_secs() == 3));
        // An absurd wait (u32::MAX seconds is 136 years) is clamped to an hour.
        let absurd = map_error(&RequestError::RetryAfter(Seconds::from_seconds(u32::MAX)), "x", &redactor);
        assert!(matches!(absurd, PlatformError::RateLimited { retry_after } if retry_after == MAX_RETRY_AFTER));
    }

    #[test]
    fn the_token_never_reaches_an_error_text() {
        let redactor = Redactor::new("<token>", &["123:secret"]);
        let error = RequestError::Api(ApiError::Unknown("Bad Gateway at /bot123:secret/SendMessage".into()));
        let mapped = map_error(&error, "send", &redactor).to_string();
        assert!(!mapped.contains("123:secret") && mapped.contains("<token>"), "{mapped}");
    }

    #[test]
    fn conflicts_are_recognised() {
        assert!(is_conflict(&RequestError::Api(ApiError::TerminatedByOtherGetUpdates)));
        let webhook = "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook first";
        assert!(is_conflict(&RequestError::Api(ApiError::Unknown(webhook.into()))));
        assert!(!is_conflict(&RequestError::Api(ApiError::ChatNotFound)));
    }

    #[test]
    fn chat_and_message_ids_parse_or_fail_permanently() {
        let chat = ChatRef::new("telegram", "-1001234", ChatType::Group);
        assert!(matches!(recipient(&chat), Ok(Recipient::Id(ChatId(-1001234)))));
        let channel = ChatRef::new("telegram", "@news", ChatType::Channel);
        assert!(matches!(recipient(&channel), Ok(Recipient::ChannelUsername(name)) if name == "@news"));
        let bad = ChatRef::new("telegram", "abc", ChatType::Dm);
        assert!(matches!(recipient(&bad), Err(PlatformError::Permanent(_))));
        let mut topic = ChatRef::new("telegram", "-100", ChatType::Thread);
        topic.thread_id = Some("77".into());
        assert!(matches!(thread_id(&topic), Ok(Some(ThreadId(MessageId(77))))));
        topic.thread_id = Some("x".into());
        assert!(thread_id(&topic).is_err());
    }
}
