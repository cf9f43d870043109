//! Attachments are downloaded before accept, capped in size, and never cost a message; button
//! presses are answered after accept.

use std::sync::Arc;
use std::time::Duration;

use hermesd_platform::{AttachmentKind, InboundEvent, Platform, PlatformContext};
use hermesd_telegram::{TelegramPlatform, TelegramSettings};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::{FakeBotApi, FlakyIngress, settings};

fn with_file(update_id: i64, message_id: i64, field: &str, file: Value) -> Value {
    json!({"update_id": update_id, "message": {"message_id": message_id, "date": 1_700_000_000,
        "chat": {"id": 42, "type": "private", "first_name": "Ann"},
        "from": {"id": 42, "is_bot": false, "first_name": "Ann"}, "caption": "see", field: file}})
}

fn message_of(event: &InboundEvent) -> &hermesd_platform::InboundMessage {
    match event {
        InboundEvent::Message { message, .. } => message,
        InboundEvent::Action { .. } => panic!("expected a message, got {event:?}"),
    }
}

#[tokio::test]
async fn files_are_saved_under_the_media_dir_with_a_cap() {
    let fake = FakeBotApi::start().await;
    let home = tempfile::tempdir().expect("tempdir");
    let media_dir = home.path().join("media").join("telegram");
    let settings = TelegramSettings { max_file_bytes: 1024, ..settings(&fake, &media_dir) };
    fake.add_file("big-photo", "photos/file_1.jpg", 600, &[7u8; 600]);
    fake.add_file("liar", "documents/file_2.bin", 10, &[1u8; 2000]);
    let photo = json!([{"file_id": "thumb", "file_unique_id": "ut", "width": 90, "height": 90, "file_size": 100},
        {"file_id": "big-photo", "file_unique_id": "ubig", "width": 800, "height": 600, "file_size": 600}]);
    let huge = json!({"file_id": "huge", "file_unique_id": "uh", "file_name": "movie.mkv", "file_size": 5_242_880});
    // Telegram said 10 bytes; the download is 2000, over the cap.
    let liar = json!({"file_id": "liar", "file_unique_id": "ul", "file_name": "a.bin", "file_size": 10});
    let press = json!({"update_id": 4, "callback_query": {"id": "cbq9", "chat_instance": "ci", "data": "approve:1",
        "from": {"id": 42, "is_bot": false, "first_name": "Ann"},
        "message": {"message_id": 70, "date": 1_700_000_000, "chat": {"id": 42, "type": "private", "first_name": "Ann"},
            "text": "Approve?"}}});
    fake.push_updates([
        with_file(1, 61, "photo", photo),
        with_file(2, 62, "document", huge),
        with_file(3, 63, "document", liar),
        press,
    ]);
    let platform = Arc::new(TelegramPlatform::new(settings));
    let ingress = FlakyIngress::new(0);
    let ctx = PlatformContext { ingress: ingress.clone() };
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (platform, cancel) = (platform.clone(), cancel.clone());
        async move { platform.run(ctx, cancel).await }
    });
    let events = ingress.inner.wait_for(4, Duration::from_secs(10)).await;
    assert_eq!(events.len(), 4, "{events:#?}");

    let photo = message_of(&events[0]);
    assert_eq!(photo.text, "see");
    assert_eq!(photo.attachments.len(), 1);
    let attachment = &photo.attachments[0];
    assert_eq!(attachment.kind, AttachmentKind::Image);
    assert_eq!(attachment.path, "media/telegram/42/ubig_photo.jpg", "relative to the data dir");
    assert_eq!(attachment.size, 600);
    let saved = std::fs::read(home.path().join(&attachment.path)).expect("file saved");
    assert_eq!(saved, vec![7u8; 600]);

    let huge = message_of(&events[1]);
    assert!(huge.attachments.is_empty());
    assert_eq!(huge.text, "see\n[file too large: movie.mkv, 5.0 MB]");
    let fetched: Vec<_> = fake.calls("getFile").iter().map(|b| b["file_id"].clone()).collect();
    assert_eq!(fetched, [json!("big-photo"), json!("liar")], "an oversized file is not even looked up");

    let liar = message_of(&events[2]);
    assert!(liar.attachments.is_empty());
    assert_eq!(liar.text, "see\n[attachment download failed: a.bin]");
    assert!(!media_dir.join("42").join("ul_a.bin").exists());
    assert!(!media_dir.join("42").join("ul_a.bin.part").exists(), "no partial file left");

    assert!(matches!(&events[3], InboundEvent::Action { event_id, .. } if event_id == "cb:cbq9"));
    let answered = fake.wait_calls("answerCallbackQuery", 1, Duration::from_secs(5)).await;
    assert_eq!(answered[0]["callback_query_id"], "cbq9");
    assert_eq!(fake.downloads(), 2);

    cancel.cancel();
    assert!(tokio::time::timeout(Duration::from_secs(2), run).await.is_ok());
}
