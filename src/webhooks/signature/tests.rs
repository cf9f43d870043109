//! Tests for webhook signature verification: each scheme's accept and refuse cases, and a
//! deterministic fuzz loop checking that only correctly signed input is ever accepted.

use std::collections::HashMap;

use super::*;

const SECRET: &[u8] = b"It's a Secret to Everybody";
const BODY: &[u8] = b"Hello, World!";
const NOW: i64 = 1_780_000_000;

fn with(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |name: &str| map.get(name).cloned()
}

fn check(scheme: Scheme, headers: &[(&str, &str)], body: &[u8]) -> Result<(), SignatureError> {
    verify(scheme, SECRET, &with(headers), body, NOW)
}

#[test]
fn github_matches_the_documented_example() {
    // From GitHub's "Validating webhook deliveries" documentation.
    let expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    assert_eq!(sign_github(SECRET, BODY), expected);
    assert_eq!(check(Scheme::GitHub, &[("x-hub-signature-256", expected)], BODY), Ok(()));
}

#[test]
fn github_refusals() {
    let good = sign_github(SECRET, BODY);
    let upper = format!("sha256={}", good["sha256=".len()..].to_ascii_uppercase());
    assert_eq!(check(Scheme::GitHub, &[("x-hub-signature-256", &upper)], BODY), Ok(()), "hex is case-insensitive");
    assert_eq!(
        check(Scheme::GitHub, &[("x-hub-signature-256", &good)], b"Hello, World?"),
        Err(SignatureError::Mismatch)
    );
    let other = sign_github(b"another secret", BODY);
    assert_eq!(check(Scheme::GitHub, &[("x-hub-signature-256", &other)], BODY), Err(SignatureError::Mismatch));
    assert_eq!(check(Scheme::GitHub, &[], BODY), Err(SignatureError::Missing("x-hub-signature-256")));
    let bare = &good["sha256=".len()..];
    assert_eq!(
        check(Scheme::GitHub, &[("x-hub-signature-256", bare)], BODY),
        Err(SignatureError::Malformed("x-hub-signature-256: expected sha256=<hex>"))
    );
    let non_hex = format!("sha256={}", "zz".repeat(32));
    let truncated = &good[..good.len() - 2];
    for value in [non_hex.as_str(), truncated, "sha256=", "sha256=ab"] {
        assert_eq!(
            check(Scheme::GitHub, &[("x-hub-signature-256", value)], BODY),
            Err(SignatureError::Malformed("x-hub-signature-256: expected 64 hex digits")),
            "{value}"
        );
    }
    // The old SHA-1 header does not count.
    assert_eq!(
        check(Scheme::GitHub, &[("x-hub-signature", "sha1=00")], BODY),
        Err(SignatureError::Missing("x-hub-signature-256"))
    );
}

#[test]
fn gitlab_token() {
    let secret = std::str::from_utf8(SECRET).expect("ascii");
    assert_eq!(check(Scheme::GitLab, &[("x-gitlab-token", secret)], BODY), Ok(()));
    assert_eq!(
        check(Scheme::GitLab, &[("x-gitlab-token", "It's a Secret to Everybody!")], BODY),
        Err(SignatureError::Mismatch)
    );
    assert_eq!(check(Scheme::GitLab, &[("x-gitlab-token", "It's a Secret")], BODY), Err(SignatureError::Mismatch));
    assert_eq!(check(Scheme::GitLab, &[("x-gitlab-token", "")], BODY), Err(SignatureError::Mismatch));
    assert_eq!(check(Scheme::GitLab, &[], BODY), Err(SignatureError::Missing("x-gitlab-token")));
}

#[test]
fn generic_accepts_within_the_window() {
    for sent in [NOW, NOW - 300, NOW + 300, NOW - 1] {
        let signature = sign_generic(SECRET, sent, BODY);
        let ts = sent.to_string();
        assert_eq!(
            check(Scheme::Generic, &[("x-webhook-signature", &signature), ("x-webhook-timestamp", &ts)], BODY),
            Ok(())
        );
        let prefixed = format!("sha256={signature}");
        assert_eq!(
            check(Scheme::Generic, &[("x-webhook-signature", &prefixed), ("x-webhook-timestamp", &ts)], BODY),
            Ok(())
        );
    }
}

#[test]
fn generic_refusals() {
    let ts = NOW.to_string();
    let good = sign_generic(SECRET, NOW, BODY);
    let headers =
        |sig: &str, ts: &str| vec![("x-webhook-signature", sig.to_owned()), ("x-webhook-timestamp", ts.to_owned())];
    let run = |pairs: Vec<(&str, String)>, body: &[u8]| {
        let refs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        check(Scheme::Generic, &refs, body)
    };
    assert_eq!(run(headers(&good, &ts), b"tampered"), Err(SignatureError::Mismatch));
    assert_eq!(run(headers(&sign_generic(b"wrong", NOW, BODY), &ts), BODY), Err(SignatureError::Mismatch));
    // A signature for another timestamp does not carry over (replay with a fresh timestamp).
    let other_ts = (NOW - 10).to_string();
    assert_eq!(run(headers(&good, &other_ts), BODY), Err(SignatureError::Mismatch));
    let stale = sign_generic(SECRET, NOW - 301, BODY);
    assert_eq!(run(headers(&stale, &(NOW - 301).to_string()), BODY), Err(SignatureError::Stale { skew_secs: 301 }));
    let future = sign_generic(SECRET, NOW + 3600, BODY);
    assert_eq!(run(headers(&future, &(NOW + 3600).to_string()), BODY), Err(SignatureError::Stale { skew_secs: -3600 }));
    assert_eq!(
        run(headers(&good, &i64::MIN.to_string()), BODY),
        Err(SignatureError::Stale { skew_secs: i64::MAX }),
        "extreme timestamps saturate"
    );
    assert_eq!(
        run(headers(&good, "yesterday"), BODY),
        Err(SignatureError::Malformed("x-webhook-timestamp: expected Unix seconds"))
    );
    assert_eq!(
        run(headers("not hex", &ts), BODY),
        Err(SignatureError::Malformed("x-webhook-signature: expected 64 hex digits"))
    );
    assert_eq!(
        run(vec![("x-webhook-timestamp", ts.clone())], BODY),
        Err(SignatureError::Missing("x-webhook-signature"))
    );
    assert_eq!(
        run(vec![("x-webhook-signature", good.clone())], BODY),
        Err(SignatureError::Missing("x-webhook-timestamp"))
    );
}

