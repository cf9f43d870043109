//! One person in the panel: who used the agent most over 30 days (on the people page), and a
//! person's own page — their conversations, their usage, their memory files — with an export of
//! everything hermesd keeps of them (`agent::people::export`, also `GET /api/people/export` for
//! scripts) and, after a confirmation, its erasure (`agent::people::erase`, as `hermesd sessions
//! delete --user` does). Both are logged with the key that logged in.

use axum::Json;
use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::super::AppState;
use super::html::{escape, page, when};
use super::usage::{dollars, span};
use crate::clock::now_ms;

/// People the usage table lists.
const LISTED: u32 = 50;

#[derive(Deserialize)]
pub(super) struct Person {
    platform: String,
    user: String,
}

/// `platform=…&user=…`, percent-encoded.
fn query(platform: &str, user: &str) -> String {
    let encode = |text: &str| -> String {
        text.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => char::from(b).to_string(),
                other => format!("%{other:02X}"),
            })
            .collect()
    };
    format!("platform={}&user={}", encode(platform), encode(user))
}

/// The link to a person's page.
fn link(platform: &str, user: &str) -> String {
    format!("/ui/people/person?{}", query(platform, user))
}

/// The people page's table: who used the agent over 30 days, most first, each linking to their
/// page. A store error is said in its place.
pub(super) async fn usage_table(state: &AppState) -> String {
    let (from, to) = span();
    let people = match state.store.usage_by_person(&from, &to, LISTED).await {
        Ok(people) => people,
        Err(e) => return format!("<h2>Usage by person</h2><p class=\"bad\">{}</p>", escape(&e.to_string())),
    };
    if people.is_empty() {
        return "<h2>Usage by person</h2><p class=\"muted\">Nobody used the agent in the last 30 days.</p>".into();
    }
    let rows: String = people
        .iter()
        .map(|p| {
            format!(
                "<tr><td>{}</td><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&p.platform),
                escape(&link(&p.platform, &p.user)),
                escape(&p.user),
                p.sum.turns,
                p.sum.total_tokens(),
                dollars(p.sum.cost_micros)
            )
        })
        .collect();
    format!(
        "<h2>Usage by person</h2><p class=\"muted\">{from} to {to}, every profile.</p><table><thead><tr><th>Platform</th>\
         <th>Person</th><th>Turns</th><th>Tokens</th><th>Cost</th></tr></thead><tbody>{rows}</tbody></table>"
    )
}

/// `GET /ui/people/person?platform=…&user=…`: their conversations, usage and memory; export
/// and delete.
pub(super) async fn person(State(state): State<AppState>, headers: HeaderMap, Query(who): Query<Person>) -> Response {
    let session = match super::pages::reader(&state, &headers) {
        Ok(session) => session,
        Err(login) => return *login,
    };
    let (platform, user) = (who.platform.as_str(), who.user.as_str());
    let sessions = match state.store.person_sessions(platform, user).await {
        Ok(sessions) => sessions,
        Err(e) => return super::html::failed(&session.csrf, "Person", e),
    };
    let (from, to) = span();
    let used = state
        .store
        .usage_by_person(&from, &to, u32::MAX)
        .await
        .ok()
        .and_then(|all| all.into_iter().find(|p| p.platform == platform && p.user == user));
    let mut body = format!("<p>{} on {}.</p>", escape(user), escape(platform));
    match used {
        Some(p) => body.push_str(&format!(
            "<p>Last 30 days: {} turns, {} tokens, {}.</p>",
            p.sum.turns,
            p.sum.total_tokens(),
            dollars(p.sum.cost_micros)
        )),
        None => body.push_str("<p class=\"muted\">No use in the last 30 days.</p>"),
    }
    if sessions.is_empty() {
        body.push_str("<h2>Conversations</h2><p class=\"muted\">None kept.</p>");
    } else {
        let rows: String = sessions
            .iter()
            .map(|s| format!("<li><a href=\"/ui/sessions/{}\">{}</a></li>", escape(&s.id), escape(&s.key)))
            .collect();
        body.push_str(&format!("<h2>Conversations</h2><ul>{rows}</ul>"));
    }
    body.push_str(&format!(
        "<h2>Export</h2><p><a href=\"/api/people/export?{}\" download>Download everything kept of them</a> \
         (JSON: each conversation with every message, and their memory files).</p>",
        escape(&query(platform, user))
    ));
    body.push_str(&format!(
        "<h2>Delete</h2><p>Erase their {} conversation(s) with their messages and replies, the cron jobs they made, \
         their memory, their files and their usage. This cannot be undone.</p>\
         <form method=\"post\" action=\"/ui/people/erase\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <input type=\"hidden\" name=\"platform\" value=\"{}\"><input type=\"hidden\" name=\"user\" value=\"{}\">\
         <p><label><input type=\"checkbox\" name=\"confirm\" value=\"yes\" required> Yes, delete {} for good</label></p>\
         <p><button type=\"submit\">Delete this person</button></p></form>",
        sessions.len(),
        escape(&session.csrf),
        escape(platform),
        escape(user),
        escape(user)
    ));
    page(StatusCode::OK, "Person", Some(&session.csrf), &body)
}

