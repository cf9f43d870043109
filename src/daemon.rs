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

use crate::access::Access;
use crate::agent::provider::{AnthropicMessages, ChatCompletions, NotConfigured, Provider, Responses};
use crate::agent::runtime::chain::{ProviderChain, RetryPolicy};
use crate::agent::runtime::prompt::PromptBuilder;
use crate::agent::tools;
use crate::config::{Config, ConfigError, Env, Paths, ProviderKind};
use crate::cron::tick::Scheduler;
use crate::delivery::Targets;
use crate::delivery::local::LocalPlatform;
use crate::delivery::turns::Routing;
use crate::http::{AppState, Readiness};
use crate::ingress::HostIngress;
use crate::metrics::Metrics;
use crate::net_guard::AddressPolicy;
use crate::outbox::{Outbox, PlatformRegistry};
use crate::platforms::api::ApiPlatform;
use crate::recovery::{RecoveryReport, recover};
use crate::router::{Router, RouterSettings};
use crate::store::{SqliteStore, Store, StoreError};
use crate::systemd;
use crate::turn::approvals::Approvals;
use crate::turn::heartbeat::HeartbeatSettings;
use crate::turn::{RunnerParts, RunnerSettings, TurnRunner};
use crate::webhooks::handler::WebhookState;
use crate::webhooks::route::WebhookRoutes;

mod standby;

/// How long pending deliveries may run after turns have drained.
const DELIVERY_GRACE: Duration = Duration::from_secs(5);

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

/// `sandbox` with the commands' egress proxy started on the home's socket, when commands may use
/// the network: then HTTP(S) through the proxy is their only way out. The proxy refuses
/// loopback, private and link-local targets like web_fetch (never `tools.web_allow_private`: a
/// command must not reach the LAN's or the host's services).
fn with_egress_proxy(
    sandbox: crate::sandbox::Sandbox,
    terminal: &crate::config::TerminalConfig,
    home: &std::path::Path,
) -> crate::sandbox::Sandbox {
    if sandbox.mode() == crate::sandbox::SandboxMode::None || terminal.deny_network {
        return sandbox;
    }
    let socket = crate::sandbox::proxy::socket_path(home);
    match crate::sandbox::EgressProxy::start(&socket, AddressPolicy::new(false)) {
        Ok(proxy) => sandbox.with_proxy(proxy),
        Err(e) => {
            tracing::warn!(error = %e, socket = %socket.display(), "cannot start the commands' egress proxy; commands get no network");
            sandbox
        }
    }
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
    shutdown: CancellationToken,
    done: tokio::task::JoinHandle<()>,
}

