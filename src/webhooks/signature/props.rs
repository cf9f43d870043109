//! Properties of webhook signature verification over generated deliveries: a delivery signed
//! over the exact body verifies (the generic scheme inside its ±300 s window only), and any
//! single-bit change of the body, the timestamp or the tag is refused.

use proptest::prelude::*;

use super::*;

const NOW: i64 = 1_780_000_000;

fn headers(pairs: Vec<(&'static str, Vec<u8>)>) -> impl Fn(&str) -> Option<String> {
    move |name: &str| {
        pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| String::from_utf8_lossy(value).into_owned())
    }
}

fn flip(bytes: &[u8], bit: prop::sample::Index) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let at = bit.index(bytes.len() * 8);
    out[at / 8] ^= 1 << (at % 8);
    out
}

/// Flips one bit of the 32-byte tag inside a `[prefix]<64 hex>` header value.
fn flip_tag(value: &str, prefix: &str, bit: prop::sample::Index) -> Vec<u8> {
    let tag = hmac_sha256::decode_hex(&value[prefix.len()..]).expect("a tag this module wrote");
    format!("{prefix}{}", hmac_sha256::encode_hex(&flip(&tag, bit))).into_bytes()
}

fn secret() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 1..40)
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 1..200)
}

proptest! {
    #[test]
    fn github_signatures_bind_the_body(secret in secret(), body in body(), bit in any::<prop::sample::Index>()) {
        let signature = sign_github(&secret, &body);
        let verify_with = |signature: Vec<u8>, body: &[u8]| {
            verify(Scheme::GitHub, &secret, &headers(vec![(GITHUB_SIGNATURE, signature)]), body, NOW)
        };
        prop_assert_eq!(verify_with(signature.clone().into_bytes(), &body), Ok(()));
        prop_assert_eq!(verify_with(signature.clone().into_bytes(), &flip(&body, bit)), Err(SignatureError::Mismatch));
        prop_assert_eq!(verify_with(flip_tag(&signature, "sha256=", bit), &body), Err(SignatureError::Mismatch));
        // Any bit of the header as sent: refused, unless it only changed a hex digit's case.
        let sent = flip(signature.as_bytes(), bit);
        let case_only = sent.eq_ignore_ascii_case(signature.as_bytes()) && sent.starts_with(b"sha256=");
        prop_assert_eq!(verify_with(sent, &body).is_ok(), case_only);
    }

    #[test]
    fn generic_signatures_bind_body_and_timestamp(
        secret in secret(),
        body in body(),
        skew in -400i64..400,
        bit in any::<prop::sample::Index>(),
    ) {
        let timestamp = NOW - skew;
        let signature = sign_generic(&secret, timestamp, &body);
        let verify_with = |signature: Vec<u8>, timestamp: Vec<u8>, body: &[u8]| {
            let pairs = vec![(GENERIC_SIGNATURE, signature), (GENERIC_TIMESTAMP, timestamp)];
            verify(Scheme::Generic, &secret, &headers(pairs), body, NOW)
        };
        let stamp = timestamp.to_string().into_bytes();
        let exact = verify_with(signature.clone().into_bytes(), stamp.clone(), &body);
        if skew.abs() > MAX_SKEW_SECS {
            prop_assert_eq!(exact, Err(SignatureError::Stale { skew_secs: skew }));
            return Ok(());
        }
        prop_assert_eq!(exact, Ok(()));
        prop_assert_eq!(verify_with(format!("sha256={signature}").into_bytes(), stamp.clone(), &body), Ok(()));
        prop_assert!(verify_with(signature.clone().into_bytes(), stamp.clone(), &flip(&body, bit)).is_err());
        prop_assert!(verify_with(signature.clone().into_bytes(), flip(&stamp, bit), &body).is_err());
        prop_assert!(verify_with(flip_tag(&signature, "", bit), stamp, &body).is_err());
    }

    #[test]
    fn gitlab_tokens_must_match_exactly(token in "[ -~]{1,40}", bit in any::<prop::sample::Index>()) {
        let verify_with = |sent: Vec<u8>| {
            verify(Scheme::GitLab, token.as_bytes(), &headers(vec![(GITLAB_TOKEN, sent)]), b"{}", NOW)
        };
        prop_assert_eq!(verify_with(token.clone().into_bytes()), Ok(()));
        prop_assert_eq!(verify_with(flip(token.as_bytes(), bit)), Err(SignatureError::Mismatch));
    }

    #[test]
    fn arbitrary_headers_never_verify(secret in secret(), body in body(), sent in "\\PC{0,80}", stamp in "\\PC{0,12}") {
        for scheme in [Scheme::GitHub, Scheme::Generic] {
            let pairs = vec![
                (GITHUB_SIGNATURE, sent.clone().into_bytes()),
                (GENERIC_SIGNATURE, sent.clone().into_bytes()),
                (GENERIC_TIMESTAMP, stamp.clone().into_bytes()),
            ];
            prop_assert!(verify(scheme, &secret, &headers(pairs), &body, NOW).is_err());
        }
    }
}
