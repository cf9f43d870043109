//! Entry points for the fuzz targets in tests/fuzz (built by cargo-afl with `--cfg fuzzing`, and
//! by the tests). Each takes the fuzzer's raw bytes and panics when a promise is broken; nothing
//! here is used by the adapter itself.
//!
//! `envelope` and `stream` are the checks of the `signal_envelope` and `signal_stream` targets; the
//! `props` modules beside the normaliser and the SSE decoder test the same promises.

use hermesd_platform::{ChatType, InboundEvent};
use serde_json::Value;

use crate::inbound::{Rules, normalise};
use hermesd_platform::sse::SseDecoder;

use crate::stream::MAX_EVENT_BYTES;

const ME: &str = "+15550001111";
const ME_UUID: &str = "00000000-0000-4000-8000-000000000001";

/// A signal-cli `receive` payload as JSON: normalised with and without mention gating it never
/// panics, and every event keeps the promises in [`check`].
pub fn envelope(data: &[u8]) {
    let Ok(payload) = serde_json::from_slice::<Value>(data) else { return };
    for require_mention in [false, true] {
        let rules = Rules {
            account: ME.into(),
            account_uuid: Some(ME_UUID.into()),
            require_mention,
            patterns: vec!["hermes".into()],
        };
        let normalised = normalise(&payload, &rules);
        if let Err(broken) = check(&payload, &rules, normalised.as_ref().map(|n| &n.event)) {
            panic!("payload {payload} under require_mention={require_mention}: {broken}\ngot {normalised:?}");
        }
    }
}

/// Only data messages are heard, never the account's own; the sender is the UUID when there is
/// one; the event id is `<sender>:<timestamp>`; groups are `group:<id>` chats; a DM is always
/// addressed and, with mention gating, so is every group message that comes through.
fn check(payload: &Value, rules: &Rules, event: Option<&InboundEvent>) -> Result<(), String> {
    let Some(event) = event else { return Ok(()) };
    let InboundEvent::Message { event_id, message } = event else {
        return Err("a payload became an action".into());
    };
    let envelope = &payload["envelope"];
    if !envelope["dataMessage"].is_object() {
        return Err("an envelope without a data message was heard".into());
    }
    let uuid = envelope["sourceUuid"].as_str().filter(|u| !u.is_empty());
    if envelope["sourceNumber"].as_str() == Some(ME) || uuid == Some(ME_UUID) {
        return Err("the account's own message was heard".into());
    }
    if let Some(uuid) = uuid
        && message.sender.id != uuid
    {
        return Err(format!("the sender is {} though the UUID is {uuid}", message.sender.id));
    }
    if event_id != &message.message_id || !event_id.starts_with(&format!("{}:", message.sender.id)) {
        return Err(format!("event id {event_id} is not <sender>:<timestamp>"));
    }
    match message.chat.chat_type {
        ChatType::Dm if !message.addressed => return Err("a DM was not addressed".into()),
        ChatType::Dm if message.chat.chat_id != message.sender.id => return Err("a DM chat is not its sender".into()),
        ChatType::Group if !message.chat.chat_id.starts_with("group:") => {
            return Err("a group chat lacks group:".into());
        }
        ChatType::Group if rules.require_mention && !message.addressed => {
            return Err("unaddressed group chatter passed mention gating".into());
        }
        ChatType::Channel | ChatType::Thread => return Err("signal has no channels or threads".into()),
        _ => {}
    }
    Ok(())
}

/// Bytes of an event stream: split at every point the decoder gives the same items as whole,
/// and never holds more than `MAX_EVENT_BYTES` for one event.
pub fn stream(data: &[u8]) {
    let whole = SseDecoder::new(MAX_EVENT_BYTES).push(data);
    let cut = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let mut split = SseDecoder::new(MAX_EVENT_BYTES);
    let first = split.push(&data[..cut]);
    let joined = first.and_then(|mut events| {
        events.extend(split.push(&data[cut..])?);
        Ok(events)
    });
    if let (Ok(whole), Ok(joined)) = (&whole, &joined) {
        assert_eq!(whole, joined, "a split changed the events");
        for event in whole {
            assert!(event.data.len() <= MAX_EVENT_BYTES, "an event over the cap came through");
        }
    }
}

#[cfg(test)]
mod tests {
    use hermesd_platform::corpus::seeds;

    #[test]
    fn corpus_seeds_parse_and_pass() {
        let envelopes = seeds("signal_envelope");
        let parsed = envelopes.iter().filter(|s| serde_json::from_slice::<serde_json::Value>(s).is_ok()).count();
        assert!(parsed >= 4, "seeds must be real payloads, {parsed} parsed");
        envelopes.iter().for_each(|seed| super::envelope(seed));
        let streams = seeds("signal_stream");
        streams.iter().for_each(|seed| super::stream(seed));
    }
}
