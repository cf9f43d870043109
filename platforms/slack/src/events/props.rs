//! Properties of the Events API signature check over generated requests: a request signed over
//! the exact body verifies inside the 300 s window and is refused outside it, and any single-bit
//! change of the body, the timestamp or the tag is refused.

use proptest::prelude::*;

use super::*;

const NOW: i64 = 1_700_000_000;

fn request(timestamp: &[u8], signature: &[u8], body: &[u8]) -> WebhookRequest {
    WebhookRequest {
        headers: vec![
            (TIMESTAMP_HEADER.into(), String::from_utf8_lossy(timestamp).into_owned()),
            (SIGNATURE_HEADER.into(), String::from_utf8_lossy(signature).into_owned()),
        ],
        body: body.to_vec(),
    }
}

fn flip(bytes: &[u8], bit: prop::sample::Index) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let at = bit.index(bytes.len() * 8);
    out[at / 8] ^= 1 << (at % 8);
    out
}

proptest! {
    #[test]
    fn signatures_bind_body_and_timestamp(
        secret in "[ -~]{1,40}",
        body in prop::collection::vec(any::<u8>(), 1..200),
        skew in -400i64..400,
        bit in any::<prop::sample::Index>(),
    ) {
        let timestamp = (NOW - skew).to_string();
        let signature = sign(&secret, &timestamp, &body);
        let exact = verify(&secret, &request(timestamp.as_bytes(), signature.as_bytes(), &body), NOW);
        if skew.abs() > MAX_SKEW_SECS {
            prop_assert_eq!(exact, Err(Refused::Stale));
            return Ok(());
        }
        prop_assert_eq!(exact, Ok(()));
        let flipped_body = request(timestamp.as_bytes(), signature.as_bytes(), &flip(&body, bit));
        prop_assert_eq!(verify(&secret, &flipped_body, NOW), Err(Refused::Mismatch));
        let flipped_time = request(&flip(timestamp.as_bytes(), bit), signature.as_bytes(), &body);
        prop_assert!(verify(&secret, &flipped_time, NOW).is_err());
        // Flip a bit of the tag itself, then of the header as sent (only a hex digit's case
        // change names the same tag).
        let tag = hermesd_platform::hmac_sha256::decode_hex(&signature[3..]).expect("a tag this module wrote");
        let other = format!("v0={}", flip(&tag, bit).iter().map(|b| format!("{b:02x}")).collect::<String>());
        prop_assert_eq!(verify(&secret, &request(timestamp.as_bytes(), other.as_bytes(), &body), NOW), Err(Refused::Mismatch));
        let sent = flip(signature.as_bytes(), bit);
        let case_only = sent.eq_ignore_ascii_case(signature.as_bytes()) && sent.starts_with(b"v0=");
        prop_assert_eq!(verify(&secret, &request(timestamp.as_bytes(), &sent, &body), NOW).is_ok(), case_only);
    }

    #[test]
    fn other_secrets_and_arbitrary_headers_never_verify(
        secret in "[ -~]{1,40}",
        other in "[ -~]{1,40}",
        body in prop::collection::vec(any::<u8>(), 0..200),
        sent in "\\PC{0,80}",
    ) {
        let timestamp = NOW.to_string();
        let forged = sign(&other, &timestamp, &body);
        prop_assert_eq!(verify(&secret, &request(timestamp.as_bytes(), forged.as_bytes(), &body), NOW).is_ok(), secret == other);
        prop_assert!(verify(&secret, &request(timestamp.as_bytes(), sent.as_bytes(), &body), NOW).is_err());
    }
}
