//! Wiring: builds every part from a validated config, runs them under one cancellation tree and
//! one task tracker, and shuts them down in order within a deadline.
//!
//! Shutdown order: STOPPING → intake closed → platforms stop receiving → running turns finish
//! or persist → pending deliveries get a moment → HTTP stops → store closes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hermesd_platform::{Platform, PlatformContext};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::tools;
use crate::config::{Config, ConfigError, Env, Paths};
use crate::http::{AppState, Readiness};
use crate::ingress::HostIngress;
use crate::metrics::Metrics;
use crate::recovery::{RecoveryReport, recover};
use crate::store::{Store, StoreError};
use crate::systemd;
use crate::vocab::live::Live;
use crate::webhooks::handler::WebhookState;

mod parts;
mod standby;

pub use parts::build_platforms;

/// Extra knobs for embedding the daemon (CLI subcommands, tests).
#[derive(Default)]
pub struct DaemonOptions {
    /// Serve HTTP (false for `hermesd chat`).
    pub no_http: bool,
    /// Platforms to run besides the configured ones (the terminal).
    pub extra_platforms: Vec<Arc<dyn Platform>>,
    /// Tell systemd about readiness and stopping.
    pub systemd: bool,
    /// The `hermesd` binary that runs stdio MCP servers' shim (default: this executable; tests
    /// running the daemon in-process point it at the built binary).
    pub mcp_shim: Option<std::path::PathBuf>,
    /// Hold the home's lease (`hermesd run`): while another daemon holds it, stand by until it
    /// lapses or this token fires (then start ends with `StartError::Stopped`).
    pub lease: Option<CancellationToken>,
    /// Run only `extra_platforms` (`hermesd chat` with no daemon running): no configured adapter,
    /// API, cron or crash recovery, so their work stays for the daemon that owns it.
    pub extra_only: bool,
}

/// Why the daemon could not start, by exit code.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Invalid configuration (exit 78).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The database cannot be used by this binary (exit 78: restarting will not help).
    #[error("store: {0}")]
    Schema(StoreError),
    /// Anything else; a restart may help (exit 75).
    #[error(transparent)]
    Other(#[from] anyhow::Error),
    /// Stopped (a signal) while standing by for another daemon's lease (exit 0).
    #[error("stopped while standing by")]
    Stopped,
}

impl StartError {
    /// The process exit code for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            StartError::Config(_) | StartError::Schema(StoreError::SchemaTooNew { .. }) => 78,
            StartError::Stopped => 0,
            _ => 75,
        }
    }
}

/// A running daemon.
pub struct Daemon {
    /// The HTTP address actually bound.
    pub addr: Option<SocketAddr>,
    /// Metrics, for tests and benchmarks in-process.
    pub metrics: Arc<Metrics>,
    /// What recovery did at start.
    pub recovery: RecoveryReport,
    /// How long start took, to READY.
    pub started_in: Duration,
    /// The MCP servers (state, tools), for tests and benchmarks in-process.
    pub mcp: Arc<tools::mcp::McpHub>,
    /// Reads the config again (SIGHUP, `/admin/reload`).
    pub reloader: Arc<crate::access::reload::Reloader>,
    shutdown: CancellationToken,
    done: tokio::task::JoinHandle<()>,
}

