//! The rmcp implementation of `McpConnector` / `McpSession`: stdio through the shim (pipes from
//! `Spawner`) and Streamable HTTP on ring-only reqwest. The only file that names rmcp types.
//!
//! A server's stderr is logged under its name, rate-limited.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig, ContentBlock, ResourceContents};
use rmcp::service::{NotificationContext, Peer, RunningServiceCancellationToken};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, watch};

use super::client::{CallOutput, McpConnector, McpError, McpSession, Part, RemoteTool};
use super::spawn::{Spawner, StdioPlan, record_group, stop_group};
use crate::config::Secret;

/// Forwards `notifications/tools/list_changed` to the supervisor.
struct Handler {
    changed: mpsc::Sender<()>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // A full channel already holds a pending refresh; one is enough.
        let _ = self.changed.try_send(());
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        // 2025-11-25 is what deployed servers speak, and on it `list_changed` arrives unscoped
        // (2026-07-28 moves it to `subscriptions/listen` streams).
        info.protocol_version = rmcp::model::ProtocolVersion::V_2025_11_25;
        info.client_info.name = "hermesd".into();
        info.client_info.version = env!("CARGO_PKG_VERSION").into();
        info
    }
}

/// Where a stdio server's shim is, so closing the session stops its group.
struct ShimProcess {
    pgid: u32,
    record: std::path::PathBuf,
}

/// A connected rmcp client.
struct Session {
    peer: Peer<RoleClient>,
    cancel: Mutex<Option<RunningServiceCancellationToken>>,
    closed: watch::Receiver<bool>,
}

#[async_trait]
impl McpSession for Session {
    async fn list_tools(&self) -> Result<Vec<RemoteTool>, McpError> {
        let tools = self.peer.list_all_tools().await.map_err(service_error)?;
        Ok(tools
            .into_iter()
            .map(|t| RemoteTool {
                name: t.name.into_owned(),
                description: t.description.map(|d| d.into_owned()).unwrap_or_default(),
                input_schema: Value::Object((*t.input_schema).clone()),
            })
            .collect())
    }

    async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<CallOutput, McpError> {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        // rmcp sends `notifications/cancelled` when this future is dropped mid-call.
        let result = self.peer.call_tool(params).await.map_err(service_error)?;
        Ok(convert(result))
    }

    async fn closed(&self) {
        let mut closed = self.closed.clone();
        let _ = closed.wait_for(|c| *c).await;
    }

    async fn close(&self) {
        let token = self.cancel.lock().expect("cancel lock poisoned").take();
        if let Some(token) = token {
            token.cancel();
        }
        self.closed().await;
    }
}

fn service_error(e: ServiceError) -> McpError {
    match e {
        ServiceError::McpError(data) => McpError::Remote(data.message.into_owned()),
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => McpError::Closed,
        other => McpError::Protocol(other.to_string()),
    }
}

fn convert(result: CallToolResult) -> CallOutput {
    let parts = result
        .content
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text(t) => Part::Text(t.text),
            ContentBlock::Image(i) => match base64::engine::general_purpose::STANDARD.decode(i.data.as_bytes()) {
                Ok(data) => Part::Image { mime: i.mime_type, data },
                Err(_) => Part::Text(format!("[an image ({}) that was not valid base64]", i.mime_type)),
            },
            ContentBlock::Audio(_) => Part::Text("[audio content omitted]".into()),
            ContentBlock::Resource(r) => match r.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => Part::Resource { uri, text: Some(text) },
                ResourceContents::BlobResourceContents { uri, .. } => Part::Resource { uri, text: None },
                _ => Part::Text("[a resource of an unknown kind]".into()),
            },
            ContentBlock::ResourceLink(link) => Part::Resource { uri: link.uri, text: None },
            _ => Part::Text("[content of an unknown kind omitted]".into()),
        })
        .collect();
    CallOutput { is_error: result.is_error.unwrap_or(false), parts, structured: result.structured_content }
}

/// Start the rmcp service on `transport` and wrap it as a session.
async fn start<T, E, A>(transport: T, changed: mpsc::Sender<()>) -> Result<Arc<dyn McpSession>, McpError>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let service = Handler { changed }.serve(transport).await.map_err(|e| McpError::Connect(e.to_string()))?;
    let peer = service.peer().clone();
    let cancel = service.cancellation_token();
    let (done, closed) = watch::channel(false);
    tokio::spawn(async move {
        let _ = service.waiting().await;
        let _ = done.send(true);
    });
    Ok(Arc::new(Session { peer, cancel: Mutex::new(Some(cancel)), closed }))
}

/// Connects to a stdio server through the shim.
pub(super) struct StdioConnector {
    plan: StdioPlan,
    spawner: Arc<Spawner>,
}

impl StdioConnector {
    /// A connector for `plan`, spawning from `spawner`.
    pub(super) fn new(plan: StdioPlan, spawner: Arc<Spawner>) -> Self {
        Self { plan, spawner }
    }
}

