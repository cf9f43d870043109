//! The panel's reading pages and the JSON they are made from: the conversations (the most recent,
//! or those the store's search finds), one conversation's transcript (tool calls and results
//! folded, images inline from their own route) and the recent log lines. Text from conversations
//! is always escaped.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::super::AppState;
use super::super::api::holds_a_key;
use super::auth::PanelSession;
use super::html::{escape, page, when};
use crate::store::{SessionInfo, StoredMessage};
use crate::vocab::message::Role;

/// Conversations a list shows.
const LIST: u32 = 100;

/// A page's reader: the panel session, or the login page to answer instead.
pub(super) fn reader(state: &AppState, headers: &HeaderMap) -> Result<PanelSession, Box<Response>> {
    state.panel.of(headers).ok_or_else(|| Box::new(super::login_page(StatusCode::OK, None)))
}

/// `/api/*`'s reader: a key as bearer token, or the panel's cookie.
pub(super) fn api_reader(state: &AppState, headers: &HeaderMap) -> Result<(), Box<Response>> {
    if holds_a_key(state, headers) || state.panel.of(headers).is_some() {
        return Ok(());
    }
    let body = json!({ "error": { "message": "invalid or missing API key", "type": "invalid_request_error", "code": "invalid_api_key" } });
    Err(Box::new((StatusCode::UNAUTHORIZED, Json(body)).into_response()))
}

#[derive(Deserialize)]
pub(super) struct Search {
    #[serde(default)]
    q: String,
    /// Only this profile's conversations.
    #[serde(default)]
    profile: String,
    /// Only this adapter's (`telegram`, `telegram@work`, `api`).
    #[serde(default)]
    platform: String,
}

impl Search {
    /// The session key prefixes the filters mean (`agent:<profile>:<platform>:`); `None`: all.
    fn prefixes(&self, state: &AppState) -> Option<Vec<String>> {
        let (profile, platform) = (self.profile.trim(), self.platform.trim());
        if profile.is_empty() && platform.is_empty() {
            return None;
        }
        let profiles: Vec<String> = match profile {
            "" => state.profiles.get().iter().map(|(name, _)| name.clone()).collect(),
            one => vec![one.to_owned()],
        };
        let tail = if platform.is_empty() { String::new() } else { format!("{platform}:") };
        Some(profiles.iter().map(|p| format!("agent:{}:{tail}", crate::config::profile_key(p))).collect())
    }
}

/// What a conversation is, as the list and the API say it.
fn session_json(session: &SessionInfo) -> Value {
    json!({
        "id": session.id, "key": session.key, "title": session.title,
        "created_at": session.created_at, "updated_at": session.updated_at,
        "messages": session.message_count, "model": session.model, "suspended": session.suspended,
    })
}

async fn list(state: &AppState, search: &Search) -> Result<(Vec<SessionInfo>, Vec<Value>), String> {
    let query = search.q.trim();
    let prefixes: Vec<Option<String>> = match search.prefixes(state) {
        Some(prefixes) => prefixes.into_iter().map(Some).collect(),
        None => vec![None],
    };
    if query.is_empty() {
        let mut sessions = Vec::new();
        for prefix in &prefixes {
            sessions.extend(state.store.list_sessions_with(prefix.as_deref(), LIST).await.map_err(|e| e.to_string())?);
        }
        sessions.sort_by_key(|s| std::cmp::Reverse(s.updated_at));
        sessions.truncate(LIST as usize);
        return Ok((sessions, Vec::new()));
    }
    let mut hits = Vec::new();
    for prefix in &prefixes {
        hits.extend(state.store.search_with(query, None, prefix.as_deref(), LIST).await.map_err(|e| e.to_string())?);
    }
    hits.truncate(LIST as usize);
    let mut sessions: Vec<SessionInfo> = Vec::new();
    let mut found = Vec::new();
    for hit in hits {
        found.push(json!({ "session_id": hit.session_id, "role": hit.role, "snippet": hit.snippet, "created_at": hit.created_at }));
        if sessions.iter().any(|s| s.id == hit.session_id) {
            continue;
        }
        if let Some(session) = state.store.session(&hit.session_id).await.map_err(|e| e.to_string())? {
            sessions.push(session);
        }
    }
    Ok((sessions, found))
}