/// `GET /api/people/export?platform=…&user=…`: everything kept of a person, as a JSON download
/// (the key as bearer, or the panel's cookie).
pub(super) async fn export(State(state): State<AppState>, headers: HeaderMap, Query(who): Query<Person>) -> Response {
    if let Err(refused) = super::pages::api_reader(&state, &headers) {
        return *refused;
    }
    let by = match state.panel.of(&headers) {
        Some(session) => session.who,
        None => super::super::api::bearer_holder(&state, &headers).unwrap_or("api"),
    };
    let (platform, user) = (who.platform.as_str(), who.user.as_str());
    match crate::agent::people::export(&*state.store, &state.home, platform, user, now_ms()).await {
        Ok(document) => {
            tracing::info!(key = by, platform, user, "panel: person exported");
            let name: String = format!("hermesd-{platform}-{user}.json")
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_') { c } else { '_' })
                .collect();
            let mut response = Json(document).into_response();
            if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
                response.headers_mut().insert(header::CONTENT_DISPOSITION, value);
            }
            response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(e) => super::json::unavailable(e.to_string()),
    }
}

#[derive(Deserialize)]
pub(super) struct EraseForm {
    csrf: String,
    platform: String,
    user: String,
    #[serde(default)]
    confirm: String,
}

/// `POST /ui/people/erase`: delete a person, once confirmed; the page says what went.
pub(super) async fn erase(State(state): State<AppState>, headers: HeaderMap, Form(form): Form<EraseForm>) -> Response {
    let Some(session) = super::checked(&state, &headers, &form.csrf) else { return super::refused() };
    let (platform, user) = (form.platform.as_str(), form.user.as_str());
    if form.confirm != "yes" {
        let back = escape(&link(platform, user));
        return page(
            StatusCode::BAD_REQUEST,
            "Person",
            Some(&session.csrf),
            &format!("<p class=\"bad\">Not deleted: the confirmation was not ticked. <a href=\"{back}\">Back</a></p>"),
        );
    }
    if let Err(e) = crate::agent::people::parse_person(&format!("{platform}:{user}")) {
        return page(
            StatusCode::BAD_REQUEST,
            "Person",
            Some(&session.csrf),
            &format!("<p class=\"bad\">{}</p>", escape(&e)),
        );
    }
    match crate::agent::people::erase(&*state.store, &state.home, &state.workdir, platform, user).await {
        Ok(lines) => {
            tracing::info!(key = session.who, platform, user, "panel: person deleted");
            let list: String = lines.iter().map(|l| format!("<li>{}</li>", escape(l))).collect();
            let body = format!(
                "<p class=\"ok\">Deleted {} on {}, at {}.</p><ul>{list}</ul>",
                escape(user),
                escape(platform),
                when(now_ms())
            );
            page(StatusCode::OK, "Person deleted", Some(&session.csrf), &body)
        }
        Err(e) => super::html::failed(&session.csrf, "Person", e),
    }
}

/// `GET /api/people`: who used the agent over 30 days, most first.
pub(super) async fn api_people(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(refused) = super::pages::api_reader(&state, &headers) {
        return *refused;
    }
    let (from, to) = span();
    match state.store.usage_by_person(&from, &to, LISTED).await {
        Ok(people) => {
            let people: Vec<_> = people
                .iter()
                .map(|p| {
                    json!({ "platform": p.platform, "user": p.user, "turns": p.sum.turns,
                            "prompt_tokens": p.sum.tokens.prompt, "completion_tokens": p.sum.tokens.completion,
                            "cost_micros": p.sum.cost_micros, "unpriced_calls": p.sum.unpriced_calls })
                })
                .collect();
            Json(json!({ "from": from, "to": to, "people": people })).into_response()
        }
        Err(e) => super::json::unavailable(e.to_string()),
    }
}