impl Daemon {
    /// Build everything and start serving, in named parts: the config checked, the store
    /// opened (the home held), the adapters, the outbox, the agent, the turn runner, the
    /// router and ingress, recovery, the background tasks, HTTP; then the shutdown sequence
    /// waits for the token. Returns once READY has been signalled.
    pub async fn start(config: Config, paths: Paths, env: Env, options: DaemonOptions) -> Result<Self, StartError> {
        let started = Instant::now();
        // reqwest is built without a default crypto provider; install ring once per process.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let extra: Vec<&str> = options.extra_platforms.iter().map(|p| p.name()).collect();
        let problems = config.validate_with(&env, &extra);
        if !problems.is_empty() {
            return Err(ConfigError { problems }.into());
        }
        for note in config.profile_advice() {
            tracing::warn!("{note}");
        }
        std::fs::create_dir_all(&paths.home).with_context(|| format!("create {}", paths.home.display()))?;
        let (sqlite, holding) = parts::open_store(&config, &paths, &options).await?;
        let store: Arc<dyn Store> = Arc::new(sqlite.clone());
        let metrics = Arc::new(Metrics::default());
        sqlite.count_into(metrics.clone());
        let ground = parts::Ground {
            config: &config,
            env: &env,
            paths: &paths,
            options: &options,
            store: &store,
            metrics: &metrics,
        };
        let adapters = parts::Adapters::build(ground)?;
        let delivery = parts::Delivery::new(ground, &adapters.platforms);
        let agent = parts::AgentParts::build(ground, &adapters, &delivery.outbox)?;
        let access = parts::access(ground, &adapters.platforms)?;
        let mcp = agent.mcp.clone();
        let (sandbox, webhooks, targets) = (agent.sandbox.clone(), agent.webhooks.clone(), agent.targets.clone());
        let reloader =
            Arc::new(crate::access::reload::Reloader::new(&config, paths.clone(), access.0.clone(), env.redaction()));
        {
            // MCP servers added, removed or changed start and stop without touching the others.
            let mcp = mcp.clone();
            reloader.on_reload(&["mcp"], Box::new(move |config, env| mcp.apply(&config.mcp, env)));
        }
        // The log filter: `.env`'s HERMESD_LOG now (the process environment, read at start,
        // still wins) and at each reload.
        if std::env::var_os("HERMESD_LOG").is_none()
            && let Some(spec) = env.var("HERMESD_LOG")
            && let Err(e) = crate::logging::set_filter(Some(&spec))
        {
            tracing::warn!("{e}");
        }
        reloader.on_reload(
            &[],
            Box::new(|_, env| {
                if std::env::var_os("HERMESD_LOG").is_some() {
                    return Vec::new();
                }
                match crate::logging::set_filter(env.var("HERMESD_LOG").as_deref()) {
                    Ok(()) => {
                        vec![format!("log filter: {}", env.var("HERMESD_LOG").unwrap_or_else(|| "the default".into()))]
                    }
                    Err(e) => vec![format!("log filter unchanged: {e}")],
                }
            }),
        );
        let kit = agent.kit.clone();
        let runner = parts::runner(ground, &delivery.outbox, &adapters, agent, &access.0);
        let (api_models, api_profiles) = api_catalog(&config, &paths);
        let (api_models, api_profiles) =
            (Arc::new(Live::new(Arc::new(api_models))), Arc::new(Live::new(Arc::new(api_profiles))));
        {
            // Models and prices, profiles with their personas, skills and toolsets, routes, the
            // toolsets per platform, the approved commands and the cron time zone: built again
            // and swapped in whole; a turn already running keeps what it started with.
            let (runner, paths, store, metrics) = (runner.clone(), paths.clone(), store.clone(), metrics.clone());
            let (api_models, api_profiles) = (api_models.clone(), api_profiles.clone());
            // Only these keys are taken from the new config; the others stay as the daemon
            // started (they wait for a restart), so no part runs on half a new config.
            let base = config.clone();
            let in_use = profiles_in_use(&config);
            reloader.on_reload(
                IN_PLACE,
                Box::new(move |config, env| {
                    // Accounts keep the profiles they name until a restart: one of those gone
                    // would send its chats to the default profile's persona and memory.
                    if let Some(gone) = in_use.iter().find(|p| !config.profiles.contains_key(*p)) {
                        return vec![format!(
                            "profiles and routes not reloaded: profile {gone} is still named by a running account; restart to remove it"
                        )];
                    }
                    let mixed = in_place(&base, config);
                    match kit.agents(&mixed, env, &paths, &store, &metrics) {
                        Ok(agents) => {
                            runner.agents().replace(agents);
                            runner.reconfigure(mixed.routes.clone().into(), mixed.tools.clone());
                            let (models, profiles) = api_catalog(&mixed, &paths);
                            api_models.set(Arc::new(models));
                            api_profiles.set(Arc::new(profiles));
                            vec![
                                "models and prices, profiles (personas, models, skills, toolsets)".to_owned(),
                                "routes, toolsets per platform, approved commands, cron time zone".to_owned(),
                            ]
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "profiles not rebuilt on reload; the running ones stay");
                            vec![format!("profiles and routes not reloaded ({e}); the running ones stay")]
                        }
                    }
                }),
            );
        }
        let router = parts::router(ground, runner, access.0);
        let fence =
            holding.as_ref().map(|holding| crate::store::Fence { lease: standby::HOME.into(), token: holding.token });
        let ingress = Arc::new(HostIngress::new(store.clone(), router.clone(), metrics.clone()).with_fence(fence));
        let ready = Arc::new(Readiness::default());
        let _ = ready.sandbox.set((sandbox.describe(), sandbox.problem()));

        let listener = match options.no_http {
            true => None,
            false => Some(
                TcpListener::bind(&config.http.listen).await.with_context(|| format!("bind {}", config.http.listen))?,
            ),
        };
        let addr = listener.as_ref().map(|l| l.local_addr()).transpose().context("local address")?;
        let recovery = match options.extra_only {
            true => RecoveryReport::default(),
            false => recover(&store, &delivery.outbox, &router, &config.recovery, &metrics)
                .await
                .map_err(|e| anyhow::anyhow!("recovery: {e}"))?,
        };