/// A `<select>` of `name` with "all" and `options`, `chosen` selected.
fn select(name: &str, label: &str, options: &[String], chosen: &str) -> String {
    let mut html = format!(
        "<label for=\"{name}\">{label}</label> <select id=\"{name}\" name=\"{name}\"><option value=\"\">all</option>"
    );
    for option in options {
        let selected = if option == chosen { " selected" } else { "" };
        html.push_str(&format!("<option value=\"{0}\"{selected}>{0}</option>", escape(option)));
    }
    html.push_str("</select> ");
    html
}

/// `GET /ui/sessions[?q=…&profile=…&platform=…]`.
pub(super) async fn sessions(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(search): Query<Search>,
) -> Response {
    let session = match reader(&state, &headers) {
        Ok(session) => session,
        Err(login) => return *login,
    };
    let (sessions, hits) = match list(&state, &search).await {
        Ok(found) => found,
        Err(e) => return super::html::failed(&session.csrf, "Conversations", e),
    };
    let profiles: Vec<String> = state.profiles.get().iter().map(|(name, _)| name.clone()).collect();
    let mut platforms: Vec<String> = state.platforms.all().map(|p| p.name().to_owned()).collect();
    platforms.sort();
    let mut body = format!(
        "<form method=\"get\" action=\"/ui/sessions\" role=\"search\"><label for=\"q\">Search the conversations</label> \
         <input id=\"q\" name=\"q\" type=\"search\" value=\"{}\"> {}{}<button type=\"submit\">Search</button></form>",
        escape(&search.q),
        select("profile", "Profile", &profiles, search.profile.trim()),
        select("platform", "Platform", &platforms, search.platform.trim())
    );
    if sessions.is_empty() {
        body.push_str("<p class=\"muted\">No conversation.</p>");
    } else {
        body.push_str("<table><thead><tr><th>Conversation</th><th>Last activity</th><th>Messages</th><th>Key</th></tr></thead><tbody>");
        for s in &sessions {
            let title = s.title.clone().unwrap_or_else(|| s.key.clone());
            let snippets: String = hits
                .iter()
                .filter(|h| h["session_id"] == s.id.as_str())
                .take(3)
                .map(|h| {
                    format!("<br><span class=\"muted\">{}</span>", escape(h["snippet"].as_str().unwrap_or_default()))
                })
                .collect();
            body.push_str(&format!(
                "<tr><td><a href=\"/ui/sessions/{}\">{}</a>{snippets}</td><td>{}</td><td>{}</td><td class=\"muted\">{}</td></tr>",
                escape(&s.id),
                escape(&title),
                when(s.updated_at),
                s.message_count.max(0),
                escape(&s.key)
            ));
        }
        body.push_str("</tbody></table>");
    }
    page(StatusCode::OK, "Conversations", Some(&session.csrf), &body)
}

pub(super) fn message_html(session_id: &str, message: &StoredMessage) -> String {
    let m = &message.message;
    // Images inline, each from the panel's own route (the page never names a file path).
    let images: String = (0..m.images.len())
        .map(|n| {
            format!(
                "<img src=\"/ui/sessions/{}/images/{}/{n}\" alt=\"image {}\" loading=\"lazy\">",
                escape(session_id),
                message.id,
                n + 1
            )
        })
        .collect();
    let role = m.role.as_str();
    let text = m.content.as_deref().unwrap_or_default();
    let archived = if message.archived { " <span class=\"muted\">(summarised)</span>" } else { "" };
    let head = format!("<div class=\"role\">{} · {}{archived}</div>", escape(role), when(message.created_at));
    match m.role {
        Role::Tool => format!(
            "<details class=\"msg tool\"><summary>{}</summary>{}</details>",
            format_args!("tool result {}", escape(m.tool_call_id.as_deref().unwrap_or_default())),
            escape(text)
        ),
        _ => {
            let calls: String = m
                .tool_calls
                .iter()
                .map(|c| {
                    format!("<details><summary>calls {}</summary>{}</details>", escape(&c.name), escape(&c.arguments))
                })
                .collect();
            format!("<div class=\"msg {}\">{head}{}{images}{calls}</div>", escape(role), escape(text))
        }
    }
}

