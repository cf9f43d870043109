//! Webhook authentication (DESIGN.md §7): GitHub's `X-Hub-Signature-256`, GitLab's shared token,
//! and a generic HMAC-SHA256 over `"{timestamp}.{body}"` with a ±300 s window. Every comparison
//! of secret material is constant-time; nothing here does IO or reads the clock.
//!
//! `retention.inbound_events` keeps a delivery's records for at least an hour, twice the generic
//! scheme's ±300 s window (a compile-time assertion), so a generic replay is refused by its
//! timestamp once its records are gone. GitHub and GitLab sign no time: their replays after pruning
//! cannot be told apart (README, Security).

use hermesd_platform::hmac_sha256;

/// How far the generic scheme's timestamp may be from now, either way, in seconds.
pub const MAX_SKEW_SECS: i64 = 300;

// A generic delivery is deduplicated for `retention.inbound_events` (at least an hour); once
// its record is pruned, a replay must already be refused by its timestamp. A signature made up
// to the window ahead of now stays valid for twice the window.
const _: () = assert!(2 * MAX_SKEW_SECS.unsigned_abs() <= crate::config::MIN_RETENTION_SECS);

const GITHUB_SIGNATURE: &str = "x-hub-signature-256";
const GITLAB_TOKEN: &str = "x-gitlab-token";
const GENERIC_SIGNATURE: &str = "x-webhook-signature";
const GENERIC_TIMESTAMP: &str = "x-webhook-timestamp";

/// How a route's sender proves it knows the secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `X-Hub-Signature-256: sha256=<hex>` = HMAC-SHA256(secret, body).
    GitHub,
    /// `X-Gitlab-Token` equals the secret.
    GitLab,
    /// `X-Webhook-Signature: [sha256=]<hex>` = HMAC-SHA256(secret, "{timestamp}.{body}"), with
    /// `X-Webhook-Timestamp` in Unix seconds within [`MAX_SKEW_SECS`] of now.
    Generic,
}

/// Why a delivery was not authenticated. The HTTP layer answers 401 for all of them (500 for
/// [`SignatureError::NoSecret`], which is a configuration fault) and logs the detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// A required header is absent; the value is its lowercase name.
    #[error("missing header {0}")]
    Missing(&'static str),
    /// A header is present but not in the expected form.
    #[error("malformed {0}")]
    Malformed(&'static str),
    /// Well-formed, but signed with another secret or over another body.
    #[error("signature mismatch")]
    Mismatch,
    /// The generic scheme's timestamp is outside the window; positive skew means in the past.
    #[error("timestamp is {skew_secs} s from now, outside the ±{MAX_SKEW_SECS} s window")]
    Stale {
        /// Now minus the timestamp, in seconds.
        skew_secs: i64,
    },
    /// The route's secret is empty, which anyone could forge; config validation should have
    /// refused it, and this refuses every delivery in case it did not.
    #[error("route has an empty secret")]
    NoSecret,
}

/// Checks a delivery against the route's `secret`. `headers` looks a header up by its lowercase
/// name, case-insensitively; `body` is the raw request body; `now_unix` is the current Unix time.
pub fn verify(
    scheme: Scheme,
    secret: &[u8],
    headers: &impl Fn(&str) -> Option<String>,
    body: &[u8],
    now_unix: i64,
) -> Result<(), SignatureError> {
    if secret.is_empty() {
        return Err(SignatureError::NoSecret);
    }
    let header = |name: &'static str| headers(name).ok_or(SignatureError::Missing(name));
    match scheme {
        Scheme::GitHub => {
            let value = header(GITHUB_SIGNATURE)?;
            let hex = value
                .trim()
                .strip_prefix("sha256=")
                .ok_or(SignatureError::Malformed("x-hub-signature-256: expected sha256=<hex>"))?;
            let tag = hmac_sha256::decode_hex(hex)
                .ok_or(SignatureError::Malformed("x-hub-signature-256: expected 64 hex digits"))?;
            hmac_sha256::verify(secret, &[body], &tag).then_some(()).ok_or(SignatureError::Mismatch)
        }
        Scheme::GitLab => {
            let token = header(GITLAB_TOKEN)?;
            // Comparing tags of both values under a fixed key is constant-time and, unlike a
            // byte compare, does not reveal the secret's length.
            let key = b"hermesd gitlab token";
            let expected = hmac_sha256::tag(key, &[secret]);
            hmac_sha256::verify(key, &[token.as_bytes()], &expected).then_some(()).ok_or(SignatureError::Mismatch)
        }
        Scheme::Generic => {
            let value = header(GENERIC_SIGNATURE)?;
            let timestamp = header(GENERIC_TIMESTAMP)?;
            let hex = value.trim();
            let hex = hex.strip_prefix("sha256=").unwrap_or(hex);
            let tag = hmac_sha256::decode_hex(hex)
                .ok_or(SignatureError::Malformed("x-webhook-signature: expected 64 hex digits"))?;
            let timestamp = timestamp.trim();
            let sent: i64 = timestamp
                .parse()
                .map_err(|_| SignatureError::Malformed("x-webhook-timestamp: expected Unix seconds"))?;
            let skew_secs = now_unix.saturating_sub(sent);
            if skew_secs.unsigned_abs() > MAX_SKEW_SECS.unsigned_abs() {
                return Err(SignatureError::Stale { skew_secs });
            }
            // The timestamp is signed as sent, so a sender's formatting is its own business.
            hmac_sha256::verify(secret, &[timestamp.as_bytes(), b".", body], &tag)
                .then_some(())
                .ok_or(SignatureError::Mismatch)
        }
    }
}

/// The `X-Hub-Signature-256` value GitHub would send: `sha256=<hex>`.
pub fn sign_github(secret: &[u8], body: &[u8]) -> String {
    format!("sha256={}", hmac_sha256::encode_hex(&hmac_sha256::tag(secret, &[body])))
}

/// The `X-Webhook-Signature` value for the generic scheme: lowercase hex of
/// HMAC-SHA256(secret, "{timestamp}.{body}").
pub fn sign_generic(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    hmac_sha256::encode_hex(&hmac_sha256::tag(secret, &[timestamp.to_string().as_bytes(), b".", body]))
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests;
