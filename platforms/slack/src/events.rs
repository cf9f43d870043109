//! The Events API over HTTP: Slack POSTs signed events (and interactions) to `/slack/events` on
//! the host's server.
//!
//! Every request is verified first (`x-slack-signature`, v0 HMAC-SHA256 over
//! `v0:{timestamp}:{body}`, at most 300 s old; 401 otherwise). A request is answered 200 only
//! after its event was accepted; anything else makes Slack deliver it again, and its retries
//! (`x-slack-retry-num`) carry the same message, so they deduplicate by event id.
//!
//! Besides event callbacks it answers Slack's `url_verification` challenge and takes interactivity
//! requests (a button press posted as a `payload=<json>` form).

use hermesd_platform::{PlatformContext, WebhookRequest, WebhookResponse, hmac_sha256};

use crate::inbound::{Callback, Interaction, normalise_interaction};
use crate::{NAME, SlackPlatform};

/// The header Slack sends the signature in (lowercase, as the host passes headers).
pub(crate) const SIGNATURE_HEADER: &str = "x-slack-signature";
/// The header Slack sends the signing timestamp in.
pub(crate) const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";
/// Set on Slack's redeliveries.
const RETRY_HEADER: &str = "x-slack-retry-num";
const RETRY_REASON_HEADER: &str = "x-slack-retry-reason";

/// The oldest (and most future) request timestamp accepted, in seconds: Slack's own window.
pub(crate) const MAX_SKEW_SECS: i64 = 300;

/// Why a request was refused before it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    #[error("missing signature or timestamp header")]
    Missing,
    #[error("timestamp outside the 300 s window")]
    Stale,
    #[error("malformed signature")]
    Malformed,
    #[error("signature mismatch")]
    Mismatch,
}

/// Checks a request's v0 signature against `secret` at time `now` (Unix seconds).
pub(crate) fn verify(secret: &str, request: &WebhookRequest, now: i64) -> Result<(), Refused> {
    let timestamp = request.header(TIMESTAMP_HEADER).ok_or(Refused::Missing)?;
    let signature = request.header(SIGNATURE_HEADER).ok_or(Refused::Missing)?;
    let sent: i64 = timestamp.trim().parse().map_err(|_| Refused::Stale)?;
    if (now - sent).abs() > MAX_SKEW_SECS {
        return Err(Refused::Stale);
    }
    let tag = signature.trim().strip_prefix("v0=").and_then(hmac_sha256::decode_hex).ok_or(Refused::Malformed)?;
    let base = format!("v0:{}:", timestamp.trim());
    // Compared in constant time.
    hmac_sha256::verify(secret.as_bytes(), &[base.as_bytes(), &request.body], &tag)
        .then_some(())
        .ok_or(Refused::Mismatch)
}

/// The `x-slack-signature` value Slack would send for `body` at `timestamp`.
#[cfg(any(fuzzing, test))]
pub(crate) fn sign(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let base = format!("v0:{timestamp}:");
    format!("v0={}", hmac_sha256::encode_hex(&hmac_sha256::tag(secret.as_bytes(), &[base.as_bytes(), body])))
}

