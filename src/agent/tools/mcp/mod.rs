//! MCP servers as tool sources: config → supervisor (`server.rs`) → the rmcp client behind one
//! small trait (`client.rs`, `rmcp_client.rs`) → tools registered like built-ins (`tool.rs`).
//!
//! `McpHub` starts every configured server in the background (readiness never waits for them),
//! keeps one sorted snapshot of all their tools that turns take at their start (`ToolSource`),
//! and reports each server's state and counters to `/readyz`, `/metrics` and `hermesd mcp`.
//! It must never let one server's failure delay or break another, nor leave a process behind.
//!
//! An HTTP server's bearer and header values (`bearer_env`, `headers_env`) come only from the
//! environment. No stdio server process, nor anything it started, outlives the daemon (`spawn.rs`,
//! `shim.rs`).

pub mod client;
mod naming;
mod rmcp_client;
pub mod server;
pub mod shim;
pub mod spawn;
mod tool;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use client::{CallOutput, McpConnector, McpError, McpSession, Part, RemoteTool};
pub use naming::{MAX_TOOL_NAME, tool_names};
pub use server::{ServerState, Status};

use super::{ToolEntry, ToolSource};
use crate::config::{Env, McpConfig, McpServerConfig};
use rmcp_client::{HttpConnector, StdioConnector};
use server::Supervision;
use spawn::{Spawner, StdioPlan};

/// What starting the hub needs from the daemon.
pub struct HubSettings {
    /// `HERMESD_HOME` (group records; never readable by sandboxed servers).
    pub home: PathBuf,
    /// The tools' workdir (a stdio server's default `cwd`).
    pub workdir: PathBuf,
    /// The `hermesd` binary that runs the shim (the daemon's own executable).
    pub shim_exe: PathBuf,
    /// How long an approval (`approve = true`) waits.
    pub approval_timeout: Duration,
}

/// One server's state as the status surfaces show it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ServerReport {
    /// The configured name.
    pub name: String,
    /// `connecting`, `ready`, `failed`, `stopped`.
    pub state: &'static str,
    /// The reason of a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Registered tools.
    pub tools: usize,
    /// Calls made.
    pub calls: u64,
    /// Calls that failed.
    pub errors: u64,
}

/// Every MCP server of the daemon.
pub struct McpHub {
    /// The running servers, in name order.
    servers: Mutex<Vec<Running>>,
    snapshot: Mutex<Arc<[ToolEntry]>>,
    generation: watch::Sender<u64>,
    cancel: CancellationToken,
    tracker: TaskTracker,
    /// Kept alive while servers run: shims die with the thread that spawned them. Started when
    /// the first stdio server is.
    spawner: Mutex<Option<Arc<Spawner>>>,
    /// What starting a server needs (`None`: a hub of test connectors, which `apply` leaves be).
    settings: Option<HubSettings>,
    approval_timeout: Duration,
}

/// A server as it runs: its state, the settings it was started with, and what stops it alone.
struct Running {
    state: Arc<ServerState>,
    config: McpServerConfig,
    stop: CancellationToken,
}

impl McpHub {
    /// A hub without servers.
    pub fn empty() -> Arc<Self> {
        Self::with_connectors(Vec::new(), Duration::from_secs(60), None)
    }

    /// Start every enabled server of `config` in the background and return at once. Groups
    /// left by a previous daemon that died are killed first.
    pub fn start(config: &McpConfig, env: &Env, settings: HubSettings) -> Arc<Self> {
        let reaped = spawn::reap_stale(&settings.home);
        if reaped > 0 {
            tracing::warn!(groups = reaped, "killed MCP server processes left by a previous run");
        }
        let approval_timeout = settings.approval_timeout;
        let hub = Self::new(Some(settings), approval_timeout);
        for (name, server) in config.servers.iter().filter(|(_, s)| s.enabled) {
            let connector = hub.connector(name, server, env);
            hub.launch(name, server.clone(), connector);
        }
        hub
    }

    fn new(settings: Option<HubSettings>, approval_timeout: Duration) -> Arc<Self> {
        Arc::new(McpHub {
            servers: Mutex::new(Vec::new()),
            snapshot: Mutex::new(Arc::from(Vec::new())),
            generation: watch::channel(0).0,
            cancel: CancellationToken::new(),
            tracker: TaskTracker::new(),
            spawner: Mutex::new(None),
            settings,
            approval_timeout,
        })
    }

