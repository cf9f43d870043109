//! One Bot API address serving several fake bots, as the real one serves every bot.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};

use super::{FakeTelegram, Shared, error, file, method, reply};

/// Several fake bots behind one Bot API address, as the real one serves every bot: each request
/// goes to the bot whose token its path carries (an unknown token is refused like the real API).
pub async fn serve_bots(bots: &[&FakeTelegram]) -> String {
    let by_token: Arc<HashMap<String, Arc<Shared>>> =
        Arc::new(bots.iter().map(|b| (b.shared.token.clone(), b.shared.clone())).collect());
    let pick = |by_token: &HashMap<String, Arc<Shared>>, bot: &str| {
        bot.strip_prefix("bot").and_then(|token| by_token.get(token)).cloned()
    };
    let (methods, files) = (by_token.clone(), by_token);
    let app = Router::new()
        .route(
            "/{bot}/{method}",
            post(move |Path((bot, name)): Path<(String, String)>, headers: HeaderMap, body: Bytes| {
                let shared = pick(&methods, &bot);
                async move {
                    match shared {
                        Some(shared) => method(State(shared), Path((bot, name)), headers, body).await,
                        None => reply(Err(error(401, "Unauthorized"))),
                    }
                }
            }),
        )
        .route(
            "/file/{bot}/{*path}",
            get(move |Path((bot, path)): Path<(String, String)>| {
                let shared = pick(&files, &bot);
                async move {
                    match shared {
                        Some(shared) => file(State(shared), Path((bot, path))).await,
                        None => StatusCode::UNAUTHORIZED.into_response(),
                    }
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the shared bot api");
    let addr = listener.local_addr().expect("shared bot api addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

impl FakeTelegram {
    /// Telegram's last delivery to the webhook failed with `message` (as when the URL does not
    /// answer); `getWebhookInfo` reports it until the webhook is set again.
    pub fn webhook_failed(&self, message: &str) {
        if let Some(webhook) = self.shared.lock().webhook.as_mut() {
            webhook.last_error = Some(message.to_owned());
        }
    }
}

/// `getWebhookInfo`'s answer.
pub(super) fn webhook_info(store: &super::Store) -> serde_json::Value {
    let webhook = store.webhook.as_ref();
    let mut info = serde_json::json!({
        "url": webhook.map_or(String::new(), |w| w.url.clone()),
        "has_custom_certificate": false,
        "pending_update_count": store.pending.len(),
    });
    if let Some(message) = webhook.and_then(|w| w.last_error.as_ref()) {
        info["last_error_date"] = serde_json::json!(1_764_300_000);
        info["last_error_message"] = serde_json::json!(message);
    }
    info
}
