//! Entry points for the fuzz targets in tests/fuzz (built by cargo-afl with `--cfg fuzzing`, and
//! by the tests). Each takes the fuzzer's raw bytes and panics when a promise is broken; nothing
//! here is used by the adapter itself.

use hermesd_platform::{ChatType, InboundEvent, WebhookRequest};

use crate::events::{MAX_SKEW_SECS, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign, verify};
use crate::format::markdown_to_mrkdwn;
use crate::format::mrkdwn_check::check_mrkdwn;
use crate::inbound::{BotIdentity, Callback, Interaction, Normalised, Rules, normalise, normalise_interaction};
use crate::inbound::{RawEvent, thread_to_check};

const BOT_USER: &str = "UBOT";
const NOW: i64 = 1_700_000_000;

/// A Socket Mode envelope or an Events API body as JSON: normalised under every combination of
/// rules it never panics, and every event keeps the promises in [`check_message`].
pub fn envelope(data: &[u8]) {
    let Ok(body) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let bot = BotIdentity { user_id: BOT_USER.into(), bot_id: Some("BBOT".into()) };
    let (kind, payload) = match body["type"].as_str() {
        // Socket Mode wraps the Events API body (or an interaction) in `payload`.
        Some("events_api") => ("events_api", body["payload"].clone()),
        Some("interactive") => ("interactive", body["payload"].clone()),
        Some("block_actions") => ("interactive", body),
        _ => ("events_api", body),
    };
    if kind == "interactive" {
        let Ok(interaction) = serde_json::from_value::<Interaction>(payload) else { return };
        if let Some(event) = normalise_interaction(&interaction, &bot) {
            let InboundEvent::Action { action, .. } = &event else { panic!("a press became {event:?}") };
            let value = interaction.actions.first().and_then(|a| a.value.as_deref());
            assert!(action.sender.id != BOT_USER && !action.sender.id.is_empty(), "{event:?}");
            assert!(interaction.kind == "block_actions" && value == Some(action.data.as_str()), "{event:?}");
        }
        return;
    }
    let Ok(callback) = serde_json::from_value::<Callback>(payload) else { return };
    let _ = thread_to_check(&callback, &bot);
    for bits in 0u8..16 {
        let rules = Rules {
            require_mention: bits & 1 != 0,
            allowed_channels: if bits & 2 != 0 { vec!["C1".into()] } else { Vec::new() },
            edited_messages: bits & 4 != 0,
        };
        let in_thread = bits & 8 != 0;
        let normalised = normalise(&callback, &bot, &rules, in_thread);
        if let Err(broken) = check_message(&callback.event, &rules, in_thread, normalised.as_ref()) {
            panic!("event {:?} under {rules:?} (in thread {in_thread}): {broken}\ngot {normalised:?}", callback.event);
        }
    }
}

/// The bot's own and other bots' messages are never heard, the text is the message's own (less
/// a leading mention of the bot), DMs are addressed, `require_mention` and `allowed_channels`
/// hold, and the event id names the channel and message.
fn check_message(
    outer: &RawEvent,
    rules: &Rules,
    in_thread: bool,
    normalised: Option<&Normalised>,
) -> Result<(), String> {
    let Some(normalised) = normalised else { return Ok(()) };
    let InboundEvent::Message { event_id, message } = &normalised.event else {
        return Err("an event callback became an action".into());
    };
    let edited = outer.subtype.as_deref() == Some("message_changed");
    let source = if edited { outer.message.as_deref().ok_or("an edit without its message")? } else { outer };
    if source.bot_id.is_some() || source.subtype.as_deref() == Some("bot_message") || message.sender.id == BOT_USER {
        return Err("a bot's message was heard".into());
    }
    if edited && !rules.edited_messages {
        return Err("an edit was heard with edited_messages off".into());
    }
    let channel = outer.channel.as_deref().unwrap_or_default();
    let ts = source.ts.as_deref().unwrap_or_default();
    let id = format!("{channel}:{ts}");
    if !(*event_id == id || edited && event_id.starts_with(&format!("{id}:e"))) {
        return Err(format!("event id {event_id:?} for {id:?}"));
    }
    let in_channel = message.chat.chat_type != ChatType::Dm;
    if message.chat.chat_id != channel || in_channel && !rules.allowed_channels.is_empty() && channel != "C1" {
        return Err(format!("chat {:?} from channel {channel:?}", message.chat));
    }
    if !message.addressed && (!in_channel || rules.require_mention) {
        return Err("addressed is wrong".into());
    }
    let raw = source.text.as_deref().unwrap_or_default();
    let shown = raw.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
    let stripped = raw.trim_start().starts_with(&format!("<@{BOT_USER}"));
    if !(message.text == shown || stripped && shown.ends_with(&message.text)) {
        return Err(format!("text {:?} is not the message's {raw:?}", message.text));
    }
    let mentioned = raw.contains(&format!("<@{BOT_USER}>")) || raw.contains(&format!("<@{BOT_USER}|"));
    if in_channel && message.addressed && !(mentioned || in_thread || outer.kind == "app_mention") {
        return Err("addressed without a mention, a thread or an app_mention".into());
    }
    Ok(())
}

