//! One supervised MCP server: its state, its current session and tools, its call statistics,
//! and the supervisor loop that connects in the background, re-lists tools on
//! `notifications/tools/list_changed`, and reconnects with backoff after a crash or a dropped
//! HTTP session. A broken server only ever affects its own tools.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermesd_platform::Backoff;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::client::{McpConnector, McpError, McpSession, RemoteTool};
use super::naming::tool_names;
use super::tool::McpTool;
use crate::agent::tools::{ToolEntry, ToolSpec};
use crate::config::McpServerConfig;

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Connecting (first time or again).
    Connecting,
    /// Connected; its tools are registered.
    Ready,
    /// The last attempt failed or the connection dropped; retrying after a delay.
    Failed(String),
    /// Shut down with the daemon.
    Stopped,
}

impl Status {
    /// The state name (`/readyz`, metrics, `hermesd mcp list`).
    pub fn name(&self) -> &'static str {
        match self {
            Status::Connecting => "connecting",
            Status::Ready => "ready",
            Status::Failed(_) => "failed",
            Status::Stopped => "stopped",
        }
    }

    /// The state with its reason, for people.
    pub fn describe(&self) -> String {
        match self {
            Status::Failed(why) => format!("failed: {why}"),
            other => other.name().to_owned(),
        }
    }
}

/// Call counters of one server (bounded: one set per configured server).
#[derive(Debug, Default)]
pub struct Stats {
    /// Calls made.
    pub calls: AtomicU64,
    /// Calls that ended in an error (including `isError` results).
    pub errors: AtomicU64,
    /// Total call time, in microseconds.
    pub micros: AtomicU64,
    /// Connections made (the first and every reconnect).
    pub connects: AtomicU64,
}

impl Stats {
    /// Count one call.
    pub fn record(&self, elapsed: Duration, failed: bool) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.micros.fetch_add(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// The live state of one server, shared by its supervisor, its tools and the status surfaces.
pub struct ServerState {
    /// The configured name.
    pub name: String,
    /// Call statistics.
    pub stats: Stats,
    status: Mutex<Status>,
    session: Mutex<Option<Arc<dyn McpSession>>>,
    tools: Mutex<Arc<[ToolEntry]>>,
    /// Woken when a session connects, or the server is given up for good.
    connected: tokio::sync::Notify,
    /// Set when the server cannot be started at all: nobody waits for it.
    given_up: std::sync::atomic::AtomicBool,
}

impl ServerState {
    /// A server that has not connected yet.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            stats: Stats::default(),
            status: Mutex::new(Status::Connecting),
            session: Mutex::new(None),
            tools: Mutex::new(Arc::from(Vec::new())),
            connected: tokio::sync::Notify::new(),
            given_up: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Its state now.
    pub fn status(&self) -> Status {
        self.status.lock().expect("status lock poisoned").clone()
    }

    /// The connected session, if any.
    pub fn session(&self) -> Option<Arc<dyn McpSession>> {
        self.session.lock().expect("session lock poisoned").clone()
    }

    /// The connected session, waiting up to `wait` for one while the server (re)connects, so a
    /// call made just after a crash is served by the restarted server instead of failing at
    /// once. `None` when none came in time, or the server cannot be started at all.
    pub async fn session_within(&self, wait: Duration) -> Option<Arc<dyn McpSession>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Registered before looking, so a connect in between is not missed.
            let notified = self.connected.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(session) = self.session() {
                return Some(session);
            }
            if self.given_up.load(Ordering::SeqCst) {
                return None;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.session();
            }
        }
    }

    /// Its registered tools, in name order.
    pub fn tools(&self) -> Arc<[ToolEntry]> {
        self.tools.lock().expect("tools lock poisoned").clone()
    }

    /// Mark a server that cannot be started at all (e.g. its token is not set).
    pub fn fail_permanently(&self, why: String) {
        self.set_status(Status::Failed(why));
        self.given_up.store(true, Ordering::SeqCst);
        self.connected.notify_waiters();
    }

    fn set_status(&self, status: Status) {
        *self.status.lock().expect("status lock poisoned") = status;
    }

    /// Replace the tools; `true` when they differ from before (names, descriptions, schemas).
    fn set_tools(&self, tools: Vec<ToolEntry>) -> bool {
        let mut current = self.tools.lock().expect("tools lock poisoned");
        let same = current.len() == tools.len()
            && current.iter().zip(&tools).all(|(a, b)| {
                let (a, b) = (&a.spec, &b.spec);
                a.name == b.name && a.description == b.description && a.parameters == b.parameters
            });
        if !same {
            *current = Arc::from(tools);
        }
        !same
    }
}

/// What the supervisor needs besides the connector.
pub struct Supervision {
    /// The server's config (filters, timeouts, approval).
    pub config: McpServerConfig,
    /// How long an approval waits.
    pub approval_timeout: Duration,
    /// Called whenever this server's tools change.
    pub on_change: Arc<dyn Fn() + Send + Sync>,
}

/// Connections shorter than this do not reset the backoff (a server that dies right after
/// starting is retried ever more slowly).
const STABLE_AFTER: Duration = Duration::from_secs(30);