#[async_trait]
impl McpConnector for StdioConnector {
    async fn connect(&self, changed: mpsc::Sender<()>) -> Result<Arc<dyn McpSession>, McpError> {
        if !self.plan.cwd.is_dir() {
            return Err(McpError::Connect(format!("the working directory {} does not exist", self.plan.cwd.display())));
        }
        if let Some(tmp) = self.plan.env.get("TMPDIR") {
            create_private_dir(tmp).map_err(|e| McpError::Connect(format!("create {tmp}: {e}")))?;
        }
        let mut child = self
            .spawner
            .spawn(self.plan.command())
            .await
            .map_err(|e| McpError::Connect(format!("start the shim: {e}")))?;
        let pgid = child.id();
        let record = self.plan.record.clone();
        if let Err(e) = record_group(&record, pgid) {
            tracing::warn!(server = %self.plan.server, error = %e, "cannot record the MCP server's process group");
        }
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(McpError::Connect("the shim has no pipes".into()));
        };
        if let Some(stderr) = child.stderr.take().and_then(|s| tokio::process::ChildStderr::from_std(s).ok()) {
            tokio::spawn(log_stderr(self.plan.server.clone(), stderr));
        }
        // Reap the shim when it exits (a blocking wait, off the runtime's workers).
        let reaper_record = record.clone();
        tokio::task::spawn_blocking(move || {
            let _ = child.wait();
            let _ = std::fs::remove_file(reaper_record);
        });
        let stdin = tokio::process::ChildStdin::from_std(stdin).map_err(|e| McpError::Connect(e.to_string()))?;
        let stdout = tokio::process::ChildStdout::from_std(stdout).map_err(|e| McpError::Connect(e.to_string()))?;
        let shim = ShimProcess { pgid, record };
        match start((stdout, stdin), changed).await {
            Ok(session) => Ok(Arc::new(WithShim { session, shim })),
            Err(e) => {
                stop_group(shim.pgid, Duration::from_millis(500)).await;
                Err(e)
            }
        }
    }
}

/// A stdio session: closing it also stops the shim's group.
struct WithShim {
    session: Arc<dyn McpSession>,
    shim: ShimProcess,
}

#[async_trait]
impl McpSession for WithShim {
    async fn list_tools(&self) -> Result<Vec<RemoteTool>, McpError> {
        self.session.list_tools().await
    }

    async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<CallOutput, McpError> {
        self.session.call_tool(name, arguments).await
    }

    async fn closed(&self) {
        self.session.closed().await;
    }

    async fn close(&self) {
        stop_group(self.shim.pgid, Duration::from_secs(3)).await;
        let _ = std::fs::remove_file(&self.shim.record);
        self.session.close().await;
    }
}

fn create_private_dir(path: &str) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).recursive(true).create(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Lines a server may log per window before the rest of the window is counted, not logged.
const STDERR_LINES_PER_WINDOW: u32 = 20;
const STDERR_WINDOW: Duration = Duration::from_secs(10);

/// Log a server's stderr under its name, at most `STDERR_LINES_PER_WINDOW` lines per window.
async fn log_stderr(server: String, stderr: tokio::process::ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    let mut window_start = tokio::time::Instant::now();
    let (mut logged, mut dropped) = (0u32, 0u64);
    while let Ok(Some(line)) = lines.next_line().await {
        if window_start.elapsed() >= STDERR_WINDOW {
            if dropped > 0 {
                tracing::warn!(server = %server, dropped, "mcp server stderr: lines suppressed");
            }
            window_start = tokio::time::Instant::now();
            (logged, dropped) = (0, 0);
        }
        if logged < STDERR_LINES_PER_WINDOW {
            logged += 1;
            let line: String = line.chars().take(1000).collect();
            tracing::info!(server = %server, "mcp server stderr: {line}");
        } else {
            dropped += 1;
        }
    }
}

/// Connects to a Streamable HTTP server.
pub(super) struct HttpConnector {
    url: String,
    bearer: Option<Secret>,
    headers: Vec<(String, Secret)>,
}

impl HttpConnector {
    /// A connector for `url` with an optional bearer token and extra headers (values secret).
    pub(super) fn new(url: String, bearer: Option<Secret>, headers: Vec<(String, Secret)>) -> Self {
        Self { url, bearer, headers }
    }
}

#[async_trait]
impl McpConnector for HttpConnector {
    async fn connect(&self, changed: mpsc::Sender<()>) -> Result<Arc<dyn McpSession>, McpError> {
        // hermesd builds TLS on ring only; installing it is a no-op when main already did.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut custom = HashMap::new();
        for (name, value) in &self.headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| McpError::Connect(format!("{name:?} is not a header name")))?;
            let mut value = reqwest::header::HeaderValue::from_str(value.expose())
                .map_err(|_| McpError::Connect(format!("the value of header {name} is not valid")))?;
            value.set_sensitive(true);
            custom.insert(name, value);
        }
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url.clone()).custom_headers(custom);
        if let Some(token) = &self.bearer {
            config = config.auth_header(token.expose().to_owned());
        }
        // No idle pooling (rmcp's own advice: a reused half-read connection stalls on delayed
        // ACKs) and no redirects (a token must not follow one to another origin).
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| McpError::Connect(format!("build the HTTP client: {e}")))?;
        let transport = StreamableHttpClientTransport::with_client(client, config);
        start(transport, changed).await
    }
}
