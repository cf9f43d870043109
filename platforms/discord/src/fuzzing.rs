//! Entry points for the fuzz targets in tests/fuzz (built by cargo-afl with `--cfg fuzzing`, and
//! by the tests). Each takes the fuzzer's raw bytes and panics when a promise is broken; nothing
//! here is used by the adapter itself.

use hermesd_platform::{ChatType, InboundEvent};
use serenity::model::channel::{Message, MessageType};

use crate::inbound::{BotIdentity, Normalised, Place, Rules, normalise_message};

const BOT: u64 = 900;
const BOT_ROLE: u64 = 777;

/// A `MESSAGE_CREATE` payload as JSON: normalised in a DM, a channel and threads under every
/// combination of rules it never panics, and every event keeps the promises in [`check`].
pub fn message(data: &[u8]) {
    let Ok(message) = serde_json::from_slice::<Message>(data) else { return };
    let bot = BotIdentity { id: BOT, name: "hermes".into(), roles: vec![BOT_ROLE] };
    let places = [
        Place::Dm,
        Place::Channel,
        Place::Thread { parent: Some(200), bot_owned: false },
        Place::Thread { parent: None, bot_owned: true },
    ];
    for place in places {
        for bits in 0u8..8 {
            let channel = message.channel_id.get();
            let rules = Rules {
                require_mention: bits & 1 != 0,
                auto_thread: bits & 2 != 0,
                // Another channel (never the thread's parent, 200): this one is off the list.
                allowed_channels: if bits & 4 != 0 { vec![if channel == 1 { 2 } else { 1 }] } else { Vec::new() },
                ignored_channels: Vec::new(),
            };
            let normalised = normalise_message(&message, place, &bot, &rules);
            if let Err(broken) = check(&message, place, &rules, normalised.as_ref()) {
                panic!("message {message:?} in {place:?} under {rules:?}: {broken}\ngot {normalised:?}");
            }
        }
    }
}

/// Bots, webhooks and the bot itself are never heard; only plain messages and replies are; a
/// channel off the allowlist is never served; a DM or the bot's own thread is addressed, and
/// elsewhere only a mention (of the bot or its role) or a reply to it addresses the bot; the
/// text keeps no raw mention of the bot; ids and attachments come through.
fn check(message: &Message, place: Place, rules: &Rules, normalised: Option<&Normalised>) -> Result<(), String> {
    let Some(normalised) = normalised else { return Ok(()) };
    let InboundEvent::Message { event_id, message: inbound } = &normalised.event else {
        return Err("a message became an action".into());
    };
    if message.author.bot || message.author.id.get() == BOT || message.webhook_id.is_some() {
        return Err("a bot's or webhook's message was heard".into());
    }
    if !matches!(message.kind, MessageType::Regular | MessageType::InlineReply) {
        return Err(format!("a {:?} message was heard", message.kind));
    }
    if place != Place::Dm && !rules.allowed_channels.is_empty() {
        return Err("a channel off the allowlist was served".into());
    }
    let mentioned = message.mentions.iter().any(|user| user.id.get() == BOT)
        || message.mention_roles.iter().any(|role| role.get() == BOT_ROLE)
        || message.referenced_message.as_ref().is_some_and(|replied| replied.author.id.get() == BOT);
    let own = matches!(place, Place::Dm | Place::Thread { bot_owned: true, .. });
    if inbound.addressed != (own || mentioned) || rules.require_mention && !inbound.addressed {
        return Err(format!("addressed {} (mentioned {mentioned}, place {place:?})", inbound.addressed));
    }
    if normalised.open_thread != (place == Place::Channel && rules.auto_thread && mentioned) {
        return Err(format!("open_thread {}", normalised.open_thread));
    }
    if inbound.text.contains(&format!("<@{BOT}>")) || inbound.text.contains(&format!("<@!{BOT}>")) {
        return Err(format!("a raw mention of the bot is left in {:?}", inbound.text));
    }
    let id = message.id.get().to_string();
    if *event_id != id || inbound.message_id != id || inbound.chat.chat_id != message.channel_id.get().to_string() {
        return Err(format!("ids {event_id:?}/{:?} for message {id}", inbound.chat));
    }
    let want = match place {
        Place::Dm => ChatType::Dm,
        Place::Channel => ChatType::Group,
        Place::Thread { .. } => ChatType::Thread,
    };
    if inbound.chat.chat_type != want || normalised.files.len() != message.attachments.len() {
        return Err(format!("{:?} with {} files", inbound.chat.chat_type, normalised.files.len()));
    }
    if inbound.text.trim().is_empty() && normalised.files.is_empty() {
        return Err("an empty message was kept".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use hermesd_platform::corpus::seeds;

    #[test]
    fn corpus_seeds_parse_and_pass() {
        let mut parsed = 0;
        for seed in seeds("discord_message") {
            parsed += usize::from(serde_json::from_slice::<super::Message>(&seed).is_ok());
            super::message(&seed);
        }
        assert!(parsed >= 3, "seeds must be real messages, {parsed} parsed");
    }
}
