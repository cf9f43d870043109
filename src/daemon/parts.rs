//! The daemon's named parts, built in `Daemon::start`'s order: the store (and the home's
//! lease), the adapters, the outbox, the agent (model chain, tools, sandbox, MCP), access, the
//! turn runner and the router; then the background tasks and HTTP; and the shutdown sequence
//! that stops them in the opposite order.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use hermesd_platform::PlatformContext;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{DaemonOptions, StartError, standby};
use crate::access::Access;
use crate::agent::provider::{AnthropicMessages, ChatCompletions, NotConfigured, Provider, Responses};
use crate::agent::runtime::chain::{ProviderChain, RetryPolicy};
use crate::agent::runtime::prompt::PromptBuilder;
use crate::agent::tools;
use crate::config::{Config, ConfigError, Env, Paths, ProviderKind, Secret};
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
use crate::router::{Router, RouterSettings};
use crate::store::{SqliteStore, Store, StoreError};
use crate::systemd;
use crate::turn::approvals::Approvals;
use crate::turn::heartbeat::HeartbeatSettings;
use crate::turn::{RunnerParts, RunnerSettings, TurnRunner};
use crate::webhooks::route::WebhookRoutes;

/// How long pending deliveries may run after turns have drained.
const DELIVERY_GRACE: Duration = Duration::from_secs(5);

/// What every part is built from: the validated config, the environment, the home, the
/// embedder's options, the store and the metrics.
#[derive(Clone, Copy)]
pub(super) struct Ground<'a> {
    pub(super) config: &'a Config,
    pub(super) env: &'a Env,
    pub(super) paths: &'a Paths,
    pub(super) options: &'a DaemonOptions,
    pub(super) store: &'a Arc<dyn Store>,
    pub(super) metrics: &'a Arc<Metrics>,
}

/// Open the store (a schema newer than this binary is exit 78) and, for `hermesd run`, hold
/// the home: stand by while another daemon holds it.
pub(super) async fn open_store(
    config: &Config,
    paths: &Paths,
    options: &DaemonOptions,
) -> Result<(SqliteStore, Option<standby::Holding>), StartError> {
    let database = paths.database(&config.store);
    let store = SqliteStore::open(&database, config.store.busy_timeout.get(), config.store.readers).await.map_err(
        |e| match e {
            StoreError::SchemaTooNew { .. } => StartError::Schema(e),
            other => StartError::Other(anyhow::anyhow!("open {}: {other}", database.display())),
        },
    )?;
    let holding = match &options.lease {
        Some(cancel) => Some(
            standby::hold(&store, &paths.home, &config.http, options.systemd, cancel)
                .await?
                .ok_or(StartError::Stopped)?,
        ),
        None => None,
    };
    if let Some(holding) = &holding {
        tracing::debug!(token = holding.token, "holding the home");
    }
    Ok((store, holding))
}

/// The platforms the daemon runs: the configured adapters, the API, the embedder's extras.
pub(super) struct Adapters {
    pub(super) platforms: PlatformRegistry,
    /// The `homeassistant` tools over that adapter's connection, when it runs.
    hass_tools: Option<tools::homeassistant::HassTools>,
    pub(super) api: Option<Arc<ApiPlatform>>,
    usage_board: Arc<crate::usage::UsageBoard>,
}

impl Adapters {
    pub(super) fn build(ground: Ground<'_>) -> anyhow::Result<Self> {
        let Ground { config, env, paths, options, store, .. } = ground;
        let (mut platforms, hass_tools) = match options.extra_only {
            true => (PlatformRegistry::default(), None),
            false => build_all(config, env, paths)?,
        };
        let usage_board = Arc::new(crate::usage::UsageBoard::default());
        let api = (config.platforms.api.enabled && !options.extra_only).then(|| {
            let api = ApiPlatform::new(store.clone(), &config.platforms.api.model_id)
                .with_media(api_media(&paths.home))
                .with_responses(store.clone());
            Arc::new(api.with_usage(usage_board.clone()))
        });
        if let Some(api) = &api {
            platforms.insert(api.clone());
        }
        for platform in &options.extra_platforms {
            platforms.insert(platform.clone());
        }
        Ok(Self { platforms, hass_tools, api, usage_board })
    }
}

