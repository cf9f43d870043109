//! `OutboundMessage` → Discord REST bodies: content, reply reference, buttons, allowed mentions;
//! and the typing throttle.
//!
//! No retries or pacing here (the host owns both). Every body carries `allowed_mentions` so the
//! bot can never ping `@everyone`, `@here` or a role, whatever the model writes.
//!
//! Replies carry a message reference, buttons go in action rows, typing is throttled to one call
//! per 8 s per channel, and a keyed send (`Platform::send_keyed`) carries a `nonce` — 24 hex digits
//! of the SHA-256 of the host's key — with `enforce_nonce`, so a resend after a crash returns the
//! message Discord already created instead of a second one (for a few minutes).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use hermesd_platform::{Button, OutboundMessage, PlatformError};
use serde_json::{Value, json};

/// Discord's limits on components.
const BUTTONS_PER_ROW: usize = 5;
const MAX_ROWS: usize = 5;
const MAX_LABEL: usize = 80;
const MAX_CUSTOM_ID: usize = 100;

/// Users may be pinged (a reply pings its author); `@everyone`, `@here` and roles never.
pub(crate) fn allowed_mentions() -> Value {
    json!({ "parse": ["users"], "replied_user": true })
}

/// The body of `POST /channels/{id}/messages`. `reference` is the message to reply to when it lives
/// in the same channel.
pub(crate) fn message_body(message: &OutboundMessage, reference: Option<u64>) -> Result<Value, PlatformError> {
    let mut body = json!({ "content": message.text, "allowed_mentions": allowed_mentions() });
    if let Some(id) = reference {
        // A deleted original must not make the reply fail.
        body["message_reference"] = json!({ "message_id": id.to_string(), "fail_if_not_exists": false });
    }
    if !message.buttons.is_empty() {
        body["components"] = components(&message.buttons)?;
    }
    Ok(body)
}

/// Discord's `nonce` for the host's send key: 24 hex digits of its SHA-256 (a nonce is at most
/// 25 characters), the same for every attempt at one chunk in any process.
pub(crate) fn nonce(key: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(key.as_bytes());
    digest.iter().take(12).map(|byte| format!("{byte:02x}")).collect()
}

/// The body of `PATCH /channels/{id}/messages/{id}`.
pub(crate) fn edit_body(text: &str) -> Value {
    json!({ "content": text, "allowed_mentions": allowed_mentions() })
}

/// Buttons in action rows: five per row, the first primary and the rest secondary.
fn components(buttons: &[Button]) -> Result<Value, PlatformError> {
    if buttons.len() > BUTTONS_PER_ROW * MAX_ROWS {
        return Err(PlatformError::Permanent(format!("{} buttons is more than discord allows", buttons.len())));
    }
    if let Some(long) = buttons.iter().find(|b| b.data.chars().count() > MAX_CUSTOM_ID || b.data.is_empty()) {
        return Err(PlatformError::Permanent(format!(
            "button data of {} characters does not fit a discord custom_id",
            long.data.chars().count()
        )));
    }
    let rows: Vec<Value> = buttons
        .chunks(BUTTONS_PER_ROW)
        .enumerate()
        .map(|(row, buttons)| {
            let buttons: Vec<Value> = buttons
                .iter()
                .enumerate()
                .map(|(column, button)| {
                    let style = if row == 0 && column == 0 { 1 } else { 2 };
                    let label: String = button.label.chars().take(MAX_LABEL).collect();
                    json!({ "type": 2, "style": style, "label": label, "custom_id": button.data })
                })
                .collect();
            json!({ "type": 1, "components": buttons })
        })
        .collect();
    Ok(Value::Array(rows))
}

/// A numeric Discord id from a chat or message ref.
pub(crate) fn id(text: &str, what: &str) -> Result<u64, PlatformError> {
    text.parse::<u64>()
        .ok()
        .filter(|&id| id > 0)
        .ok_or_else(|| PlatformError::Permanent(format!("{what} `{text}` is not a discord id")))
}

/// Discord's indicator lasts about ten seconds, the host refreshes every four: skip calls that
/// would only repeat one still showing.
#[derive(Debug)]
pub(crate) struct TypingThrottle {
    interval: Duration,
    last: Mutex<HashMap<u64, Instant>>,
}

impl TypingThrottle {
    pub(crate) fn new(interval: Duration) -> Self {
        Self { interval, last: Mutex::default() }
    }

