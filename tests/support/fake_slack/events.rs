//! Posts Events API requests to the daemon the way Slack does: JSON event callbacks (and
//! `payload=` interaction forms) signed with `x-slack-signature: v0=HMAC-SHA256(secret,
//! "v0:{timestamp}:{body}")`, optionally mis-signed, stale, or marked as a retry. The signature is
//! computed here independently of hermesd's own code.

use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;

/// How to post one request.
#[derive(Debug, Clone, Default)]
pub struct EventPost {
    /// The signing secret to sign with.
    pub secret: String,
    /// Seconds to shift the timestamp by (negative: in the past).
    pub skew_secs: i64,
    /// Sign a different body than the one sent.
    pub tamper: bool,
    /// `x-slack-retry-num`, as on Slack's redeliveries.
    pub retry_num: Option<u32>,
    /// The path posted to; `None`: `/slack/events`.
    pub path: Option<String>,
}

impl EventPost {
    /// Correctly signed with `secret`, now.
    pub fn signed(secret: &str) -> Self {
        Self { secret: secret.to_owned(), ..Self::default() }
    }

    /// Signed with `secret`, posted to an account's `/slack/<account>/events`.
    pub fn to_account(secret: &str, account: &str) -> Self {
        Self { path: Some(format!("/slack/{account}/events")), ..Self::signed(secret) }
    }
}

fn signature(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(format!("v0:{timestamp}:").as_bytes());
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    format!("v0={}", tag.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

async fn post(base: &str, body: Vec<u8>, content_type: &str, how: &EventPost) -> (u16, String) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs();
    let timestamp = (i64::try_from(now).expect("small") + how.skew_secs).to_string();
    let signed_body = if how.tamper { [body.as_slice(), b" "].concat() } else { body.clone() };
    let mut request = crate::support::client()
        .post(format!("{base}{}", how.path.as_deref().unwrap_or("/slack/events")))
        .header("content-type", content_type)
        .header("x-slack-request-timestamp", &timestamp)
        .header("x-slack-signature", signature(&how.secret, &timestamp, &signed_body))
        .body(body);
    if let Some(retry) = how.retry_num {
        request = request.header("x-slack-retry-num", retry.to_string()).header("x-slack-retry-reason", "http_timeout");
    }
    let response = request.send().await.expect("events api request sent");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// POSTs a JSON body (an `event_callback` or `url_verification`) to `{base}/slack/events`.
pub async fn post_event(base: &str, body: &Value, how: &EventPost) -> (u16, String) {
    post(base, body.to_string().into_bytes(), "application/json", how).await
}

/// POSTs an interaction `payload` as Slack's interactivity form.
pub async fn post_interaction(base: &str, payload: &Value, how: &EventPost) -> (u16, String) {
    let encoded: String = payload
        .to_string()
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect();
    post(base, format!("payload={encoded}").into_bytes(), "application/x-www-form-urlencoded", how).await
}
