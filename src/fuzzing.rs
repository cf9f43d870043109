//! Entry points for the fuzz targets in tests/fuzz (built by cargo-afl with `--cfg fuzzing`, and
//! by the tests). Each takes the fuzzer's raw bytes and panics when a promise is broken; nothing
//! here is used by the daemon itself.
//!
//! The checks: `sse` (through `agent::provider::fuzz`), `tool_arguments` (argument repair) and
//! `webhook` (signatures and templates).

use serde_json::Value;

use crate::agent::runtime::sanitize::repair_arguments;
use crate::webhooks::signature::{MAX_SKEW_SECS, Scheme, sign_generic, sign_github, verify};
use crate::webhooks::template::{event_type, render};

const NOW: i64 = 1_700_000_000;

/// A streamed reply body: the first byte says how many cuts follow (up to 15), each a byte
/// offset scaled to the stream; the events must not depend on the cuts or the line endings.
pub fn sse(data: &[u8]) {
    let Some((count, rest)) = data.split_first() else { return };
    let Some((cuts, stream)) = rest.split_at_checked(usize::from(count % 16)) else { return };
    let cuts: Vec<usize> = cuts.iter().map(|cut| usize::from(*cut) * (stream.len() + 1) / 256).collect();
    if let Err(broken) = crate::agent::provider::fuzz::check_sse(stream, &cuts) {
        panic!("stream {:?}: {broken}", String::from_utf8_lossy(stream));
    }
}

/// A model's tool-call arguments: the repair always yields one JSON object, is idempotent, and
/// leaves arguments that already were a JSON object exactly as sent (less outer whitespace).
pub fn tool_arguments(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let repaired = repair_arguments(&text);
    let object = serde_json::from_str::<serde_json::Map<String, Value>>(&repaired);
    assert!(object.is_ok(), "{text:?} repaired to {repaired:?}, not a JSON object");
    assert_eq!(repair_arguments(&repaired), repaired, "repair of {text:?} is not idempotent");
    if serde_json::from_str::<serde_json::Map<String, Value>>(text.trim()).is_ok() {
        assert_eq!(repaired, text.trim(), "a valid object was rewritten");
    }
}

/// Webhook ingress: an even first byte checks a signature scheme (see [`webhook_signature`]),
/// an odd one renders a template over a payload (see [`webhook_template`]).
pub fn webhook(data: &[u8]) {
    match data.split_first() {
        Some((mode, rest)) if mode % 2 == 0 => webhook_signature(rest),
        Some((_, rest)) => webhook_template(rest),
        None => {}
    }
}

/// The bytes pick the scheme, the secret, the clock skew, a bit to flip and the body. A delivery
/// signed over the exact body verifies (the generic scheme only inside its window); any
/// single-bit change of what the scheme signs, or of its signature, is refused (a case change of
/// a hex digit names the same tag); arbitrary headers never verify unless they are the truth.
fn webhook_signature(data: &[u8]) {
    let [scheme, secret_len, skew, flip_lo, flip_hi, rest @ ..] = data else { return };
    let Some((secret, body)) = rest.split_at_checked(1 + usize::from(secret_len % 32)) else { return };
    let skew_secs = i64::from(*skew as i8) * 3;
    let timestamp = (NOW - skew_secs).to_string();
    let (scheme, signature_header, signature) = match scheme % 3 {
        0 => (Scheme::GitHub, "x-hub-signature-256", sign_github(secret, body)),
        1 => (Scheme::GitLab, "x-gitlab-token", String::from_utf8_lossy(secret).into_owned()),
        _ => (Scheme::Generic, "x-webhook-signature", sign_generic(secret, NOW - skew_secs, body)),
    };
    let check = |timestamp: &[u8], signature: &[u8], body: &[u8]| {
        let headers = |name: &str| match name {
            "x-webhook-timestamp" => Some(String::from_utf8_lossy(timestamp).into_owned()),
            name if name == signature_header => Some(String::from_utf8_lossy(signature).into_owned()),
            _ => None,
        };
        verify(scheme, secret, &headers, body, NOW)
    };
    let exact = check(timestamp.as_bytes(), signature.as_bytes(), body);
    // GitLab's token is compared as text, so a secret that is not UTF-8 can never be sent.
    let sendable = scheme != Scheme::GitLab || std::str::from_utf8(secret).is_ok();
    let fresh = scheme != Scheme::Generic || skew_secs.abs() <= MAX_SKEW_SECS;
    assert_eq!(exact.is_ok(), fresh && sendable, "{scheme:?} exact delivery at skew {skew_secs}: {exact:?}");
    if exact.is_err() {
        return;
    }
    // Only what the scheme signs: GitLab's token does not cover the body or a timestamp.
    let mut parts = match scheme {
        Scheme::GitHub => vec![signature.into_bytes(), body.to_vec()],
        Scheme::GitLab => vec![signature.into_bytes()],
        Scheme::Generic => vec![signature.into_bytes(), body.to_vec(), timestamp.clone().into_bytes()],
    };
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
    // The tag's hex digits may come in either case; GitHub's `sha256=` prefix may not.
    let hex_from = if scheme == Scheme::GitHub { "sha256=".len() } else { 0 };
    let in_hex = part == 0 && scheme != Scheme::GitLab && flip / 8 >= hex_from;
    let case_only = in_hex && before.is_ascii_hexdigit() && before.eq_ignore_ascii_case(&after);
    let signature = &parts[0];
    let body = parts.get(1).map_or(body, Vec::as_slice);
    let timestamp = parts.get(2).map_or(timestamp.as_bytes(), Vec::as_slice);
    let outcome = check(timestamp, signature, body);
    assert_eq!(outcome.is_ok(), case_only, "{scheme:?}: bit {flip} of part {part} flipped: {outcome:?}");
}

/// Everything after the first zero byte is the payload (JSON, else `null`). Rendering never
/// panics, text without braces is left as written, and every placeholder adds at most its cap
/// (plus `…`), so a payload cannot blow up the prompt. The event type header is cleaned.
fn webhook_template(data: &[u8]) {
    let Some((max, rest)) = data.split_first() else { return };
    let max = 1 + usize::from(max % 64);
    let (template, payload) = rest.split_at(rest.iter().position(|b| *b == 0).unwrap_or(rest.len()));
    let template = String::from_utf8_lossy(template);
    let payload: Value = serde_json::from_slice(payload.get(1..).unwrap_or_default()).unwrap_or(Value::Null);
    let kind = event_type(&|name: &str| (name == "x-event-type").then(|| template.clone().into_owned()));
    assert!(kind.chars().count() <= 128 && !kind.chars().any(char::is_control), "event type {kind:?}");
    let out = render(&template, &payload, &kind, max);
    if !template.contains(['{', '}']) {
        assert_eq!(out, template, "text without placeholders changed");
    }
    let bound = template.chars().count() + template.matches('{').count() * (max + 1);
    assert!(out.chars().count() <= bound, "{template:?} over {payload} rendered {} chars", out.chars().count());
}

#[cfg(test)]
mod tests {
    use hermesd_platform::corpus::seeds;

    #[test]
    fn corpus_seeds_pass() {
        seeds("sse").iter().for_each(|seed| super::sse(seed));
        seeds("tool_arguments").iter().for_each(|seed| super::tool_arguments(seed));
        seeds("webhook").iter().for_each(|seed| super::webhook(seed));
    }
}
