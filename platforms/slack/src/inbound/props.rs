//! Properties of the event normaliser over generated Slack events: any envelope keeps the
//! promises the fuzz target checks (crate::fuzzing), bots are never heard, a DM keeps its text
//! (entities decoded), and in a channel only a mention of the bot, an `app_mention` or a
//! thread the bot is in addresses it.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

const BOT: &str = "UBOT";

fn bot() -> BotIdentity {
    BotIdentity { user_id: BOT.into(), bot_id: Some("BBOT".into()) }
}

/// Message text as Slack sends it: words, entities, mentions of the bot and of others.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-zA-Z0-9]{1,8}",
        3 => Just(" ".to_owned()),
        1 => prop::sample::select(vec![
            "<@UBOT>", "<@UBOT|hermes>", "<@UBOTX>", "<@U2>", "&lt;", "&gt;", "&amp;", "&amp;lt;", ":", ",", "\n", "é",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(piece, 1..12).prop_map(|pieces| pieces.concat())
}

/// An event callback of any kind the normaliser reads, from a person or a bot.
fn callback() -> impl Strategy<Value = Value> {
    let kind = prop::sample::select(vec!["message", "app_mention", "reaction_added"]);
    let subtype =
        prop::option::of(prop::sample::select(vec!["file_share", "bot_message", "message_changed", "channel_join"]));
    let channel = prop::sample::select(vec![
        ("C1", Some("channel")),
        ("C2", Some("group")),
        ("D1", Some("im")),
        ("D2", None),
        ("C3", None),
    ]);
    let user = prop::sample::select(vec![Some("U1"), Some("UBOT"), Some(""), None]);
    let thread = prop::option::of(prop::sample::select(vec!["1700000000.000100", "1690000000.000000"]));
    (kind, subtype, channel, user, any::<bool>(), text(), thread, any::<bool>()).prop_map(
        |(kind, subtype, (channel, channel_type), user, from_bot, text, thread, edited)| {
            let mut inner = json!({"type": "message", "text": text, "ts": "1700000000.000100"});
            if let Some(user) = user {
                inner["user"] = json!(user);
            }
            if from_bot {
                inner["bot_id"] = json!("B9");
            }
            if let Some(thread) = thread {
                inner["thread_ts"] = json!(thread);
            }
            if edited {
                inner["edited"] = json!({"ts": "1700000005.000000"});
            }
            let mut event = json!({"type": kind, "channel": channel});
            if let Some(channel_type) = channel_type {
                event["channel_type"] = json!(channel_type);
            }
            match subtype {
                Some("message_changed") => {
                    event["subtype"] = json!("message_changed");
                    event["message"] = inner;
                }
                Some(other) => {
                    inner["subtype"] = json!(other);
                    for (key, value) in inner.as_object().expect("an object") {
                        event[key.as_str()] = value.clone();
                    }
                    event["type"] = json!(kind);
                }
                None => {
                    for (key, value) in inner.as_object().expect("an object") {
                        event[key.as_str()] = value.clone();
                    }
                    event["type"] = json!(kind);
                }
            }
            json!({"type": "event_callback", "event_id": "Ev1", "event": event})
        },
    )
}

fn parse(body: &Value) -> Result<Callback, TestCaseError> {
    serde_json::from_value(body.clone()).map_err(|error| TestCaseError::fail(format!("{error}: {body}")))
}

fn all_rules() -> Vec<(Rules, bool)> {
    let mut all = Vec::new();
    for bits in 0u8..8 {
        let rules =
            Rules { require_mention: bits & 1 != 0, allowed_channels: Vec::new(), edited_messages: bits & 2 != 0 };
        all.push((rules, bits & 4 != 0));
    }
    all
}

proptest! {
    #[test]
    fn every_envelope_keeps_the_promises(body in callback()) {
        parse(&body)?;
        let bytes = serde_json::to_vec(&body).expect("json");
        crate::fuzzing::envelope(&bytes);
        let socket = json!({"envelope_id": "e1", "type": "events_api", "payload": body});
        crate::fuzzing::envelope(&serde_json::to_vec(&socket).expect("json"));
    }

    #[test]
    fn bots_are_never_heard(mut body in callback(), bot_id in any::<bool>()) {
        let event = &mut body["event"];
        let target = if event.get("message").is_some() { &mut event["message"] } else { event };
        if bot_id { target["bot_id"] = json!("B9"); } else { target["user"] = json!(BOT); }
        let callback = parse(&body)?;
        for (rules, in_thread) in all_rules() {
            prop_assert!(normalise(&callback, &bot(), &rules, in_thread).is_none());
        }
    }

    #[test]
    fn a_dm_keeps_its_text(text in text()) {
        let body = json!({"type": "event_callback", "event": {"type": "message", "channel": "D1", "channel_type": "im",
            "user": "U1", "text": text, "ts": "1700000000.000100"}});
        let shown = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
        match normalise(&parse(&body)?, &bot(), &Rules { require_mention: true, ..Rules::default() }, false) {
            Some(Normalised { event: InboundEvent::Message { message, .. }, .. }) => {
                prop_assert!(message.addressed);
                if text.trim_start().starts_with("<@UBOT>") || text.trim_start().starts_with("<@UBOT|") {
                    prop_assert!(shown.ends_with(&message.text), "{:?} -> {:?}", text, message.text);
                } else {
                    prop_assert_eq!(message.text, shown);
                }
            }
            other => prop_assert!(text.trim().is_empty(), "a DM was dropped: {:?} -> {:?}", text, other),
        }
    }

    #[test]
    fn in_channels_only_a_mention_or_the_bots_thread_addresses_it(text in text(), in_thread in any::<bool>()) {
        let body = json!({"type": "event_callback", "event": {"type": "message", "channel": "C1", "channel_type": "channel",
            "user": "U1", "text": text, "ts": "1700000000.000100"}});
        let normalised = normalise(&parse(&body)?, &bot(), &Rules::default(), in_thread);
        let addressed = matches!(normalised, Some(Normalised { event: InboundEvent::Message { ref message, .. }, .. }) if message.addressed);
        let mentioned = text.contains("<@UBOT>") || text.contains("<@UBOT|");
        prop_assert_eq!(addressed, !text.trim().is_empty() && (mentioned || in_thread), "{:?}", text);
    }
}
