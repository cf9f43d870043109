//! Properties of the update normaliser over generated Bot API updates: any update keeps the
//! promises the fuzz target checks (crate::fuzzing), bots are never heard, the text is kept as
//! sent, and in a group only a real mention or a command for it addresses the bot.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

const BOT_ID: u64 = 999;

fn bot() -> BotIdentity {
    BotIdentity { id: BOT_ID, username: "hermes_bot".into() }
}

fn human() -> impl Strategy<Value = Value> {
    (1u64..2000)
        .prop_filter("not the bot", |id| *id != BOT_ID)
        .prop_map(|id| json!({"id": id, "is_bot": false, "first_name": format!("P{id}"), "username": format!("p{id}")}))
}

fn a_bot() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"id": BOT_ID, "is_bot": true, "first_name": "Hermes", "username": "hermes_bot"})),
        (1u64..2000).prop_map(|id| json!({"id": id, "is_bot": true, "first_name": "Other", "username": "other_bot"})),
    ]
}

fn chat() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"id": 42, "type": "private", "first_name": "Ann"})),
        Just(json!({"id": -100, "type": "group", "title": "Friends"})),
        Just(json!({"id": -1001, "type": "supergroup", "title": "Forum", "is_forum": true})),
        Just(json!({"id": -1002, "type": "channel", "title": "News"})),
    ]
}

/// Text as people write to a bot: words, mentions (of the bot, of a longer name, of others),
/// commands addressed to it or to another bot, and characters that change length when
/// lowercased.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-zA-Z0-9]{1,8}",
        3 => Just(" ".to_owned()),
        1 => prop::sample::select(vec![
            "@hermes_bot", "@HERMES_BOT", "@hermes_botx", "@other_bot", "/status", "/status@hermes_bot",
            "/x@other_bot", "/tmp/x", "hermes", "\n", "İ", "é", "😀", "@", "/",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(piece, 1..12).prop_map(|pieces| pieces.concat())
}

/// A message update of any kind, from anyone, maybe a reply, maybe with a photo.
fn update() -> impl Strategy<Value = Value> {
    let kind = prop::sample::select(vec!["message", "edited_message", "channel_post"]);
    let from = prop::option::of(prop_oneof![3 => human(), 1 => a_bot()]);
    let reply = prop::option::of((prop_oneof![human(), a_bot()], text()));
    (kind, chat(), from, text(), reply, any::<bool>(), any::<bool>()).prop_map(
        |(kind, chat, from, text, reply, photo, topic)| {
            let mut message =
                json!({"message_id": 7, "date": 1_700_000_000, "edit_date": 1_700_000_060, "chat": chat.clone()});
            message[if photo { "caption" } else { "text" }] = json!(text);
            if photo {
                message["photo"] = json!([{"file_id": "p", "file_unique_id": "u", "width": 9, "height": 9}]);
            }
            if let Some(from) = from {
                message["from"] = from;
            }
            if let Some((author, text)) = reply {
                message["reply_to_message"] =
                    json!({"message_id": 3, "date": 1_700_000_000, "chat": chat, "from": author, "text": text});
            }
            if topic {
                message["is_topic_message"] = json!(true);
                message["message_thread_id"] = json!(3);
            }
            json!({"update_id": 1, kind: message})
        },
    )
}

/// Parses as the adapter does, from text: teloxide reads an update's kind from borrowed
/// strings, and from a `Value` it silently yields an unknown kind.
fn parse(update: &Value) -> Result<Update, TestCaseError> {
    let parsed: Update =
        serde_json::from_str(&update.to_string()).map_err(|error| TestCaseError::fail(format!("{error}: {update}")))?;
    if matches!(parsed.kind, UpdateKind::Error(_)) {
        return Err(TestCaseError::fail(format!("not an update teloxide reads: {update}")));
    }
    Ok(parsed)
}

fn rules(require_mention: bool) -> Rules {
    Rules { require_mention, mention_patterns: Vec::new(), channel_posts: true, edited_messages: true }
}

proptest! {
    #[test]
    fn every_update_keeps_the_promises(update in update()) {
        parse(&update)?;
        crate::fuzzing::update(&serde_json::to_vec(&update).expect("json"));
    }

    #[test]
    fn bots_are_never_heard(mut update in update(), author in a_bot()) {
        let kind = if update.get("message").is_some() { "message" } else if update.get("edited_message").is_some() { "edited_message" } else { "channel_post" };
        update[kind]["from"] = author;
        let update = parse(&update)?;
        for require_mention in [false, true] {
            prop_assert_eq!(normalise(&update, &bot(), &rules(require_mention)), None);
        }
    }

    #[test]
    fn a_dm_keeps_its_text(text in text(), author in human()) {
        let update = json!({"update_id": 1, "message": {"message_id": 7, "date": 1_700_000_000, "from": author,
            "chat": {"id": 42, "type": "private", "first_name": "Ann"}, "text": text}});
        let normalised = normalise(&parse(&update)?, &bot(), &rules(true));
        let Some(Normalised { event: InboundEvent::Message { message, .. }, .. }) = normalised else {
            prop_assert!(text.trim().is_empty(), "a DM was dropped: {text:?}");
            return Ok(());
        };
        prop_assert!(message.addressed);
        // Only `/command@hermes_bot` loses its `@hermes_bot`, so the host sees a plain command.
        let first = text.split(char::is_whitespace).next().unwrap_or_default();
        let want = match first.strip_prefix('/').and_then(|word| word.split_once('@')) {
            Some((command, target)) if target.eq_ignore_ascii_case("hermes_bot") => {
                format!("/{command}{}", &text[first.len()..])
            }
            _ => text.clone(),
        };
        prop_assert_eq!(message.text, want);
    }

    #[test]
    fn in_groups_only_a_mention_or_command_addresses_the_bot(text in text(), author in human()) {
        let update = json!({"update_id": 1, "message": {"message_id": 7, "date": 1_700_000_000, "from": author,
            "chat": {"id": -100, "type": "group", "title": "Friends"}, "text": text}});
        let normalised = normalise(&parse(&update)?, &bot(), &rules(false));
        let addressed = matches!(normalised, Some(Normalised { event: InboundEvent::Message { ref message, .. }, .. }) if message.addressed);
        let lower = text.to_lowercase();
        let mentioned = lower.match_indices("@hermes_bot").any(|(at, m)| {
            lower[at + m.len()..].chars().next().is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
        });
        // A command decides alone: addressed when it names no bot or this one.
        let command = text.strip_prefix('/').and_then(|rest| rest.split_whitespace().next()).and_then(|word| {
            let (name, target) = word.split_once('@').map_or((word, None), |(name, target)| (name, Some(target)));
            let valid = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            valid.then(|| target.is_none_or(|target| target.eq_ignore_ascii_case("hermes_bot")))
        });
        prop_assert_eq!(addressed, command.unwrap_or(mentioned), "{:?}", text);
    }
}