/// The outbox and the tasks delivering for it, which shutdown gives a grace period of their own.
pub(super) struct Delivery {
    pub(super) outbox: Outbox,
    cancel: CancellationToken,
    tracker: TaskTracker,
}

impl Delivery {
    pub(super) fn new(ground: Ground<'_>, platforms: &PlatformRegistry) -> Self {
        let Ground { config, env, paths, store, metrics, .. } = ground;
        let (cancel, tracker) = (CancellationToken::new(), TaskTracker::new());
        let outbox = Outbox::new(store.clone(), platforms.clone(), metrics.clone(), tracker.clone(), cancel.clone())
            .with_redaction(env.redaction())
            .with_streaming(config.platforms.streaming(env))
            .with_data_dir(paths.home.clone());
        Self { outbox, cancel, tracker }
    }
}

/// The agent: each profile's model chain, prompts and tools (with the sandbox and MCP servers
/// they share), the media and summary helpers, and where replies are routed.
pub(super) struct AgentParts {
    agents: crate::turn::agents::Agents,
    media: crate::agent::media::Media,
    summary: Option<Arc<crate::agent::auxiliary::Summarizer>>,
    routing: Routing,
    pub(super) targets: Targets,
    pub(super) webhooks: Arc<WebhookRoutes>,
    pub(super) sandbox: Arc<crate::sandbox::Sandbox>,
    pub(super) mcp: Arc<tools::mcp::McpHub>,
    /// What builds the profiles' agents again on a reload.
    pub(super) kit: AgentKit,
}

/// The shared parts every profile's agent is built over, kept to build them again from a new
/// config (a reload): the fetcher, the daemon-side tools, Home Assistant's tools, the MCP hub,
/// the providers' HTTP client.
#[derive(Clone)]
pub(super) struct AgentKit {
    fetcher: tools::web_fetch::WebFetchTool,
    extras: tools::ExtraTools,
    hass: Option<tools::homeassistant::HassTools>,
    mcp: Arc<tools::mcp::McpHub>,
    http: reqwest::Client,
}

impl AgentKit {
    /// Every profile's agent for `config`: models and their prices, personas, skills, memory
    /// folders, toolsets and turn limits as it says.
    pub(super) fn agents(
        &self,
        config: &Config,
        env: &Env,
        paths: &Paths,
        store: &Arc<dyn Store>,
        metrics: &Arc<Metrics>,
    ) -> Result<crate::turn::agents::Agents, StartError> {
        let options = crate::daemon::DaemonOptions::default();
        let ground = Ground { config, env, paths, options: &options, store, metrics };
        // The daemon-side tools take the new config's cron and daily caps.
        let extras =
            tools::ExtraTools { cron: config.cron.clone(), limits: config.limits.clone(), ..self.extras.clone() };
        let shared = SharedTools {
            fetcher: self.fetcher.clone(),
            extras,
            hass: self.hass.as_ref(),
            mcp: &self.mcp,
            http: &self.http,
        };
        agents(ground, &shared)
    }
}