        let shutdown = CancellationToken::new();
        let tasks = TaskTracker::new();
        let platform_cancel = shutdown.child_token();
        let ctx = PlatformContext { ingress: ingress.clone() };
        ground.spawn(&tasks, &adapters.platforms, &ctx, &ingress, &router, &delivery.outbox, &platform_cancel);
        ready.platforms_started.store(true, Ordering::SeqCst);
        let http_cancel = CancellationToken::new();
        if let Some(listener) = listener {
            let state = AppState {
                store: store.clone(),
                metrics: metrics.clone(),
                ingress: ingress.clone(),
                api: adapters.api.clone(),
                api_key: env.secret("API_SERVER_KEY").map_err(|e| anyhow::anyhow!(e))?,
                local_key: Some(access.1),
                model_id: config.platforms.api.model_id.clone(),
                models: api_models,
                profiles: api_profiles,
                ready: ready.clone(),
                sse_keepalive: config.http.sse_keepalive.get(),
                platforms: adapters.platforms.clone(),
                platform_ctx: ctx.clone(),
                webhooks: WebhookState { routes: webhooks, ingress: ingress.clone() },
                targets,
                outbox: delivery.outbox.clone(),
                loopback: addr.is_some_and(|a| a.ip().is_loopback()),
                mcp: mcp.clone(),
                idempotency_ttl: crate::retention::idempotency_age(&config.retention),
                panel: Arc::default(),
                home: paths.home.clone(),
                workdir: paths.workdir(&config.tools),
                reloader: Some(reloader.clone()),
            };
            ground.serve_http(&tasks, listener, state, &platform_cancel, &http_cancel);
        }
        if options.systemd {
            systemd::ready(&tasks, shutdown.clone(), store.clone());
        }
        tracing::info!(addr = ?addr, recovered = ?recovery, elapsed_ms = started.elapsed().as_millis() as u64, "hermesd ready");

        let stopping = parts::Stopping {
            systemd: options.systemd,
            ready,
            ingress,
            router,
            drain_timeout: config.agent.drain_timeout.get(),
            mcp: mcp.clone(),
            delivery,
            api: adapters.api,
            http_cancel,
            tasks,
            sqlite,
            holding,
        };
        let done = tokio::spawn(stopping.after(shutdown.clone()));
        Ok(Self { addr, metrics, recovery, started_in: started.elapsed(), mcp, reloader, shutdown, done })
    }

    /// Begin a graceful shutdown.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// A token that shuts the daemon down when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Wait until shutdown has finished.
    pub async fn wait(self) {
        if let Err(e) = self.done.await {
            tracing::error!(error = %e, "shutdown task failed");
        }
    }

    /// Shut down and wait.
    pub async fn stop(self) {
        self.shutdown();
        self.wait().await;
    }
}

/// The keys a reload takes in place (a table, or one key of it); every other change waits for a
/// restart and is named as such.
const IN_PLACE: &[&str] = &[
    "model",
    "profiles",
    "skills",
    "routes",
    "tools.toolsets",
    "tools.platforms",
    "tools.approved_commands",
    "tools.clarify_timeout",
    "tools.memory_chars",
    "tools.user_chars",
    "cron.timezone",
    "cron.default_deliver",
];

/// The config the daemon runs on after a reload: `base` (what it started with) with the keys of
/// `IN_PLACE` taken from `new`.
fn in_place(base: &Config, new: &Config) -> Config {
    let mut mixed = base.clone();
    mixed.model = new.model.clone();
    mixed.profiles = new.profiles.clone();
    mixed.skills = new.skills.clone();
    mixed.routes = new.routes.clone();
    let (tools, from) = (&mut mixed.tools, &new.tools);
    tools.toolsets = from.toolsets.clone();
    tools.platforms = from.platforms.clone();
    tools.approved_commands = from.approved_commands.clone();
    tools.clarify_timeout = from.clarify_timeout;
    tools.memory_chars = from.memory_chars;
    tools.user_chars = from.user_chars;
    mixed.cron.timezone = new.cron.timezone.clone();
    mixed.cron.default_deliver = new.cron.default_deliver.clone();
    mixed
}

/// The model ids the API answers to, and each profile with its primary model (`/readyz`).
fn api_catalog(config: &Config, paths: &Paths) -> (crate::config::ApiModels, Vec<(String, Option<String>)>) {
    let profiles = config
        .profile_names()
        .into_iter()
        .filter_map(|name| config.profile(name, paths))
        .map(|p| (p.name.to_owned(), p.models.first().map(|m| m.name.clone())))
        .collect();
    (config.api_models(), profiles)
}

/// The profiles a config's platform accounts name (they are wired at start).
fn profiles_in_use(config: &Config) -> Vec<String> {
    fn walk(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, item) in map {
                    match (key.as_str(), item) {
                        ("profile", serde_json::Value::String(name)) => out.push(name.clone()),
                        _ => walk(item, out),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&serde_json::to_value(&config.platforms).unwrap_or_default(), &mut out);
    out.retain(|p| p != crate::config::DEFAULT_PROFILE);
    out.sort();
    out.dedup();
    out
}
