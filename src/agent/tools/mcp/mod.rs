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
    servers: Vec<Arc<ServerState>>,
    snapshot: Mutex<Arc<[ToolEntry]>>,
    generation: watch::Sender<u64>,
    cancel: CancellationToken,
    tracker: TaskTracker,
    /// Kept alive while servers run: shims die with the thread that spawned them.
    _spawner: Option<Arc<Spawner>>,
}

impl McpHub {
    /// A hub without servers.
    pub fn empty() -> Arc<Self> {
        Self::with_connectors(Vec::new(), Duration::from_secs(60), None)
    }

    /// Start every enabled server of `config` in the background and return at once. Groups
    /// left by a previous daemon that died are killed first.
    pub fn start(config: &McpConfig, env: &Env, settings: HubSettings) -> Arc<Self> {
        let enabled: Vec<(&String, &McpServerConfig)> = config.servers.iter().filter(|(_, s)| s.enabled).collect();
        if enabled.is_empty() {
            return Self::empty();
        }
        let reaped = spawn::reap_stale(&settings.home);
        if reaped > 0 {
            tracing::warn!(groups = reaped, "killed MCP server processes left by a previous run");
        }
        let needs_spawner = enabled.iter().any(|(_, s)| s.command.is_some());
        let spawner = match needs_spawner.then(Spawner::start).transpose() {
            Ok(spawner) => spawner.map(Arc::new),
            Err(e) => {
                tracing::error!(error = %e, "cannot start the MCP spawner thread; stdio servers stay off");
                None
            }
        };
        let daemon_env = |key: &str| env.var(key);
        let mut servers = Vec::new();
        for (name, server) in enabled {
            let connector: Result<Arc<dyn McpConnector>, String> = match (&server.command, &server.url) {
                (Some(_), _) => match &spawner {
                    Some(spawner) => {
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
                        Ok(Arc::new(StdioConnector::new(plan, spawner.clone())))
                    }
                    None => Err("the spawner thread is not running".into()),
                },
                (None, Some(url)) => http_connector(url, server, env).map(|c| Arc::new(c) as Arc<dyn McpConnector>),
                (None, None) => Err("neither command nor url is set".into()),
            };
            servers.push((name.clone(), server.clone(), connector));
        }
        Self::build(servers, settings.approval_timeout, spawner)
    }

    /// A hub over the given connectors (tests and benchmarks drive fakes through this).
    pub fn with_connectors(
        servers: Vec<(String, McpServerConfig, Arc<dyn McpConnector>)>,
        approval_timeout: Duration,
        spawner: Option<Arc<Spawner>>,
    ) -> Arc<Self> {
        let servers = servers.into_iter().map(|(n, c, conn)| (n, c, Ok(conn))).collect();
        Self::build(servers, approval_timeout, spawner)
    }

    #[allow(clippy::type_complexity)] // a private list of (name, config, connector or why not)
    fn build(
        servers: Vec<(String, McpServerConfig, Result<Arc<dyn McpConnector>, String>)>,
        approval_timeout: Duration,
        spawner: Option<Arc<Spawner>>,
    ) -> Arc<Self> {
        let states: Vec<Arc<ServerState>> =
            servers.iter().map(|(name, _, _)| Arc::new(ServerState::new(name))).collect();
        let hub = Arc::new(McpHub {
            servers: states.clone(),
            snapshot: Mutex::new(Arc::from(Vec::new())),
            generation: watch::channel(0).0,
            cancel: CancellationToken::new(),
            tracker: TaskTracker::new(),
            _spawner: spawner,
        });
        for ((_, config, connector), state) in servers.into_iter().zip(&states) {
            let connector = match connector {
                Ok(connector) => connector,
                Err(why) => {
                    tracing::error!(server = %state.name, error = %why, "mcp server not started");
                    state.fail_permanently(why);
                    continue;
                }
            };
            // Supervisors hold the hub weakly: they never keep it alive.
            let weak = Arc::downgrade(&hub);
            let on_change: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
                if let Some(hub) = weak.upgrade() {
                    hub.rebuild();
                }
            });
            let settings = Supervision { config, approval_timeout, on_change };
            hub.tracker.spawn(server::supervise(state.clone(), connector, settings, hub.cancel.child_token()));
        }
        hub
    }

    /// Recompute the snapshot from every server's tools; the generation moves only when the
    /// combined list changed.
    fn rebuild(&self) {
        let mut all: BTreeMap<String, ToolEntry> = BTreeMap::new();
        for server in &self.servers {
            for entry in server.tools().iter() {
                all.entry(entry.spec.name.to_string()).or_insert_with(|| entry.clone());
            }
        }
        let tools: Arc<[ToolEntry]> = all.into_values().collect();
        *self.snapshot.lock().expect("snapshot lock poisoned") = tools;
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
        self.servers
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
        if self.servers.is_empty() {
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
            for server in &self.servers {
                let _ = writeln!(out, "{name}{{server=\"{}\"}} {}", server.name, value(server));
            }
        }
        let _ = writeln!(out, "# TYPE hermesd_mcp_connects_total counter");
        for server in &self.servers {
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
