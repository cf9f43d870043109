//! `OutboundMessage` → HA commands: a reply to a request is a `hermesd_response` event (with the
//! request's conversation id and event id); a chat `notify.<service>` is a notify service call.
//! HA has no rate limits on its websocket API; refusals and connection trouble map to the
//! host's error kinds.
//!
//! The `hermesd_response` event carries the conversation id, the request id, the message's kind and
//! whether it is the final piece.

use hermesd_platform::{OutboundKind, OutboundMessage, PlatformError};
use serde_json::{Value, json};

use crate::config::RESPONSE_EVENT;
use crate::link::HassError;

/// The command that delivers `message`, `notify_title` being the title of notify calls.
pub fn command_for(message: &OutboundMessage, notify_title: &str) -> Value {
    let chat = &message.chat;
    if let Some(service) = chat.chat_id.strip_prefix("notify.") {
        let mut data = json!({ "message": message.text });
        if !notify_title.is_empty() {
            data["title"] = Value::from(notify_title);
        }
        return json!({ "type": "call_service", "domain": "notify", "service": service, "service_data": data });
    }
    let kind = match message.kind {
        OutboundKind::Reply => "reply",
        OutboundKind::Error => "error",
        OutboundKind::Notice => "notice",
        OutboundKind::Progress => "progress",
    };
    let (index, count) = message.chunk;
    json!({
        "type": "fire_event",
        "event_type": RESPONSE_EVENT,
        "event_data": {
            "text": message.text,
            "conversation_id": chat.thread_id,
            "request_id": message.reply_to,
            "user_id": chat.chat_id,
            "kind": kind,
            "final": index + 1 >= count,
        },
    })
}

/// The message id of a delivered command: the context HA created for it, else `fallback`.
pub fn message_id(result: &Value, fallback: String) -> String {
    result.get("context").and_then(|c| c.get("id")).and_then(Value::as_str).map_or(fallback, str::to_owned)
}

/// The host's error kind for a failed command.
pub fn map_error(error: HassError, what: &str) -> PlatformError {
    match error {
        HassError::Disconnected | HassError::Timeout(_) | HassError::Busy => {
            PlatformError::Transient(format!("{what}: {error}"))
        }
        HassError::Refused { ref code, .. } => match code.as_str() {
            "unauthorized" => PlatformError::Unauthorized(format!("{what}: {error}")),
            "timeout" | "home_assistant_error" | "unknown_error" => {
                PlatformError::Transient(format!("{what}: {error}"))
            }
            _ => PlatformError::Permanent(format!("{what}: {error}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use hermesd_platform::{ChatRef, ChatType};

    use super::*;

    fn message(chat: ChatRef, reply_to: Option<&str>, chunk: (u32, u32)) -> OutboundMessage {
        OutboundMessage {
            chat,
            text: "The door is locked.".into(),
            reply_to: reply_to.map(str::to_owned),
            kind: OutboundKind::Reply,
            buttons: Vec::new(),
            chunk,
            file: None,
        }
    }

    #[test]
    fn replies_fire_the_response_event_and_notify_targets_call_the_service() {
        let chat = ChatRef { thread_id: Some("kitchen".into()), ..ChatRef::new("homeassistant", "u1", ChatType::Dm) };
        let reply = command_for(&message(chat, Some("01JREQ"), (0, 1)), "Hermes");
        assert_eq!(reply["type"], "fire_event");
        assert_eq!(reply["event_type"], "hermesd_response");
        assert_eq!(
            reply["event_data"],
            json!({"text": "The door is locked.", "conversation_id": "kitchen", "request_id": "01JREQ",
                "user_id": "u1", "kind": "reply", "final": true})
        );
        let notify = ChatRef::new("homeassistant", "notify.mobile_app_phone", ChatType::Dm);
        let call = command_for(&message(notify, None, (0, 2)), "Hermes");
        assert_eq!(
            call,
            json!({"type": "call_service", "domain": "notify", "service": "mobile_app_phone",
                "service_data": {"message": "The door is locked.", "title": "Hermes"}})
        );
    }

    #[test]
    fn errors_map_to_what_the_host_acts_on() {
        let refused = |code: &str| HassError::Refused { code: code.into(), message: "m".into() };
        assert_eq!(map_error(HassError::Disconnected, "send").kind(), "transient");
        assert_eq!(map_error(refused("not_found"), "send").kind(), "permanent");
        assert_eq!(map_error(refused("unauthorized"), "send").kind(), "unauthorized");
        assert_eq!(map_error(refused("home_assistant_error"), "send").kind(), "transient");
        assert_eq!(message_id(&json!({"context": {"id": "c1"}}), "f".into()), "c1");
        assert_eq!(message_id(&Value::Null, "f".into()), "f");
    }
}
