//! The one HTTP server (axum): health, readiness, metrics, the OpenAI-compatible API, `/admin/*`,
//! and the signed webhook routes; they all enter through the ingress. Routes a browser could
//! drive (`/v1/*`, `/admin/*`) sit behind the browser guard; signed routes do not.
//!
//! Routes with a bearer key (`/v1/*`, `/admin/*`) check it, and `/webhooks/*` the presence of a
//! signature, before reading the body. The files: `serve.rs` and `bounds.rs` (connections and their
//! time bounds), `guard.rs` and `limit.rs` (what a browser or a greedy client may do), `api.rs`,
//! `api_media.rs`, `files.rs`, `idempotency.rs` and `responses.rs` (the OpenAI-compatible API: chat
//! completions and the Responses API; SSE answers carry keepalives), `admin.rs` and `failpoints.rs` (`/admin/*`), `health.rs`, and `webhook.rs` (adapter
//! webhook routes such as `/telegram/webhook`); the `/webhooks/{route}` handler lives in
//! `crate::webhooks`.

mod admin;
mod api;
mod api_media;
mod bounds;
#[cfg(feature = "failpoints")]
mod failpoints;
mod files;
mod guard;
mod health;
mod idempotency;
mod limit;
mod operator;
mod panel;
mod response_events;
mod responses;
mod serve;
mod webhook;

pub use guard::BrowserGuard;
pub use idempotency::{prune as prune_idempotency, prune_responses};
pub use limit::ApiRateLimit;
pub use panel::PanelSessions;
pub use serve::{ServeSettings, serve};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};

use crate::config::{HttpConfig, Secret};
use crate::delivery::Targets;
use crate::ingress::HostIngress;
use crate::metrics::Metrics;
use crate::outbox::{Outbox, PlatformRegistry};
use crate::platforms::api::ApiPlatform;
use crate::store::Store;
use crate::vocab::live::Live;
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

/// Each profile with its primary model (`None`: no model configured).
pub type ProfileModels = Vec<(String, Option<String>)>;

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
    /// The home's local key (`PairingKey::local_api_key`): what `hermesd send` presents.
    pub local_key: Option<Secret>,
    /// The model id replies name when the request names none (the default profile's).
    pub model_id: String,
    /// The model ids the API answers to, each naming a profile (a reload replaces them).
    pub models: Arc<Live<crate::config::ApiModels>>,
    /// Each profile with its primary model (`None`: no model configured), for `/readyz` (a
    /// reload replaces them).
    pub profiles: Arc<Live<ProfileModels>>,
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
    /// Whether the server listens on loopback only (test builds' failpoint route then needs no
    /// key).
    pub loopback: bool,
    /// MCP servers (`/readyz` details, `/metrics`).
    pub mcp: std::sync::Arc<crate::agent::tools::mcp::McpHub>,
    /// How long `Idempotency-Key` records count (`[retention] idempotency`).
    pub idempotency_ttl: Duration,
    /// The control panel's logged-in browsers.
    pub panel: Arc<PanelSessions>,
    /// `HERMESD_HOME` (memory files and media a person's export and erasure reach).
    pub home: std::path::PathBuf,
    /// The tools' working folder (a person's folder there goes with their erasure).
    pub workdir: std::path::PathBuf,
    /// Reads the config again (`POST /admin/reload`; `/readyz` shows the live one).
    pub reloader: Option<Arc<crate::access::reload::Reloader>>,
}

/// The application's routes.
pub fn router(state: AppState, http: &HttpConfig) -> Router {
    // The panel (`/ui`, `/api/*`): its own guard (a login, a cookie, CSRF tokens, same origin),
    // and the API's Host rule while it has no key.
    let guard = Arc::new(BrowserGuard::new(http, state.api_key.is_none()));
    let mut app = panel::routes()
        .route_layer(from_fn_with_state(guard.clone(), guard::host_guard))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics));
    for platform in state.platforms.all() {
        if let Some(path) = platform.webhook_path() {
            let (platform, ctx) = (platform.clone(), state.platform_ctx.clone());
            let get_platform = platform.clone();
            let route = post(move |headers, body| webhook::handle(platform, ctx, headers, body))
                .get(move |query| webhook::handshake(get_platform, query));
            app = app.route(&path, route);
        }
    }
    if !state.webhooks.routes.is_empty() {
        let hooks = Router::new()
            .route("/webhooks/{route}", post(crate::webhooks::handler::receive))
            .with_state(state.webhooks.clone());
        app = app.merge(hooks);
    }
    let mut browser = Router::new()
        .route("/admin/send", post(admin::send).options(guard::preflight))
        .route("/admin/deliveries/{id}/retry", post(operator::retry_delivery))
        .route("/admin/deliveries/{id}/drop", post(operator::drop_delivery))
        .route("/admin/events/{seq}/replay", post(operator::replay_event))
        .route("/admin/reload", post(operator::reload));
    #[cfg(feature = "failpoints")]
    {
        browser = browser.route("/admin/failpoints", post(failpoints::arm));
    }
    if state.api.is_some() {
        let mut v1 = Router::new()
            .route("/v1/chat/completions", post(api::chat_completions).options(guard::preflight))
            .route("/v1/models", get(api::models).options(guard::preflight))
            .route("/v1/responses", post(responses::create).options(guard::preflight))
            .route("/v1/responses/{id}", get(responses::retrieve).delete(responses::delete).options(guard::preflight))
            .route("/v1/files/{id}/{name}", get(files::download).options(guard::preflight));
        if let Some(limit) = ApiRateLimit::new(http.rate_limit_per_minute) {
            let keyed = state.clone();
            let authorized = Arc::new(move |headers: &axum::http::HeaderMap| {
                keyed.api_key.is_some() && api::authorized(&keyed, headers)
            });
            v1 = v1.route_layer(from_fn_with_state(limit::RateState { limit, authorized }, limit::rate_limit));
        }
        browser = browser.merge(v1);
    }
    app = app.merge(browser.route_layer(from_fn_with_state(guard, guard::browser_guard)));
    if state.api.is_some() {
        app = app.fallback(api::not_found);
    }
    app.layer(DefaultBodyLimit::max(http.max_body_bytes)).with_state(state)
}
