//! Outbound calls as the fake Bot API sees them.

use hermesd_platform::{Button, ChatRef, ChatType, MessageRef, OutboundKind, OutboundMessage, Platform, PlatformError};
use hermesd_telegram::TelegramPlatform;
use serde_json::json;

use crate::support::{FakeBotApi, settings};

fn topic() -> ChatRef {
    let mut chat = ChatRef::new("telegram", "-1001", ChatType::Thread);
    chat.thread_id = Some("5".into());
    chat
}

fn message(chat: ChatRef, text: &str) -> OutboundMessage {
    OutboundMessage {
        chat,
        text: text.into(),
        reply_to: None,
        kind: OutboundKind::Reply,
        buttons: Vec::new(),
        chunk: (0, 1),
        file: None,
    }
}

async fn platform() -> (FakeBotApi, TelegramPlatform, tempfile::TempDir) {
    let fake = FakeBotApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = TelegramPlatform::new(settings(&fake, dir.path()));
    (fake, platform, dir)
}

#[tokio::test]
async fn send_uses_html_threads_replies_and_buttons() {
    let (fake, platform, _dir) = platform().await;
    let mut approval = message(topic(), "Run **rm** `a<b`?");
    approval.reply_to = Some("31".into());
    approval.buttons = vec![
        Button { label: "Approve".into(), data: "approve:1".into() },
        Button { label: "Deny".into(), data: "deny:1".into() },
    ];
    let sent = platform.send(&approval).await.expect("sent");
    assert_eq!(sent, MessageRef { chat: topic(), message_id: "1000".into() });
    let body = &fake.calls("sendMessage")[0];
    assert_eq!(body["chat_id"], -1001);
    assert_eq!(body["text"], "Run <b>rm</b> <code>a&lt;b</code>?");
    assert_eq!(body["parse_mode"], "HTML");
    assert_eq!(body["message_thread_id"], 5);
    assert_eq!(body["reply_parameters"]["message_id"], 31);
    assert_eq!(body["reply_parameters"]["allow_sending_without_reply"], true);
    let keyboard = &body["reply_markup"]["inline_keyboard"];
    assert_eq!(keyboard[0][0], json!({"text": "Approve", "callback_data": "approve:1"}));
    assert_eq!(keyboard[0][1], json!({"text": "Deny", "callback_data": "deny:1"}));
}

#[tokio::test]
async fn refused_markup_is_sent_again_as_plain_text() {
    let (fake, platform, _dir) = platform().await;
    let refused = json!({"ok": false, "error_code": 400,
        "description": "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0"});
    fake.answer_next("sendMessage", 1, 400, refused.clone());
    let dm = ChatRef::new("telegram", "42", ChatType::Dm);
    platform.send(&message(dm.clone(), "**bold**")).await.expect("sent as plain text");
    let calls = fake.calls("sendMessage");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1]["text"], "**bold**", "the original text, unconverted");
    assert_eq!(calls[1].get("parse_mode"), None);

    fake.answer_next("editMessageText", 1, 400, refused);
    let target = MessageRef { chat: dm, message_id: "7".into() };
    platform.edit(&target, "_it_").await.expect("edited as plain text");
    let edits = fake.calls("editMessageText");
    assert_eq!((edits[0]["text"].clone(), edits[1]["text"].clone()), (json!("<i>it</i>"), json!("_it_")));
}

#[tokio::test]
async fn edit_treats_not_modified_as_success_and_maps_errors() {
    let (fake, platform, _dir) = platform().await;
    let dm = ChatRef::new("telegram", "42", ChatType::Dm);
    let target = MessageRef { chat: dm.clone(), message_id: "7".into() };
    let not_modified = json!({"ok": false, "error_code": 400, "description": "Bad Request: message is not modified: \
        specified new message content and reply markup are exactly the same as a current content and reply markup of the message"});
    fake.answer_next("editMessageText", 1, 400, not_modified);
    platform.edit(&target, "same").await.expect("not modified is fine");

    let blocked = json!({"ok": false, "error_code": 403, "description": "Forbidden: bot was blocked by the user"});
    fake.answer_next("sendMessage", 1, 403, blocked);
    let outcome = platform.send(&message(dm.clone(), "hi")).await;
    assert!(
        matches!(&outcome, Err(PlatformError::Permanent(detail)) if detail.contains("send to chat 42")),
        "{outcome:?}"
    );

    let not_found = json!({"ok": false, "error_code": 400, "description": "Bad Request: chat not found"});
    fake.answer_next("sendChatAction", 1, 400, not_found);
    assert!(matches!(platform.typing(&dm).await, Err(PlatformError::Permanent(_))));
    platform.typing(&topic()).await.expect("typing in a topic");
    let actions = fake.calls("sendChatAction");
    assert_eq!(actions[1]["action"], "typing");
    assert_eq!(actions[1]["message_thread_id"], 5);
}

#[tokio::test]
async fn network_failures_are_transient_and_never_show_the_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    drop(listener);
    let fake_url_settings = hermesd_telegram::TelegramSettings {
        token: crate::support::TOKEN.into(),
        api_url: url,
        media_dir: dir.path().to_path_buf(),
        ..hermesd_telegram::TelegramSettings::default()
    };
    let platform = TelegramPlatform::new(fake_url_settings);
    let outcome = platform.send(&message(ChatRef::new("telegram", "42", ChatType::Dm), "hi")).await;
    match outcome {
        Err(PlatformError::Transient(detail)) => assert!(!detail.contains(crate::support::TOKEN), "{detail}"),
        other => panic!("expected Transient, got {other:?}"),
    }
}
