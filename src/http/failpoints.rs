//! `POST /admin/failpoints` — only in builds with the `failpoints` feature (tests): arms or
//! disarms a failpoint of this running daemon, `{"name": "store.max_page_count", "action":
//! "value(1)"}` (`"off"` disarms). Same access rule as `/admin/send`: the bearer key when one is
//! set, else a loopback listener only.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ArmRequest {
    name: String,
    action: String,
}

pub(super) async fn arm(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(request): Json<ArmRequest>,
) -> Response {
    let authorised = if state.api_key.is_some() { super::api::authorized(&state, &headers) } else { state.loopback };
    if !authorised {
        return (StatusCode::UNAUTHORIZED, Json(json!({ "error": "missing or wrong bearer key" }))).into_response();
    }
    match crate::failpoint::set(&request.name, &request.action) {
        Ok(()) => {
            tracing::warn!(name = request.name, action = request.action, "failpoint armed");
            (StatusCode::OK, Json(json!({ "armed": request.name }))).into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, Json(json!({ "error": e.to_string() }))).into_response(),
    }
}