impl Daemon {
    /// Build everything and start serving. Returns once READY has been signalled.
    pub async fn start(config: Config, paths: Paths, env: Env, options: DaemonOptions) -> Result<Self, StartError> {
        let started = Instant::now();
        // reqwest is built without a default crypto provider; install ring once per process.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let extra: Vec<&str> = options.extra_platforms.iter().map(|p| p.name()).collect();
        let problems = config.validate_with(&env, &extra);
        if !problems.is_empty() {
            return Err(ConfigError { problems }.into());
        }
        std::fs::create_dir_all(&paths.home).with_context(|| format!("create {}", paths.home.display()))?;
        let store =
            SqliteStore::open(&paths.database(&config.store), config.store.busy_timeout.get(), config.store.readers)
                .await
                .map_err(|e| match e {
                    StoreError::SchemaTooNew { .. } => StartError::Schema(e),
                    other => {
                        StartError::Other(anyhow::anyhow!("open {}: {other}", paths.database(&config.store).display()))
                    }
                })?;
        let sqlite = store.clone();
        let store: Arc<dyn Store> = Arc::new(store);
        let holding = match &options.lease {
            Some(cancel) => Some(
                standby::hold(&sqlite, &paths.home, &config.http, options.systemd, cancel)
                    .await?
                    .ok_or(StartError::Stopped)?,
            ),
            None => None,
        };
        if let Some(holding) = &holding {
            tracing::debug!(token = holding.token, "holding the home");
        }
        let metrics = Arc::new(Metrics::default());
        sqlite.count_into(metrics.clone());

        let (mut platforms, hass_tools) = match options.extra_only {
            true => (PlatformRegistry::default(), None),
            false => build_all(&config, &env, &paths)?,
        };
        let usage_board = Arc::new(crate::usage::UsageBoard::default());
        let api = (config.platforms.api.enabled && !options.extra_only).then(|| {
            let api =
                ApiPlatform::new(store.clone(), &config.platforms.api.model_id).with_media(api_media(&paths.home));
            Arc::new(api.with_usage(usage_board.clone()))
        });
        if let Some(api) = &api {
            platforms.insert(api.clone());
        }
        for platform in &options.extra_platforms {
            platforms.insert(platform.clone());
        }

        let shutdown = CancellationToken::new();
        let delivery_cancel = CancellationToken::new();
        let delivery_tracker = TaskTracker::new();
        let outbox = Outbox::new(
            store.clone(),
            platforms.clone(),
            metrics.clone(),
            delivery_tracker.clone(),
            delivery_cancel.clone(),
        )
        .with_redaction(env.redaction())
        .with_streaming(config.platforms.streaming())
        .with_data_dir(paths.home.clone());
        let http = crate::http_client::build().context("build HTTP client")?;
        let chain = build_chain(&config, &env, &http)?.with_metrics(metrics.clone());
        let media = crate::agent::media::Media::from_config(paths.home.clone(), &config.auxiliary, &env, &http)
            .map_err(|e| anyhow::anyhow!("auxiliary: {e}"))?;
        let summary = crate::agent::auxiliary::Summarizer::from_config(config.auxiliary.summary.as_ref(), &env, &http)
            .map_err(|e| anyhow::anyhow!("auxiliary.summary: {e}"))?
            .map(Arc::new);
        drop(http);
        let workdir = paths.workdir(&config.tools);
        std::fs::create_dir_all(&workdir).with_context(|| format!("create {}", workdir.display()))?;
        let webhooks = Arc::new(WebhookRoutes::build(&config.webhooks, &env).map_err(|e| anyhow::anyhow!(e))?);
        let targets = Targets::new(store.clone(), platforms.clone(), &env);
        let routing = Routing::new(store.clone(), targets.clone(), &config.webhooks, &paths.home)
            .with_hass_watch(config.platforms.homeassistant.watch_target.clone());
        let skills =
            crate::agent::skills::Skills::new(paths.skills(), config.skills.clone(), crate::router::commands::names());
        let prompts = PromptBuilder::new(config.agent.system_prompt.clone(), workdir.clone(), paths.home.clone())
            .with_skills(skills)
            .with_memory(config.memory.clone());
        for note in tools::memory::upgrade_notes(&config.memory, &paths.home, &workdir) {
            tracing::warn!("{note}");
        }
        let fetcher = tools::web_fetch::WebFetchTool::new(AddressPolicy::new(config.tools.web_allow_private))
            .context("build web_fetch client")?;
        // Every file a secret came from (now or later) is denied to commands.
        let sandbox = crate::sandbox::Sandbox::start(&config.tools.terminal).with_secrets(env.trail());
        let sandbox = Arc::new(with_egress_proxy(sandbox, &config.tools.terminal, &paths.home));
        let serves_api = config.platforms.api.enabled && !options.no_http && !options.extra_only;
        if let Some(why) = sandbox.reaches_loopback().filter(|_| serves_api)
            && matches!(env.secret("API_SERVER_KEY"), Ok(None))
        {
            let problem = format!(
                "terminal commands could reach the keyless API on loopback: {why}; set API_SERVER_KEY, or \
                 run on a kernel with user namespaces or Landlock ABI 4"
            );
            return Err(ConfigError { problems: vec![problem] }.into());
        }
        let extras = tools::ExtraTools {
            cron: config.cron.clone(),
            limits: config.limits.clone(),
            targets: targets.clone(),
            outbox: outbox.clone(),
            redaction: env.redaction(),
            sandbox: sandbox.clone(),
            web_search: tools::web_search::WebSearchTool::from_config(&config.tools.web_search, &env)
                .context("build web_search")?,
            summary: summary.clone(),
        };
        let mut registry = tools::builtin(&config.tools, &config.agent, fetcher, &chain, &prompts, extras);
        for tool in hass_tools.iter().flat_map(|t| t.tools()) {
            registry.register(tool);
        }
        // MCP servers connect in the background: start never waits for them.
        let mcp_settings = tools::mcp::HubSettings {
            home: paths.home.clone(),
            workdir: workdir.clone(),
            shim_exe: match &options.mcp_shim {
                Some(path) => path.clone(),
                None => std::env::current_exe().context("locate the hermesd binary")?,
            },
            approval_timeout: config.tools.approval_timeout.get(),
        };
        let mcp = tools::mcp::McpHub::start(&config.mcp, &env, mcp_settings);
        registry.add_source(mcp.clone());
        let pairing_key = crate::access::PairingKey::load_or_create(&paths.home).map_err(|e| anyhow::anyhow!(e))?;
        let local_key = crate::config::Secret::new(pairing_key.local_api_key());
        let unpaired = (!config.platforms.email.pairing).then_some("email");
        let access = Arc::new(
            Access::from_env(&env, platforms.all().map(|p| p.name()), store.clone(), pairing_key)
                .without_pairing(unpaired),
        );
        let accounting = {
            let access = access.clone();
            let exempt = Box::new(move |platform: &str, user: &str| access.is_named_admin(platform, user));
            Arc::new(crate::usage::Accounting::new(store.clone(), config.limits.clone(), exempt, usage_board.clone()))
        };
        let runner = Arc::new(TurnRunner::new(
            RunnerParts {
                store: store.clone(),
                chain,
                registry,
                outbox: outbox.clone(),
                metrics: metrics.clone(),
                approvals: Arc::new(Approvals::default()),
                prompts,
                workdir,
                data_dir: paths.home.clone(),
                media: Arc::new(media),
                summary,
                routing,
                accounting,
            },
            RunnerSettings {
                sessions: config.sessions.clone(),
                recovery: config.recovery.clone(),
                tools: config.tools.clone(),
                max_iterations: config.agent.max_iterations,
                compression_threshold: config.compression.threshold,
                heartbeat: HeartbeatSettings {
                    typing_every: Duration::from_secs(4),
                    progress_every: Duration::from_millis(1500),
                    notice_every: config.agent.heartbeat_interval.get(),
                    inactivity: config.agent.inactivity_timeout.get(),
                    progress: config.agent.progress,
                },
                flush: crate::turn::flush::FlushSettings::from_config(&config.memory),
            },
        ));
        let router = Router::new(
            runner,
            access,
            RouterSettings {
                busy_policy: config.agent.busy_policy,
                max_queued: config.agent.max_queued_per_session,
                session_idle: config.agent.session_idle.get(),
                group_per_user: config.sessions.group_per_user,
                max_concurrent_turns: config.agent.max_concurrent_turns,
                max_parked_turns: config.agent.max_parked_turns,
                batch_window: config.agent.batch_window.get(),
            },
            metrics.clone(),
        );
        let fence =
            holding.as_ref().map(|holding| crate::store::Fence { lease: standby::HOME.into(), token: holding.token });
        let ingress = Arc::new(HostIngress::new(store.clone(), router.clone(), metrics.clone()).with_fence(fence));
        let ready = Arc::new(Readiness::default());
        let _ = ready.sandbox.set((sandbox.describe(), sandbox.problem()));

        let listener = if options.no_http {
            None
        } else {
            let listener =
                TcpListener::bind(&config.http.listen).await.with_context(|| format!("bind {}", config.http.listen))?;
            Some(listener)
        };
        let addr = listener.as_ref().map(|l| l.local_addr()).transpose().context("local address")?;

        let recovery = match options.extra_only {
            true => RecoveryReport::default(),
            false => recover(&store, &outbox, &router, &config.recovery, &metrics)
                .await
                .map_err(|e| anyhow::anyhow!("recovery: {e}"))?,
        };

        let tasks = TaskTracker::new();
        let platform_cancel = shutdown.child_token();
        let ctx = PlatformContext { ingress: ingress.clone() };
        for platform in platforms.all() {
            let (platform, ctx, cancel) = (platform.clone(), ctx.clone(), platform_cancel.clone());
            tasks.spawn(async move {
                let name = platform.name().to_owned();
                if let Err(e) = platform.run(ctx, cancel).await {
                    tracing::error!(platform = %name, error = %e, "platform stopped");
                }
            });
        }
        ready.platforms_started.store(true, Ordering::SeqCst);
        if config.cron.enabled && !options.no_http && !options.extra_only {
            let scheduler = Scheduler::new(store.clone(), ingress.clone(), &paths.home, config.cron.tick.get());
            tasks.spawn(scheduler.run(platform_cancel.clone()));
        }
        tasks.spawn(router.clone().sweep_sessions(config.sessions.sweep_interval.get(), platform_cancel.clone()));
        tasks.spawn(outbox.clone().expire_pacers(platform_cancel.clone()));
        tasks.spawn(crate::store::search::index_in_background(store.clone(), platform_cancel.clone()));
        tasks.spawn(crate::retention::run(
            store.clone(),
            crate::retention::Folders::under(&paths.home).with_tool_tmp(crate::sandbox::private_tmp_root()),
            config.retention.clone(),
            metrics.clone(),
            platform_cancel.clone(),
        ));

        let http_cancel = CancellationToken::new();
        if let Some(listener) = listener {
            let state = AppState {
                store: store.clone(),
                metrics: metrics.clone(),
                ingress: ingress.clone(),
                api: api.clone(),
                api_key: env.secret("API_SERVER_KEY").map_err(|e| anyhow::anyhow!(e))?,
                local_key: Some(local_key),
                model_id: config.platforms.api.model_id.clone(),
                ready: ready.clone(),
                sse_keepalive: config.http.sse_keepalive.get(),
                platforms: platforms.clone(),
                platform_ctx: ctx.clone(),
                webhooks: WebhookState { routes: webhooks.clone(), ingress: ingress.clone() },
                targets: targets.clone(),
                outbox: outbox.clone(),
                loopback: addr.is_some_and(|a| a.ip().is_loopback()),
                mcp: mcp.clone(),
                idempotency_ttl: crate::retention::idempotency_age(&config.retention),
            };
            let ttl = crate::retention::idempotency_age(&config.retention);
            tasks.spawn(crate::http::prune_idempotency(store.clone(), ttl, platform_cancel.clone()));
            let app = crate::http::router(state, &config.http);
            let settings = crate::http::ServeSettings {
                header_read_timeout: config.http.header_read_timeout.get(),
                idle_timeout: config.http.idle_timeout.get(),
                body_timeout: config.http.body_timeout.get(),
                max_connections: config.http.max_connections,
            };
            tasks.spawn(crate::http::serve(listener, app, settings, http_cancel.clone()));
        }
        if options.systemd {
            systemd::ready(&tasks, shutdown.clone(), store.clone());
        }
        tracing::info!(addr = ?addr, recovered = ?recovery, elapsed_ms = started.elapsed().as_millis() as u64, "hermesd ready");

        let drain_timeout = config.agent.drain_timeout.get();
        let stop_mcp = mcp.clone();
        let stopping = shutdown.clone();
        let systemd_on = options.systemd;
        let done = tokio::spawn(async move {
            stopping.cancelled().await;
            if systemd_on {
                systemd::stopping();
            }
            tracing::info!("shutting down: intake closed, draining turns");
            ready.set_draining();
            ingress.close();
            router.drain(drain_timeout).await;
            stop_mcp.shutdown().await;
            delivery_tracker.close();
            if tokio::time::timeout(DELIVERY_GRACE, delivery_tracker.wait()).await.is_err() {
                tracing::info!("deliveries still pending; they resume at the next start");
                delivery_cancel.cancel();
                delivery_tracker.wait().await;
            }
            if let Some(api) = &api {
                api.release_all();
            }
            http_cancel.cancel();
            tasks.close();
            tasks.wait().await;
            sqlite.close().await;
            // Released only now: a standby takes over once nothing of this daemon runs.
            drop(holding);
            tracing::info!("hermesd stopped");
        });
        Ok(Self { addr, metrics, recovery, started_in: started.elapsed(), mcp, shutdown, done })
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

/// The chat platforms the config enables, plus the `local` delivery target; nothing is started.
/// (`hermesd send` uses this to deliver without a running daemon.)
pub fn build_platforms(config: &Config, env: &Env, paths: &Paths) -> anyhow::Result<PlatformRegistry> {
    build_all(config, env, paths).map(|(platforms, _)| platforms)
}

/// The platforms, plus the `homeassistant` tools over that adapter's connection when it runs.
#[cfg_attr(
    not(any(
        feature = "telegram",
        feature = "slack",
        feature = "discord",
        feature = "whatsapp",
        feature = "homeassistant",
        feature = "signal",
        feature = "email"
    )),
    allow(unused_variables)
)]
fn build_all(
    config: &Config,
    env: &Env,
    paths: &Paths,
) -> anyhow::Result<(PlatformRegistry, Option<tools::homeassistant::HassTools>)> {
    let mut platforms = PlatformRegistry::default();
    #[allow(unused_mut)]
    let mut hass_tools = None;
    #[cfg(feature = "homeassistant")]
    if config.platforms.homeassistant.enabled {
        let approval = config.tools.approval_timeout.get();
        let (hass, tools) = crate::platforms::homeassistant::build(&config.platforms.homeassistant, env, approval)
            .map_err(|e| anyhow::anyhow!("homeassistant: {e}"))?;
        platforms.insert(hass);
        hass_tools = Some(tools);
    }
    #[cfg(feature = "telegram")]
    if config.platforms.telegram.enabled {
        let telegram = crate::platforms::telegram::build(&config.platforms.telegram, env, &paths.home)
            .map_err(|e| anyhow::anyhow!("telegram: {e}"))?;
        platforms.insert(telegram);
    }
    #[cfg(feature = "slack")]
    if config.platforms.slack.enabled {
        let slack = crate::platforms::slack::build(&config.platforms.slack, env, &paths.home)
            .map_err(|e| anyhow::anyhow!("slack: {e}"))?;
        platforms.insert(slack);
    }
    #[cfg(feature = "discord")]
    if config.platforms.discord.enabled {
        let discord = crate::platforms::discord::build(&config.platforms.discord, env, &paths.home)
            .map_err(|e| anyhow::anyhow!("discord: {e}"))?;
        platforms.insert(discord);
    }
    #[cfg(feature = "whatsapp")]
    if config.platforms.whatsapp.enabled {
        let whatsapp = crate::platforms::whatsapp::build(&config.platforms.whatsapp, env, &paths.home)
            .map_err(|e| anyhow::anyhow!("whatsapp: {e}"))?;
        platforms.insert(whatsapp);
    }
    #[cfg(feature = "signal")]
    if config.platforms.signal.enabled {
        let signal = crate::platforms::signal::build(&config.platforms.signal, env, &paths.home)
            .map_err(|e| anyhow::anyhow!("signal: {e}"))?;
        platforms.insert(signal);
    }
    #[cfg(feature = "email")]
    if config.platforms.email.enabled {
        let email = crate::platforms::email::build(&config.platforms.email, env, &paths.home)
            .map_err(|e| anyhow::anyhow!("email: {e}"))?;
        platforms.insert(email);
    }
    platforms.insert(Arc::new(LocalPlatform::new(paths.home.join("deliveries"))));
    Ok((platforms, hass_tools))
}

