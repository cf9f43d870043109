//! Table tests of the envelope normaliser: signal-cli's JSON in, the expected event out.

use hermesd_platform::conformance::check_normalise_table;
use serde_json::{Value, json};

use super::*;

const ME: &str = "+15550001111";
const ME_UUID: &str = "00000000-0000-4000-8000-000000000001";
const ALICE: &str = "a11ce000-0000-4000-8000-00000000000a";

fn rules() -> Rules {
    Rules {
        account: ME.into(),
        account_uuid: Some(ME_UUID.into()),
        require_mention: true,
        patterns: vec!["hermes".into()],
    }
}

fn envelope(data: Value) -> Value {
    json!({"account": ME, "envelope": {
        "source": "+15557654321", "sourceNumber": "+15557654321", "sourceUuid": ALICE, "sourceName": "Alice",
        "sourceDevice": 1, "timestamp": 1_700_000_000_123_i64, "serverReceivedTimestamp": 1, "serverDeliveredTimestamp": 2,
        "dataMessage": data}})
}

fn message(chat: ChatRef, text: &str, addressed: bool) -> InboundEvent {
    let message_id = format!("{ALICE}:1700000000123");
    InboundEvent::Message {
        event_id: message_id.clone(),
        message: InboundMessage {
            profile: None,
            message_id,
            chat,
            sender: Sender {
                id: ALICE.into(),
                name: Some("Alice".into()),
                is_bot: false,
                roles: vec!["+15557654321".into()],
            },
            text: text.into(),
            attachments: Vec::new(),
            reply_to: None,
            addressed,
            timestamp_ms: 1_700_000_000_123,
            history: Vec::new(),
            chat_title: None,
            client: None,
        },
    }
}

fn dm() -> ChatRef {
    ChatRef::new("signal", ALICE, ChatType::Dm)
}

fn group() -> ChatRef {
    ChatRef::new("signal", "group:R3JvdXA=", ChatType::Group)
}

fn in_group(mut event: InboundEvent) -> InboundEvent {
    if let InboundEvent::Message { message, .. } = &mut event {
        message.chat_title = Some("Team".into());
    }
    event
}

#[test]
fn envelopes_normalise_as_the_table_says() {
    let group_info = json!({"groupId": "R3JvdXA=", "groupName": "Team", "revision": 3, "type": "DELIVER"});
    let rows = vec![
        (
            "dm text",
            envelope(json!({"timestamp": 1_700_000_000_123_i64, "message": "hello"})),
            Some(message(dm(), "hello", true)),
        ),
        (
            "group without mention",
            envelope(json!({"timestamp": 1, "message": "lunch?", "groupInfo": group_info})),
            None,
        ),
        (
            "group mention of our uuid",
            envelope(json!({"message": "\u{FFFC} status?", "groupInfo": group_info,
                "mentions": [{"name": ME, "number": ME, "uuid": ME_UUID, "start": 0, "length": 1}]})),
            Some(in_group(message(group(), "@+15550001111 status?", true))),
        ),
        (
            "group pattern",
            envelope(json!({"message": "Hermes, status?", "groupInfo": group_info})),
            Some(in_group(message(group(), "Hermes, status?", true))),
        ),
        (
            "group command",
            envelope(json!({"message": "/status", "groupInfo": group_info})),
            Some(in_group(message(group(), "/status", true))),
        ),
        ("reaction", envelope(json!({"message": null, "reaction": {"emoji": "👍", "targetSentTimestamp": 5}})), None),
        ("remote delete", envelope(json!({"remoteDelete": {"timestamp": 5}})), None),
        ("group update without text", envelope(json!({"groupInfo": group_info})), None),
        (
            "typing",
            json!({"envelope": {"sourceUuid": ALICE, "timestamp": 5, "typingMessage": {"action": "STARTED"}}}),
            None,
        ),
        (
            "receipt",
            json!({"envelope": {"sourceUuid": ALICE, "timestamp": 5, "receiptMessage": {"isDelivery": true}}}),
            None,
        ),
        (
            "sync sent message",
            json!({"envelope": {"sourceUuid": ME_UUID, "timestamp": 5, "syncMessage": {"sentMessage": {"message": "x"}}}}),
            None,
        ),
        (
            "our own message",
            json!({"envelope": {"sourceNumber": ME, "sourceUuid": ME_UUID, "timestamp": 5, "dataMessage": {"message": "x"}}}),
            None,
        ),
        ("no envelope", json!({"exception": {"message": "x"}}), None),
    ];
    check_normalise_table(&rows, |raw| normalise(raw, &rules()).map(|n| n.event));
}

