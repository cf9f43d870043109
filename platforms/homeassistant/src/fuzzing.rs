//! Entry point for the fuzz target in tests/fuzz (built by cargo-afl with `--cfg fuzzing`, and by
//! the tests). It takes the fuzzer's raw bytes (an `event` frame's `event` object, or a whole
//! frame) and panics when a promise of the normalisers is broken; the adapter never uses it.

use hermesd_platform::{ChatType, InboundEvent};
use serde_json::Value;

use crate::config::{DEFAULT_WATCH_PROMPT, NAME, NO_USER, WATCH_PLATFORM};
use crate::inbound::{MAX_TEXT_CHARS, normalise_request, state_change, watch_event};

/// An HA event as JSON: a request keeps the event contract (event id = `context.id`, sender =
/// `context.user_id` or `automation`, a DM chat of that user, a usable conversation id, text
/// trimmed, non-empty and capped); a state change renders a prompt of one line with the default
/// template, and never for a change of attributes alone.
pub fn event(data: &[u8]) {
    let Ok(frame) = serde_json::from_slice::<Value>(data) else { return };
    let event = frame.get("event").cloned().unwrap_or(frame);
    if let Some(request) = normalise_request(&event) {
        let InboundEvent::Message { event_id, message } = &request else { panic!("a request became {request:?}") };
        assert_eq!(Some(event_id.as_str()), event["context"]["id"].as_str(), "{request:?}");
        assert_eq!(&message.message_id, event_id);
        assert_eq!((message.chat.platform.as_str(), message.chat.chat_type), (NAME, ChatType::Dm));
        assert_eq!(message.chat.chat_id, message.sender.id);
        let user = event["context"]["user_id"].as_str();
        assert!(user == Some(message.sender.id.as_str()) || message.sender.id == NO_USER, "{request:?}");
        assert!(!message.text.is_empty() && message.text.chars().count() <= MAX_TEXT_CHARS);
        assert_eq!(message.text, message.text.trim());
        for id in [Some(&message.chat.chat_id), message.chat.thread_id.as_ref()].into_iter().flatten() {
            assert!(!id.is_empty() && !id.contains(':') && !id.chars().any(char::is_whitespace), "{id:?}");
        }
    }
    if let Some(change) = state_change(&event, DEFAULT_WATCH_PROMPT) {
        assert!(!change.prompt.contains('\n') && !change.prompt.contains('\r'), "{change:?}");
        assert!(change.prompt.chars().count() < DEFAULT_WATCH_PROMPT.len() + 5 * 210, "{change:?}");
        let old = event["data"]["old_state"]["state"].as_str();
        assert_ne!(old, event["data"]["new_state"]["state"].as_str(), "attributes alone: {change:?}");
        let watched = watch_event(&change);
        assert_eq!(watched.platform(), WATCH_PLATFORM);
        assert_eq!(watched.chat().thread_id.as_deref(), Some(change.change_id.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use hermesd_platform::corpus::seeds;

    #[test]
    fn corpus_seeds_pass() {
        seeds("hass_event").iter().for_each(|seed| super::event(seed));
    }
}

#[cfg(test)]
mod props {
    use proptest::prelude::*;
    use serde_json::json;

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![any::<String>(), "[a-z \\n:\\t.\\-]{0,40}", Just(String::new())]
    }

    fn maybe_text() -> impl Strategy<Value = serde_json::Value> {
        prop_oneof![
            text().prop_map(serde_json::Value::from),
            Just(serde_json::Value::Null),
            any::<i64>().prop_map(serde_json::Value::from)
        ]
    }

    proptest! {
        #[test]
        fn requests_keep_the_contract(body in text(), conversation in maybe_text(), user in maybe_text(), id in maybe_text()) {
            let event = json!({"event_type": "hermesd_request", "data": {"text": body, "conversation_id": conversation},
                "context": {"id": id, "user_id": user}});
            super::event(event.to_string().as_bytes());
        }

        #[test]
        fn state_changes_render_one_line(entity in "[a-z_]{1,8}\\.[a-z_\\n]{1,8}", old in maybe_text(), new in maybe_text(), name in maybe_text()) {
            let state = |s: &serde_json::Value| json!({"state": s, "attributes": {"friendly_name": name}, "context": {"id": "c1"}});
            let event = json!({"event_type": "state_changed", "time_fired": "t",
                "data": {"entity_id": entity, "old_state": state(&old), "new_state": state(&new)}});
            super::event(event.to_string().as_bytes());
        }
    }
}
