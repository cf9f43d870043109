//! The one HTTP server (axum): health, readiness, metrics and the OpenAI-compatible API. Later
//! webhook and platform callback routes mount here too; they all enter through the ingress.

mod admin;
mod api;
mod health;
mod webhook;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};

use crate::config::Secret;
use crate::delivery::Targets;
use crate::ingress::HostIngress;
use crate::metrics::Metrics;
use crate::outbox::{Outbox, PlatformRegistry};
use crate::platforms::api::ApiPlatform;
use crate::store::Store;
use crate::webhooks::handler::WebhookState;
use hermesd_platform::PlatformContext;

/// What `/readyz` reports.
#[derive(Debug, Default)]
pub struct Readiness {
    /// Platforms were started.
    pub platforms_started: AtomicBool,
    /// Shutdown began.
    pub draining: AtomicBool,
    /// The tools' sandbox, set at start: its one-line report, and the problem when it cannot run.
    pub sandbox: std::sync::OnceLock<(String, Option<String>)>,
}

impl Readiness {
    /// Mark shutdown.
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }
}

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    /// The store (readiness ping).
    pub store: Arc<dyn Store>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// The ingress.
    pub ingress: Arc<HostIngress>,
    /// The API platform, when enabled.
    pub api: Option<Arc<ApiPlatform>>,
    /// The API's bearer key.
    pub api_key: Option<Secret>,
    /// The model id `/v1/models` lists.
    pub model_id: String,
    /// Readiness flags.
    pub ready: Arc<Readiness>,
    /// SSE keepalive interval.
    pub sse_keepalive: Duration,
    /// Every running adapter (webhook routes, health).
    pub platforms: PlatformRegistry,
    /// What webhook handlers hand events to.
    pub platform_ctx: PlatformContext,
    /// `[[webhooks]]` routes.
    pub webhooks: WebhookState,
    /// Delivery targets (`POST /admin/send`).
    pub targets: Targets,
    /// The outbox (`POST /admin/send`).
    pub outbox: Outbox,
    /// Whether the server listens on loopback only (admin routes then need no key).
    pub loopback: bool,
}

/// The application's routes.
pub fn router(state: AppState, max_body_bytes: usize) -> Router {
    let mut app = Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics));
    for platform in state.platforms.all() {
        if let Some(path) = platform.webhook_path() {
            let (platform, ctx) = (platform.clone(), state.platform_ctx.clone());
            app = app.route(&path, post(move |headers, body| webhook::handle(platform, ctx, headers, body)));
        }
    }
    if !state.webhooks.routes.is_empty() {
        let hooks = Router::new()
            .route("/webhooks/{route}", post(crate::webhooks::handler::receive))
            .with_state(state.webhooks.clone());
        app = app.merge(hooks);
    }
    app = app.route("/admin/send", post(admin::send));
    if state.api.is_some() {
        app = app
            .route("/v1/chat/completions", post(api::chat_completions))
            .route("/v1/models", get(api::models))
            .fallback(api::not_found);
    }
    app.layer(DefaultBodyLimit::max(max_body_bytes)).with_state(state)
}
