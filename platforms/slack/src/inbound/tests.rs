//! Table tests for normalisation: raw Slack event JSON in, expected event out.

use hermesd_platform::conformance::check_normalise_table;
use hermesd_platform::{AttachmentKind, ChatRef, ChatType, InboundAction, InboundEvent, InboundMessage, Sender};
use serde_json::{Value, json};

use super::*;

const BOT: &str = "UBOT";
const TS: &str = "1700000000.000100";

fn bot() -> BotIdentity {
    BotIdentity { user_id: BOT.into(), bot_id: Some("BBOT".into()) }
}

fn rules() -> Rules {
    Rules { require_mention: true, allowed_channels: Vec::new(), edited_messages: false }
}

fn callback(event: Value) -> Callback {
    serde_json::from_value(json!({"type": "event_callback", "event_id": "Ev1", "event": event})).expect("callback")
}

fn message(channel: &str, channel_type: &str, user: &str, text: &str) -> Value {
    json!({"type": "message", "channel": channel, "channel_type": channel_type, "user": user, "text": text, "ts": TS})
}

fn with(mut value: Value, key: &str, field: Value) -> Value {
    value[key] = field;
    value
}

fn chat(channel: &str, chat_type: ChatType, thread: Option<&str>) -> ChatRef {
    ChatRef {
        platform: "slack".into(),
        chat_id: channel.into(),
        chat_type,
        thread_id: thread.map(str::to_owned),
        guild: None,
    }
}

fn expected(event_id: &str, chat: ChatRef, user: &str, text: &str, addressed: bool) -> Option<InboundEvent> {
    Some(InboundEvent::Message {
        event_id: event_id.into(),
        message: InboundMessage {
            profile: None,
            message_id: TS.into(),
            chat,
            sender: Sender { id: user.into(), name: None, is_bot: false, roles: Vec::new() },
            text: text.into(),
            attachments: Vec::new(),
            reply_to: None,
            addressed,
            timestamp_ms: 1_700_000_000_000,
            history: Vec::new(),
            chat_title: None,
            client: None,
        },
    })
}

fn run(rows: &[(&str, Value, Option<InboundEvent>)], rules: &Rules, in_thread: bool) {
    check_normalise_table(rows, |raw| normalise(&callback(raw.clone()), &bot(), rules, in_thread).map(|n| n.event));
}

#[test]
fn messages_normalise_by_conversation_kind() {
    let mention = format!("<@{BOT}> what is up?");
    let thread_reply = with(message("C1", "channel", "U1", "and then?"), "thread_ts", json!("1699999999.000001"));
    let rows = [
        (
            "dm",
            message("D1", "im", "U1", "hello"),
            expected("D1:1700000000.000100", chat("D1", ChatType::Dm, None), "U1", "hello", true),
        ),
        (
            "dm in an assistant thread",
            with(message("D1", "im", "U1", "hi"), "thread_ts", json!("1699.1")),
            expected("D1:1700000000.000100", chat("D1", ChatType::Dm, Some("1699.1")), "U1", "hi", true),
        ),
        (
            "channel mention starts a thread on the message",
            message("C1", "channel", "U1", &mention),
            expected("C1:1700000000.000100", chat("C1", ChatType::Thread, Some(TS)), "U1", "what is up?", true),
        ),
        (
            "app_mention has no channel type",
            json!({"type": "app_mention", "channel": "C1", "user": "U1", "text": mention, "ts": TS}),
            expected("C1:1700000000.000100", chat("C1", ChatType::Thread, Some(TS)), "U1", "what is up?", true),
        ),
        (
            "private channel mention with a command",
            message("G1", "group", "U1", &format!("<@{BOT}>: !stop")),
            expected("G1:1700000000.000100", chat("G1", ChatType::Thread, Some(TS)), "U1", "!stop", true),
        ),
        ("unmentioned channel message", message("C1", "channel", "U1", "just chatting"), None),
        ("unmentioned thread reply, bot not in it", thread_reply.clone(), None),
        ("bot's own message", message("D1", "im", BOT, "echo"), None),
        ("another bot", with(message("D1", "im", "U2", "beep"), "bot_id", json!("B2")), None),
        (
            "bot_message subtype",
            with(message("C1", "channel", "U2", "<@UBOT> x"), "subtype", json!("bot_message")),
            None,
        ),
        (
            "channel join",
            with(message("C1", "channel", "U1", "<@UBOT> joined"), "subtype", json!("channel_join")),
            None,
        ),
        (
            "deletion",
            json!({"type": "message", "subtype": "message_deleted", "channel": "D1", "channel_type": "im", "deleted_ts": TS, "ts": "1700000001.0"}),
            None,
        ),
        ("empty text", message("D1", "im", "U1", "  "), None),
        ("reaction event", json!({"type": "reaction_added", "user": "U1", "reaction": "+1"}), None),
        (
            "escaped text and a mention elsewhere stay as typed",
            message("D1", "im", "U1", "a &lt; b &amp;&amp; <@U7> ok"),
            expected("D1:1700000000.000100", chat("D1", ChatType::Dm, None), "U1", "a < b && <@U7> ok", true),
        ),
    ];
    run(&rows, &rules(), false);
    let in_thread = [(
        "thread reply in a thread the bot is in",
        thread_reply,
        expected(
            "C1:1700000000.000100",
            chat("C1", ChatType::Thread, Some("1699999999.000001")),
            "U1",
            "and then?",
            true,
        ),
    )];
    run(&in_thread, &rules(), true);
}