    /// How to reach server `name`, or why it cannot be started.
    fn connector(&self, name: &str, server: &McpServerConfig, env: &Env) -> Result<Arc<dyn McpConnector>, String> {
        let Some(settings) = &self.settings else { return Err("this hub starts no servers of its own".into()) };
        match (&server.command, &server.url) {
            (Some(_), _) => {
                let spawner = {
                    let mut slot = self.spawner.lock().expect("spawner lock poisoned");
                    if slot.is_none() {
                        match Spawner::start() {
                            Ok(spawner) => *slot = Some(Arc::new(spawner)),
                            Err(e) => return Err(format!("cannot start the MCP spawner thread: {e}")),
                        }
                    }
                    slot.clone().expect("set just above")
                };
                let daemon_env = |key: &str| env.var(key);
                let mut plan = StdioPlan::new(
                    name,
                    server,
                    &daemon_env,
                    &settings.home,
                    &settings.workdir,
                    settings.shim_exe.clone(),
                );
                // The files the daemon read its secrets from stay closed to servers too.
                plan.confinement.deny_read.extend(env.trail().files());
                Ok(Arc::new(StdioConnector::new(plan, spawner)))
            }
            (None, Some(url)) => http_connector(url, server, env).map(|c| Arc::new(c) as Arc<dyn McpConnector>),
            (None, None) => Err("neither command nor url is set".into()),
        }
    }

