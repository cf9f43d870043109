//! The shared conformance checks from `hermesd-platform`, run against the fake Graph API.

use std::time::Duration;

use hermesd_platform::chunk::measure;
use hermesd_platform::conformance::{
    check_capabilities, check_reports_rate_limit, check_run_honours_cancel, check_send_chunks,
};
use hermesd_platform::{ChatRef, ChatType, LengthUnit, OutboundKind, OutboundMessage, Platform};

use crate::fake_whatsapp::webhook;
use crate::{USER, rig, rig_with};

fn dm() -> ChatRef {
    ChatRef::new("whatsapp", USER, ChatType::Dm)
}

fn text(text: &str) -> OutboundMessage {
    OutboundMessage {
        chat: dm(),
        text: text.into(),
        reply_to: None,
        kind: OutboundKind::Reply,
        buttons: Vec::new(),
        chunk: (0, 1),
        file: None,
    }
}

#[tokio::test]
async fn capabilities_are_whatsapps() {
    let rig = rig().await;
    let caps = rig.platform.capabilities();
    check_capabilities(&caps);
    assert_eq!(rig.platform.name(), "whatsapp");
    assert_eq!((caps.max_message_len, caps.length_unit), (4096, LengthUnit::Chars));
    assert!(!caps.edits && !caps.threads && caps.buttons && caps.typing && caps.interactive);
    assert_eq!(rig.platform.webhook_path().as_deref(), Some("/whatsapp/webhook"));
}

#[tokio::test]
async fn run_checks_the_token_and_stops_promptly_on_cancel() {
    let rig = rig().await;
    check_run_honours_cancel(rig.platform.clone(), Duration::from_millis(300), Duration::from_secs(2)).await;
    assert_eq!(rig.fake.calls_to("phone").len(), 1, "one token check at start");
    let health = rig.platform.health().expect("run started");
    assert!(health.healthy, "a quiet number with a valid token is healthy: {health:?}");
}

#[tokio::test]
async fn a_refused_token_makes_the_adapter_unhealthy() {
    let rig = rig_with(|s| s.access_token = "EAAwrong".into()).await;
    check_run_honours_cancel(rig.platform.clone(), Duration::from_millis(300), Duration::from_secs(2)).await;
    let health = rig.platform.health().expect("run started");
    assert!(!health.healthy && health.detail.contains("refused"), "{health:?}");
    assert!(!health.detail.contains("EAAwrong"), "the token never shows: {health:?}");
}

#[tokio::test]
async fn long_replies_are_sent_in_chunks_within_4096_chars() {
    let rig = rig().await;
    assert_eq!(rig.post(&webhook::text(USER, "hi").1).await, 200, "the user wrote: the window is open");
    let long = "Emoji 👍🏽 and words, many of them, to fill several messages. ".repeat(200);
    let refs = check_send_chunks(rig.platform.as_ref(), &dm(), &long).await;
    let sent = rig.fake.sent_to(USER);
    assert!(refs.len() >= 3, "{} chunks", refs.len());
    assert_eq!(sent.len(), refs.len());
    for body in &sent {
        assert!(measure(body["text"]["body"].as_str().unwrap(), LengthUnit::Chars) <= 4096);
        assert_eq!(body["type"], "text");
    }
    assert_eq!(refs[0].message_id, "wamid.OUT1", "the wamid Graph returned");
}

#[tokio::test]
async fn rate_limit_codes_are_reported_as_rate_limited() {
    let rig = rig().await;
    rig.post(&webhook::text(USER, "hi").1).await;
    let hello = text("hello");
    rig.fake.fail_next("messages", 1, 400, 131_056, None);
    check_reports_rate_limit(|| rig.platform.send(&hello), Duration::from_secs(6)).await;
    rig.fake.fail_next("messages", 1, 429, 130_429, Some(3));
    check_reports_rate_limit(|| rig.platform.send(&hello), Duration::from_secs(3)).await;
    assert!(rig.platform.send(&hello).await.is_ok(), "the next call goes through");
}