impl AgentParts {
    pub(super) fn build(ground: Ground<'_>, adapters: &Adapters, outbox: &Outbox) -> Result<Self, StartError> {
        let Ground { config, env, paths, options, store, .. } = ground;
        let http = crate::http_client::build().context("build HTTP client")?;
        let media = crate::agent::media::Media::from_config(paths.home.clone(), &config.auxiliary, env, &http)
            .map_err(|e| anyhow::anyhow!("auxiliary: {e}"))?;
        let summary = crate::agent::auxiliary::Summarizer::from_config(config.auxiliary.summary.as_ref(), env, &http)
            .map_err(|e| anyhow::anyhow!("auxiliary.summary: {e}"))?
            .map(Arc::new);
        let workdir = paths.workdir(&config.tools);
        let webhooks = Arc::new(WebhookRoutes::build(&config.webhooks, env).map_err(|e| anyhow::anyhow!(e))?);
        let targets = Targets::new(store.clone(), adapters.platforms.clone(), env);
        let hass_watch = crate::platforms::hass::watch_target(&config.platforms);
        let routing =
            Routing::new(store.clone(), targets.clone(), &config.webhooks, &paths.home).with_hass_watch(hass_watch);
        for note in tools::memory::upgrade_notes(&config.memory, &paths.home, &workdir) {
            tracing::warn!("{note}");
        }
        let sandbox = sandbox(config, env, paths, options)?;
        let extras = tools::ExtraTools {
            cron: config.cron.clone(),
            limits: config.limits.clone(),
            targets: targets.clone(),
            outbox: outbox.clone(),
            redaction: env.redaction(),
            sandbox: sandbox.clone(),
            web_search: tools::web_search::WebSearchTool::from_config(&config.tools.web_search, env)
                .context("build web_search")?,
            summary: summary.clone(),
        };
        let fetcher = tools::web_fetch::WebFetchTool::new(AddressPolicy::new(config.tools.web_allow_private))
            .context("build web_fetch client")?;
        // MCP servers connect in the background: start never waits for them.
        let mcp_settings = tools::mcp::HubSettings {
            home: paths.home.clone(),
            workdir: workdir.clone(),
            shim_exe: match &options.mcp_shim {
                Some(path) => path.clone(),
                None => crate::sandbox::own_executable().context("locate the hermesd binary")?,
            },
            approval_timeout: config.tools.approval_timeout.get(),
        };
        let mcp = tools::mcp::McpHub::start(&config.mcp, env, mcp_settings);
        let shared = SharedTools {
            fetcher: fetcher.clone(),
            extras: extras.clone(),
            hass: adapters.hass_tools.as_ref(),
            mcp: &mcp,
            http: &http,
        };
        let agents = agents(ground, &shared)?;
        let kit = AgentKit { fetcher, extras, hass: adapters.hass_tools.clone(), mcp: mcp.clone(), http: http.clone() };
        Ok(Self { agents, media, summary, routing, targets, webhooks, sandbox, mcp, kit })
    }
}

/// What every profile's tools share: the fetcher, the daemon-side tools, Home Assistant's
/// tools, the MCP servers, and the HTTP client its providers use.
struct SharedTools<'a> {
    fetcher: tools::web_fetch::WebFetchTool,
    extras: tools::ExtraTools,
    hass: Option<&'a tools::homeassistant::HassTools>,
    mcp: &'a Arc<tools::mcp::McpHub>,
    http: &'a reqwest::Client,
}

/// Every profile's agent: the default (the top-level configuration, today's paths) and each
/// `[profiles.<name>]`, with its own chain, persona, skills, memory folder, workdir and tools.
fn agents(ground: Ground<'_>, shared: &SharedTools<'_>) -> Result<crate::turn::agents::Agents, StartError> {
    let Ground { config, paths, .. } = ground;
    let mut built = Vec::new();
    for name in config.profile_names() {
        let profile = config.profile(name, paths).expect("a listed profile resolves");
        built.push(profile_agent(ground, &profile, config.profiles.get(name), shared)?);
    }
    let mut built = built.into_iter();
    let default = built.next().expect("the default profile is listed first");
    Ok(built.fold(crate::turn::agents::Agents::new(default), crate::turn::agents::Agents::with))
}