/// `GET /ui/sessions/{id}`.
pub(super) async fn transcript(State(state): State<AppState>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let session = match reader(&state, &headers) {
        Ok(session) => session,
        Err(login) => return *login,
    };
    let found = match state.store.session(&id).await {
        Ok(found) => found,
        Err(e) => return super::html::failed(&session.csrf, "Conversation", e),
    };
    let Some(info) = found else {
        return page(StatusCode::NOT_FOUND, "Conversation", Some(&session.csrf), "<p>No such conversation.</p>");
    };
    let messages = match state.store.full_history(&id).await {
        Ok(messages) => messages,
        Err(e) => return super::html::failed(&session.csrf, "Conversation", e),
    };
    let mut body = format!(
        "<p class=\"muted\">{} · started {} · last {}</p>",
        escape(&info.key),
        when(info.created_at),
        when(info.updated_at)
    );
    for message in messages.iter().filter(|m| m.message.role != Role::System) {
        body.push_str(&message_html(&id, message));
    }
    let title = info.title.clone().unwrap_or_else(|| "Conversation".into());
    page(StatusCode::OK, &title, Some(&session.csrf), &body)
}

/// Largest image the transcript serves.
const MAX_IMAGE_BYTES: u64 = 32 * 1024 * 1024;

/// `GET /ui/sessions/{id}/images/{message}/{n}`: the `n`th image of a message of that
/// conversation, read from the media folder (a stored path that leaves it is never followed).
pub(super) async fn image(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((id, message, n)): Path<(String, i64, usize)>,
) -> Response {
    if state.panel.of(&headers).is_none() {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let messages = match state.store.full_history(&id).await {
        Ok(messages) => messages,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    };
    let found = messages.iter().find(|m| m.id == message).and_then(|m| m.message.images.get(n));
    let Some(image) = found else { return StatusCode::NOT_FOUND.into_response() };
    let relative = std::path::Path::new(&image.path);
    let inside =
        relative.starts_with("media") && relative.components().all(|c| matches!(c, std::path::Component::Normal(_)));
    if !inside || !image.mime.starts_with("image/") {
        return StatusCode::NOT_FOUND.into_response();
    }
    let path = state.home.join(relative);
    // No link out of the media folder either, at any level.
    let (real, media) = (tokio::fs::canonicalize(&path).await, tokio::fs::canonicalize(state.home.join("media")).await);
    if !matches!((&real, &media), (Ok(real), Ok(media)) if real.starts_with(media)) {
        return StatusCode::NOT_FOUND.into_response();
    }
    let too_big = tokio::fs::symlink_metadata(&path).await.map(|m| !m.is_file() || m.len() > MAX_IMAGE_BYTES);
    if !matches!(too_big, Ok(false)) {
        return StatusCode::NOT_FOUND.into_response();
    }
    match tokio::fs::read(&path).await {
        Ok(bytes) => {
            let mime = axum::http::HeaderValue::from_str(&image.mime)
                .unwrap_or(axum::http::HeaderValue::from_static("application/octet-stream"));
            super::html::harden(([(axum::http::header::CONTENT_TYPE, mime)], bytes).into_response())
        }
        Err(_) => StatusCode::NOT_FOUND.into_response(),
    }
}

/// `GET /api/sessions[?q=…&profile=…&platform=…]`.
pub(super) async fn api_sessions(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(search): Query<Search>,
) -> Response {
    if let Err(refused) = api_reader(&state, &headers) {
        return *refused;
    }
    match list(&state, &search).await {
        Ok((sessions, hits)) => {
            Json(json!({ "sessions": sessions.iter().map(session_json).collect::<Vec<_>>(), "hits": hits }))
                .into_response()
        }
        Err(e) => super::json::unavailable(e),
    }
}

/// `GET /api/sessions/{id}`.
pub(super) async fn api_session(State(state): State<AppState>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if let Err(refused) = api_reader(&state, &headers) {
        return *refused;
    }
    let unavailable = super::json::unavailable;
    let info = match state.store.session(&id).await {
        Ok(Some(info)) => info,
        Ok(None) => {
            return (StatusCode::NOT_FOUND, Json(json!({ "error": { "message": "no such session", "type": "invalid_request_error", "code": "not_found" } })))
                .into_response();
        }
        Err(e) => return unavailable(e.to_string()),
    };
    match state.store.full_history(&id).await {
        Ok(messages) => {
            let messages: Vec<Value> = messages
                .iter()
                .filter(|m| m.message.role != Role::System)
                .map(|m| json!({ "role": m.message.role.as_str(), "content": m.message.content, "tool_calls": m.message.tool_calls.iter().map(|c| json!({"id": c.id, "name": c.name, "arguments": c.arguments})).collect::<Vec<_>>(), "tool_call_id": m.message.tool_call_id, "created_at": m.created_at, "archived": m.archived }))
                .collect();
            let mut body = session_json(&info);
            body["transcript"] = Value::Array(messages);
            Json(body).into_response()
        }
        Err(e) => unavailable(e.to_string()),
    }
}

#[derive(Deserialize)]
pub(super) struct LogFilter {
    /// The least severe level shown (`error`, `warn`, `info`, `debug`, `trace`).
    #[serde(default)]
    level: String,
    /// Only lines of targets containing this (`hermesd::turn`, `telegram`).
    #[serde(default)]
    component: String,
    /// Load the page again every few seconds.
    #[serde(default)]
    follow: Option<String>,
}

fn severity(level: &str) -> u8 {
    match level.to_ascii_uppercase().as_str() {
        "ERROR" => 0,
        "WARN" => 1,
        "INFO" => 2,
        "DEBUG" => 3,
        _ => 4,
    }
}

/// `GET /ui/logs[?level=…&component=…&follow=1]`: the recent log lines, masked as the log is.
pub(super) async fn logs(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(filter): Query<LogFilter>,
) -> Response {
    let session = match reader(&state, &headers) {
        Ok(session) => session,
        Err(login) => return *login,
    };
    let floor = if filter.level.is_empty() { 4 } else { severity(&filter.level) };
    let component = filter.component.trim().to_owned();
    let lines: Vec<String> = crate::logging::recent(1000)
        .into_iter()
        .filter(|line| {
            let mut words = line.split_whitespace();
            let (_, level, target) = (words.next(), words.next().unwrap_or_default(), words.next().unwrap_or_default());
            severity(level) <= floor && (component.is_empty() || target.contains(&component))
        })
        .collect();
    let options: String = ["", "error", "warn", "info", "debug"]
        .iter()
        .map(|l| {
            let selected = if *l == filter.level { " selected" } else { "" };
            format!("<option value=\"{l}\"{selected}>{}</option>", if l.is_empty() { "all" } else { l })
        })
        .collect();
    let follow = filter.follow.is_some();
    let mut body = format!(
        "<form method=\"get\" action=\"/ui/logs\"><label for=\"level\">Level</label> <select id=\"level\" name=\"level\">{options}</select> \
         <label for=\"component\">Component</label> <input id=\"component\" name=\"component\" type=\"search\" value=\"{}\"> \
         <label><input type=\"checkbox\" name=\"follow\" value=\"1\"{}> follow</label> <button type=\"submit\">Show</button></form>",
        escape(&component),
        if follow { " checked" } else { "" }
    );
    if lines.is_empty() {
        body.push_str("<p class=\"muted\">No line.</p>");
    } else {
        let text: String = lines.iter().rev().map(|l| escape(l) + "\n").collect();
        body.push_str(&format!(
            "<p class=\"muted\">Newest first; the last {} lines the daemon kept.</p><pre>{text}</pre>",
            lines.len()
        ));
    }
    if follow {
        return super::html::refreshing("Logs", &session.csrf, &body, 5);
    }
    page(StatusCode::OK, "Logs", Some(&session.csrf), &body)
}