    /// Start supervising server `name` (or mark it failed with why it cannot start).
    fn launch(self: &Arc<Self>, name: &str, config: McpServerConfig, connector: Result<Arc<dyn McpConnector>, String>) {
        let state = Arc::new(ServerState::new(name));
        let stop = self.cancel.child_token();
        match connector {
            Err(why) => {
                tracing::error!(server = %name, error = %why, "mcp server not started");
                state.fail_permanently(why);
            }
            Ok(connector) => {
                // Supervisors hold the hub weakly: they never keep it alive.
                let weak = Arc::downgrade(self);
                let on_change: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
                    if let Some(hub) = weak.upgrade() {
                        hub.rebuild();
                    }
                });
                let settings =
                    Supervision { config: config.clone(), approval_timeout: self.approval_timeout, on_change };
                self.tracker.spawn(server::supervise(state.clone(), connector, settings, stop.clone()));
            }
        }
        let mut servers = self.servers.lock().expect("servers lock poisoned");
        servers.push(Running { state, config, stop });
        servers.sort_by(|a, b| a.state.name.cmp(&b.state.name));
    }

    /// Bring the servers in line with `config` (a reload): removed ones and changed ones stop
    /// (their processes with them), added and changed ones start; the others are not touched,
    /// calls in flight included. Returns what changed, one line each.
    pub fn apply(self: &Arc<Self>, config: &McpConfig, env: &Env) -> Vec<String> {
        if self.settings.is_none() {
            return Vec::new();
        }
        let same =
            |a: &McpServerConfig, b: &McpServerConfig| serde_json::to_value(a).ok() == serde_json::to_value(b).ok();
        let wanted: BTreeMap<&String, &McpServerConfig> = config.servers.iter().filter(|(_, s)| s.enabled).collect();
        let mut changes = Vec::new();
        let mut keep = Vec::new();
        {
            let mut servers = self.servers.lock().expect("servers lock poisoned");
            for running in servers.drain(..) {
                // A server that could not start (a secret that was missing, say) tries again.
                let failed = matches!(running.state.status(), Status::Failed(_));
                match wanted.get(&running.state.name) {
                    Some(new) if same(new, &running.config) && !failed => keep.push(running),
                    found => {
                        running.stop.cancel();
                        let what = if found.is_some() { "restarted with its new settings" } else { "stopped" };
                        changes.push(format!("mcp server {}: {what}", running.state.name));
                    }
                }
            }
            *servers = keep;
        }
        let running: Vec<String> =
            self.servers.lock().expect("servers lock poisoned").iter().map(|r| r.state.name.clone()).collect();
        for (name, server) in wanted {
            if running.contains(name) {
                continue;
            }
            if !changes.iter().any(|c| c.starts_with(&format!("mcp server {name}:"))) {
                changes.push(format!("mcp server {name}: started"));
            }
            let connector = self.connector(name, server, env);
            self.launch(name, server.clone(), connector);
        }
        self.rebuild();
        changes
    }

    /// A hub over the given connectors (tests and benchmarks drive fakes through this).
    pub fn with_connectors(
        servers: Vec<(String, McpServerConfig, Arc<dyn McpConnector>)>,
        approval_timeout: Duration,
        spawner: Option<Arc<Spawner>>,
    ) -> Arc<Self> {
        let hub = Self::new(None, approval_timeout);
        *hub.spawner.lock().expect("spawner lock poisoned") = spawner;
        for (name, config, connector) in servers {
            hub.launch(&name, config, Ok(connector));
        }
        hub
    }

    /// The running servers' states, in name order.
    fn states(&self) -> Vec<Arc<ServerState>> {
        self.servers.lock().expect("servers lock poisoned").iter().map(|r| r.state.clone()).collect()
    }

    /// Recompute the snapshot from every server's tools. The snapshot stays locked while it is
    /// computed, so two servers changing at once cannot leave the older list in place.
    fn rebuild(&self) {
        let mut snapshot = self.snapshot.lock().expect("snapshot lock poisoned");
        let mut all: BTreeMap<String, ToolEntry> = BTreeMap::new();
        for server in &self.states() {
            for entry in server.tools().iter() {
                all.entry(entry.spec.name.to_string()).or_insert_with(|| entry.clone());
            }
        }
        *snapshot = all.into_values().collect();
        drop(snapshot);
        self.generation.send_modify(|g| *g += 1);
    }

    /// A receiver that changes each time the tool set changes (tests, benchmarks).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// The names of the registered MCP tools now, in order.
    pub fn snapshot_names(&self) -> Vec<String> {
        self.snapshot.lock().expect("snapshot lock poisoned").iter().map(|entry| entry.spec.name.to_string()).collect()
    }

    /// Registered MCP tools now.
    pub fn tool_count(&self) -> usize {
        self.snapshot.lock().expect("snapshot lock poisoned").len()
    }

    /// Each server's state, in name order.
    pub fn report(&self) -> Vec<ServerReport> {
        self.states()
            .iter()
            .map(|s| {
                let status = s.status();
                ServerReport {
                    name: s.name.clone(),
                    state: status.name(),
                    error: match status {
                        Status::Failed(why) => Some(why),
                        _ => None,
                    },
                    tools: s.tools().len(),
                    calls: s.stats.calls.load(Ordering::Relaxed),
                    errors: s.stats.errors.load(Ordering::Relaxed),
                }
            })
            .collect()
    }

    /// Prometheus text for every server (labels: the configured server names, a bounded set).
    pub fn render_metrics(&self) -> String {
        let mut out = String::new();
        let servers = self.states();
        if servers.is_empty() {
            return out;
        }
        let series: [Series; 5] = [
            ("hermesd_mcp_server_up", "gauge", &|s| u8::from(s.status() == Status::Ready).to_string()),
            ("hermesd_mcp_tools", "gauge", &|s| s.tools().len().to_string()),
            ("hermesd_mcp_calls_total", "counter", &|s| s.stats.calls.load(Ordering::Relaxed).to_string()),
            ("hermesd_mcp_call_errors_total", "counter", &|s| s.stats.errors.load(Ordering::Relaxed).to_string()),
            ("hermesd_mcp_call_seconds_total", "counter", &|s| {
                format!("{:.6}", s.stats.micros.load(Ordering::Relaxed) as f64 / 1e6)
            }),
        ];
        for (name, kind, value) in series {
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for server in &servers {
                let _ = writeln!(out, "{name}{{server=\"{}\"}} {}", server.name, value(server));
            }
        }
        let _ = writeln!(out, "# TYPE hermesd_mcp_connects_total counter");
        for server in &servers {
            let _ = writeln!(
                out,
                "hermesd_mcp_connects_total{{server=\"{}\"}} {}",
                server.name,
                server.stats.connects.load(Ordering::Relaxed)
            );
        }
        out
    }

    /// Stop every server (their process groups included) and wait for the supervisors.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// A metric: its name, its Prometheus type, and its value for one server.
type Series<'a> = (&'a str, &'a str, &'a dyn Fn(&ServerState) -> String);

impl ToolSource for McpHub {
    fn snapshot(&self) -> Arc<[ToolEntry]> {
        self.snapshot.lock().expect("snapshot lock poisoned").clone()
    }
}

fn http_connector(url: &str, server: &McpServerConfig, env: &Env) -> Result<HttpConnector, String> {
    let secret = |name: &str| -> Result<crate::config::Secret, String> {
        env.secret(name)?.ok_or_else(|| format!("{name} is not set"))
    };
    let bearer = server.bearer_env.as_deref().map(secret).transpose()?;
    let headers = server
        .headers_env
        .iter()
        .map(|(header, var)| secret(var).map(|value| (header.clone(), value)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(HttpConnector::new(url.to_owned(), bearer, headers))
}