/// One profile's agent.
fn profile_agent(
    ground: Ground<'_>,
    profile: &crate::config::Profile<'_>,
    own: Option<&crate::config::ProfileConfig>,
    shared: &SharedTools<'_>,
) -> Result<crate::turn::agents::ProfileAgent, StartError> {
    let Ground { config, env, paths, metrics, .. } = ground;
    let chain = build_chain(&profile.models, config, env, shared.http)?.with_metrics(metrics.clone());
    let workdir = profile.workdir(paths, &config.tools);
    std::fs::create_dir_all(&workdir).with_context(|| format!("create {}", workdir.display()))?;
    let skills =
        crate::agent::skills::Skills::new(profile.skills(), config.skills.clone(), crate::router::commands::names());
    let prompts = PromptBuilder::new(config.agent.system_prompt.clone(), workdir.clone(), profile.dir.clone())
        .with_soul(profile.soul.clone())
        .with_skills(skills)
        .with_memory(config.memory.clone());
    let (tools_config, agent_config) = (&config.tools, &config.agent);
    // The profile's caps also bound the cron jobs made in its chats.
    let extras = tools::ExtraTools { limits: profile.limits.clone(), ..shared.extras.clone() };
    let mut registry = tools::builtin(tools_config, agent_config, shared.fetcher.clone(), &chain, &prompts, extras);
    for tool in shared.hass.iter().flat_map(|t| t.tools()) {
        registry.register(tool);
    }
    registry.add_source(shared.mcp.clone());
    Ok(crate::turn::agents::ProfileAgent {
        name: profile.name.to_owned(),
        chain,
        prompts,
        registry,
        workdir,
        toolsets: own.and_then(|p| p.toolsets.clone()),
        max_iterations: profile.max_iterations,
        busy_policy: profile.busy_policy,
    })
}

/// The commands' sandbox, with every file a secret came from (now or later) denied; refused
/// when commands could reach a keyless API on loopback.
fn sandbox(
    config: &Config,
    env: &Env,
    paths: &Paths,
    options: &DaemonOptions,
) -> Result<Arc<crate::sandbox::Sandbox>, StartError> {
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
    Ok(sandbox)
}

/// Access (allowlists, pairing under the per-home key) and the home's local API key.
pub(super) fn access(ground: Ground<'_>, platforms: &PlatformRegistry) -> anyhow::Result<(Arc<Access>, Secret)> {
    let Ground { env, paths, store, .. } = ground;
    let pairing_key = crate::access::PairingKey::load_or_create(&paths.home).map_err(|e| anyhow::anyhow!(e))?;
    let local_key = Secret::new(pairing_key.local_api_key());
    let access =
        Access::from_env(env, platforms.all().map(|p| (p.name(), p.access_rules())), store.clone(), pairing_key);
    Ok((Arc::new(access), local_key))
}

/// The turn runner over the agent's parts, with usage caps that exempt named admins.
pub(super) fn runner(
    ground: Ground<'_>,
    outbox: &Outbox,
    adapters: &Adapters,
    agent: AgentParts,
    access: &Arc<Access>,
) -> Arc<TurnRunner> {
    let Ground { config, paths, store, metrics, .. } = ground;
    let accounting = {
        let access = access.clone();
        let exempt = Box::new(move |platform: &str, user: &str| access.is_named_admin(platform, user));
        let mut accounting =
            crate::usage::Accounting::new(store.clone(), config.limits.clone(), exempt, adapters.usage_board.clone());
        for (name, profile) in &config.profiles {
            if let Some(limits) = &profile.limits {
                accounting = accounting.with_profile_limits(name, limits.clone());
            }
        }
        Arc::new(accounting)
    };
    let parts = RunnerParts {
        store: store.clone(),
        agents: Arc::new(agent.agents),
        routes: config.routes.clone().into(),
        outbox: outbox.clone(),
        metrics: metrics.clone(),
        approvals: Arc::new(Approvals::with_preapproved(&config.tools.approved_commands)),
        data_dir: paths.home.clone(),
        media: Arc::new(agent.media),
        summary: agent.summary,
        routing: agent.routing,
        accounting,
    };
    let settings = RunnerSettings {
        sessions: config.sessions.clone(),
        recovery: config.recovery.clone(),
        tools: config.tools.clone(),
        compression_threshold: config.compression.threshold,
        heartbeat: HeartbeatSettings {
            typing_every: Duration::from_secs(4),
            progress_every: Duration::from_millis(1500),
            notice_every: config.agent.heartbeat_interval.get(),
            inactivity: config.agent.inactivity_timeout.get(),
            progress: config.agent.progress,
        },
        flush: crate::turn::flush::FlushSettings::from_config(&config.memory),
    };
    Arc::new(TurnRunner::new(parts, settings))
}