#[test]
fn quotes_attachments_and_ids() {
    let raw = envelope(json!({
        "message": "what about this?",
        "quote": {"id": 1_699_999_999_000_i64, "author": ME, "authorNumber": ME, "authorUuid": ME_UUID, "text": "earlier answer"},
        "attachments": [
            {"contentType": "image/jpeg", "filename": "cat.jpg", "id": "att1.jpg", "size": 2048},
            {"contentType": "application/pdf", "id": "att2", "size": null}
        ],
        "groupInfo": {"groupId": "R3JvdXA=", "groupName": "Team"}
    }));
    let normalised = normalise(&raw, &rules()).expect("a message");
    let InboundEvent::Message { event_id, message } = &normalised.event else { panic!("a message") };
    assert_eq!(event_id, &format!("{ALICE}:1700000000123"));
    let quoted = message.reply_to.clone().expect("a quote");
    assert_eq!(quoted.message_id, format!("{ME_UUID}:1699999999000"));
    assert!(quoted.from_bot && message.addressed, "a reply to the bot addresses it");
    assert_eq!(quoted.text.as_deref(), Some("earlier answer"));
    assert_eq!(normalised.group_id.as_deref(), Some("R3JvdXA="));
    assert_eq!(normalised.author, ALICE);
    assert_eq!(normalised.files.len(), 2);
    assert_eq!(normalised.files[0].kind, AttachmentKind::Image);
    assert_eq!((normalised.files[0].name.as_str(), normalised.files[0].size), ("cat.jpg", Some(2048)));
    assert_eq!((normalised.files[1].name.as_str(), normalised.files[1].size), ("att2", None));
}

#[test]
fn without_require_mention_every_group_message_addresses_the_bot() {
    let relaxed = Rules { require_mention: false, ..rules() };
    let raw = envelope(json!({"message": "lunch?", "groupInfo": {"groupId": "R3JvdXA="}}));
    let normalised = normalise(&raw, &relaxed).expect("a message");
    let InboundEvent::Message { message, .. } = normalised.event else { panic!("a message") };
    assert!(message.addressed);
}

#[test]
fn a_sender_without_uuid_is_known_by_number() {
    let raw = json!({"envelope": {"sourceNumber": "+15557654321", "timestamp": 9, "dataMessage": {"message": "hi"}}});
    let normalised = normalise(&raw, &rules()).expect("a message");
    assert_eq!(normalised.event.sender().id, "+15557654321");
    assert!(normalised.event.sender().roles.is_empty());
    assert_eq!(normalised.event.event_id(), "+15557654321:9");
}

mod props {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    proptest! {
        #[test]
        fn arbitrary_envelopes_never_panic(text in ".{0,40}", ts in any::<i64>(), group in proptest::option::of("[A-Za-z0-9+/=]{0,12}"),
            start in any::<i64>()) {
            let data = json!({"message": text, "timestamp": ts, "groupInfo": group.map(|g| json!({"groupId": g})),
                "mentions": [{"uuid": ME_UUID, "start": start, "length": 1}], "attachments": [{"id": text}]});
            let _ = normalise(&envelope(data), &rules());
        }
    }
}