/// The Events API signature: the bytes pick the secret, the clock skew, a bit to flip and the
/// body. A request signed over the exact body verifies inside the 300 s window and is refused
/// outside it; any single-bit change of body, timestamp or signature is refused (a case change
/// of a hex digit names the same tag).
pub fn signature(data: &[u8]) {
    let [secret_len, skew, flip_lo, flip_hi, rest @ ..] = data else { return };
    let Some((secret, body)) = rest.split_at_checked(1 + usize::from(secret_len % 32)) else { return };
    let secret = String::from_utf8_lossy(secret);
    let timestamp = (NOW - i64::from(*skew as i8) * 3).to_string();
    let signature = sign(&secret, &timestamp, body);
    let request = |timestamp: &[u8], signature: &[u8], body: &[u8]| WebhookRequest {
        headers: vec![
            (TIMESTAMP_HEADER.into(), String::from_utf8_lossy(timestamp).into_owned()),
            (SIGNATURE_HEADER.into(), String::from_utf8_lossy(signature).into_owned()),
        ],
        body: body.to_vec(),
    };
    let fresh = (i64::from(*skew as i8) * 3).abs() <= MAX_SKEW_SECS;
    let exact = verify(&secret, &request(timestamp.as_bytes(), signature.as_bytes(), body), NOW);
    assert_eq!(exact.is_ok(), fresh, "exact request at skew {skew}: {exact:?}");
    if !fresh {
        return;
    }
    let mut parts = [body.to_vec(), timestamp.clone().into_bytes(), signature.clone().into_bytes()];
    let bits: usize = parts.iter().map(|part| part.len() * 8).sum();
    let mut flip = usize::from(u16::from_le_bytes([*flip_lo, *flip_hi])) % bits;
    let mut part = 0;
    while flip >= parts[part].len() * 8 {
        flip -= parts[part].len() * 8;
        part += 1;
    }
    let before = parts[part][flip / 8];
    parts[part][flip / 8] ^= 1 << (flip % 8);
    let after = parts[part][flip / 8];
    let case_only = part == 2 && before.eq_ignore_ascii_case(&after) && before.is_ascii_hexdigit();
    let [body, timestamp, signature] = &parts;
    let outcome = verify(&secret, &request(timestamp, signature, body), NOW);
    assert_eq!(outcome.is_ok(), case_only, "bit {flip} of part {part} flipped: {outcome:?}");
    // Whatever the headers say, only the true signature verifies.
    let forged = request(timestamp, rest, body);
    if verify(&secret, &forged, NOW).is_ok() {
        let sent = String::from_utf8_lossy(rest).trim().to_ascii_lowercase();
        assert_eq!(sent, sign(&secret, &String::from_utf8_lossy(timestamp), body), "a forged signature verified");
    }
}

/// Markdown from the model: the mrkdwn never carries markup other than the converter's links.
pub fn markdown(data: &[u8]) {
    let markdown = String::from_utf8_lossy(data);
    let mrkdwn = markdown_to_mrkdwn(&markdown);
    if let Err(broken) = check_mrkdwn(&mrkdwn) {
        panic!("markdown {markdown:?}: {broken}");
    }
}

#[cfg(test)]
mod tests {
    use hermesd_platform::corpus::seeds;

    #[test]
    fn corpus_seeds_pass() {
        seeds("slack_envelope").iter().for_each(|seed| super::envelope(seed));
        seeds("slack_signature").iter().for_each(|seed| super::signature(seed));
        seeds("slack_markdown").iter().for_each(|seed| super::markdown(seed));
    }
}