#[test]
fn empty_secret_refuses_everything() {
    let headers = with(&[("x-gitlab-token", "")]);
    assert_eq!(verify(Scheme::GitLab, b"", &headers, BODY, NOW), Err(SignatureError::NoSecret));
    let sig = sign_github(b"", BODY);
    let headers = with(&[("x-hub-signature-256", &sig)]);
    assert_eq!(verify(Scheme::GitHub, b"", &headers, BODY, NOW), Err(SignatureError::NoSecret));
}

#[test]
fn errors_read_well() {
    assert_eq!(SignatureError::Missing("x-gitlab-token").to_string(), "missing header x-gitlab-token");
    assert_eq!(
        SignatureError::Stale { skew_secs: 301 }.to_string(),
        "timestamp is 301 s from now, outside the ±300 s window"
    );
}

/// A xorshift64 generator: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let len = self.below(max + 1);
        (0..len).map(|_| self.next() as u8).collect()
    }
    fn text(&mut self, max: usize) -> String {
        const PIECES: &[&str] = &["a", "F", "0", "9", "=", "sha256=", " ", "é", "-", "+", "z", "\u{0}", "ff"];
        (0..self.below(max + 1)).map(|_| PIECES[self.below(PIECES.len())]).collect()
    }
}

/// Independently decides whether a delivery is correctly signed.
fn correctly_signed(scheme: Scheme, secret: &[u8], headers: &HashMap<&str, String>, body: &[u8]) -> bool {
    if secret.is_empty() {
        return false;
    }
    let hex_of = |value: &str, prefix_required: bool| {
        let value = value.trim();
        match value.strip_prefix("sha256=") {
            Some(hex) => Some(hex.to_ascii_lowercase()),
            None if prefix_required => None,
            None => Some(value.to_ascii_lowercase()),
        }
    };
    match scheme {
        Scheme::GitHub => headers
            .get("x-hub-signature-256")
            .and_then(|v| hex_of(v, true))
            .is_some_and(|hex| format!("sha256={hex}") == sign_github(secret, body)),
        Scheme::GitLab => headers.get("x-gitlab-token").is_some_and(|t| t.as_bytes() == secret),
        Scheme::Generic => {
            let (Some(sig), Some(ts)) = (headers.get("x-webhook-signature"), headers.get("x-webhook-timestamp")) else {
                return false;
            };
            let Ok(sent) = ts.trim().parse::<i64>() else { return false };
            let fresh = (NOW - 300..=NOW + 300).contains(&sent);
            let mut signed = ts.trim().as_bytes().to_vec();
            signed.push(b'.');
            signed.extend_from_slice(body);
            fresh && hex_of(sig, false).is_some_and(|hex| format!("sha256={hex}") == sign_github(secret, &signed))
        }
    }
}

#[test]
fn fuzz_only_correct_signatures_pass() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut accepted, mut correct) = (0, 0);
    for round in 0..5_000 {
        let scheme = [Scheme::GitHub, Scheme::GitLab, Scheme::Generic][rng.below(3)];
        let secret = if rng.below(4) == 0 { b"s3cret".to_vec() } else { rng.bytes(40) };
        let body = rng.bytes(200);
        let sent = NOW + rng.below(1_000) as i64 - 500;
        let mut headers: HashMap<&str, String> = HashMap::new();
        for name in ["x-hub-signature-256", "x-gitlab-token", "x-webhook-signature", "x-webhook-timestamp"] {
            let value = match (rng.below(6), name) {
                (0, _) => continue,
                (1 | 2, "x-hub-signature-256") => sign_github(&secret, &body),
                (1 | 2, "x-gitlab-token") => String::from_utf8_lossy(&secret).into_owned(),
                (1 | 2, "x-webhook-signature") => sign_generic(&secret, sent, &body),
                (1 | 2, _) => sent.to_string(),
                (3, _) => sign_github(&rng.bytes(8), &body),
                (4, _) => {
                    // Flip one character of a correct value.
                    let mut value = sign_generic(&secret, sent, &body).into_bytes();
                    let at = rng.below(value.len());
                    value[at] = b"0123456789abcdefxyz="[rng.below(20)];
                    String::from_utf8(value).expect("ascii")
                }
                _ => rng.text(80),
            };
            headers.insert(name, value);
        }
        let lookup = |name: &str| headers.get(name).cloned();
        let result = verify(scheme, &secret, &lookup, &body, NOW);
        let expected = correctly_signed(scheme, &secret, &headers, &body);
        assert_eq!(result.is_ok(), expected, "round {round}: {scheme:?} {result:?} headers {headers:?}");
        accepted += usize::from(result.is_ok());
        correct += usize::from(expected);
    }
    // The generator must exercise both outcomes, or the loop proves nothing.
    assert!(accepted > 300, "only {accepted} accepted");
    assert!(correct == accepted);
}
