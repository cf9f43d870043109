//! Properties of the SSE decoder: events come out whole and in order however the bytes are
//! split (inside lines, CRLF pairs or UTF-8 sequences), with any of the three line endings, and
//! arbitrary bytes never make it panic or decode differently when split.

use proptest::prelude::*;

use super::*;

/// An event as a server writes it: an optional name, one or more data lines (no line breaks in
/// a line), and maybe a comment and an `id`.
fn event() -> impl Strategy<Value = SseEvent> {
    let line = "[a-zA-Z0-9 {}\":,é😀]{0,20}";
    let name = prop::option::of("[a-z_.]{1,12}");
    (name, prop::collection::vec(line, 1..4)).prop_map(|(event, lines)| SseEvent { event, data: lines.join("\n") })
}

fn encode(events: &[SseEvent], eol: &str, extras: bool) -> Vec<u8> {
    let mut out = String::new();
    for event in events {
        if extras {
            out.push_str(&format!(": keepalive{eol}id: 7{eol}"));
        }
        if let Some(name) = &event.event {
            out.push_str(&format!("event: {name}{eol}"));
        }
        for line in event.data.split('\n') {
            out.push_str(&format!("data: {line}{eol}"));
        }
        out.push_str(eol);
    }
    out.into_bytes()
}

/// Split `bytes` at the given fractions of its length.
fn split(bytes: &[u8], cuts: &[prop::sample::Index]) -> Vec<Vec<u8>> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
    at.sort_unstable();
    let mut parts = Vec::new();
    let mut from = 0;
    for cut in at {
        parts.push(bytes[from..cut].to_vec());
        from = cut;
    }
    parts.push(bytes[from..].to_vec());
    parts
}

fn decode(parts: &[Vec<u8>]) -> Vec<SseEvent> {
    let mut decoder = SseDecoder::default();
    let mut events = Vec::new();
    for part in parts {
        events.extend(decoder.push(part).expect("small events fit"));
    }
    events.extend(decoder.finish());
    events
}

proptest! {
    #[test]
    fn events_survive_any_split_and_line_ending(
        events in prop::collection::vec(event(), 0..8),
        eol in prop::sample::select(vec!["\n", "\r\n", "\r"]),
        extras in any::<bool>(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let bytes = encode(&events, eol, extras);
        prop_assert_eq!(decode(&split(&bytes, &cuts)), events);
    }

    #[test]
    fn arbitrary_bytes_decode_the_same_split_or_whole(
        bytes in prop::collection::vec(any::<u8>(), 0..400),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        prop_assert_eq!(decode(&split(&bytes, &cuts)), decode(std::slice::from_ref(&bytes)));
    }
}
