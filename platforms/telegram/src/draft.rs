//! `sendMessageDraft`: a message streamed into a private chat while it is being written (Bot API
//! 9.3+). teloxide 0.17 predates it, so this is its own small payload sent through teloxide's
//! JSON request machinery (same base URL, token and error mapping as every other call).
//!
//! A draft is ephemeral (Telegram shows it for about 30 s after its last update) and has no
//! message id; the final answer is still sent with `sendMessage`. Nothing here paces or retries.
//!
//! Drafts are offered only in private chats, and given up for good (streaming by edits from then
//! on) once Telegram refuses the method.

use std::sync::atomic::{AtomicBool, Ordering};

use hermesd_platform::{ChatRef, ChatType, PlatformError, Redactor};
use serde::Serialize;
use teloxide::prelude::*;
use teloxide::requests::{JsonRequest, Payload};
use teloxide::types::True;
use teloxide::{ApiError, RequestError};

use crate::format::markdown_to_html;
use crate::outbound::map_error;

/// The Bot API's `sendMessageDraft` body.
#[derive(Debug, Clone, Serialize)]
struct SendMessageDraft {
    /// The private chat.
    chat_id: i64,
    /// A forum topic of the private chat, when the chat has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    message_thread_id: Option<i64>,
    /// Non-zero; updates of one draft id are animated.
    draft_id: i64,
    /// The text so far (1–4096 characters after entity parsing).
    text: String,
    /// `HTML`, or absent for plain text.
    #[serde(skip_serializing_if = "Option::is_none")]
    parse_mode: Option<&'static str>,
}

impl Payload for SendMessageDraft {
    type Output = True;
    const NAME: &'static str = "sendMessageDraft";
}

/// Whether drafts are worth trying in a chat; turned off for good once Telegram (or a local Bot
/// API server that predates drafts) refuses the method itself.
#[derive(Debug, Default)]
pub(crate) struct Drafts {
    refused: AtomicBool,
}

impl Drafts {
    /// Drafts exist only in private chats.
    pub(crate) fn usable(&self, chat: &ChatRef) -> bool {
        chat.chat_type == ChatType::Dm && !self.refused.load(Ordering::Relaxed)
    }

    /// Show `text` (markdown) as draft `draft_id` in `chat`; HTML first, plain text if Telegram
    /// cannot parse the markup of a half-written answer.
    pub(crate) async fn send(
        &self,
        bot: &Bot,
        redactor: &Redactor,
        chat: &ChatRef,
        draft_id: i64,
        text: &str,
    ) -> Result<(), PlatformError> {
        let chat_id = chat.chat_id.parse::<i64>().map_err(|_| {
            PlatformError::Permanent(format!("chat id `{}` is not a private telegram chat", chat.chat_id))
        })?;
        let message_thread_id = chat.thread_id.as_deref().and_then(|t| t.parse::<i64>().ok());
        let request = |text: String, html: bool| {
            let payload =
                SendMessageDraft { chat_id, message_thread_id, draft_id, text, parse_mode: html.then_some("HTML") };
            JsonRequest::new(bot.clone(), payload)
        };
        let sent = match request(markdown_to_html(text), true).await {
            Err(RequestError::Api(ApiError::CantParseEntities(_))) => request(text.to_owned(), false).await,
            other => other,
        };
        match sent {
            Ok(_) => Ok(()),
            Err(error) => {
                let mapped = map_error(&error, &format!("draft in chat {chat_id}"), redactor);
                if matches!(mapped, PlatformError::Permanent(_)) && is_method_refused(&error) {
                    tracing::info!(platform = crate::NAME, "sendMessageDraft refused; streaming by edits from now on");
                    self.refused.store(true, Ordering::Relaxed);
                }
                Err(mapped)
            }
        }
    }
}

/// Whether the error says the method itself is unavailable (an older Bot API server, or a bot
/// Telegram does not offer drafts), rather than something about this one call.
fn is_method_refused(error: &RequestError) -> bool {
    match error {
        RequestError::Api(ApiError::Unknown(description)) => {
            let description = description.to_ascii_lowercase();
            description.starts_with("not found")
                || description.contains("method")
                || description.contains("not allowed")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_has_the_bot_api_shape() {
        let payload = SendMessageDraft {
            chat_id: 5,
            message_thread_id: None,
            draft_id: 77,
            text: "<b>hi</b>".into(),
            parse_mode: Some("HTML"),
        };
        let json = serde_json::to_value(&payload).unwrap();
        assert_eq!(json, serde_json::json!({"chat_id": 5, "draft_id": 77, "text": "<b>hi</b>", "parse_mode": "HTML"}));
        assert_eq!(SendMessageDraft::NAME, "sendMessageDraft");
    }

    #[test]
    fn drafts_are_for_private_chats_until_refused() {
        let drafts = Drafts::default();
        assert!(drafts.usable(&ChatRef::new("telegram", "5", ChatType::Dm)));
        assert!(!drafts.usable(&ChatRef::new("telegram", "-100", ChatType::Group)));
        assert!(is_method_refused(&RequestError::Api(ApiError::Unknown("Not Found: method not found".into()))));
        assert!(!is_method_refused(&RequestError::Api(ApiError::ChatNotFound)));
        let other_chat = RequestError::Api(ApiError::Unknown("Bad Request: chat not found".into()));
        assert!(!is_method_refused(&other_chat), "one chat's error never turns drafts off");
        drafts.refused.store(true, Ordering::Relaxed);
        assert!(!drafts.usable(&ChatRef::new("telegram", "5", ChatType::Dm)));
    }
}
