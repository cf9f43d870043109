//! The control panel at `/ui`: server-rendered pages, readable without JavaScript, and the JSON
//! API under `/api/` that says the same for scripts.
//!
//! Access (`auth.rs`): a login with the API key, or on a keyless daemon the home's local key
//! (`hermesd ui` prints it), starts a panel session in an `HttpOnly`, `SameSite=Strict`
//! cookie; every state-changing request carries the session's CSRF token and comes from the
//! panel's own origin; every login, failed login and logout is logged with which key it was.
//! `/api/*` takes the same key as a bearer token, or the panel's cookie for reading; `/v1/*`
//! never takes the cookie. No secret is ever rendered. Pages (`pages.rs`): status (what
//! `/readyz` says, followed live by `panel.js` over SSE), the chat (`chat.rs`), conversations (recent, or found by the store's search) and a transcript
//! with its tool calls folded; and the ones that change things (`actions.rs`): people and their
//! pairing codes, cron jobs, failed deliveries.

mod actions;
mod auth;
mod chat;
mod html;
mod json;
mod pages;
mod people;
mod status;
mod usage;

pub use auth::PanelSessions;

use axum::Router;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::AppState;
use super::api::key_holder;

const CSS: &str = include_str!("panel.css");
const JS: &str = include_str!("panel.js");

/// The panel's routes (and `/api/*`).
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(status::home))
        .route("/ui/", get(|| async { Redirect::to("/ui") }))
        .route("/ui/login", post(login))
        .route("/ui/logout", post(logout))
        .route("/ui/sessions", get(pages::sessions))
        .route("/ui/sessions/{id}", get(pages::transcript))
        .route("/ui/sessions/{id}/images/{message}/{n}", get(pages::image))
        .route("/ui/people", get(actions::people))
        .route("/ui/people/{action}", post(actions::person))
        .route("/ui/people/person", get(people::person))
        .route("/ui/people/erase", post(people::erase))
        .route("/api/people", get(people::api_people))
        .route("/api/people/export", get(people::export))
        .route("/ui/cron", get(actions::cron).post(actions::cron_add))
        .route("/ui/cron/{id}/{action}", post(actions::cron_action))
        .route("/ui/deliveries", get(actions::deliveries))
        .route("/ui/deliveries/{id}/retry", post(actions::retry))
        .route("/ui/assets/panel.css", get(css))
        .route("/ui/assets/panel.js", get(js))
        .route("/ui/chat", get(chat::page_get).post(chat::send))
        .route("/ui/status/events", get(status::status_events))
        .route("/api/sessions", get(pages::api_sessions))
        .route("/api/sessions/{id}", get(pages::api_session))
        .route("/api/jobs", get(json::jobs))
        .route("/api/pairing", get(json::pairing))
        .route("/api/deliveries", get(json::deliveries))
        .route("/ui/logs", get(pages::logs))
        .route("/ui/usage", get(usage::usage))
        .route("/api/usage", get(usage::api_usage))
        .route("/ui/config", get(actions::config))
        .route("/ui/config/reload", post(actions::reload))
}

async fn css() -> Response {
    html::harden(
        ([(header::CONTENT_TYPE, "text/css; charset=utf-8"), (header::CACHE_CONTROL, "max-age=3600")], CSS)
            .into_response(),
    )
}

async fn js() -> Response {
    html::harden(
        ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8"), (header::CACHE_CONTROL, "max-age=3600")], JS)
            .into_response(),
    )
}

#[derive(Deserialize)]
struct LoginForm {
    key: String,
}

#[derive(Deserialize)]
struct CsrfForm {
    csrf: String,
}

/// The login page, with `problem` said above the form.
pub(super) fn login_page(status: StatusCode, problem: Option<&str>) -> Response {
    let problem =
        problem.map(|p| format!("<p class=\"bad\" role=\"alert\">{}</p>", html::escape(p))).unwrap_or_default();
    let body = format!(
        "{problem}<form method=\"post\" action=\"/ui/login\"><p><label for=\"key\">API key</label><br>\
         <input id=\"key\" name=\"key\" type=\"password\" autocomplete=\"current-password\" required autofocus></p>\
         <p><button type=\"submit\">Log in</button></p></form>\
         <p class=\"muted\">The daemon's <code>API_SERVER_KEY</code>; without one, the home's local key, \
         which <code>hermesd ui</code> prints.</p>"
    );
    html::page(status, "Log in", None, &body)
}

async fn login(State(state): State<AppState>, headers: HeaderMap, Form(form): Form<LoginForm>) -> Response {
    if !auth::same_origin(&headers) {
        return html::page(
            StatusCode::FORBIDDEN,
            "Refused",
            None,
            "<p>This form must be sent from the panel itself.</p>",
        );
    }
    match key_holder(&state, &form.key) {
        Some(who) => {
            let id = state.panel.start(who);
            tracing::info!(key = who, "panel: logged in");
            let mut response = Redirect::to("/ui").into_response();
            if let Ok(cookie) = HeaderValue::from_str(&auth::set_cookie(&id, &headers)) {
                response.headers_mut().insert(header::SET_COOKIE, cookie);
            }
            html::harden(response)
        }
        None => {
            tracing::warn!("panel: a login with a wrong key");
            // A guess costs time.
            tokio::time::sleep(std::time::Duration::from_millis(400)).await;
            login_page(StatusCode::UNAUTHORIZED, Some("That is not this daemon's key."))
        }
    }
}

async fn logout(State(state): State<AppState>, headers: HeaderMap, Form(form): Form<CsrfForm>) -> Response {
    let Some(session) = checked(&state, &headers, &form.csrf) else { return refused() };
    state.panel.end(&headers);
    tracing::info!(key = session.who, "panel: logged out");
    let mut response = Redirect::to("/ui").into_response();
    if let Ok(cookie) = HeaderValue::from_str(&auth::clear_cookie()) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    html::harden(response)
}

/// The session of a state-changing request: logged in, from the panel's origin, with its token.
fn checked(state: &AppState, headers: &HeaderMap, csrf: &str) -> Option<auth::PanelSession> {
    let session = state.panel.of(headers)?;
    let token_ok = csrf.len() == session.csrf.len()
        && csrf.bytes().zip(session.csrf.bytes()).fold(0, |d, (a, b)| d | (a ^ b)) == 0;
    (auth::same_origin(headers) && token_ok).then_some(session)
}

fn refused() -> Response {
    tracing::warn!("panel: a change was refused (no login, a wrong CSRF token or another origin)");
    html::page(
        StatusCode::FORBIDDEN,
        "Refused",
        None,
        "<p>This change was not sent from a logged-in panel page. <a href=\"/ui\">Back to the panel</a></p>",
    )
}
