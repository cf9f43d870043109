//! HA events → `InboundEvent`: a `hermesd_request` becomes a message from its HA user; a
//! `state_changed` matching the watch rules becomes a prompt on the watch pseudo-platform.
//!
//! The event contract (README): `hermesd_request` data `{"text", "conversation_id"?}`, the user
//! is `context.user_id`, the event id `context.id`. A request's chat is the HA user; its
//! conversation id, when given, is the thread, so each conversation is its own session and no
//! user can continue another's.
//!
//! A request is a DM-typed message; without a `context.user_id` the user is `automation`. A
//! `state_changed` becomes a rendered prompt (every value one line, capped; attribute-only changes
//! skipped) on the `homeassistant_watch` pseudo-platform, the entity the chat and the change id the
//! thread, so each change is its own session.

use std::time::{SystemTime, UNIX_EPOCH};

use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, Sender};
use serde_json::Value;

use crate::config::{NAME, NO_USER, REQUEST_EVENT, WATCH_PLATFORM};

/// Longest request text taken; the rest is cut (an automation can send anything).
pub const MAX_TEXT_CHARS: usize = 16_000;
/// Longest conversation id taken.
const MAX_ID_CHARS: usize = 128;
/// Longest value put into a watch prompt (states can be free text).
const MAX_VALUE_CHARS: usize = 200;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(value, |v, key| v.get(key)).and_then(Value::as_str)
}

/// Whether `id` may be a chat or thread id: short, printable, no separators of targets.
fn usable_id(id: &str) -> bool {
    !id.is_empty()
        && id.chars().count() <= MAX_ID_CHARS
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
}