    /// Whether to call Discord for `channel` now; records the call when it says yes.
    pub(crate) fn due(&self, channel: u64, now: Instant) -> bool {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if last.get(&channel).is_some_and(|&at| now.saturating_duration_since(at) < self.interval) {
            return false;
        }
        // Bounded: entries older than the interval no longer matter.
        if last.len() >= 1024 {
            last.retain(|_, at| now.saturating_duration_since(*at) < self.interval);
        }
        last.insert(channel, now);
        true
    }

    /// Forgets a call that failed, so the next refresh tries again.
    pub(crate) fn failed(&self, channel: u64) {
        self.last.lock().unwrap_or_else(PoisonError::into_inner).remove(&channel);
    }
}

#[cfg(test)]
mod tests {
    use hermesd_platform::{ChatRef, ChatType, OutboundKind};

    use super::*;

    fn outbound(text: &str, buttons: Vec<Button>) -> OutboundMessage {
        OutboundMessage {
            chat: ChatRef::new("discord", "7", ChatType::Group),
            text: text.into(),
            reply_to: Some("9".into()),
            kind: OutboundKind::Reply,
            buttons,
            chunk: (0, 1),
            file: None,
        }
    }

    fn button(label: &str, data: &str) -> Button {
        Button { label: label.into(), data: data.into() }
    }

    #[test]
    fn bodies_reply_and_never_ping_everyone() {
        let body = message_body(&outbound("hi @everyone", Vec::new()), Some(9)).unwrap();
        assert_eq!(body["content"], "hi @everyone");
        assert_eq!(body["allowed_mentions"]["parse"], json!(["users"]), "no everyone, no roles");
        assert_eq!(body["message_reference"]["message_id"], "9");
        assert_eq!(body["message_reference"]["fail_if_not_exists"], false);
        assert!(body.get("components").is_none());
        let plain = message_body(&outbound("x", Vec::new()), None).unwrap();
        assert!(plain.get("message_reference").is_none());
        assert_eq!(edit_body("y")["allowed_mentions"], allowed_mentions());
    }

    #[test]
    fn buttons_become_action_rows_of_five() {
        let buttons: Vec<Button> = (0..7).map(|i| button(&format!("b{i}"), &format!("d{i}"))).collect();
        let body = message_body(&outbound("choose", buttons), None).unwrap();
        let rows = body["components"].as_array().unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["components"].as_array().unwrap().len(), 5);
        assert_eq!(rows[0]["components"][0], json!({ "type": 2, "style": 1, "label": "b0", "custom_id": "d0" }));
        assert_eq!(rows[1]["components"][1]["custom_id"], "d6");
        assert_eq!(rows[1]["components"][1]["style"], 2);
        let too_long = vec![button("x", &"d".repeat(101))];
        assert!(matches!(message_body(&outbound("x", too_long), None), Err(PlatformError::Permanent(_))));
    }

    #[test]
    fn typing_is_skipped_while_the_last_indicator_still_shows() {
        let throttle = TypingThrottle::new(Duration::from_secs(8));
        let start = Instant::now();
        assert!(throttle.due(1, start));
        assert!(!throttle.due(1, start + Duration::from_secs(4)));
        assert!(throttle.due(2, start + Duration::from_secs(4)), "other channels are independent");
        assert!(throttle.due(1, start + Duration::from_secs(8)));
        throttle.failed(1);
        assert!(throttle.due(1, start + Duration::from_secs(9)), "a failed call is retried at once");
    }

    #[test]
    fn a_nonce_is_stable_per_key_distinct_across_keys_and_fits_discord() {
        let first = nonce("0195f3a2-7c1e-7d40-9a7e-3c2b1f0e9d8c/17");
        assert_eq!(first, nonce("0195f3a2-7c1e-7d40-9a7e-3c2b1f0e9d8c/17"), "every attempt sends the same nonce");
        assert_ne!(first, nonce("0195f3a2-7c1e-7d40-9a7e-3c2b1f0e9d8c/18"), "the next chunk is another message");
        assert!(first.len() <= 25 && first.chars().all(|c| c.is_ascii_hexdigit()), "{first}");
    }

    #[test]
    fn ids_must_be_discord_snowflakes() {
        assert_eq!(id("42", "chat").ok(), Some(42));
        assert!(matches!(id("abc", "chat"), Err(PlatformError::Permanent(m)) if m.contains("chat `abc`")));
        assert!(id("0", "chat").is_err());
    }
}
