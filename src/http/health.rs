//! `/healthz` (the process answers), `/readyz` (store open, platforms started, not draining;
//! MCP servers are reported as details but never make it wait; store write faults are named)
//! and `/metrics` (Prometheus text).

use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::json;

use super::AppState;

pub(super) async fn healthz() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

pub(super) async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let (status, body) = readiness(&state).await;
    (status, Json(body))
}

/// What `/readyz` answers: its status and body.
pub(super) async fn readiness(state: &AppState) -> (StatusCode, serde_json::Value) {
    let mut problems = Vec::new();
    if let Err(e) = state.store.ping().await {
        problems.push(format!("store: {e}"));
    }
    // Writes failing right now (a lock held elsewhere, a full disk, I/O errors): the daemon
    // keeps retrying them, and says so here.
    if let Some(problem) = state.store.write_problem() {
        problems.push(format!("store: {problem}"));
    }
    if !state.ready.platforms_started.load(Ordering::SeqCst) {
        problems.push("platforms: starting".to_owned());
    }
    // One line per adapter (each account its own), healthy or not.
    let mut platforms = serde_json::Map::new();
    for platform in state.platforms.all() {
        let Some(health) = platform.health() else { continue };
        if !health.healthy {
            problems.push(format!("{}: {}", platform.name(), health.detail));
        }
        let line = if health.healthy { "ok".to_owned() } else { health.detail };
        platforms.insert(platform.name().to_owned(), line.into());
    }
    if state.ready.draining.load(Ordering::SeqCst) {
        problems.push("draining: shutting down".to_owned());
    }
    // One line per profile: the model its turns start on.
    let profiles: serde_json::Map<String, serde_json::Value> = state
        .profiles
        .get()
        .iter()
        .map(|(name, model)| {
            let line = model.as_ref().map_or_else(|| "no model configured".to_owned(), |m| format!("model {m}"));
            (name.clone(), line.into())
        })
        .collect();
    let mcp = state.mcp.report();
    let (sandbox, sandbox_problem) = state.ready.sandbox.get().cloned().unwrap_or_default();
    problems.extend(sandbox_problem);
    // Which config is live (a refused reload leaves the one before in force, and says why).
    let config = state.reloader.as_ref().map(|r| r.live());
    if problems.is_empty() {
        (
            StatusCode::OK,
            json!({
                "status": "ready", "platforms": platforms, "profiles": profiles, "sandbox": sandbox, "mcp": mcp,
                "config": config
            }),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({
                "status": "not ready", "problems": problems, "platforms": platforms, "profiles": profiles,
                "sandbox": sandbox, "mcp": mcp, "config": config
            }),
        )
    }
}

pub(super) async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let mut text = state.metrics.render();
    text.push_str(&state.mcp.render_metrics());
    text.push_str("# TYPE hermesd_platform_seconds_since_progress gauge\n");
    for platform in state.platforms.all() {
        if let Some(seconds) = platform.health().and_then(|h| h.seconds_since_progress) {
            text.push_str(&format!(
                "hermesd_platform_seconds_since_progress{{platform=\"{}\"}} {seconds:.1}\n",
                platform.name()
            ));
        }
    }
    // What waits for an operator (`hermesd deliveries list --failed`, `events list
    // --quarantined`): partial indexes make these counts cheap.
    if let Ok((failed, set_aside, events)) = state.store.trouble_counts().await {
        text.push_str("# TYPE hermesd_outbox_troubled gauge\n");
        text.push_str(&format!("hermesd_outbox_troubled{{state=\"failed\"}} {failed}\n"));
        text.push_str(&format!("hermesd_outbox_troubled{{state=\"quarantined\"}} {set_aside}\n"));
        text.push_str("# TYPE hermesd_inbound_quarantined gauge\n");
        text.push_str(&format!("hermesd_inbound_quarantined {events}\n"));
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}
