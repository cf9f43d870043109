//! Table tests for the Discord normaliser: gateway JSON in, expected `InboundEvent` out.

use hermesd_platform::conformance::check_normalise_table;
use serde_json::{Value, json};
use serenity::model::application::Interaction;

use super::*;

const BOT: u64 = 900;
const BOT_ROLE: u64 = 777;
const CHANNEL: u64 = 300;
const PARENT: u64 = 200;

fn bot() -> BotIdentity {
    BotIdentity { id: BOT, name: "hermes".into(), roles: vec![BOT_ROLE] }
}

fn rules() -> Rules {
    Rules { require_mention: true, auto_thread: true, ..Rules::default() }
}

fn user(id: u64, bot: bool) -> Value {
    json!({ "id": id.to_string(), "username": format!("u{id}"), "discriminator": "0", "global_name": null,
        "avatar": null, "bot": bot })
}

/// A MESSAGE_CREATE payload; `guild` adds guild id and member roles.
fn raw(id: u64, author: u64, text: &str, guild: bool) -> Value {
    let mut message = json!({ "id": id.to_string(), "channel_id": CHANNEL.to_string(), "author": user(author, false),
        "content": text, "timestamp": "2026-01-02T03:04:05.000000+00:00", "edited_timestamp": null, "tts": false,
        "mention_everyone": false, "mentions": [], "mention_roles": [], "attachments": [], "embeds": [],
        "pinned": false, "type": 0 });
    if guild {
        message["guild_id"] = json!("50");
        message["member"] = json!({ "roles": ["11", "12"], "joined_at": null, "deaf": false, "mute": false,
            "flags": 0, "pending": false });
    }
    message
}

fn with(mut message: Value, key: &str, value: Value) -> Value {
    message[key] = value;
    message
}

fn event(id: u64, chat_type: ChatType, text: &str, roles: &[&str], addressed: bool) -> Option<InboundEvent> {
    let message = InboundMessage {
        profile: None,
        message_id: id.to_string(),
        chat: ChatRef::new("discord", CHANNEL.to_string(), chat_type),
        sender: Sender {
            id: "1".into(),
            name: Some("u1".into()),
            is_bot: false,
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        },
        text: text.into(),
        attachments: Vec::new(),
        reply_to: None,
        addressed,
        timestamp_ms: 1_767_323_045_000,
        history: Vec::new(),
        chat_title: None,
        client: None,
    };
    Some(InboundEvent::Message { event_id: id.to_string(), message })
}

fn normalise(raw: &(Value, Place, Rules)) -> Option<InboundEvent> {
    let message: Message = serde_json::from_value(raw.0.clone()).expect("a valid MESSAGE_CREATE");
    normalise_message(&message, raw.1, &bot(), &raw.2).map(|n| n.event)
}

#[test]
fn messages_normalise_by_place_and_mention() {
    let mentioned = with(raw(3, 1, "<@900> hi", true), "mentions", json!([user(BOT, true)]));
    let by_role = with(raw(4, 1, "<@&777> hi", true), "mention_roles", json!([BOT_ROLE.to_string()]));
    let other_role = with(raw(5, 1, "<@&778> hi", true), "mention_roles", json!(["778"]));
    let open = rules();
    let lax = Rules { require_mention: false, ..rules() };
    let thread = Place::Thread { parent: Some(PARENT), bot_owned: false };
    let bots_thread = Place::Thread { parent: Some(PARENT), bot_owned: true };
    let guild_roles = ["11", "12"];
    let rows = [
        (
            "a dm is always addressed",
            (raw(1, 1, "hello", false), Place::Dm, open.clone()),
            event(1, ChatType::Dm, "hello", &[], true),
        ),
        ("an unmentioned channel message is ignored", (raw(2, 1, "chatter", true), Place::Channel, open.clone()), None),
        (
            "a mention addresses the bot and is dropped from the text",
            (mentioned.clone(), Place::Channel, open.clone()),
            event(3, ChatType::Group, "hi", &guild_roles, true),
        ),
        (
            "a mention of the bot's role addresses it",
            (by_role, Place::Channel, open.clone()),
            event(4, ChatType::Group, "<@&777> hi", &guild_roles, true),
        ),
        ("another role does not", (other_role, Place::Channel, open.clone()), None),
        (
            "without require_mention the chatter passes, unaddressed",
            (raw(2, 1, "chatter", true), Place::Channel, lax),
            event(2, ChatType::Group, "chatter", &guild_roles, false),
        ),
        (
            "a thread the bot opened needs no mention",
            (raw(6, 1, "more", true), bots_thread, open.clone()),
            event(6, ChatType::Thread, "more", &guild_roles, true),
        ),
        ("someone else's thread does", (raw(7, 1, "more", true), thread, open.clone()), None),
        (
            "a mention in someone else's thread passes",
            (mentioned.clone(), thread, open.clone()),
            event(3, ChatType::Thread, "hi", &guild_roles, true),
        ),
        ("bots are ignored", (with(raw(8, 1, "hi", false), "author", user(2, true)), Place::Dm, open.clone()), None),
        (
            "the bot itself is ignored",
            (with(raw(9, 1, "hi", false), "author", user(BOT, true)), Place::Dm, open.clone()),
            None,
        ),
        (
            "webhook posts are ignored",
            (with(raw(10, 1, "hi", false), "webhook_id", json!("44")), Place::Dm, open.clone()),
            None,
        ),
        (
            "system messages are ignored",
            (with(raw(11, 1, "hi", false), "type", json!(7)), Place::Dm, open.clone()),
            None,
        ),
        ("an empty message is ignored", (raw(12, 1, "  ", false), Place::Dm, open.clone()), None),
    ];
    check_normalise_table(&rows, normalise);
}