#[test]
fn rules_gate_channels_and_edits() {
    let open = Rules { require_mention: false, ..rules() };
    let rows = [(
        "unmentioned channel message without require_mention",
        message("C1", "channel", "U1", "just chatting"),
        expected("C1:1700000000.000100", chat("C1", ChatType::Thread, Some(TS)), "U1", "just chatting", false),
    )];
    run(&rows, &open, false);

    let allowed = Rules { allowed_channels: vec!["C1".into()], ..rules() };
    let rows = [
        ("other channel", message("C2", "channel", "U1", "<@UBOT> hi"), None),
        (
            "dm is not a channel",
            message("D9", "im", "U1", "hi"),
            expected("D9:1700000000.000100", chat("D9", ChatType::Dm, None), "U1", "hi", true),
        ),
        (
            "listed channel",
            message("C1", "channel", "U1", "<@UBOT> hi"),
            expected("C1:1700000000.000100", chat("C1", ChatType::Thread, Some(TS)), "U1", "hi", true),
        ),
    ];
    run(&rows, &allowed, false);

    let edit = json!({
        "type": "message", "subtype": "message_changed", "channel": "D1", "channel_type": "im", "ts": "1700000005.0",
        "message": {"type": "message", "user": "U1", "text": "fixed", "ts": TS, "edited": {"user": "U1", "ts": "1700000004.0"}},
    });
    let unfurl = json!({
        "type": "message", "subtype": "message_changed", "channel": "D1", "channel_type": "im", "ts": "1700000005.0",
        "message": {"type": "message", "user": "U1", "text": "see https://x", "ts": TS},
    });
    run(&[("edit ignored by default", edit.clone(), None)], &rules(), false);
    let edits = Rules { edited_messages: true, ..rules() };
    let rows = [
        (
            "edit as a new message",
            edit,
            expected("D1:1700000000.000100:e1700000004.0", chat("D1", ChatType::Dm, None), "U1", "fixed", true),
        ),
        ("an unfurl is not an edit", unfurl, None),
    ];
    run(&rows, &edits, false);
}

#[test]
fn mention_and_message_events_share_one_event_id() {
    let as_message = message("C1", "channel", "U1", "<@UBOT> hi");
    let as_mention = json!({"type": "app_mention", "channel": "C1", "user": "U1", "text": "<@UBOT> hi", "ts": TS});
    let ids: Vec<_> = [as_message, as_mention]
        .into_iter()
        .filter_map(|raw| normalise(&callback(raw), &bot(), &rules(), false))
        .map(|n| n.event.event_id().to_owned())
        .collect();
    assert_eq!(ids, ["C1:1700000000.000100", "C1:1700000000.000100"]);
}

