//! Platform webhook routes (Telegram in webhook mode, Slack's Events API, WhatsApp): the request is
//! handed to its adapter as plain headers and body; the adapter verifies, normalises and
//! accepts, and answers 2xx only once the event is stored.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::RawQuery;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hermesd_platform::{Platform, PlatformContext, WebhookRequest};

pub(super) async fn handle(
    platform: Arc<dyn Platform>,
    ctx: PlatformContext,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return (rejection.status(), rejection.body_text()).into_response(),
    };
    let headers = headers
        .iter()
        .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
        .collect();
    let answer = platform.handle_webhook(&ctx, WebhookRequest { headers, body: body.to_vec() }).await;
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(axum::http::header::CONTENT_TYPE, "application/json")], answer.body).into_response()
}

/// A GET on a platform's webhook route (a subscription handshake), answered as plain text.
pub(super) async fn handshake(platform: Arc<dyn Platform>, query: RawQuery) -> Response {
    let answer = platform.webhook_get(query.0.as_deref().unwrap_or_default());
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(axum::http::header::CONTENT_TYPE, "text/plain; charset=utf-8")], answer.body).into_response()
}
