//! The status page: readiness and its problems, each platform (and account) with its health, last
//! progress and traffic, the profiles' models, MCP servers, the gateway's own numbers (waiting
//! messages, turns, model calls with their mean time and cost, the store's size), the config in
//! force, the version and uptime. `panel.js` keeps it current from `/ui/status/events`, a
//! server-sent event stream (bounded in number, ended with the login) that sends the page's
//! HTML when it changed.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::Value;

use super::super::AppState;
use super::html::{escape, page};
use super::pages::reader;

/// `GET /ui`: the status, or the login form. With a script, `panel.js` keeps it current from
/// `/ui/status/events`.
pub(super) async fn home(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let session = match reader(&state, &headers) {
        Ok(session) => session,
        Err(login) => return *login,
    };
    let body = format!("<div id=\"live\" data-events=\"/ui/status/events\">{}</div>", status_html(&state).await);
    page(StatusCode::OK, "Status", Some(&session.csrf), &body)
}

/// How often a status stream looks again.
const STATUS_EVERY: Duration = Duration::from_secs(2);

/// `GET /ui/status/events`: the status as `status` events (the page's HTML, sent when it
/// changed), for as long as the panel session lives.
pub(super) async fn status_events(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if !state.panel.alive(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let Some(permit) = state.panel.stream_permit() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "too many status streams").into_response();
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(4);
    let keepalive = state.sse_keepalive;
    tokio::spawn(async move {
        let _permit = permit;
        let mut last = String::new();
        loop {
            // Ends with the login (logout, expiry); looking does not keep it alive.
            if !state.panel.alive(&headers) {
                return;
            }
            let now = status_html(&state).await;
            if now != last {
                if tx.send(Event::default().event("status").data(now.clone())).await.is_err() {
                    return;
                }
                last = now;
            }
            tokio::select! {
                () = tokio::time::sleep(STATUS_EVERY) => {}
                () = tx.closed() => return,
            }
        }
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok::<_, Infallible>);
    super::html::harden(Sse::new(stream).keep_alive(KeepAlive::new().interval(keepalive)).into_response())
}

/// The status as HTML: readiness with its problems, each platform and profile, the MCP
/// servers, the configuration in force, the version and uptime.
async fn status_html(state: &AppState) -> String {
    let (status, ready) = super::super::health::readiness(state).await;
    let mut body = String::new();
    let verdict = if status == StatusCode::OK {
        "<span class=\"ok\">ready</span>"
    } else {
        "<span class=\"bad\">not ready</span>"
    };
    body.push_str(&format!(
        "<p>The daemon is {verdict}. <span class=\"muted\">hermesd {}, up {}.</span></p>",
        env!("CARGO_PKG_VERSION"),
        uptime(state.panel.since())
    ));
    for problem in ready["problems"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        body.push_str(&format!("<p class=\"bad\">{}</p>", escape(problem)));
    }
    let section = |title: &str, map: &Value| -> String {
        let rows: String = map
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, line)| {
                let text = line.as_str().map_or_else(|| line.to_string(), str::to_owned);
                let class = if text == "ok" { " class=\"ok\"" } else { "" };
                format!("<tr><th scope=\"row\">{}</th><td{class}>{}</td></tr>", escape(name), escape(&text))
            })
            .collect();
        if rows.is_empty() {
            return String::new();
        }
        format!("<h2>{}</h2><table>{rows}</table>", escape(title))
    };
    body.push_str(&platforms_html(state).await);
    body.push_str(&section("Profiles", &ready["profiles"]));
    body.push_str(&models_html(state));
    body.push_str(&gateway_html(state));
    let servers: String = ready["mcp"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let text = |k: &str| s[k].as_str().map_or_else(|| s[k].to_string(), str::to_owned);
            format!(
                "<tr><th scope=\"row\">{}</th><td>{}</td><td>{} tools</td><td class=\"muted\">{}</td></tr>",
                escape(&text("name")),
                escape(&text("state")),
                escape(&text("tools")),
                escape(&crate::logging::mask(s["error"].as_str().unwrap_or_default()))
            )
        })
        .collect();
    if !servers.is_empty() {
        body.push_str(&format!("<h2>MCP servers</h2><table>{servers}</table>"));
    }
    if let Some(config) = ready["config"].as_object() {
        let text = |k: &str| {
            config.get(k).map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).unwrap_or_default()
        };
        body.push_str(&format!(
            "<h2>Configuration</h2><p>{} (digest {}), {} reload(s) since the start.</p>",
            escape(&text("path")),
            escape(&text("digest")),
            escape(&text("reloads"))
        ));
        if let Some(refused) = config.get("refused").and_then(Value::as_str) {
            body.push_str(&format!("<p class=\"bad\">The last reload was refused: {}</p>", escape(refused)));
        }
    }
    body
}

