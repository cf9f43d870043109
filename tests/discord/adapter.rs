//! The Discord adapter on its own against the fake Discord: the shared conformance checks from
//! `hermesd-platform`, plus typing throttling, reactions, attachments, health, a refused token,
//! and a sender the ingress does not admit.

use std::sync::Arc;
use std::time::Duration;

use hermesd_discord::{DiscordPlatform, DiscordSettings, Reactions};
use hermesd_platform::chunk::measure;
use hermesd_platform::conformance::{
    RecordingIngress, check_capabilities, check_reports_rate_limit, check_run_honours_cancel, check_send_chunks,
};
use hermesd_platform::{
    Admission, ChatRef, ChatType, InboundEvent, LengthUnit, OutboundKind, OutboundMessage, Platform, PlatformContext,
    PlatformError,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::eventually;
use crate::support::fake_discord::{Channel, FakeDiscord, File};
use crate::{TOKEN, WAIT, ann};

fn settings(dc: &FakeDiscord, media: &std::path::Path) -> DiscordSettings {
    DiscordSettings {
        token: TOKEN.into(),
        api_url: dc.base_url(),
        media_dir: media.join("media").join("discord"),
        ..DiscordSettings::default()
    }
}

fn dm_chat(id: u64) -> ChatRef {
    ChatRef::new("discord", id.to_string(), ChatType::Dm)
}

fn reply(chat: ChatRef, text: &str, reply_to: Option<u64>, kind: OutboundKind) -> OutboundMessage {
    OutboundMessage {
        chat,
        text: text.into(),
        reply_to: reply_to.map(|id| id.to_string()),
        kind,
        buttons: Vec::new(),
        chunk: (0, 1),
        file: None,
    }
}

/// Runs the adapter with a recording ingress until the returned token is cancelled.
fn run(platform: &Arc<DiscordPlatform>) -> (Arc<RecordingIngress>, CancellationToken) {
    let ingress = RecordingIngress::new();
    let ctx = PlatformContext { ingress: ingress.clone() };
    let cancel = CancellationToken::new();
    let (platform, token) = (Arc::clone(platform), cancel.clone());
    tokio::spawn(async move { platform.run(ctx, token).await });
    (ingress, cancel)
}

#[test]
fn capabilities_are_discords() {
    let platform = DiscordPlatform::new(DiscordSettings::default());
    let caps = platform.capabilities();
    check_capabilities(&caps);
    assert_eq!(platform.name(), "discord");
    assert_eq!((caps.max_message_len, caps.length_unit), (2000, LengthUnit::Chars));
    assert!(caps.edits && caps.threads && caps.buttons && caps.typing && caps.interactive);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_connects_and_stops_promptly_on_cancel() {
    let dc = FakeDiscord::builder().token(TOKEN).start().await;
    let dir = tempfile::tempdir().unwrap();
    let platform = Arc::new(DiscordPlatform::new(settings(&dc, dir.path())));
    let dm = Channel::dm(7101);
    // Dispatched before the adapter connects: delivered after READY.
    let queued = dc.post(&dm, &ann(), "queued before start");
    let ingress = check_run_honours_cancel(platform.clone(), Duration::from_millis(1500), Duration::from_secs(2)).await;
    let events = ingress.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].chat(), &dm_chat(dm.id));
    assert_eq!(dc.identifies().len(), 1);
    let cursor = ingress.cursor("discord");
    assert_eq!(cursor, Some(format!("[[{},0,{queued}]]", dm.id)), "the newest message seen, saved for catch-up");
    let health = platform.health().expect("run started");
    assert!(health.healthy && health.detail.starts_with("last dispatch"), "{health:?}");
    assert!(eventually(WAIT, || !dc.connected()).await, "the socket closed with the adapter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_replies_are_sent_in_chunks_within_2000_characters() {
    let dc = FakeDiscord::builder().token(TOKEN).start().await;
    let dir = tempfile::tempdir().unwrap();
    let platform = DiscordPlatform::new(settings(&dc, dir.path()));
    let dm = Channel::dm(7102);
    dc.add_channel(&dm);
    let text: String = "Emoji 👍🏽 and family 👨‍👩‍👧‍👦 count as several characters. ".repeat(200);
    let refs = check_send_chunks(&platform, &dm_chat(dm.id), &text).await;
    let sent = dc.sent_to(dm.id);
    assert!(refs.len() >= 4, "{} chunks", refs.len());
    assert_eq!(sent.len(), refs.len());
    assert!(sent.iter().all(|s| measure(&s.content, LengthUnit::Chars) <= 2000));
    assert_eq!(refs[0].message_id, sent[0].id.to_string(), "the id Discord returned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_reported_as_rate_limited_and_a_global_one_holds_every_channel() {
    let dc = FakeDiscord::builder().token(TOKEN).start().await;
    let dir = tempfile::tempdir().unwrap();
    let platform = DiscordPlatform::new(settings(&dc, dir.path()));
    let (one, two) = (Channel::dm(7103), Channel::dm(7104));
    dc.add_channel(&one);
    dc.add_channel(&two);
    let limited = json!({ "message": "You are being rate limited.", "retry_after": 3, "global": false });
    dc.fail_next("create_message", 1, 429, limited);
    let message = reply(dm_chat(one.id), "hi", None, OutboundKind::Reply);
    check_reports_rate_limit(|| platform.send(&message), Duration::from_secs(3)).await;
    assert!(platform.send(&message).await.is_ok(), "a per-route limit holds nothing else");

    let global = json!({ "message": "You are being rate limited.", "retry_after": 30, "global": true });
    dc.fail_next("create_message", 1, 429, global);
    assert!(matches!(platform.send(&message).await, Err(PlatformError::RateLimited { .. })));
    let calls = dc.calls().len();
    let elsewhere = reply(dm_chat(two.id), "hi", None, OutboundKind::Reply);
    let held = platform.send(&elsewhere).await;
    assert!(matches!(held, Err(PlatformError::RateLimited { retry_after }) if retry_after > Duration::from_secs(25)));
    assert_eq!(dc.calls().len(), calls, "held without asking Discord");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_is_sent_at_most_every_eight_seconds_per_channel() {
    let dc = FakeDiscord::builder().token(TOKEN).start().await;
    let dir = tempfile::tempdir().unwrap();
    let platform = DiscordPlatform::new(settings(&dc, dir.path()));
    let chat = dm_chat(7105);
    for _ in 0..3 {
        platform.typing(&chat).await.unwrap();
    }
    platform.typing(&dm_chat(7106)).await.unwrap();
    assert_eq!(dc.typing(), vec![7105, 7106], "the indicator still shows: repeats skipped");
    dc.fail_next("typing", 1, 502, json!({ "message": "bad gateway", "code": 0 }));
    let failed = platform.typing(&dm_chat(7107)).await;
    assert!(matches!(failed, Err(PlatformError::Transient(_))), "{failed:?}");
    platform.typing(&dm_chat(7107)).await.unwrap();
    assert_eq!(dc.typing(), vec![7105, 7106, 7107], "a failed call is not counted as shown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reactions_mark_received_done_and_failed_when_configured() {
    let dc = FakeDiscord::builder().token(TOKEN).start().await;
    let dir = tempfile::tempdir().unwrap();
    let reactions = Reactions { received: Some("👀".into()), done: Some("✅".into()), failed: Some("❌".into()) };
    let platform = Arc::new(DiscordPlatform::new(DiscordSettings { reactions, ..settings(&dc, dir.path()) }));
    let (ingress, cancel) = run(&platform);
    let dm = Channel::dm(7108);
    let asked = dc.post(&dm, &ann(), "react please");
    assert_eq!(ingress.wait_for(1, WAIT).await.len(), 1);
    assert!(eventually(WAIT, || dc.reactions() == vec![(dm.id, asked, "👀".to_owned())]).await, "{:?}", dc.reactions());

    let mut first = reply(dm_chat(dm.id), "part one", Some(asked), OutboundKind::Reply);
    first.chunk = (0, 2);
    platform.send(&first).await.unwrap();
    assert_eq!(dc.reactions().len(), 1, "no reaction before the last chunk");
    let last = OutboundMessage { chunk: (1, 2), text: "part two".into(), ..first };
    platform.send(&last).await.unwrap();
    platform.send(&reply(dm_chat(dm.id), "it broke", Some(asked), OutboundKind::Error)).await.unwrap();
    platform.send(&reply(dm_chat(dm.id), "queued (1)", Some(asked), OutboundKind::Notice)).await.unwrap();
    let emoji: Vec<String> = dc.reactions().into_iter().map(|(_, _, e)| e).collect();
    assert_eq!(emoji, vec!["👀", "✅", "❌"]);
    cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_are_downloaded_with_a_size_cap() {
    let dc = FakeDiscord::builder().token(TOKEN).start().await;
    let dir = tempfile::tempdir().unwrap();
    let platform =
        Arc::new(DiscordPlatform::new(DiscordSettings { max_file_bytes: 1000, ..settings(&dc, dir.path()) }));
    let (ingress, cancel) = run(&platform);
    let small = File { name: "note.txt".into(), mime: "text/plain".into(), bytes: b"remember the milk".to_vec() };
    let big = File { name: "huge.png".into(), mime: "image/png".into(), bytes: vec![7; 5000] };
    dc.post_files(&Channel::dm(7109), &ann(), "two files", &[small, big]);
    let events = ingress.wait_for(1, WAIT).await;
    let Some(InboundEvent::Message { message, .. }) = events.first() else { panic!("{events:?}") };
    assert_eq!(message.attachments.len(), 1, "{message:?}");
    let saved = &message.attachments[0];
    assert!(saved.path.starts_with("media/discord/7109/"), "{saved:?}");
    assert_eq!(std::fs::read(dir.path().join(&saved.path)).unwrap(), b"remember the milk");
    assert!(message.text.contains("[file too large: huge.png"), "{}", message.text);
    cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_the_ingress_does_not_admit_costs_no_download_and_no_accept() {
    let dc = FakeDiscord::builder().token(TOKEN).start().await;
    let dir = tempfile::tempdir().unwrap();
    let platform = Arc::new(DiscordPlatform::new(settings(&dc, dir.path())));
    let (ingress, cancel) = run(&platform);
    ingress.refuse("3003");
    let file = File { name: "note.txt".into(), mime: "text/plain".into(), bytes: b"not for strangers".to_vec() };
    let stranger = crate::support::fake_discord::User::new(3003, "stranger");
    dc.post_files(&Channel::dm(7110), &stranger, "take this", &[file]);
    dc.post(&Channel::dm(7111), &ann(), "after");
    // Two dispatches close together may reach the adapter in either order: wait for both checks.
    let checked = || ingress.admissions().into_iter().map(|(_, a)| a).collect::<Vec<Admission>>();
    assert!(eventually(WAIT, || checked().len() == 2).await, "{:?}", checked());
    let mut admissions = checked();
    admissions.sort_by_key(|a| *a != Admission::Pairing);
    assert_eq!(admissions, [Admission::Pairing, Admission::Admit]);
    // Dispatches are handled one after another, so a later admitted message proves the refused
    // one is finished.
    dc.post(&Channel::dm(7111), &ann(), "later");
    let events = ingress.wait_for(2, WAIT).await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events.iter().all(|e| e.sender().id == ann().id.to_string()), "{events:?}");
    assert!(!dc.calls().iter().any(|c| c.contains("/attachments/")), "{:?}", dc.calls());
    assert!(!dir.path().join("media").exists());
    cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_ends_run_as_unauthorized() {
    let dc = FakeDiscord::builder().token("another-token").start().await;
    let dir = tempfile::tempdir().unwrap();
    let platform = DiscordPlatform::new(settings(&dc, dir.path()));
    let ctx = PlatformContext { ingress: RecordingIngress::new() };
    let ended = tokio::time::timeout(WAIT, platform.run(ctx, CancellationToken::new())).await;
    assert!(matches!(ended, Ok(Err(PlatformError::Unauthorized(ref m))) if !m.contains(TOKEN)), "{ended:?}");
    assert!(dc.identifies().is_empty(), "no gateway connection without a valid token");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_replace_the_text_of_the_message_sent() {
    let dc = FakeDiscord::builder().token(TOKEN).start().await;
    let dir = tempfile::tempdir().unwrap();
    let platform = DiscordPlatform::new(settings(&dc, dir.path()));
    let dm = Channel::dm(7110);
    dc.add_channel(&dm);
    let sent = platform.send(&reply(dm_chat(dm.id), "working…", None, OutboundKind::Progress)).await.unwrap();
    platform.edit(&sent, "still working @everyone").await.unwrap();
    let edits = dc.edits();
    assert_eq!(edits.len(), 1);
    assert_eq!(edits[0].content, "still working @everyone");
    assert_eq!(edits[0].allowed_mentions["parse"], json!(["users"]), "an edit never pings everyone");
    assert_eq!((edits[0].channel, edits[0].message.to_string()), (dm.id, sent.message_id));
    let missing = hermesd_platform::MessageRef { chat: dm_chat(dm.id), message_id: "not-an-id".into() };
    assert!(matches!(platform.edit(&missing, "x").await, Err(PlatformError::Permanent(_))));
}