#[test]
fn replies_to_the_bot_address_it_and_keep_context() {
    let original = with(raw(20, 1, "earlier answer", true), "author", user(BOT, true));
    let reply = with(with(raw(21, 1, "and then?", true), "referenced_message", original), "type", json!(19));
    let message: Message = serde_json::from_value(reply).expect("valid");
    let normalised = normalise_message(&message, Place::Channel, &bot(), &rules()).expect("addressed by the reply");
    assert!(normalised.open_thread, "a reply to the bot in a channel opens a thread like a mention");
    let InboundEvent::Message { message, .. } = normalised.event else { panic!("a message") };
    let context = message.reply_to.expect("reply context");
    assert_eq!((context.message_id.as_str(), context.from_bot), ("20", true));
    assert_eq!(context.text.as_deref(), Some("earlier answer"));
}

#[test]
fn only_mentions_in_text_channels_open_threads() {
    let mentioned = with(raw(3, 1, "<@900> hi", true), "mentions", json!([user(BOT, true)]));
    let message: Message = serde_json::from_value(mentioned).expect("valid");
    let thread = Place::Thread { parent: Some(PARENT), bot_owned: false };
    let cases = [
        (Place::Channel, rules(), true),
        (thread, rules(), false),
        (Place::Channel, Rules { auto_thread: false, ..rules() }, false),
    ];
    for (place, rules, want) in cases {
        let got = normalise_message(&message, place, &bot(), &rules).map(|n| n.open_thread);
        assert_eq!(got, Some(want), "{place:?} auto_thread={}", rules.auto_thread);
    }
    let mut event = normalise_message(&message, Place::Channel, &bot(), &rules()).expect("kept").event;
    move_into_thread(&mut event, 3);
    assert_eq!(event.chat(), &ChatRef::new("discord", "3", ChatType::Thread));
    assert_eq!(event.event_id(), "3", "the event id stays the message id");
}

#[test]
fn channel_filters_apply_to_channels_and_their_threads() {
    let message: Message =
        serde_json::from_value(with(raw(3, 1, "<@900> hi", true), "mentions", json!([user(BOT, true)])))
            .expect("valid");
    let ignored = Rules { ignored_channels: vec![PARENT], ..rules() };
    let allowed_elsewhere = Rules { allowed_channels: vec![999], ..rules() };
    let allowed_parent = Rules { allowed_channels: vec![PARENT], ..rules() };
    let thread = Place::Thread { parent: Some(PARENT), bot_owned: true };
    assert!(normalise_message(&message, thread, &bot(), &ignored).is_none(), "a thread under an ignored channel");
    assert!(normalise_message(&message, Place::Channel, &bot(), &allowed_elsewhere).is_none());
    assert!(normalise_message(&message, thread, &bot(), &allowed_parent).is_some());
    let dm: Message = serde_json::from_value(raw(1, 1, "hello", false)).expect("valid");
    assert!(normalise_message(&dm, Place::Dm, &bot(), &allowed_elsewhere).is_some(), "filters are for guilds");
}

#[test]
fn attachments_become_file_requests() {
    let files = json!([{ "id": "61", "filename": "cat.png", "size": 2048, "url": "http://127.0.0.1/a/cat.png",
        "proxy_url": "http://127.0.0.1/a/cat.png", "content_type": "image/png" },
        { "id": "62", "filename": "notes.txt", "size": 10, "url": "http://127.0.0.1/a/notes.txt",
        "proxy_url": "http://127.0.0.1/a/notes.txt" }]);
    let message: Message = serde_json::from_value(with(raw(1, 1, "", false), "attachments", files)).expect("valid");
    let normalised = normalise_message(&message, Place::Dm, &bot(), &rules()).expect("files alone are a message");
    let kinds: Vec<_> = normalised.files.iter().map(|f| (f.id, f.kind, f.size)).collect();
    assert_eq!(kinds, vec![(61, AttachmentKind::Image, 2048), (62, AttachmentKind::Document, 10)]);
}

#[test]
fn button_presses_normalise_to_actions() {
    let press = json!({ "id": "70", "application_id": "900", "type": 3,
        "data": { "custom_id": "approve:abc", "component_type": 2 }, "channel_id": CHANNEL.to_string(),
        "token": "secret-interaction-token", "version": 1, "message": raw(69, BOT, "approve?", false),
        "locale": "en-US", "entitlements": [], "attachment_size_limit": 1000, "user": user(1, false) });
    let Ok(Interaction::Component(press)) = serde_json::from_value::<Interaction>(press) else {
        panic!("a component interaction")
    };
    let got = normalise_press(&press, Place::Dm).expect("a person pressed it");
    let InboundEvent::Action { event_id, action } = got else { panic!("an action") };
    assert_eq!(event_id, "ia:70");
    assert_eq!((action.message_id.as_str(), action.data.as_str()), ("69", "approve:abc"));
    assert_eq!(action.chat, ChatRef::new("discord", CHANNEL.to_string(), ChatType::Dm));
    assert_eq!(action.sender.id, "1");
}

#[test]
fn a_leading_bot_mention_is_dropped_so_commands_parse() {
    let bot = bot();
    assert_eq!(clean_text("<@900> /status", &bot), "/status");
    assert_eq!(clean_text("<@!900>   hi", &bot), "hi");
    assert_eq!(clean_text("ask <@900> again", &bot), "ask @hermes again");
    assert_eq!(clean_text("<@901> hi", &bot), "<@901> hi");
}
