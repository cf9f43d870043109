//! `POST /admin/send` — what `hermesd send` calls on a running daemon: `{"target", "text"}` is
//! delivered through this daemon's outbox. Needs a bearer: `API_SERVER_KEY`, or the home's local
//! key (`PairingKey::local_api_key`, which `hermesd send` derives from the home's `pairing.key`;
//! sandboxed commands cannot read it), so a keyless API on loopback no longer lets any local
//! process post as the bot: loopback alone is no credential.

use std::time::Duration;

use axum::Json;
use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use crate::delivery::send::{SendOutcome, send as deliver};

/// How long the request waits for the platform's receipt before answering "queued".
const WAIT: Duration = Duration::from_secs(30);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SendRequest {
    target: String,
    text: String,
    /// The platform's account to send from (`telegram` + `work` = `telegram@work`).
    #[serde(default)]
    account: Option<String>,
}

fn answer(status: StatusCode, body: serde_json::Value) -> Response {
    (status, Json(body)).into_response()
}

pub(super) async fn send(State(state): State<AppState>, request: Request) -> Response {
    if !super::api::holds_a_key(&state, request.headers()) {
        return answer(StatusCode::UNAUTHORIZED, json!({ "error": "missing or wrong bearer key" }));
    }
    // Read only once authorised, so an unauthorised client cannot hold the handler with a slow
    // body.
    let Json(request) = match Json::<SendRequest>::from_request(request, &state).await {
        Ok(body) => body,
        Err(e) => return answer(StatusCode::BAD_REQUEST, json!({ "error": e.body_text() })),
    };
    let target = match &request.account {
        Some(account) => match crate::vocab::target::on_account(&request.target, account) {
            Ok(target) => target,
            Err(e) => return answer(StatusCode::BAD_REQUEST, json!({ "error": e })),
        },
        None => request.target.clone(),
    };
    match deliver(state.store.as_ref(), &state.outbox, &state.targets, &target, None, &request.text, WAIT).await {
        Ok((chat, SendOutcome::Delivered(ids))) => {
            answer(StatusCode::OK, json!({ "status": "delivered", "chat": chat.key(), "message_ids": ids }))
        }
        Ok((chat, SendOutcome::Queued)) => {
            answer(StatusCode::ACCEPTED, json!({ "status": "queued", "chat": chat.key() }))
        }
        Err(e) => answer(StatusCode::BAD_REQUEST, json!({ "error": e })),
    }
}
