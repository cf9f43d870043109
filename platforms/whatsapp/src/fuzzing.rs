//! Entry points for the fuzz targets in tests/fuzz (built by cargo-afl with `--cfg fuzzing`, and
//! by the tests). Each takes the fuzzer's raw bytes and panics when a promise is broken; nothing
//! here is used by the adapter itself.

use hermesd_platform::{ChatType, InboundEvent};

use crate::inbound::parse;
use crate::webhook::{handshake, sign, verify};

const NUMBER_ID: &str = "106540352242922";
const NOW_MS: i64 = 1_700_000_000_000;

/// A webhook body: parsing never panics, and every event is a DM from its sender with an id,
/// carrying text or media (a message) or the button's data (an action); statuses have ids.
pub fn notification(data: &[u8]) {
    let Some(parsed) = parse(data, NUMBER_ID, NOW_MS) else { return };
    for normalised in &parsed.events {
        let event = &normalised.event;
        let chat = event.chat();
        assert_eq!((chat.platform.as_str(), chat.chat_type), ("whatsapp", ChatType::Dm), "{event:?}");
        assert!(!chat.chat_id.is_empty() && chat.chat_id == event.sender().id, "{event:?}");
        assert!(!event.event_id().is_empty(), "{event:?}");
        match event {
            InboundEvent::Message { message, .. } => {
                assert!(message.addressed && message.attachments.is_empty(), "{event:?}");
                assert!(!message.text.trim().is_empty() || normalised.media.is_some(), "{event:?}");
                if let Some(media) = &normalised.media {
                    assert!(!media.id.is_empty() && !media.name.is_empty(), "{media:?}");
                }
            }
            InboundEvent::Action { action, .. } => assert!(!action.data.is_empty(), "{event:?}"),
        }
    }
    assert!(parsed.statuses.iter().all(|s| !s.id.is_empty()), "{:?}", parsed.statuses);
}

/// The signature check and the handshake: the first byte splits the input into a secret and a
/// body; a body signed with its secret verifies, any change to it does not, an arbitrary header
/// never panics, and the handshake answers 200 only for the verify token.
pub fn signature(data: &[u8]) {
    let split = usize::from(data.first().copied().unwrap_or(0)).min(data.len());
    let (secret, body) = data.split_at(split);
    let secret = String::from_utf8_lossy(secret);
    let good = sign(&secret, body);
    assert_eq!(verify(&secret, Some(&good), body), Ok(()));
    let mut changed = body.to_vec();
    match changed.last_mut() {
        Some(last) => *last ^= 1,
        None => changed.push(0),
    }
    assert!(verify(&secret, Some(&good), &changed).is_err());
    let header = String::from_utf8_lossy(body);
    if verify(&secret, Some(&header), body).is_ok() {
        assert_eq!(header.trim().to_ascii_lowercase(), good, "only the right tag verifies");
    }
    let answer = handshake("the-verify-token", &header);
    assert!(matches!(answer.status, 200 | 403), "{answer:?}");
    if answer.status == 200 {
        assert_eq!(handshake("another-token", &header).status, 403, "the token decided: {header}");
    }
}

#[cfg(test)]
mod tests {
    use hermesd_platform::corpus::seeds;

    #[test]
    fn corpus_seeds_pass() {
        let notifications = seeds("whatsapp_webhook");
        for seed in notifications {
            super::notification(&seed);
        }
        let signatures = seeds("whatsapp_signature");
        for seed in signatures {
            super::signature(&seed);
        }
    }
}