/// Each adapter (each account its own): its health, how long since it last made progress
/// (a poll, an event), the messages it took in and sent since the start, and its queue: the
/// replies waiting to be sent.
async fn platforms_html(state: &AppState) -> String {
    // Replies waiting to go out, per adapter (unknown while the store does not answer).
    let waiting: Option<std::collections::HashMap<String, u64>> =
        state.store.pending_by_platform().await.ok().map(|rows| rows.into_iter().collect());
    let count = |name: &'static str, platform: &str, outcome: &str| {
        state.metrics.counter(name, &format!("platform=\"{platform}\",outcome=\"{outcome}\""))
    };
    let mut platforms: Vec<_> = state.platforms.all().collect();
    platforms.sort_by(|a, b| a.name().cmp(b.name()));
    let rows: String = platforms
        .iter()
        .map(|platform| {
            let name = platform.name();
            let (class, line, last) = match platform.health() {
                Some(h) => (
                    if h.healthy { "ok" } else { "bad" },
                    if h.healthy { "ok".to_owned() } else { crate::logging::mask(&h.detail) },
                    h.seconds_since_progress.map(|s| format!("{s:.0} s ago")).unwrap_or_default(),
                ),
                None => ("muted", "no health report".to_owned(), String::new()),
            };
            format!(
                "<tr><th scope=\"row\">{}</th><td class=\"{class}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(name),
                escape(&line),
                escape(&last),
                count(crate::metrics::INBOUND_TOTAL, name, "new"),
                count(crate::metrics::OUTBOUND_TOTAL, name, "sent"),
                count(crate::metrics::OUTBOUND_TOTAL, name, "failed"),
                waiting.as_ref().map_or("?".to_owned(), |w| w.get(name).copied().unwrap_or(0).to_string()),
            )
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "<h2>Platforms</h2><table><thead><tr><th></th><th>Health</th><th>Last progress</th><th>Messages in</th>\
         <th>Sent</th><th>Failed sends</th><th>Waiting to send</th></tr></thead><tbody>{rows}</tbody></table>"
    )
}

/// Each model's last call: when, how long, its error, and its calls and failures since the start
/// (error text masked as the log masks it).
fn models_html(state: &AppState) -> String {
    let rows: String = state
        .metrics
        .models_last()
        .iter()
        .map(|(name, last)| {
            let error = last.error.as_deref().unwrap_or_default();
            format!(
                "<tr><th scope=\"row\">{}</th><td>{}</td><td>{} ms</td><td>{} / {}</td><td class=\"bad\">{}</td></tr>",
                escape(name),
                super::html::when(last.at_ms),
                last.millis,
                last.errors,
                last.calls,
                escape(error)
            )
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "<h2>Models</h2><table><thead><tr><th></th><th>Last call</th><th>Took</th><th>Failed / calls</th>\
         <th>Last error</th></tr></thead><tbody>{rows}</tbody></table>"
    )
}

/// The gateway's own numbers: waiting messages, turns, sessions, model calls with their mean
/// time and cost, and the store's size on disk.
fn gateway_html(state: &AppState) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    let m = &state.metrics;
    let (calls, seconds) = m.model_call_seconds();
    let mean = if calls == 0 { "—".to_owned() } else { format!("{:.0} ms", seconds * 1000.0 / calls as f64) };
    let size: u64 = ["state.db", "state.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(state.home.join(f)).ok())
        .map(|m| m.len())
        .sum();
    let rows = [
        ("Messages waiting in sessions", m.queue_depth.load(Relaxed).to_string()),
        ("Turns running", m.turns_running.load(Relaxed).to_string()),
        ("Turns waiting for a person", m.turns_parked.load(Relaxed).to_string()),
        ("Active sessions", m.active_sessions.load(Relaxed).to_string()),
        ("Model calls (mean time)", format!("{calls} ({mean})")),
        ("Model cost since the start", format!("${:.4}", m.model_cost_picos() as f64 / 1e12)),
        ("Store on disk", format!("{:.1} MB", size as f64 / 1_048_576.0)),
    ];
    let rows: String =
        rows.iter().map(|(k, v)| format!("<tr><th scope=\"row\">{k}</th><td>{}</td></tr>", escape(v))).collect();
    format!("<h2>Gateway</h2><table>{rows}</table>")
}

/// `since` as "3 d 4 h", "5 h 2 min" or "42 s".
fn uptime(since: std::time::Instant) -> String {
    let s = since.elapsed().as_secs();
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86_400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3600),
    }
}