/// The router over the runner, with the `[agent]` limits and the profile of each account.
pub(super) fn router(ground: Ground<'_>, runner: Arc<TurnRunner>, access: Arc<Access>) -> Router {
    let Ground { config, env, metrics, .. } = ground;
    let settings = RouterSettings {
        profiles: config.platforms.profiles(env),
        max_queued: config.agent.max_queued_per_session,
        session_idle: config.agent.session_idle.get(),
        group_per_user: config.sessions.group_per_user,
        max_concurrent_turns: config.agent.max_concurrent_turns,
        max_parked_turns: config.agent.max_parked_turns,
        batch_window: config.agent.batch_window.get(),
    };
    Router::new(runner, access, settings, metrics.clone())
}

impl Ground<'_> {
    /// Every platform's receive loop, the cron tick, the session sweep, pacer expiry, the
    /// search index and retention, all stopped by `cancel`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn spawn(
        &self,
        tasks: &TaskTracker,
        platforms: &PlatformRegistry,
        ctx: &PlatformContext,
        ingress: &Arc<HostIngress>,
        router: &Router,
        outbox: &Outbox,
        cancel: &CancellationToken,
    ) {
        let Ground { config, paths, store, metrics, options, .. } = *self;
        for platform in platforms.all() {
            let (platform, ctx, cancel) = (platform.clone(), ctx.clone(), cancel.clone());
            tasks.spawn(async move {
                let name = platform.name().to_owned();
                if let Err(e) = platform.run(ctx, cancel).await {
                    tracing::error!(platform = %name, error = %e, "platform stopped");
                }
            });
        }
        if config.cron.enabled && !options.no_http && !options.extra_only {
            let scheduler = Scheduler::new(store.clone(), ingress.clone(), &paths.home, config.cron.tick.get());
            tasks.spawn(scheduler.run(cancel.clone()));
        }
        tasks.spawn(router.clone().sweep_sessions(config.sessions.sweep_interval.get(), cancel.clone()));
        tasks.spawn(outbox.clone().expire_pacers(cancel.clone()));
        tasks.spawn(crate::store::search::index_in_background(store.clone(), cancel.clone()));
        tasks.spawn(crate::retention::run(
            store.clone(),
            crate::retention::Folders::under(&paths.home).with_tool_tmp(crate::sandbox::private_tmp_root()),
            config.retention.clone(),
            metrics.clone(),
            cancel.clone(),
        ));
    }

    /// Serve HTTP on `listener` until `http_cancel`, and prune idempotency records until
    /// `cancel`.
    pub(super) fn serve_http(
        &self,
        tasks: &TaskTracker,
        listener: TcpListener,
        state: AppState,
        cancel: &CancellationToken,
        http_cancel: &CancellationToken,
    ) {
        let config = self.config;
        let ttl = crate::retention::idempotency_age(&config.retention);
        tasks.spawn(crate::http::prune_idempotency(self.store.clone(), ttl, cancel.clone()));
        let kept = config.retention.responses.get();
        tasks.spawn(crate::http::prune_responses(self.store.clone(), kept, cancel.clone()));
        let app = crate::http::router(state, &config.http);
        let settings = crate::http::ServeSettings {
            header_read_timeout: config.http.header_read_timeout.get(),
            idle_timeout: config.http.idle_timeout.get(),
            body_timeout: config.http.body_timeout.get(),
            max_connections: config.http.max_connections,
        };
        tasks.spawn(crate::http::serve(listener, app, settings, http_cancel.clone()));
    }
}

