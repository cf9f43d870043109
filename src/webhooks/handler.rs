//! `POST /webhooks/{route}`: unknown route 404, no signature header 401 (before the body is
//! read), body over the route's cap 413, bad signature 401, over the route's rate 429,
//! malformed JSON 400, an event type the route does not want 200 `ignored`. Otherwise the rendered prompt is stored and deduplicated by delivery
//! id through the ingress, like any platform event, and only then answered 202 (a repeat: 200
//! `duplicate`). The reply goes to the route's delivery target, from the turn runner.
//!
//! The delivery id is no replay guard on its own: it travels in a header no scheme signs. So the
//! event is accepted together with a claim on the hash of what the signature covers (its replay
//! key, in the idempotency store under `webhook:<route>`): a signed request seen before is a
//! duplicate under any delivery id, for as long as `retention.inbound_events` keeps the records.

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, Sender};
use serde_json::{Value, json};

use super::route::{WebhookRoutes, delivery_id, replay_key, scheme_of};
use super::{signature, template};
use crate::clock::now_ms;
use crate::ingress::HostIngress;
use crate::store::{IdempotencyClaim, IdempotentAccept, WEBHOOK_SCOPE};

/// The platform name webhook events carry.
pub const PLATFORM: &str = crate::vocab::origin::Origin::WEBHOOK;

/// What the handler needs.
#[derive(Clone)]
pub struct WebhookState {
    /// Configured routes.
    pub routes: Arc<WebhookRoutes>,
    /// Where accepted deliveries go.
    pub ingress: Arc<HostIngress>,
}

fn answer(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

/// Handle one delivery.
pub async fn receive(State(state): State<WebhookState>, Path(name): Path<String>, request: Request) -> Response {
    let Some(route) = state.routes.get(&name).cloned() else {
        return answer(StatusCode::NOT_FOUND, json!({ "error": "unknown webhook route" }));
    };
    let headers = request.headers().clone();
    let lookup = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    // The signature covers the body, but a request without one is refused before its body is
    // read: an anonymous client cannot hold the handler by sending it slowly.
    let Some(scheme) = scheme_of(&lookup) else {
        tracing::info!(route = %name, "webhook without a signature refused");
        return answer(StatusCode::UNAUTHORIZED, json!({ "error": "missing signature" }));
    };
    let body = match Bytes::from_request(request, &()).await {
        Ok(body) => body,
        Err(rejection) => return answer(rejection.status(), json!({ "error": rejection.body_text() })),
    };
    if body.len() > route.config.max_body_bytes {
        return answer(
            StatusCode::PAYLOAD_TOO_LARGE,
            json!({ "error": format!("body over {} bytes", route.config.max_body_bytes) }),
        );
    }
    let now_unix = now_ms() / 1000;
    if let Err(e) = signature::verify(scheme, route.secret.expose().as_bytes(), &lookup, &body, now_unix) {
        tracing::info!(route = %name, error = %e, "webhook signature refused");
        return answer(StatusCode::UNAUTHORIZED, json!({ "error": "invalid signature" }));
    }
    let payload: Value = match serde_json::from_slice(&body) {
        Ok(payload) => payload,
        Err(e) => return answer(StatusCode::BAD_REQUEST, json!({ "error": format!("body is not JSON: {e}") })),
    };
    let event_type = template::event_type(&lookup);
    if !route.wants(&event_type) {
        return answer(StatusCode::OK, json!({ "status": "ignored", "event_type": event_type }));
    }
    if let Err(wait) = route.admit(Instant::now()) {
        let secs = wait.as_secs().max(1).to_string();
        let body = json!({ "error": "rate limit exceeded for this route" });
        return (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, secs)], Json(body)).into_response();
    }
    let delivery = delivery_id(&lookup, &body);
    let replay = replay_key(scheme, &lookup, &body);
    let text = template::render(&route.config.prompt, &payload, &event_type, route.config.max_value_chars);
    let mut chat = ChatRef::new(PLATFORM, name.clone(), ChatType::Dm);
    chat.thread_id = Some(delivery.clone());
    let event_id = format!("{name}:{delivery}");
    let event = InboundEvent::Message {
        event_id: event_id.clone(),
        message: InboundMessage {
            profile: route.config.profile.clone(),
            message_id: delivery.clone(),
            chat,
            sender: Sender {
                id: format!("webhook:{name}"),
                name: Some(event_type.clone()),
                is_bot: false,
                roles: Vec::new(),
            },
            text,
            attachments: Vec::new(),
            reply_to: None,
            addressed: true,
            timestamp_ms: now_ms(),
            history: Vec::new(),
            chat_title: None,
            client: None,
        },
    };
    let scope = format!("{WEBHOOK_SCOPE}{name}");
    // Never expired by age: retention prunes the record together with the delivery's event.
    let claim = IdempotencyClaim {
        scope: &scope,
        key: &replay,
        fingerprint: &replay,
        request_id: &event_id,
        expires_before: 0,
    };
    match state.ingress.accept_idempotent(event, &claim).await {
        Ok(IdempotentAccept::New { .. }) => {
            answer(StatusCode::ACCEPTED, json!({ "status": "accepted", "delivery": delivery }))
        }
        Ok(_) => answer(StatusCode::OK, json!({ "status": "duplicate", "delivery": delivery })),
        Err(e) => {
            tracing::warn!(route = %name, error = %e, "webhook delivery not stored");
            answer(StatusCode::SERVICE_UNAVAILABLE, json!({ "error": "not stored; retry later" }))
        }
    }
}
