//! Entry points for the fuzz targets in tests/fuzz (built by cargo-afl with `--cfg fuzzing`, and
//! by the tests). Each takes the fuzzer's raw bytes and panics when a promise is broken; nothing
//! here is used by the adapter itself.

use hermesd_platform::{ChatType, InboundEvent};
use teloxide::types::{Message, Update, UpdateKind};

use crate::format::html_check::check_html;
use crate::format::markdown_to_html;
use crate::inbound::{BotIdentity, Normalised, Rules, album_key, normalise, normalise_album};

const BOT_ID: u64 = 999;
const BOT_NAME: &str = "hermes_bot";

/// A Bot API update as JSON: normalised under every combination of rules, it never panics,
/// and every event it yields keeps the promises in [`check_update`].
pub fn update(data: &[u8]) {
    let Ok(update) = serde_json::from_slice::<Update>(data) else { return };
    let bot = BotIdentity { id: BOT_ID, username: BOT_NAME.into() };
    for bits in 0u8..8 {
        let rules = Rules {
            require_mention: bits & 1 != 0,
            mention_patterns: if bits & 2 != 0 { vec!["hermes".into()] } else { Vec::new() },
            channel_posts: bits & 4 != 0,
            edited_messages: bits & 4 != 0,
        };
        let normalised = normalise(&update, &bot, &rules);
        if let Err(broken) = check_update(&update, &rules, normalised.as_ref()) {
            panic!("update {update:?} under {rules:?}: {broken}\ngot {normalised:?}");
        }
        let _ = album_key(&update);
        if let Some(album) = normalise_album(&[&update, &update], &bot, &rules)
            && album.files.len() % 2 != 0
        {
            panic!("an album of one update twice has {} files", album.files.len());
        }
    }
}

/// Markdown from the model: the HTML is well-formed for Telegram whatever the input.
pub fn markdown(data: &[u8]) {
    let markdown = String::from_utf8_lossy(data);
    let html = markdown_to_html(&markdown);
    if let Err(broken) = check_html(&html) {
        panic!("markdown {markdown:?}: {broken}");
    }
}

/// What an update's event must satisfy: bots (this one included) are never heard, the text is
/// the message's own (less a `@bot` on a command), a DM is always addressed, a message that
/// needs a mention has one, and edits and channel posts come only when enabled.
fn check_update(update: &Update, rules: &Rules, normalised: Option<&Normalised>) -> Result<(), String> {
    let Some(normalised) = normalised else { return Ok(()) };
    let (source, edited) = match &update.kind {
        UpdateKind::Message(message) => (message, false),
        UpdateKind::EditedMessage(message) if rules.edited_messages => (message, true),
        UpdateKind::ChannelPost(message) if rules.channel_posts => (message, false),
        UpdateKind::CallbackQuery(query) => {
            if query.from.is_bot || query.from.id.0 == BOT_ID {
                return Err("a bot's button press was heard".into());
            }
            return match &normalised.event {
                InboundEvent::Action { event_id, .. } if *event_id == format!("cb:{}", query.id.0) => Ok(()),
                other => Err(format!("a callback became {other:?}")),
            };
        }
        _ => return Err("an update kind that is off produced an event".into()),
    };
    let InboundEvent::Message { event_id, message } = &normalised.event else {
        return Err("a message became an action".into());
    };
    if source.from.as_ref().is_some_and(|user| user.is_bot || user.id.0 == BOT_ID) || message.sender.is_bot {
        return Err("a bot's message was heard".into());
    }
    let prefix = format!("{}:{}", source.chat.id.0, source.id.0);
    if !event_id.starts_with(&prefix) || event_id.contains(":e") != edited {
        return Err(format!("event id {event_id:?} for {prefix} (edited: {edited})"));
    }
    let original = source.text().or_else(|| source.caption()).unwrap_or_default();
    if message.text != original && !is_command_without_bot(original, &message.text) {
        return Err(format!("text {:?} is not the message's {original:?}", message.text));
    }
    if message.text.trim().is_empty() && normalised.files.is_empty() {
        return Err("an empty message was kept".into());
    }
    if matches!(message.chat.chat_type, ChatType::Dm | ChatType::Channel) && !message.addressed {
        return Err("a DM or channel post is not addressed".into());
    }
    if rules.require_mention && !message.addressed {
        return Err("an unaddressed message passed require_mention".into());
    }
    if let (Some(reply), Some(replied)) = (&message.reply_to, source.reply_to_message()) {
        let from_bot = replied.from.as_ref().is_some_and(|user| user.id.0 == BOT_ID);
        if reply.from_bot != from_bot {
            return Err(format!("reply from_bot {} for a reply to {:?}", reply.from_bot, replied.from));
        }
    }
    if message.timestamp_ms != source.date.timestamp_millis() {
        return Err(format!("timestamp {} for date {}", message.timestamp_ms, source.date));
    }
    check_files(source, normalised)
}

/// `/cmd@hermes_bot rest` may reach the host as `/cmd rest`: exactly one `@bot` is gone from
/// the command word.
fn is_command_without_bot(original: &str, text: &str) -> bool {
    let needle = 1 + BOT_NAME.len();
    original.starts_with('/')
        && original.len() == text.len() + needle
        && original.char_indices().filter(|(_, c)| *c == '@').any(|(at, _)| {
            original.get(at + 1..at + needle).is_some_and(|name| name.eq_ignore_ascii_case(BOT_NAME))
                && original.get(..at).is_some_and(|head| !head.contains(char::is_whitespace))
                && format!("{}{}", &original[..at], &original[at + needle..]) == text
        })
}

fn check_files(source: &Message, normalised: &Normalised) -> Result<(), String> {
    let carried = [
        source.photo().is_some_and(|sizes| !sizes.is_empty()),
        source.document().is_some(),
        source.voice().is_some(),
        source.audio().is_some(),
        source.video().is_some(),
    ];
    let want = carried.iter().filter(|c| **c).count();
    if normalised.files.len() != want {
        return Err(format!("{} files for a message carrying {want}", normalised.files.len()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use hermesd_platform::corpus::seeds;

    #[test]
    fn update_seeds_parse_and_pass() {
        let mut parsed = 0;
        for seed in seeds("telegram_update") {
            let update = serde_json::from_slice::<super::Update>(&seed);
            parsed += usize::from(update.is_ok_and(|update| !matches!(update.kind, super::UpdateKind::Error(_))));
            super::update(&seed);
        }
        assert!(parsed >= 3, "seeds must be real updates, {parsed} parsed");
    }

    #[test]
    fn markdown_seeds_pass() {
        seeds("telegram_markdown").iter().for_each(|seed| super::markdown(seed));
    }

    #[test]
    fn a_command_loses_only_the_bot_mention() {
        assert!(super::is_command_without_bot("/status@Hermes_Bot now", "/status now"));
        assert!(!super::is_command_without_bot("/status@hermes_bot now", "/status"));
        assert!(!super::is_command_without_bot("hi @hermes_bot", "hi "));
    }
}
