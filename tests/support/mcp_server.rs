//! A test MCP server on rmcp's server side: served over stdio by `examples/mcp_fixture` and
//! over Streamable HTTP in-process (`serve_http`, 127.0.0.1:0).
//!
//! Tools: `echo {text}`, `add {a, b}`, `fail` (an `isError` result), `slow {ms}` (notes a
//! cancellation in `FIXTURE_CANCEL_FILE` or `cancelled`), `image` (the PNG signature and three bytes),
//! `grow` (adds the tool `extra` and sends `notifications/tools/list_changed`), `pid`, and,
//! over stdio only, `crash` (exits at once). `FIXTURE_TOOLS=N` adds `t0`..`tN-1` (benchmarks).
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// What `image` returns: the PNG signature and the bytes 1, 2, 3.
pub const PNG_BASE64: &str = "iVBORw0KGgoBAgM=";
/// Those bytes.
pub const PNG_BYTES: &[u8] = b"\x89PNG\r\n\x1a\n\x01\x02\x03";

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value, json};

/// The server's state, shared by its connections.
#[derive(Clone, Default)]
pub struct TestServer {
    grown: Arc<AtomicBool>,
    /// Calls of `slow` that were cancelled by the client.
    pub cancelled: Arc<AtomicUsize>,
    extra_tools: usize,
    cancel_file: Option<std::path::PathBuf>,
    can_crash: bool,
    only_numbered: bool,
    /// Offer `read` (a file's text) and `write` (a file), to probe a sandbox.
    files: bool,
}

impl TestServer {
    /// The in-process (HTTP) server.
    pub fn new() -> Self {
        Self::default()
    }

    /// A server with only the tools `t0`..`t{n-1}` (benchmarks).
    pub fn numbered(n: usize) -> Self {
        Self { extra_tools: n, only_numbered: true, ..Self::default() }
    }

    /// The stdio server, configured from the environment.
    pub fn from_env() -> Self {
        Self {
            extra_tools: std::env::var("FIXTURE_TOOLS").ok().and_then(|n| n.parse().ok()).unwrap_or(0),
            cancel_file: std::env::var_os("FIXTURE_CANCEL_FILE").map(Into::into),
            can_crash: true,
            files: std::env::var_os("FIXTURE_FILES").is_some(),
            ..Self::default()
        }
    }

    fn tools(&self) -> Vec<Tool> {
        let object = |props: Value, required: &[&str]| -> Arc<Map<String, Value>> {
            let schema = json!({ "type": "object", "properties": props, "required": required });
            Arc::new(schema.as_object().cloned().unwrap_or_default())
        };
        let mut tools = vec![
            Tool::new("echo", "Echo the text back.", object(json!({ "text": { "type": "string" } }), &["text"])),
            Tool::new(
                "add",
                "Add two numbers.",
                object(json!({ "a": { "type": "number" }, "b": { "type": "number" } }), &["a", "b"]),
            ),
            Tool::new("fail", "Always fails.", object(json!({}), &[])),
            Tool::new("slow", "Sleep ms milliseconds.", object(json!({ "ms": { "type": "integer" } }), &["ms"])),
            Tool::new("image", "A tiny image.", object(json!({}), &[])),
            Tool::new("grow", "Add the tool extra.", object(json!({}), &[])),
            Tool::new("pid", "The server's process id.", object(json!({}), &[])),
        ];
        if self.only_numbered {
            tools.clear();
        }
        if self.can_crash {
            tools.push(Tool::new("crash", "Exit at once.", object(json!({}), &[])));
        }
        if self.files {
            let path = || object(json!({ "path": { "type": "string" } }), &["path"]);
            tools.push(Tool::new("read", "A file's text.", path()));
            tools.push(Tool::new("write", "Write 'x' to a file.", path()));
        }
        if self.grown.load(Ordering::SeqCst) {
            tools.push(Tool::new("extra", "Appeared after grow.", object(json!({}), &[])));
        }
        for i in 0..self.extra_tools {
            tools.push(Tool::new(
                format!("t{i}"),
                "A numbered tool.",
                object(json!({ "x": { "type": "string" } }), &[]),
            ));
        }
        tools
    }
}

fn text(s: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(s)]).into())
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        match request.name.as_ref() {
            "echo" => text(format!("echo: {}", args.get("text").and_then(Value::as_str).unwrap_or(""))),
            "add" => {
                let n = |k: &str| args.get(k).and_then(Value::as_f64).unwrap_or(0.0);
                text(format!("{}", n("a") + n("b")))
            }
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text("the thing broke")]).into()),
            "slow" => {
                let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(1000);
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(ms)) => text("slept"),
                    () = context.ct.cancelled() => {
                        self.cancelled.fetch_add(1, Ordering::SeqCst);
                        if let Some(file) = &self.cancel_file {
                            let _ = std::fs::write(file, "cancelled\n");
                        }
                        Err(ErrorData::internal_error("cancelled", None))
                    }
                }
            }
            "image" => Ok(CallToolResult::success(vec![ContentBlock::image(PNG_BASE64, "image/png")]).into()),
            "grow" => {
                self.grown.store(true, Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                text("grown")
            }
            "pid" => text(std::process::id().to_string()),
            "crash" if self.can_crash => std::process::exit(3),
            "read" | "write" if self.files => {
                let path = args.get("path").and_then(Value::as_str).unwrap_or("");
                let done = if request.name == "read" {
                    std::fs::read_to_string(path)
                } else {
                    std::fs::write(path, "x").map(|()| "written".to_owned())
                };
                match done {
                    Ok(text) => self::text(text),
                    Err(e) => Ok(CallToolResult::error(vec![ContentBlock::text(format!("refused: {e}"))]).into()),
                }
            }
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }
}

/// Serve `server` over Streamable HTTP on 127.0.0.1:0; returns its `/mcp` URL. Cancel `stop`
/// to end it.
pub async fn serve_http(server: TestServer, stop: tokio_util::sync::CancellationToken) -> String {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token()),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).with_graceful_shutdown(stop.cancelled_owned()).await;
    });
    format!("http://{addr}/mcp")
}
