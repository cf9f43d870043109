//! Table tests of the normaliser: Meta's webhook JSON in, events and statuses out.

use hermesd_platform::{AttachmentKind, DeliveryStatus, InboundEvent};
use serde_json::{Value, json};

use super::*;

const NUMBER_ID: &str = "106540352242922";

fn webhook(messages: Value, statuses: Value) -> Vec<u8> {
    json!({
        "object": "whatsapp_business_account",
        "entry": [{ "id": "102290129340398", "changes": [{ "field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": { "display_phone_number": "15550783881", "phone_number_id": NUMBER_ID },
            "contacts": [{ "profile": { "name": "Sheena Nelson" }, "wa_id": "16505551234" }],
            "messages": messages,
            "statuses": statuses,
        }}]}],
    })
    .to_string()
    .into_bytes()
}

fn one(message: Value) -> Option<Normalised> {
    let parsed = parse(&webhook(json!([message]), json!([])), NUMBER_ID, 7).expect("parses");
    parsed.events.into_iter().next()
}

fn message(kind: &str, extra: Value) -> Value {
    let mut base = json!({ "from": "16505551234", "id": "wamid.IN1", "timestamp": "1749416383", "type": kind });
    for (key, value) in extra.as_object().expect("object") {
        base[key] = value.clone();
    }
    base
}

fn text_of(normalised: &Normalised) -> &str {
    match &normalised.event {
        InboundEvent::Message { message, .. } => &message.text,
        InboundEvent::Action { .. } => panic!("an action"),
    }
}

#[test]
fn a_text_message_becomes_a_dm_from_its_wa_id() {
    let normalised = one(message("text", json!({ "text": { "body": "Hello" } }))).expect("a message");
    let InboundEvent::Message { event_id, message } = &normalised.event else { panic!("not a message") };
    assert_eq!(event_id, "wamid.IN1");
    assert_eq!(message.chat, ChatRef::new("whatsapp", "16505551234", ChatType::Dm));
    assert_eq!(message.sender.id, "16505551234");
    assert_eq!(message.sender.name.as_deref(), Some("Sheena Nelson"));
    assert_eq!((message.text.as_str(), message.addressed), ("Hello", true));
    assert_eq!(message.timestamp_ms, 1_749_416_383_000);
    assert_eq!(normalised.at_ms, 1_749_416_383_000);
    assert!(normalised.media.is_none() && message.reply_to.is_none());
}

#[test]
fn a_reply_carries_the_message_it_answers() {
    let context = json!({ "context": { "from": "15550783881", "id": "wamid.BOT" }, "text": { "body": "yes" } });
    let normalised = one(message("text", context)).expect("a message");
    let InboundEvent::Message { message, .. } = &normalised.event else { panic!("not a message") };
    let reply = message.reply_to.as_ref().expect("reply context");
    assert_eq!((reply.message_id.as_str(), reply.from_bot), ("wamid.BOT", true));
}

#[test]
fn media_kinds_keep_their_caption_and_name_the_file() {
    let table = [
        (
            "image",
            json!({ "image": { "id": "M1", "mime_type": "image/jpeg", "caption": "look" } }),
            AttachmentKind::Image,
            "image.jpg",
            "look",
        ),
        (
            "audio",
            json!({ "audio": { "id": "M2", "mime_type": "audio/ogg; codecs=opus", "voice": true } }),
            AttachmentKind::Audio,
            "voice.ogg",
            "",
        ),
        (
            "audio",
            json!({ "audio": { "id": "M3", "mime_type": "audio/mpeg" } }),
            AttachmentKind::Audio,
            "audio.mp3",
            "",
        ),
        ("video", json!({ "video": { "id": "M4", "mime_type": "video/mp4" } }), AttachmentKind::Video, "video.mp4", ""),
        (
            "document",
            json!({ "document": { "id": "M5", "mime_type": "application/pdf", "filename": "report.pdf", "caption": "Q3" } }),
            AttachmentKind::Document,
            "report.pdf",
            "Q3",
        ),
        (
            "sticker",
            json!({ "sticker": { "id": "M6", "mime_type": "image/webp", "animated": false } }),
            AttachmentKind::Image,
            "sticker.webp",
            "",
        ),
    ];
    for (kind, extra, want_kind, want_name, want_text) in table {
        let normalised = one(message(kind, extra)).unwrap_or_else(|| panic!("{kind} starts a turn"));
        let media = normalised.media.as_ref().expect("media to fetch");
        assert_eq!((media.kind, media.name.as_str()), (want_kind, want_name), "{kind}");
        assert_eq!(text_of(&normalised), want_text, "{kind}");
    }
}