/// What shutdown stops, in its order: intake closed → turns drained → MCP servers stopped →
/// deliveries get `DELIVERY_GRACE` → API waiters released → HTTP and background tasks stop →
/// store closed → the home released.
pub(super) struct Stopping {
    pub(super) systemd: bool,
    pub(super) ready: Arc<Readiness>,
    pub(super) ingress: Arc<HostIngress>,
    pub(super) router: Router,
    pub(super) drain_timeout: Duration,
    pub(super) mcp: Arc<tools::mcp::McpHub>,
    pub(super) delivery: Delivery,
    pub(super) api: Option<Arc<ApiPlatform>>,
    pub(super) http_cancel: CancellationToken,
    pub(super) tasks: TaskTracker,
    pub(super) sqlite: SqliteStore,
    pub(super) holding: Option<standby::Holding>,
}

impl Stopping {
    /// Wait for `shutdown`, then stop everything in order.
    pub(super) async fn after(self, shutdown: CancellationToken) {
        shutdown.cancelled().await;
        if self.systemd {
            systemd::stopping();
        }
        tracing::info!("shutting down: intake closed, draining turns");
        self.ready.set_draining();
        self.ingress.close();
        self.router.drain(self.drain_timeout).await;
        self.mcp.shutdown().await;
        let Delivery { tracker, cancel, .. } = &self.delivery;
        tracker.close();
        if tokio::time::timeout(DELIVERY_GRACE, tracker.wait()).await.is_err() {
            tracing::info!("deliveries still pending; they resume at the next start");
            cancel.cancel();
            tracker.wait().await;
        }
        if let Some(api) = &self.api {
            api.release_all();
        }
        self.http_cancel.cancel();
        self.tasks.close();
        self.tasks.wait().await;
        self.sqlite.close().await;
        // Released only now: a standby takes over once nothing of this daemon runs.
        drop(self.holding);
        tracing::info!("hermesd stopped");
    }
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

/// The chat platforms the config enables, plus the `local` delivery target; nothing is started.
/// (`hermesd send` uses this to deliver without a running daemon.)
pub fn build_platforms(config: &Config, env: &Env, paths: &Paths) -> anyhow::Result<PlatformRegistry> {
    build_all(config, env, paths).map(|(platforms, _)| platforms)
}

/// Every registered platform the config enables (each account its own adapter), plus the
/// `homeassistant` tools over that adapter's connection when it runs, and the `local` target.
fn build_all(
    config: &Config,
    env: &Env,
    paths: &Paths,
) -> anyhow::Result<(PlatformRegistry, Option<tools::homeassistant::HassTools>)> {
    let mut platforms = PlatformRegistry::default();
    for section in config.platforms.sections() {
        for platform in section.build_all(env, &paths.home).map_err(|e| anyhow::anyhow!(e))? {
            platforms.insert(platform);
        }
    }
    let hass_tools = crate::platforms::hass::tools(&platforms, &config.platforms, config.tools.approval_timeout.get());
    platforms.insert(Arc::new(LocalPlatform::new(paths.home.join("deliveries"))));
    Ok((platforms, hass_tools))
}

/// Where image parts of API requests are saved.
fn api_media(home: &std::path::Path) -> hermesd_platform::media::MediaDir {
    let cap = crate::agent::media::image::MAX_IMAGE_BYTES;
    hermesd_platform::media::MediaDir::new(home.join("media").join(crate::platforms::api::NAME), cap)
}

/// A profile's primary model and its fallbacks, each with retries owned by the runtime.
fn build_chain(
    models: &[&crate::config::ModelConfig],
    config: &Config,
    env: &Env,
    http: &reqwest::Client,
) -> anyhow::Result<ProviderChain> {
    if models.is_empty() {
        tracing::warn!("no [model] configured: every message will be answered with a configuration hint");
        return Ok(ProviderChain::new(vec![Arc::new(NotConfigured)], RetryPolicy::default()));
    }
    let mut providers: Vec<Arc<dyn Provider>> = Vec::new();
    for model in models.iter().copied() {
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
    let prices = models.iter().map(|m| crate::usage::Prices::from_config(&m.prices())).collect();
    Ok(ProviderChain::new(providers, policy).with_prices(prices))
}
