//! The shared conformance checks from `hermesd-platform`, and the receive loop, against the fake.

use std::sync::Arc;
use std::time::Duration;

use hermesd_homeassistant::{HassPlatform, HassSettings, WatchRules};
use hermesd_platform::conformance::{
    RecordingIngress, check_capabilities, check_run_honours_cancel, check_send_chunks,
};
use hermesd_platform::{ChatRef, ChatType, InboundEvent, Platform, PlatformContext};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::FakeHa;

#[test]
fn capabilities_are_home_assistants() {
    let platform = HassPlatform::new(HassSettings::default());
    let caps = platform.capabilities();
    check_capabilities(&caps);
    assert_eq!(platform.name(), "homeassistant");
    assert!(caps.interactive && !caps.edits && !caps.buttons, "{caps:?}");
    assert!(!platform.shows_progress(&ChatRef::new("homeassistant", "u1", ChatType::Dm)));
}

#[tokio::test]
async fn run_stops_promptly_on_cancel_while_connected() {
    let fake = FakeHa::start().await;
    let platform = Arc::new(HassPlatform::new(fake.settings()));
    check_run_honours_cancel(platform.clone(), Duration::from_millis(500), Duration::from_secs(2)).await;
    assert_eq!(fake.received("auth").len(), 1);
    assert_eq!(fake.lock().subscriptions.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(), ["hermesd_request"]);
}

#[tokio::test]
async fn long_replies_are_sent_in_chunks_as_response_events() {
    let fake = FakeHa::start().await;
    let platform = Arc::new(HassPlatform::new(fake.settings()));
    let ingress = RecordingIngress::new();
    let cancel = CancellationToken::new();
    let runner = platform.clone();
    let (ctx, token) = (PlatformContext { ingress: ingress.clone() }, cancel.clone());
    let run = tokio::spawn(async move { runner.run(ctx, token).await });
    assert!(fake.wait(|i| !i.subscriptions.is_empty()).await, "subscribed");
    let chat = ChatRef { thread_id: Some("conv".into()), ..ChatRef::new("homeassistant", "u1", ChatType::Dm) };
    let text = "Lights, locks and 👨‍👩‍👧‍👦 families in one long answer. ".repeat(300);
    let refs = check_send_chunks(platform.as_ref(), &chat, &text).await;
    assert!(refs.len() >= 3, "{}", refs.len());
    let fired = fake.received("fire_event");
    assert_eq!(fired.len(), refs.len());
    assert!(
        fired.iter().all(|f| f["event_type"] == "hermesd_response" && f["event_data"]["conversation_id"] == "conv")
    );
    assert_eq!(fired.last().map(|f| f["event_data"]["final"].clone()), Some(json!(true)));
    assert_eq!(fired[0]["event_data"]["final"], json!(false));
    assert!(refs[0].message_id.starts_with("ctx-"), "HA's context id is the receipt: {:?}", refs[0]);

    // A request and a redelivery of it reach the ingress once; other events do not.
    let request = json!({"event_type": "hermesd_request", "data": {"text": "hi"}, "origin": "LOCAL",
        "time_fired": "2026-11-25T10:00:00+00:00", "context": {"id": "req-1", "parent_id": null, "user_id": "u1"}});
    fake.fire(request.clone());
    fake.fire(request);
    let events = ingress.wait_for(1, Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(events.len(), 1);
    assert_eq!(ingress.duplicates(), 1);
    let InboundEvent::Message { event_id, message } = &events[0] else { panic!("a message") };
    assert_eq!((event_id.as_str(), message.text.as_str(), message.sender.id.as_str()), ("req-1", "hi", "u1"));
    cancel.cancel();
    assert!(run.await.expect("join").is_ok());
}

#[tokio::test]
async fn watched_changes_pass_the_rules_and_the_cooldown_and_unanswered_pings_reconnect() {
    let fake = FakeHa::start().await;
    let settings = HassSettings {
        watch: WatchRules { domains: vec!["lock".into()], cooldown: Duration::from_secs(600), ..WatchRules::default() },
        ..fake.settings()
    };
    let platform = Arc::new(HassPlatform::new(settings));
    let ingress = RecordingIngress::new();
    let cancel = CancellationToken::new();
    let runner = platform.clone();
    let (ctx, token) = (PlatformContext { ingress: ingress.clone() }, cancel.clone());
    let run = tokio::spawn(async move { runner.run(ctx, token).await });
    assert!(fake.wait(|i| i.subscriptions.len() == 2).await, "requests and state changes");
    let change = |entity: &str, new: &str, ctx: &str| {
        json!({"event_type": "state_changed", "time_fired": "2026-11-25T10:00:00+00:00", "context": {"id": ctx},
            "data": {"entity_id": entity, "old_state": {"state": "locked"},
                "new_state": {"state": new, "attributes": {"friendly_name": "Front"}, "context": {"id": ctx}}}})
    };
    fake.fire(change("lock.front", "unlocked", "c1"));
    fake.fire(change("light.hall", "on", "c2"));
    fake.fire(change("lock.front", "locked", "c3"));
    let events = ingress.wait_for(1, Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(ingress.events().len(), 1, "one lock prompt per cooldown, no light: {events:?}");
    assert_eq!(events[0].platform(), "homeassistant_watch");
    assert!(platform.health().is_some_and(|h| h.healthy), "{:?}", platform.health());

    fake.lock().answer_pings = false;
    assert!(fake.wait(|i| i.conns.len() >= 2).await, "no pong within the ping interval: a new connection");
    fake.lock().answer_pings = true;
    cancel.cancel();
    assert!(run.await.expect("join").is_ok());
}

#[tokio::test]
async fn a_refused_token_ends_run_as_unauthorized() {
    let fake = FakeHa::start().await;
    let settings = HassSettings { token: "wrong".into(), ..fake.settings() };
    let platform = HassPlatform::new(settings);
    let ctx = PlatformContext { ingress: RecordingIngress::new() };
    let ended = tokio::time::timeout(Duration::from_secs(5), platform.run(ctx, CancellationToken::new())).await;
    match ended {
        Ok(Err(error)) => assert_eq!(error.kind(), "unauthorized", "{error}"),
        other => panic!("expected unauthorized, got {other:?}"),
    }
    let health = platform.health().expect("started");
    assert!(!health.healthy && health.detail.contains("HASS_TOKEN") && !health.detail.contains("wrong"), "{health:?}");
}