/// Where image parts of API requests are saved.
fn api_media(home: &std::path::Path) -> hermesd_platform::media::MediaDir {
    let cap = crate::agent::media::image::MAX_IMAGE_BYTES;
    hermesd_platform::media::MediaDir::new(home.join("media").join(crate::platforms::api::NAME), cap)
}

/// The primary model and its fallbacks, each with retries owned by the runtime.
fn build_chain(config: &Config, env: &Env, http: &reqwest::Client) -> anyhow::Result<ProviderChain> {
    let models = config.model_chain();
    if models.is_empty() {
        tracing::warn!("no [model] configured: every message will be answered with a configuration hint");
        return Ok(ProviderChain::new(vec![Arc::new(NotConfigured)], RetryPolicy::default()));
    }
    let mut providers: Vec<Arc<dyn Provider>> = Vec::new();
    for model in models {
        let key = match &model.api_key_env {
            Some(var) => env.secret(var).map_err(|e| anyhow::anyhow!(e))?,
            None => None,
        };
        let (url, name, timeout, context) = (&model.base_url, &model.name, model.timeout.get(), model.context_length);
        providers.push(match model.provider {
            ProviderKind::ChatCompletions => {
                Arc::new(ChatCompletions::new(http.clone(), url, name, key, timeout, context).with_vision(model.vision))
            }
            ProviderKind::AnthropicMessages => Arc::new(
                AnthropicMessages::new(http.clone(), url, name, key, timeout, context).with_vision(model.vision),
            ),
            ProviderKind::Responses => {
                Arc::new(Responses::new(http.clone(), url, name, key, timeout, context).with_vision(model.vision))
            }
        });
    }
    let policy = RetryPolicy {
        attempts: config.agent.retry_attempts,
        deadline: config.agent.model_deadline.get(),
        ..RetryPolicy::default()
    };
    let prices = config.model_chain().iter().map(|m| crate::usage::Prices::from_config(&m.prices())).collect();
    Ok(ProviderChain::new(providers, policy).with_prices(prices))
}
