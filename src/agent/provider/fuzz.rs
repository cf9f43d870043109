//! The SSE decoder's contract over any bytes, for the fuzz target (tests/fuzz) and the tests:
//! the events do not depend on where the stream was split, nor on which line ending it used.

use super::sse::{SseDecoder, SseEvent};

/// Checks the decoder on `stream` cut at `cuts` (byte offsets, any order, clamped).
pub(crate) fn check_sse(stream: &[u8], cuts: &[usize]) -> Result<(), String> {
    let whole = decode(&[stream]);
    let mut at: Vec<usize> = cuts.iter().map(|cut| (*cut).min(stream.len())).collect();
    at.sort_unstable();
    let mut parts = Vec::new();
    let mut from = 0;
    for cut in at {
        parts.push(&stream[from..cut]);
        from = cut;
    }
    parts.push(&stream[from..]);
    let split = decode(&parts);
    if split != whole {
        return Err(format!("split at {cuts:?}: {split:?}, whole: {whole:?}"));
    }
    let lf = only_lf(stream);
    let lf = decode(&[lf.as_slice()]);
    if lf != whole {
        return Err(format!("with LF line ends: {lf:?}, as sent: {whole:?}"));
    }
    for event in &whole {
        if event.data.contains('\r') || event.event.as_deref().is_some_and(|name| name.contains(['\r', '\n'])) {
            return Err(format!("a line end inside {event:?}"));
        }
    }
    Ok(())
}

fn decode(parts: &[&[u8]]) -> Vec<SseEvent> {
    let mut decoder = SseDecoder::default();
    let mut events = Vec::new();
    for part in parts {
        match decoder.push(part) {
            Ok(more) => events.extend(more),
            // Not reachable with fuzzer-sized inputs; a refusal is the same whatever the split.
            Err(_) => return events,
        }
    }
    events.extend(decoder.finish());
    events
}

/// The same stream with every line end (CRLF, CR or LF) written as LF.
fn only_lf(stream: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(stream.len());
    let mut bytes = stream.iter().peekable();
    while let Some(&byte) = bytes.next() {
        if byte == b'\r' {
            bytes.next_if_eq(&&b'\n');
            out.push(b'\n');
        } else {
            out.push(byte);
        }
    }
    out
}