/// A `hermesd_request` event (the `event` object of an `event` frame) as a message; `None` for
/// another event type, no text, or no event id.
pub fn normalise_request(event: &Value) -> Option<InboundEvent> {
    if str_at(event, &["event_type"]) != Some(REQUEST_EVENT) {
        return None;
    }
    let event_id = str_at(event, &["context", "id"]).filter(|id| !id.is_empty())?;
    let text: String = str_at(event, &["data", "text"])?.trim().chars().take(MAX_TEXT_CHARS).collect();
    if text.is_empty() {
        return None;
    }
    let user = str_at(event, &["context", "user_id"]).filter(|u| usable_id(u)).unwrap_or(NO_USER);
    let conversation = match event.get("data").and_then(|d| d.get("conversation_id")) {
        Some(Value::String(id)) if usable_id(id) => Some(id.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let chat = ChatRef { thread_id: conversation, ..ChatRef::new(NAME, user, ChatType::Dm) };
    let message = InboundMessage {
        profile: None,
        message_id: event_id.to_owned(),
        chat,
        sender: Sender { id: user.to_owned(), name: None, is_bot: false, roles: Vec::new() },
        text,
        attachments: Vec::new(),
        reply_to: None,
        addressed: true,
        timestamp_ms: now_ms(),
        history: Vec::new(),
        chat_title: None,
        client: None,
    };
    Some(InboundEvent::Message { event_id: event_id.to_owned(), message })
}

/// One line, at most `MAX_VALUE_CHARS`: a state or name put into a prompt cannot add lines.
fn clean(value: &str) -> String {
    let mut out: String = value.chars().map(|c| if c.is_control() { ' ' } else { c }).take(MAX_VALUE_CHARS).collect();
    if value.chars().count() > MAX_VALUE_CHARS {
        out.push('…');
    }
    out
}

/// A state change worth a prompt, before cooldown: entity, old and new state, and the prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct StateChange {
    /// The entity.
    pub entity_id: String,
    /// The prompt, rendered.
    pub prompt: String,
    /// The change's event id (`context.id` of the new state, else its time).
    pub change_id: String,
}

/// A `state_changed` event as a change, `None` when it is not one (removed entity, attributes
/// only, no id).
pub fn state_change(event: &Value, template: &str) -> Option<StateChange> {
    if str_at(event, &["event_type"]) != Some("state_changed") {
        return None;
    }
    let data = event.get("data")?;
    let entity_id = str_at(data, &["entity_id"]).filter(|e| e.contains('.'))?;
    let new_state = data.get("new_state").filter(|s| s.is_object())?;
    let new = str_at(new_state, &["state"])?;
    let old = data.get("old_state").and_then(|s| s.get("state")).and_then(Value::as_str);
    if old == Some(new) {
        return None;
    }
    let change_id = str_at(new_state, &["context", "id"])
        .or_else(|| str_at(new_state, &["last_changed"]))
        .or_else(|| str_at(event, &["time_fired"]))?;
    let name = str_at(new_state, &["attributes", "friendly_name"]).unwrap_or(entity_id);
    let domain = entity_id.split_once('.').map_or("", |(d, _)| d);
    let prompt = template
        .replace("{entity_id}", &clean(entity_id))
        .replace("{domain}", &clean(domain))
        .replace("{friendly_name}", &clean(name))
        .replace("{old_state}", &clean(old.unwrap_or("(none)")))
        .replace("{new_state}", &clean(new));
    Some(StateChange { entity_id: entity_id.to_owned(), prompt, change_id: change_id.to_owned() })
}

/// A change as an event on the watch pseudo-platform: one session per change (the change id
/// is the thread), the entity the chat.
pub fn watch_event(change: &StateChange) -> InboundEvent {
    let mut chat = ChatRef::new(WATCH_PLATFORM, change.entity_id.clone(), ChatType::Dm);
    chat.thread_id = Some(change.change_id.clone());
    let message = InboundMessage {
        profile: None,
        message_id: change.change_id.clone(),
        chat,
        sender: Sender { id: NAME.into(), name: Some("Home Assistant".into()), is_bot: false, roles: Vec::new() },
        text: change.prompt.clone(),
        attachments: Vec::new(),
        reply_to: None,
        addressed: true,
        timestamp_ms: now_ms(),
        history: Vec::new(),
        chat_title: None,
        client: None,
    };
    InboundEvent::Message { event_id: format!("{}:{}", change.entity_id, change.change_id), message }
}

#[cfg(test)]
mod tests {
    use hermesd_platform::conformance::check_normalise_table;
    use serde_json::json;

    use super::*;

    fn request(data: Value, user: Value) -> Value {
        json!({"event_type": "hermesd_request", "data": data, "origin": "LOCAL",
            "time_fired": "2026-11-25T10:00:00+00:00",
            "context": {"id": "01JREQ", "parent_id": null, "user_id": user}})
    }

    fn expected(chat_id: &str, thread: Option<&str>, text: &str) -> InboundEvent {
        let chat = ChatRef { thread_id: thread.map(str::to_owned), ..ChatRef::new(NAME, chat_id, ChatType::Dm) };
        InboundEvent::Message {
            event_id: "01JREQ".into(),
            message: InboundMessage {
                profile: None,
                message_id: "01JREQ".into(),
                chat,
                sender: Sender { id: chat_id.into(), name: None, is_bot: false, roles: Vec::new() },
                text: text.into(),
                attachments: Vec::new(),
                reply_to: None,
                addressed: true,
                timestamp_ms: 0,
                history: Vec::new(),
                chat_title: None,
                client: None,
            },
        }
    }

    #[test]
    fn requests_normalise_by_the_event_contract() {
        let rows = [
            (
                "with conversation",
                request(json!({"text": " lights? ", "conversation_id": "kitchen-1"}), json!("abc123")),
                Some(expected("abc123", Some("kitchen-1"), "lights?")),
            ),
            ("no conversation", request(json!({"text": "hi"}), json!("abc123")), Some(expected("abc123", None, "hi"))),
            ("no user", request(json!({"text": "hi"}), Value::Null), Some(expected(NO_USER, None, "hi"))),
            (
                "odd conversation id dropped",
                request(json!({"text": "hi", "conversation_id": "a:b c"}), json!("u1")),
                Some(expected("u1", None, "hi")),
            ),
            ("blank text", request(json!({"text": "  "}), json!("u1")), None),
            ("no text", request(json!({"message": "hi"}), json!("u1")), None),
            ("other event", json!({"event_type": "call_service", "data": {"text": "x"}, "context": {"id": "1"}}), None),
        ];
        check_normalise_table(&rows, |raw| {
            normalise_request(raw).map(|mut event| {
                if let InboundEvent::Message { message, .. } = &mut event {
                    message.timestamp_ms = 0;
                }
                event
            })
        });
    }

    fn changed(entity: &str, old: Option<&str>, new: Option<&str>) -> Value {
        let state = |s: &str| {
            json!({"entity_id": entity, "state": s, "attributes": {"friendly_name": "Front\nDoor"},
            "last_changed": "2026-11-25T10:00:00+00:00", "context": {"id": "01JCTX", "user_id": null}})
        };
        json!({"event_type": "state_changed", "time_fired": "2026-11-25T10:00:00+00:00",
            "data": {"entity_id": entity, "old_state": old.map(state), "new_state": new.map(state)}})
    }

    #[test]
    fn state_changes_render_the_prompt_on_one_line_per_value() {
        let change =
            state_change(&changed("lock.front", Some("locked"), Some("unlocked")), DEFAULT_PROMPT).expect("a change");
        assert_eq!(change.entity_id, "lock.front");
        assert_eq!(change.change_id, "01JCTX");
        assert_eq!(change.prompt, "Front Door (lock.front): locked -> unlocked [lock]");
        let InboundEvent::Message { event_id, message } = watch_event(&change) else { panic!("message") };
        assert_eq!(event_id, "lock.front:01JCTX");
        assert_eq!(message.chat.platform, WATCH_PLATFORM);
        assert_eq!(message.chat.thread_id.as_deref(), Some("01JCTX"));
        let first = state_change(&changed("light.x", None, Some("on")), "{old_state}").expect("new entity");
        assert_eq!(first.prompt, "(none)");
        assert_eq!(state_change(&changed("light.x", Some("on"), Some("on")), "x"), None, "attributes only");
        assert_eq!(state_change(&changed("light.x", Some("on"), None), "x"), None, "removed");
    }

    const DEFAULT_PROMPT: &str = "{friendly_name} ({entity_id}): {old_state} -> {new_state} [{domain}]";
}
