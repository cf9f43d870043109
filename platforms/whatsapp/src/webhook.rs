//! The webhook at `/whatsapp/webhook`: Meta's GET verification handshake, and POSTs signed with
//! `X-Hub-Signature-256` (`sha256=<hex HMAC-SHA256(app secret, raw body)>`).
//!
//! A POST is verified before anything is read (constant-time compare; 401 and nothing stored
//! otherwise) and answered 200 only after every message in it was accepted (or refused as a
//! stranger's) and every status recorded; anything else answers 503 so Meta delivers the whole
//! body again, and what was already accepted deduplicates by its wamid.
//!
//! The GET handshake (`Platform::webhook_get`) echoes `hub.challenge` only for `hub.mode=subscribe`
//! with the right `hub.verify_token`, compared in constant time. POST bodies over `max_body_bytes`
//! are refused before the signature is checked. A `failed` status for a message this process just
//! sent, whose receipt the host has not stored yet, also answers 503, so Meta delivers it again
//! once the receipt is there.

use hermesd_platform::hmac_sha256;
use hermesd_platform::{PlatformContext, WebhookRequest, WebhookResponse};

use crate::{NAME, WhatsAppPlatform};

/// The header Meta signs the body in (lowercase, as the host passes headers).
pub(crate) const SIGNATURE_HEADER: &str = "x-hub-signature-256";

/// Why a POST was refused before it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    #[error("missing signature header")]
    Missing,
    #[error("malformed signature")]
    Malformed,
    #[error("signature mismatch")]
    Mismatch,
}

/// Checks `X-Hub-Signature-256` of `body` against `secret`.
pub(crate) fn verify(secret: &str, signature: Option<&str>, body: &[u8]) -> Result<(), Refused> {
    let signature = signature.ok_or(Refused::Missing)?;
    let hex = signature.trim().strip_prefix("sha256=");
    let tag = hex.and_then(hmac_sha256::decode_hex).ok_or(Refused::Malformed)?;
    // Compared in constant time.
    hmac_sha256::verify(secret.as_bytes(), &[body], &tag).then_some(()).ok_or(Refused::Mismatch)
}

/// The `X-Hub-Signature-256` value Meta would send for `body`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hmac_sha256::encode_hex(&hmac_sha256::tag(secret.as_bytes(), &[body])))
}

/// The GET handshake: `hub.mode=subscribe`, the right `hub.verify_token` → echo `hub.challenge`.
pub(crate) fn handshake(verify_token: &str, query: &str) -> WebhookResponse {
    let mut mode = None;
    let mut token = None;
    let mut challenge = None;
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(value);
        match percent_decode(key).as_str() {
            "hub.mode" => mode = Some(value),
            "hub.verify_token" => token = Some(value),
            "hub.challenge" => challenge = Some(value),
            _ => {}
        }
    }
    let token_ok =
        token.is_some_and(|t| !verify_token.is_empty() && constant_eq(t.as_bytes(), verify_token.as_bytes()));
    match (mode.as_deref(), challenge) {
        (Some("subscribe"), Some(challenge)) if token_ok => {
            tracing::info!(platform = NAME, "webhook subscription verified");
            WebhookResponse { status: 200, body: challenge }
        }
        _ => {
            tracing::warn!(platform = NAME, "webhook verification refused (wrong hub.verify_token or mode)");
            WebhookResponse { status: 403, body: String::new() }
        }
    }
}

fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    // Compare the HMAC of one with the other's under a fixed key: constant time whatever the
    // lengths.
    let key = b"hermesd-verify-token";
    hmac_sha256::verify(key, &[a], &hmac_sha256::tag(key, &[b]))
}

