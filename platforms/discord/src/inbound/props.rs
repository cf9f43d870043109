//! Properties of the message normaliser over generated `MESSAGE_CREATE` payloads: any message
//! keeps the promises the fuzz target checks (crate::fuzzing), bots and webhooks are never
//! heard, and the text is kept as sent, less the bot's own mentions.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

const BOT: u64 = 900;

fn bot() -> BotIdentity {
    BotIdentity { id: BOT, name: "hermes".into(), roles: vec![777] }
}

fn user(id: u64, bot: bool) -> Value {
    json!({"id": id.to_string(), "username": format!("u{id}"), "discriminator": "0", "global_name": null, "avatar": null, "bot": bot})
}

/// Message content as people write it: words, mentions of the bot (both forms), of its role,
/// of others, and everyone pings.
fn content() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-zA-Z0-9]{1,8}",
        3 => Just(" ".to_owned()),
        1 => prop::sample::select(vec!["<@900>", "<@!900>", "<@9000>", "<@12>", "<@&777>", "@everyone", "/status", "\n", "é"])
            .prop_map(str::to_owned),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())
}

/// A MESSAGE_CREATE from a person, another bot or the bot itself, maybe a reply, with mentions
/// as Discord lists them.
fn message() -> impl Strategy<Value = Value> {
    let author = prop::sample::select(vec![(1u64, false), (2, true), (BOT, true), (3, false)]);
    let kind = prop::sample::select(vec![0u8, 19, 7, 6]);
    let replied = prop::option::of(prop::sample::select(vec![BOT, 1]));
    (author, kind, content(), any::<bool>(), any::<bool>(), replied, any::<bool>()).prop_map(
        |((author, is_bot), kind, content, mention, role, replied, webhook)| {
            let mut message = json!({"id": "10", "channel_id": "300", "author": user(author, is_bot), "content": content,
                "timestamp": "2026-01-02T03:04:05.000000+00:00", "edited_timestamp": null, "tts": false,
                "mention_everyone": false, "mentions": if mention { vec![user(BOT, true)] } else { Vec::new() },
                "mention_roles": if role { vec!["777"] } else { Vec::new() }, "attachments": [], "embeds": [],
                "pinned": false, "type": kind});
            if let Some(replied) = replied {
                message["referenced_message"] = json!({"id": "9", "channel_id": "300", "author": user(replied, replied == BOT),
                    "content": "earlier", "timestamp": "2026-01-02T03:04:00.000000+00:00", "edited_timestamp": null,
                    "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [], "attachments": [],
                    "embeds": [], "pinned": false, "type": 0});
            }
            if webhook {
                message["webhook_id"] = json!("55");
            }
            message
        },
    )
}

fn parse(raw: &Value) -> Result<Message, TestCaseError> {
    serde_json::from_value(raw.clone()).map_err(|error| TestCaseError::fail(format!("{error}: {raw}")))
}

proptest! {
    #[test]
    fn every_message_keeps_the_promises(raw in message()) {
        parse(&raw)?;
        crate::fuzzing::message(&serde_json::to_vec(&raw).expect("json"));
    }

    #[test]
    fn bots_and_webhooks_are_never_heard(mut raw in message(), author in prop::sample::select(vec![2u64, BOT]), webhook in any::<bool>()) {
        if webhook { raw["webhook_id"] = json!("55") } else { raw["author"] = user(author, author != BOT) }
        let message = parse(&raw)?;
        for place in [Place::Dm, Place::Channel, Place::Thread { parent: None, bot_owned: true }] {
            prop_assert_eq!(normalise_message(&message, place, &bot(), &Rules::default()), None);
        }
    }

    #[test]
    fn a_dm_keeps_its_text(content in content()) {
        let raw = json!({"id": "10", "channel_id": "300", "author": user(1, false), "content": content,
            "timestamp": "2026-01-02T03:04:05.000000+00:00", "edited_timestamp": null, "tts": false,
            "mention_everyone": false, "mentions": [], "mention_roles": [], "attachments": [], "embeds": [],
            "pinned": false, "type": 0});
        let normalised = normalise_message(&parse(&raw)?, Place::Dm, &bot(), &Rules::default());
        let Some(Normalised { event: InboundEvent::Message { message, .. }, .. }) = normalised else {
            // Only a DM that says nothing once a leading mention of the bot is removed is dropped.
            let rest = ["<@900>", "<@!900>"].iter().find_map(|f| content.trim_start().strip_prefix(f));
            prop_assert!(rest.unwrap_or(&content).trim().is_empty(), "a DM was dropped: {:?}", content);
            return Ok(());
        };
        // Only the bot's mentions change: a leading one goes, the others read as its name.
        let shown = |text: &str| text.replace("<@900>", "@hermes").replace("<@!900>", "@hermes");
        let trimmed = content.trim_start();
        let lead = ["<@900>", "<@!900>"].iter().find_map(|form| trimmed.strip_prefix(form));
        let want = match lead {
            Some(rest) => shown(rest.trim_start()),
            None => shown(&content),
        };
        prop_assert_eq!(message.text, want);
    }
}