#[test]
fn locations_and_contacts_become_text() {
    let location = json!({ "location": { "latitude": 37.483307, "longitude": -122.148981, "name": "Pablo Morales", "address": "1 Hacker Way" } });
    let normalised = one(message("location", location)).expect("a message");
    assert_eq!(text_of(&normalised), "[location: 37.483307, -122.148981 — Pablo Morales — 1 Hacker Way]");
    let contacts =
        json!({ "contacts": [{ "name": { "formatted_name": "Ann" }, "phones": [{ "phone": "+1 555 0100" }] }] });
    let normalised = one(message("contacts", contacts)).expect("a message");
    assert_eq!(text_of(&normalised), "[contact shared: Ann (+1 555 0100)]");
}

#[test]
fn a_button_press_is_an_action_with_the_hosts_data() {
    let press = json!({ "context": { "from": "15550783881", "id": "wamid.ASK" },
        "interactive": { "type": "button_reply", "button_reply": { "id": "approve", "title": "Approve" } } });
    let normalised = one(message("interactive", press)).expect("an action");
    let InboundEvent::Action { event_id, action } = &normalised.event else { panic!("not an action") };
    assert_eq!(
        (event_id.as_str(), action.data.as_str(), action.message_id.as_str()),
        ("wamid.IN1", "approve", "wamid.ASK")
    );
    let row = json!({ "interactive": { "type": "list_reply", "list_reply": { "id": "choice:4", "title": "Five" } } });
    let InboundEvent::Action { action, .. } = one(message("interactive", row)).expect("an action").event else {
        panic!("not an action")
    };
    assert_eq!(action.data, "choice:4");
}

#[test]
fn reactions_system_notices_and_unknown_kinds_start_no_turn() {
    for (kind, extra) in [
        ("reaction", json!({ "reaction": { "message_id": "wamid.BOT", "emoji": "👍" } })),
        ("system", json!({ "system": { "body": "changed number" } })),
        ("unsupported", json!({ "errors": [{ "code": 131051 }] })),
        ("text", json!({ "text": { "body": "   " } })),
        ("image", json!({})),
    ] {
        assert!(one(message(kind, extra)).is_none(), "{kind}");
    }
    let broken = parse(
        &webhook(json!([{ "no": "from" }, message("text", json!({ "text": { "body": "ok" } }))]), json!([])),
        NUMBER_ID,
        0,
    )
    .unwrap();
    assert_eq!((broken.events.len(), broken.skipped), (1, 1), "one unreadable message hides no other");
}

#[test]
fn other_numbers_and_non_json_are_not_ours() {
    let parsed =
        parse(&webhook(json!([message("text", json!({ "text": { "body": "hi" } }))]), json!([])), "999", 0).unwrap();
    assert!(parsed.events.is_empty() && parsed.skipped == 1);
    assert!(parse(b"not json", NUMBER_ID, 0).is_none());
}

#[test]
fn statuses_are_reports_and_a_failure_says_why() {
    let statuses = json!([
        { "id": "wamid.OUT1", "status": "sent", "timestamp": "1", "recipient_id": "16505551234" },
        { "id": "wamid.OUT1", "status": "delivered", "timestamp": "2", "recipient_id": "16505551234" },
        { "id": "wamid.OUT1", "status": "read", "timestamp": "3", "recipient_id": "16505551234" },
        { "id": "wamid.OUT2", "status": "failed", "timestamp": "4", "recipient_id": "16505551234",
          "errors": [{ "code": 131047, "title": "Re-engagement message", "message": "Re-engagement message",
                       "error_data": { "details": "Message failed to send because more than 24 hours have passed" } }] },
        { "id": "wamid.OUT3", "status": "deleted" },
    ]);
    let parsed = parse(&webhook(json!([]), statuses), NUMBER_ID, 0).unwrap();
    assert!(parsed.events.is_empty(), "statuses never start turns");
    let kinds: Vec<&str> = parsed.statuses.iter().map(|s| s.status.as_str()).collect();
    assert_eq!(kinds, ["sent", "delivered", "read", "failed"]);
    let DeliveryStatus::Failed(why) = &parsed.statuses[3].status else { panic!("not failed") };
    assert!(why.contains("131047") && why.contains("24-hour"), "{why}");
    assert_eq!(parsed.statuses[3].code, Some(131_047));
}