#[test]
fn files_become_requests_and_names_come_from_the_profile() {
    let raw = json!({
        "type": "message", "subtype": "file_share", "channel": "D1", "channel_type": "im", "user": "U1", "text": "", "ts": TS,
        "user_profile": {"display_name": "", "real_name": "Ann Example"},
        "files": [
            {"id": "F1", "name": "cat.png", "mimetype": "image/png", "size": 12, "url_private_download": "http://x/f/F1/cat.png"},
            {"id": "F2", "name": "notes.txt", "mimetype": "text/plain", "url_private": "http://x/f/F2"},
            {"id": "F3", "name": "external", "mimetype": "text/plain"},
        ],
    });
    let normalised = normalise(&callback(raw), &bot(), &rules(), false).expect("a file message");
    let names: Vec<_> = normalised.files.iter().map(|f| (f.id.as_str(), f.kind, f.url.as_str(), f.size)).collect();
    assert_eq!(
        names,
        [
            ("F1", AttachmentKind::Image, "http://x/f/F1/cat.png", Some(12)),
            ("F2", AttachmentKind::Document, "http://x/f/F2", None)
        ]
    );
    assert_eq!(normalised.event.sender().name.as_deref(), Some("Ann Example"));
}

#[test]
fn thread_checks_are_asked_only_for_unmentioned_channel_replies() {
    let reply = with(message("C1", "channel", "U1", "and then?"), "thread_ts", json!("1699.1"));
    assert_eq!(thread_to_check(&callback(reply), &bot()), Some(("C1".into(), "1699.1".into())));
    let parent = with(message("C1", "channel", "U1", "top"), "thread_ts", json!(TS));
    assert_eq!(thread_to_check(&callback(parent), &bot()), None, "a thread's parent is not a reply");
    let mentioned = with(message("C1", "channel", "U1", "<@UBOT> x"), "thread_ts", json!("1699.1"));
    assert_eq!(thread_to_check(&callback(mentioned), &bot()), None);
    let dm = with(message("D1", "im", "U1", "x"), "thread_ts", json!("1699.1"));
    assert_eq!(thread_to_check(&callback(dm), &bot()), None);
}

#[test]
fn button_presses_become_actions_in_the_buttons_thread() {
    let press = |channel: &str, thread: Option<&str>| -> Interaction {
        let mut message = json!({"type": "message", "ts": "1700000009.000200", "user": BOT, "text": "Run it?"});
        if let Some(thread) = thread {
            message["thread_ts"] = json!(thread);
        }
        serde_json::from_value(json!({
            "type": "block_actions",
            "user": {"id": "U1", "username": "ann"},
            "channel": {"id": channel},
            "container": {"type": "message", "message_ts": "1700000009.000200", "channel_id": channel},
            "message": message,
            "actions": [{"action_id": "hermesd:0", "value": "approve", "action_ts": "1700000010.1"}],
        }))
        .expect("interaction")
    };
    let action = |channel: &str, chat_type, thread: Option<&str>| InboundEvent::Action {
        event_id: format!("act:{channel}:1700000009.000200:U1:1700000010.1"),
        action: InboundAction {
            chat: chat(channel, chat_type, thread),
            sender: Sender { id: "U1".into(), name: Some("ann".into()), is_bot: false, roles: Vec::new() },
            message_id: "1700000009.000200".into(),
            data: "approve".into(),
        },
    };
    let got = normalise_interaction(&press("C1", Some(TS)), &bot());
    assert_eq!(got, Some(action("C1", ChatType::Thread, Some(TS))));
    assert_eq!(normalise_interaction(&press("D1", None), &bot()), Some(action("D1", ChatType::Dm, None)));
    let mut other = press("C1", None);
    other.kind = "view_submission".into();
    assert_eq!(normalise_interaction(&other, &bot()), None);
}

#[test]
fn timestamps_read_as_milliseconds() {
    assert_eq!(ts_millis(TS), 1_700_000_000_000);
    assert_eq!(ts_millis("1700000000.123456"), 1_700_000_000_123);
    assert_eq!(ts_millis("1700000000.5"), 1_700_000_000_500);
    assert_eq!(ts_millis("17"), 17_000);
    assert_eq!(ts_millis("x"), 0);
}
