//! The JSON the panel's other pages are made of, for scripts (a key as bearer token, or the
//! panel's cookie): cron jobs, pairing codes and approvals, failed deliveries.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::super::AppState;
use super::pages::api_reader;
use crate::clock::now_ms;

/// The JSON answer when the store could not answer (503).
pub(super) fn unavailable(e: impl std::fmt::Display) -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "error": { "message": e.to_string(), "type": "server_error" } })))
        .into_response()
}

/// `GET /api/jobs`.
pub(super) async fn jobs(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(refused) = api_reader(&state, &headers) {
        return *refused;
    }
    match state.store.list_jobs().await {
        Ok(jobs) => Json(json!({ "jobs": jobs })).into_response(),
        Err(e) => unavailable(e),
    }
}

/// `GET /api/pairing`: codes waiting (without the codes) and approved people.
pub(super) async fn pairing(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(refused) = api_reader(&state, &headers) {
        return *refused;
    }
    match state.store.access_entries(now_ms()).await {
        Ok(entries) => Json(json!({ "entries": entries })).into_response(),
        Err(e) => unavailable(e),
    }
}

/// `GET /api/deliveries`: replies that failed or were set aside.
pub(super) async fn deliveries(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(refused) = api_reader(&state, &headers) {
        return *refused;
    }
    match state.store.list_deliveries(true, 200).await {
        Ok(rows) => {
            let rows: Vec<_> = rows
                .iter()
                .map(|r| {
                    json!({ "id": r.id, "platform": r.platform, "turn_id": r.turn_id, "state": r.state,
                            "attempts": r.attempts, "error": r.error, "created_at": r.created_at })
                })
                .collect();
            Json(json!({ "deliveries": rows })).into_response()
        }
        Err(e) => unavailable(e),
    }
}
