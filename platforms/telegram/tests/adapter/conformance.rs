//! The shared conformance checks from `hermesd-platform`, run against the fake Bot API.

use std::sync::Arc;
use std::time::Duration;

use hermesd_platform::chunk::measure;
use hermesd_platform::conformance::{
    check_capabilities, check_reports_rate_limit, check_run_honours_cancel, check_send_chunks,
};
use hermesd_platform::{ChatRef, ChatType, LengthUnit, OutboundKind, OutboundMessage, Platform};
use hermesd_telegram::{TelegramPlatform, TelegramSettings};
use serde_json::json;

use crate::support::{FakeBotApi, settings};

fn dm() -> ChatRef {
    ChatRef::new("telegram", "42", ChatType::Dm)
}

#[test]
fn capabilities_are_telegrams() {
    let platform = TelegramPlatform::new(TelegramSettings::default());
    let caps = platform.capabilities();
    check_capabilities(&caps);
    assert_eq!(platform.name(), "telegram");
    assert_eq!((caps.max_message_len, caps.length_unit), (4096, LengthUnit::Utf16));
    assert!(caps.edits && caps.threads && caps.buttons && caps.typing && caps.interactive);
    assert_eq!(platform.webhook_path(), None, "polling has no webhook route");
}

#[tokio::test]
async fn run_stops_promptly_on_cancel_during_a_long_poll() {
    let fake = FakeBotApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = TelegramSettings { poll_timeout: Duration::from_secs(10), ..settings(&fake, dir.path()) };
    let platform = Arc::new(TelegramPlatform::new(settings));
    check_run_honours_cancel(platform.clone(), Duration::from_millis(500), Duration::from_secs(2)).await;
    let polls = fake.calls("getUpdates");
    assert_eq!(polls.len(), 1, "cancelled inside the first long poll");
    assert_eq!(polls[0]["timeout"], 10);
    assert_eq!(fake.calls("deleteWebhook").len(), 1);
    let health = platform.health().expect("run started");
    assert!(!health.healthy && health.detail.contains("first poll"), "{health:?}");
}

#[tokio::test]
async fn long_replies_are_sent_in_chunks_within_4096_utf16_units() {
    let fake = FakeBotApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = TelegramPlatform::new(settings(&fake, dir.path()));
    let text = "Emoji 👍🏽 and family 👨‍👩‍👧‍👦 make UTF-16 longer than chars. ".repeat(160);
    let text: String = text.chars().take(10_000).collect();
    let refs = check_send_chunks(&platform, &dm(), &text).await;
    let sent = fake.calls("sendMessage");
    assert!(refs.len() >= 3, "10,000 characters with emoji need several messages, got {}", refs.len());
    assert_eq!(sent.len(), refs.len());
    for body in &sent {
        let text = body["text"].as_str().unwrap_or_default();
        assert!(measure(text, LengthUnit::Utf16) <= 4096);
        assert_eq!(body["parse_mode"], "HTML");
        assert_eq!(body["chat_id"], 42);
    }
    let ids: Vec<_> = refs.iter().map(|r| r.message_id.clone()).collect();
    assert_eq!(ids[0], "1000", "the id Telegram returned");
}

#[tokio::test]
async fn a_429_is_reported_as_rate_limited() {
    let fake = FakeBotApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = TelegramPlatform::new(settings(&fake, dir.path()));
    let limited = json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 3",
        "parameters": {"retry_after": 3}});
    fake.answer_next("sendMessage", 1, 429, limited);
    let message = OutboundMessage {
        chat: dm(),
        text: "hi".into(),
        reply_to: None,
        kind: OutboundKind::Reply,
        buttons: Vec::new(),
        chunk: (0, 1),
        file: None,
    };
    check_reports_rate_limit(|| platform.send(&message), Duration::from_secs(3)).await;
}
