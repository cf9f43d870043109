//! Meta's side of the webhook: notification payloads as the Cloud API sends them
//! (`entry[].changes[].value` with `metadata`, `contacts`, `messages` or `statuses`), posted to
//! hermesd's `/whatsapp/webhook` signed with the app secret (`X-Hub-Signature-256`).

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::{DISPLAY_NUMBER, PHONE_NUMBER_ID};

static NEXT: AtomicU64 = AtomicU64::new(1);

/// A fresh inbound wamid.
pub fn wamid() -> String {
    format!("wamid.IN{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

fn now_secs() -> String {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs().to_string()
}

/// One notification carrying `messages` from `from` (named `name`).
pub fn notification(from: &str, name: &str, messages: Vec<Value>) -> Value {
    json!({ "object": "whatsapp_business_account", "entry": [{ "id": "102290129340398", "changes": [{
        "field": "messages",
        "value": {
            "messaging_product": "whatsapp",
            "metadata": { "display_phone_number": DISPLAY_NUMBER, "phone_number_id": PHONE_NUMBER_ID },
            "contacts": [{ "profile": { "name": name }, "wa_id": from }],
            "messages": messages,
        },
    }]}]})
}

/// A message of `kind` from `from` with `content` under the kind's key, and its wamid.
pub fn message(from: &str, kind: &str, content: Value) -> (String, Value) {
    let id = wamid();
    let mut message = json!({ "from": from, "id": id, "timestamp": now_secs(), "type": kind });
    message[kind] = content;
    (id, message)
}

/// A text message notification; returns (wamid, notification).
pub fn text(from: &str, body: &str) -> (String, Value) {
    let (id, message) = message(from, "text", json!({ "body": body }));
    (id, notification(from, "Test User", vec![message]))
}

/// A reply-button press on the bot's message `context_id` with the button's `id`.
pub fn button_reply(from: &str, context_id: &str, button_id: &str, title: &str) -> (String, Value) {
    let (id, mut message) = message(
        from,
        "interactive",
        json!({ "type": "button_reply",
        "button_reply": { "id": button_id, "title": title } }),
    );
    message["context"] = json!({ "from": DISPLAY_NUMBER, "id": context_id });
    (id, notification(from, "Test User", vec![message]))
}

/// A status callback for the bot's message `id` (`sent`, `delivered`, `read`, `failed`).
pub fn status(recipient: &str, id: &str, status: &str, error_code: Option<i64>) -> Value {
    let mut entry = json!({ "id": id, "status": status, "timestamp": now_secs(), "recipient_id": recipient });
    if let Some(code) = error_code {
        entry["errors"] = json!([{ "code": code, "title": "Re-engagement message", "message": "Re-engagement message",
            "error_data": { "details": "Message failed to send because more than 24 hours have passed since the customer last replied to this number." },
            "href": "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/" }]);
    }
    json!({ "object": "whatsapp_business_account", "entry": [{ "id": "102290129340398", "changes": [{
        "field": "messages",
        "value": {
            "messaging_product": "whatsapp",
            "metadata": { "display_phone_number": DISPLAY_NUMBER, "phone_number_id": PHONE_NUMBER_ID },
            "statuses": [entry],
        },
    }]}]})
}

/// Posts `body` to `{base}/whatsapp/webhook` with `signature` (None: unsigned); (status, body).
pub async fn post_with(base: &str, body: &[u8], signature: Option<&str>) -> (u16, String) {
    post_at(base, "/whatsapp/webhook", body, signature).await
}

/// `notification` as Meta sends it for the business number `number` instead of the fake's.
pub fn for_number(mut notification: Value, number: &str) -> Value {
    for entry in notification["entry"].as_array_mut().into_iter().flatten() {
        for change in entry["changes"].as_array_mut().into_iter().flatten() {
            change["value"]["metadata"]["phone_number_id"] = json!(number);
        }
    }
    notification
}

/// Posts `notification` signed with `app_secret` to `path` (an account's webhook).
pub async fn post_signed_at(base: &str, path: &str, app_secret: &str, notification: &Value) -> (u16, String) {
    let body = notification.to_string().into_bytes();
    let signature = hermesd_whatsapp::sign(app_secret, &body);
    post_at(base, path, &body, Some(&signature)).await
}

async fn post_at(base: &str, path: &str, body: &[u8], signature: Option<&str>) -> (u16, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut request = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_vec());
    if let Some(signature) = signature {
        request = request.header("x-hub-signature-256", signature);
    }
    let response = request.send().await.expect("webhook posted");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// Posts `notification` signed with `app_secret`, as Meta does; (status, body).
pub async fn post(base: &str, app_secret: &str, notification: &Value) -> (u16, String) {
    let body = notification.to_string().into_bytes();
    let signature = hermesd_whatsapp::sign(app_secret, &body);
    post_with(base, &body, Some(&signature)).await
}

/// The verification handshake Meta makes when the callback URL is saved; (status, body).
pub async fn handshake(base: &str, verify_token: &str, challenge: &str) -> (u16, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let encode = |text: &str| text.replace('%', "%25").replace('&', "%26").replace('+', "%2B").replace(' ', "+");
    let query =
        format!("hub.mode=subscribe&hub.challenge={}&hub.verify_token={}", encode(challenge), encode(verify_token));
    let response =
        reqwest::Client::new().get(format!("{base}/whatsapp/webhook?{query}")).send().await.expect("handshake sent");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}