/// Decodes `%XX` and `+` of a query component; invalid escapes stay as they are.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Verifies, parses and hands over one POST.
pub(crate) async fn handle(
    platform: &WhatsAppPlatform,
    ctx: &PlatformContext,
    request: &WebhookRequest,
) -> WebhookResponse {
    let secret = platform.settings.app_secret.as_str();
    // An empty configured secret would accept anyone: refuse everything instead.
    if secret.is_empty() {
        return respond(401, r#"{"error":"unauthorized"}"#);
    }
    if request.body.len() > platform.settings.max_body_bytes {
        return respond(413, r#"{"error":"body too large"}"#);
    }
    if let Err(refused) = verify(secret, request.header(SIGNATURE_HEADER), &request.body) {
        tracing::warn!(platform = NAME, %refused, "webhook refused");
        return respond(401, r#"{"error":"unauthorized"}"#);
    }
    platform.health.signed_webhook();
    let Some(parsed) = crate::inbound::parse(&request.body, &platform.settings.phone_number_id, crate::unix_ms())
    else {
        tracing::warn!(platform = NAME, "signed webhook body is not a whatsapp notification");
        return respond(400, r#"{"error":"bad payload"}"#);
    };
    if parsed.skipped > 0 {
        tracing::debug!(platform = NAME, skipped = parsed.skipped, "messages that start no turn");
    }
    match platform.deliver_all(ctx, parsed).await {
        Ok(()) => respond(200, ""),
        Err(error) => {
            tracing::warn!(platform = NAME, %error, "ingress refused a webhook; meta will deliver it again");
            respond(503, r#"{"error":"not stored"}"#)
        }
    }
}

fn respond(status: u16, body: &str) -> WebhookResponse {
    WebhookResponse { status, body: body.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_checked_over_the_raw_body() {
        let body = br#"{"object":"whatsapp_business_account","entry":[]}"#;
        let good = sign("app-secret", body);
        let other = sign("other", body);
        assert!(good.starts_with("sha256=") && good.len() == 71, "{good}");
        let table = [
            (Some(good.as_str()), &body[..], Ok(())),
            (Some(good.as_str()), &b"{}"[..], Err(Refused::Mismatch)),
            (Some(other.as_str()), &body[..], Err(Refused::Mismatch)),
            (Some(good.trim_start_matches("sha256=")), &body[..], Err(Refused::Malformed)),
            (Some("sha256=zz"), &body[..], Err(Refused::Malformed)),
            (None, &body[..], Err(Refused::Missing)),
        ];
        for (index, (signature, body, want)) in table.into_iter().enumerate() {
            assert_eq!(verify("app-secret", signature, body), want, "row {index}");
        }
        // Upper-case hex, as some proxies rewrite it, still verifies.
        assert_eq!(verify("app-secret", Some(&good.to_uppercase().replace("SHA256=", "sha256=")), body), Ok(()));
    }

    #[test]
    fn the_handshake_echoes_the_challenge_only_for_the_right_token() {
        let ok = handshake("my token", "hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=my+token");
        assert_eq!(ok, WebhookResponse { status: 200, body: "1158201444".into() });
        let encoded = handshake("my token", "hub.verify_token=my%20token&hub.mode=subscribe&hub.challenge=abc");
        assert_eq!(encoded.status, 200);
        for query in [
            "hub.mode=subscribe&hub.challenge=1&hub.verify_token=wrong",
            "hub.mode=unsubscribe&hub.challenge=1&hub.verify_token=my+token",
            "hub.mode=subscribe&hub.verify_token=my+token",
            "",
            "hub.mode=subscribe&hub.challenge=1&hub.verify_token=%",
        ] {
            assert_eq!(handshake("my token", query).status, 403, "{query}");
        }
        assert_eq!(handshake("", "hub.mode=subscribe&hub.challenge=1&hub.verify_token=").status, 403);
    }

    #[test]
    fn percent_decoding_never_panics() {
        for text in ["%", "%4", "%zz", "a%41b", "%e2%82%ac", "+"] {
            let _ = percent_decode(text);
        }
        assert_eq!(percent_decode("a%41b+c"), "aAb c");
        assert_eq!(percent_decode("%e2%82%ac"), "€");
    }
}