/// Verifies, parses, normalises and accepts one Events API request.
pub(crate) async fn handle(
    platform: &SlackPlatform,
    ctx: &PlatformContext,
    request: &WebhookRequest,
    secret: &str,
    now: i64,
) -> WebhookResponse {
    // An empty configured secret would accept anyone: refuse everything instead.
    if secret.is_empty() {
        return respond(401, r#"{"error":"unauthorized"}"#);
    }
    if let Err(refused) = verify(secret, request, now) {
        tracing::debug!(platform = NAME, %refused, "events api request refused");
        return respond(401, r#"{"error":"unauthorized"}"#);
    }
    if let Some(retry) = request.header(RETRY_HEADER) {
        let reason = request.header(RETRY_REASON_HEADER).unwrap_or("unknown");
        tracing::debug!(platform = NAME, retry, reason, "slack redelivered an event");
    }
    platform.health.progressed();
    let form = request.header("content-type").is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if form {
        return interaction(platform, ctx, &request.body).await;
    }
    let body: serde_json::Value = match serde_json::from_slice(&request.body) {
        Ok(body) => body,
        Err(_) => return respond(400, r#"{"error":"bad json"}"#),
    };
    match body["type"].as_str() {
        Some("url_verification") => {
            let challenge = body["challenge"].as_str().unwrap_or_default();
            respond(200, &serde_json::json!({ "challenge": challenge }).to_string())
        }
        Some("event_callback") => {
            let Ok(callback) = serde_json::from_value::<Callback>(body) else {
                return respond(400, r#"{"error":"bad event"}"#);
            };
            let Some(identity) = platform.identity() else { return respond(503, r#"{"error":"starting"}"#) };
            match platform.deliver(&identity, ctx, &callback).await {
                Ok(()) => respond(200, ""),
                Err(error) => {
                    tracing::warn!(platform = NAME, %error, "ingress refused an event; slack will retry");
                    respond(503, r#"{"error":"not stored"}"#)
                }
            }
        }
        // app_rate_limited and anything newer: nothing to store.
        _ => respond(200, ""),
    }
}

/// A button press posted as `payload=<json>` (Slack's interactivity request URL).
async fn interaction(platform: &SlackPlatform, ctx: &PlatformContext, body: &[u8]) -> WebhookResponse {
    let payload = form_urlencoded::parse(body).find(|(key, _)| key == "payload").map(|(_, value)| value);
    let Some(interaction) = payload.and_then(|p| serde_json::from_str::<Interaction>(&p).ok()) else {
        return respond(400, r#"{"error":"bad payload"}"#);
    };
    let Some(identity) = platform.identity() else { return respond(503, r#"{"error":"starting"}"#) };
    let Some(event) = normalise_interaction(&interaction, &identity) else { return respond(200, "") };
    match platform.deliver_press(ctx, event).await {
        Ok(()) => respond(200, ""),
        Err(error) => {
            tracing::warn!(platform = NAME, %error, "ingress refused a button press");
            respond(503, r#"{"error":"not stored"}"#)
        }
    }
}

fn respond(status: u16, body: &str) -> WebhookResponse {
    WebhookResponse { status, body: body.to_owned() }
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const NOW: i64 = 1_531_420_618;

    fn request(timestamp: &str, signature: &str, body: &str) -> WebhookRequest {
        WebhookRequest {
            headers: vec![(TIMESTAMP_HEADER.into(), timestamp.into()), (SIGNATURE_HEADER.into(), signature.into())],
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn slacks_documented_example_verifies() {
        // The example from Slack's "Verifying requests from Slack" page.
        let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let signature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        assert_eq!(sign(SECRET, "1531420618", body.as_bytes()), signature);
        assert_eq!(verify(SECRET, &request("1531420618", signature, body), NOW), Ok(()));
    }

    #[test]
    fn bad_signatures_and_stale_timestamps_are_refused() {
        let body = r#"{"type":"event_callback"}"#;
        let good = sign(SECRET, "1531420618", body.as_bytes());
        let table = [
            (request("1531420618", &good, body), NOW, Ok(())),
            (request("1531420618", &good, body), NOW + MAX_SKEW_SECS, Ok(())),
            (request("1531420618", &good, body), NOW + MAX_SKEW_SECS + 1, Err(Refused::Stale)),
            (request("1531420618", &good, body), NOW - MAX_SKEW_SECS - 1, Err(Refused::Stale)),
            (request("1531420618", &good, "{}"), NOW, Err(Refused::Mismatch)),
            (request("1531420619", &good, body), NOW, Err(Refused::Mismatch)),
            (request("1531420618", &sign("other", "1531420618", body.as_bytes()), body), NOW, Err(Refused::Mismatch)),
            (request("1531420618", "v0=zz", body), NOW, Err(Refused::Malformed)),
            (request("1531420618", &good.replace("v0=", "v1="), body), NOW, Err(Refused::Malformed)),
            (request("soon", &good, body), NOW, Err(Refused::Stale)),
            (WebhookRequest { headers: Vec::new(), body: body.into() }, NOW, Err(Refused::Missing)),
        ];
        for (index, (request, now, want)) in table.into_iter().enumerate() {
            assert_eq!(verify(SECRET, &request, now), want, "row {index}");
        }
    }
}