/// Keep `state` connected until `cancel` fires.
pub async fn supervise(
    state: Arc<ServerState>,
    connector: Arc<dyn McpConnector>,
    settings: Supervision,
    cancel: CancellationToken,
) {
    let mut backoff = Backoff::new();
    loop {
        state.set_status(Status::Connecting);
        let (changed_tx, mut changed) = mpsc::channel(1);
        let attempt = tokio::time::timeout(settings.config.connect_timeout.get(), async {
            let session = connector.connect(changed_tx).await?;
            let tools = session.list_tools().await?;
            Ok::<_, McpError>((session, tools))
        });
        let connected = tokio::select! {
            () = cancel.cancelled() => break,
            result = attempt => result.unwrap_or_else(|_| Err(McpError::Connect("timed out".into()))),
        };
        match connected {
            Ok((session, tools)) => {
                state.stats.connects.fetch_add(1, Ordering::Relaxed);
                *state.session.lock().expect("session lock poisoned") = Some(session.clone());
                install(&state, &settings, tools);
                state.set_status(Status::Ready);
                state.connected.notify_waiters();
                tracing::info!(server = %state.name, tools = state.tools().len(), "mcp server connected");
                let since = tokio::time::Instant::now();
                let ended = serve(&state, &settings, &session, &mut changed, &cancel).await;
                *state.session.lock().expect("session lock poisoned") = None;
                if state.set_tools(Vec::new()) {
                    (settings.on_change)();
                }
                if ended == Ended::Cancelled {
                    session.close().await;
                    break;
                }
                session.close().await;
                if since.elapsed() >= STABLE_AFTER {
                    backoff.reset();
                }
                tracing::warn!(server = %state.name, retry_in = ?backoff.peek(), "mcp server connection ended; reconnecting");
                state.set_status(Status::Failed("the connection ended".into()));
            }
            Err(e) => {
                tracing::warn!(server = %state.name, error = %e, retry_in = ?backoff.peek(), "mcp server unavailable");
                state.set_status(Status::Failed(e.to_string()));
            }
        }
        if !backoff.wait(&cancel).await {
            break;
        }
    }
    state.set_status(Status::Stopped);
}

#[derive(Debug, PartialEq, Eq)]
enum Ended {
    Cancelled,
    Closed,
}

async fn serve(
    state: &Arc<ServerState>,
    settings: &Supervision,
    session: &Arc<dyn McpSession>,
    changed: &mut mpsc::Receiver<()>,
    cancel: &CancellationToken,
) -> Ended {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return Ended::Cancelled,
            () = session.closed() => return Ended::Closed,
            Some(()) = changed.recv() => {
                let listed = tokio::time::timeout(settings.config.connect_timeout.get(), session.list_tools()).await;
                match listed {
                    Ok(Ok(tools)) => {
                        install(state, settings, tools);
                        tracing::info!(server = %state.name, tools = state.tools().len(), "mcp server tools changed");
                    }
                    Ok(Err(e)) => tracing::warn!(server = %state.name, error = %e, "mcp server: listing tools failed"),
                    Err(_) => tracing::warn!(server = %state.name, "mcp server: listing tools timed out"),
                }
            }
        }
    }
}

/// Turn listed tools into registered ones (filtered, named, sorted) and announce a change.
fn install(state: &Arc<ServerState>, settings: &Supervision, listed: Vec<RemoteTool>) {
    let entries = build_tools(state, settings, listed);
    if state.set_tools(entries) {
        (settings.on_change)();
    }
}

/// The registered form of a server's tools, in name order.
pub fn build_tools(state: &Arc<ServerState>, settings: &Supervision, listed: Vec<RemoteTool>) -> Vec<ToolEntry> {
    let config = &settings.config;
    let listed: Vec<RemoteTool> = listed.into_iter().filter(|t| config.tools.admits(&t.name)).collect();
    let names = tool_names(&state.name, listed.iter().map(|t| t.name.as_str()));
    let mut entries: BTreeMap<String, ToolEntry> = BTreeMap::new();
    for tool in listed {
        let Some(name) = names.get(&tool.name).cloned() else { continue };
        let spec = ToolSpec {
            name: Cow::Owned(name.clone()),
            description: Cow::Owned(description(&state.name, &tool.description)),
            parameters: schema(tool.input_schema),
            toolset: Cow::Owned(format!("mcp:{}", state.name)),
            parallel_safe: false,
            max_result_chars: config.max_output_chars,
            timeout: config.timeout.get(),
        };
        let mcp_tool = McpTool::new(spec.clone(), tool.name, state.clone(), config.approve, settings.approval_timeout);
        entries.insert(name, ToolEntry::with_spec(Arc::new(mcp_tool), spec));
    }
    entries.into_values().collect()
}

/// The description the model sees: the server's, capped, or a placeholder naming the server.
fn description(server: &str, text: &str) -> String {
    const MAX: usize = 2_000;
    let text = text.trim();
    if text.is_empty() {
        return format!("A tool of the MCP server {server}.");
    }
    text.chars().take(MAX).collect()
}

/// The arguments schema: the server's when it is an object schema, else an open object.
fn schema(value: Value) -> Value {
    match value {
        Value::Object(mut map) => {
            map.entry("type").or_insert_with(|| Value::String("object".into()));
            map.entry("properties").or_insert_with(|| Value::Object(Default::default()));
            Value::Object(map)
        }
        _ => serde_json::json!({ "type": "object", "properties": {} }),
    }
}

#[cfg(test)]
mod tests;
