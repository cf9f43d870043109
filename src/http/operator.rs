//! The operator's actions on a running daemon, behind the same bearer as `/admin/send` (the API
//! key or the home's local key): `POST /admin/deliveries/{id}/retry` sends a failed or set-aside
//! delivery again through this daemon's outbox and pacers, `POST /admin/deliveries/{id}/drop`
//! removes one, `POST /admin/events/{seq}/replay` runs a set-aside event, `POST /admin/reload`
//! reads the config again (as SIGHUP does). `hermesd deliveries`
//! and `hermesd events` call them; every action is logged with what it touched.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::AppState;
use crate::store::Again;

fn answer(status: StatusCode, body: serde_json::Value) -> Response {
    (status, Json(body)).into_response()
}

fn refused<T>(again: Again<T>, what: &str, id: i64) -> Response {
    match again {
        Again::Ready(_) => answer(StatusCode::OK, json!({ "status": "ok" })),
        Again::NotFound => answer(StatusCode::NOT_FOUND, json!({ "error": format!("no {what} {id}") })),
        Again::Not(state) => answer(
            StatusCode::CONFLICT,
            json!({ "error": format!("{what} {id} is {state}: only failed or set-aside rows are taken again") }),
        ),
        Again::Unreadable(why) => answer(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({ "error": format!("{what} {id} still does not decode ({why}); it stays set aside") }),
        ),
    }
}

fn unauthorised(state: &AppState, headers: &HeaderMap) -> Option<Response> {
    (!super::api::holds_a_key(state, headers))
        .then(|| answer(StatusCode::UNAUTHORIZED, json!({ "error": "missing or wrong bearer key" })))
}

pub(super) async fn retry_delivery(State(state): State<AppState>, Path(id): Path<i64>, headers: HeaderMap) -> Response {
    if let Some(no) = unauthorised(&state, &headers) {
        return no;
    }
    match state.store.requeue_delivery(id).await {
        Ok(Again::Ready(row)) => {
            tracing::info!(id, platform = %row.message.chat.platform, "a delivery retried by the operator");
            let chat = row.message.chat.clone();
            let turn = row.turn_id.clone();
            state.outbox.deliver_rows(&chat, &turn, vec![row]);
            answer(StatusCode::OK, json!({ "status": "queued", "chat": chat.key() }))
        }
        Ok(other) => refused(other, "delivery", id),
        Err(e) => answer(StatusCode::SERVICE_UNAVAILABLE, json!({ "error": e.to_string() })),
    }
}

pub(super) async fn drop_delivery(State(state): State<AppState>, Path(id): Path<i64>, headers: HeaderMap) -> Response {
    if let Some(no) = unauthorised(&state, &headers) {
        return no;
    }
    match state.store.drop_delivery(id).await {
        Ok(again) => {
            if matches!(again, Again::Ready(())) {
                tracing::info!(id, "a delivery dropped by the operator");
            }
            refused(again, "delivery", id)
        }
        Err(e) => answer(StatusCode::SERVICE_UNAVAILABLE, json!({ "error": e.to_string() })),
    }
}

pub(super) async fn replay_event(State(state): State<AppState>, Path(seq): Path<i64>, headers: HeaderMap) -> Response {
    if let Some(no) = unauthorised(&state, &headers) {
        return no;
    }
    match state.ingress.replay(seq).await {
        Ok(again) => refused(again, "event", seq),
        Err(e) => answer(StatusCode::SERVICE_UNAVAILABLE, json!({ "error": e.to_string() })),
    }
}

pub(super) async fn reload(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(no) = unauthorised(&state, &headers) {
        return no;
    }
    let Some(reloader) = state.reloader.clone() else {
        return answer(StatusCode::NOT_FOUND, json!({ "error": "this daemon cannot reload" }));
    };
    // Reading files: off the async workers.
    match tokio::task::spawn_blocking(move || reloader.reload()).await {
        Ok(Ok(done)) => answer(
            StatusCode::OK,
            json!({ "status": "reloaded", "applied": done.applied, "restart_needed": done.restart_needed }),
        ),
        Ok(Err(problems)) => answer(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({ "error": "the new config was refused; the running one stays", "problems": problems }),
        ),
        Err(e) => answer(StatusCode::INTERNAL_SERVER_ERROR, json!({ "error": e.to_string() })),
    }
}
