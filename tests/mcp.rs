//! MCP servers end to end: the test server (rmcp's server side, `tests/support/mcp_server.rs`)
//! over stdio through the real shim and over Streamable HTTP in-process; a daemon turn calling
//! an MCP tool; the CLI; and a `kill -9` of the real daemon leaving no server process behind.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hermesd::agent::tools::mcp::{HubSettings, McpHub};
use hermesd::agent::tools::{
    Approval, ExecutorLimits, Human, Registry, Tool, ToolContext, ToolError, ToolSource, run_calls,
};
use hermesd::config::{Config, Env, McpConfig};
use hermesd::daemon::DaemonOptions;
use hermesd::vocab::message::ToolCall;
use hermesd_platform::{ChatRef, ChatType};
use serde_json::json;
use support::mcp_server::{TestServer, serve_http};
use support::{FakeLlm, answer, ask, client, eventually};
use tokio_util::sync::CancellationToken;

const BIN: &str = env!("CARGO_BIN_EXE_hermesd");

/// The stdio test server, built by `cargo test` as an example next to this test's binary.
fn fixture() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let path = exe.parent().and_then(Path::parent).expect("target dir").join("examples").join("mcp_fixture");
    assert!(path.exists(), "{} is missing: run `cargo test` (or add `--example mcp_fixture`)", path.display());
    path
}

fn process_env() -> Env {
    let vars = ["PATH", "HOME", "LANG"].iter().filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)));
    Env::from_map(vars.chain([("FIX_TOKEN".to_owned(), "t0ken".to_owned())]).collect())
}

/// The stdio test server as the TOML table `[{table}]`, with extra lines.
fn stdio_server(table: &str, extra: &str) -> String {
    format!("[{table}]\ncommand = {:?}\nsandbox = \"none\"\n{extra}\n", fixture().display().to_string())
}

fn hub(home: &Path, toml_text: &str) -> Arc<McpHub> {
    let config: McpConfig = toml::from_str(toml_text).expect("mcp config parses");
    assert_eq!(config.problems(), Vec::<String>::new());
    let settings = HubSettings {
        home: home.to_path_buf(),
        workdir: home.to_path_buf(),
        shim_exe: PathBuf::from(BIN),
        approval_timeout: Duration::from_secs(5),
    };
    McpHub::start(&config, &process_env(), settings)
}

async fn ready(hub: &McpHub, name: &str, timeout: Duration) {
    let ok = eventually(timeout, || hub.report().iter().any(|r| r.name == name && r.state == "ready")).await;
    assert!(ok, "server {name} not ready: {:?}", hub.report());
}

fn tool(hub: &McpHub, name: &str) -> Arc<dyn Tool> {
    let snapshot = hub.snapshot();
    let found = snapshot.iter().find(|entry| entry.spec.name == name).map(|entry| entry.tool.clone());
    found.unwrap_or_else(|| panic!("no tool {name} in {:?}", hub.snapshot_names()))
}

/// Answers every approval with its value and remembers what it was asked.
struct Answer(Approval, std::sync::Mutex<Vec<String>>);

#[async_trait::async_trait]
impl Human for Answer {
    async fn approve(&self, action: &str, _timeout: Duration) -> Approval {
        self.1.lock().unwrap().push(action.to_owned());
        self.0
    }
    async fn clarify(&self, _q: &str, _c: &[String], _t: Duration) -> Option<String> {
        None
    }
}

async fn context(dir: &Path) -> ToolContext {
    context_with(dir, Approval::Approved).await
}

async fn context_with(dir: &Path, approval: Approval) -> ToolContext {
    let store = hermesd::store::SqliteStore::open(&dir.join("t.db"), Duration::from_secs(1), 1).await.expect("store");
    ToolContext {
        session_id: "s".into(),
        session_key: "k".into(),
        chat: ChatRef::new("api", "c", ChatType::Dm),
        user_id: "u".into(),
        workdir: dir.to_path_buf(),
        data_dir: dir.to_path_buf(),
        store: Arc::new(store),
        human: Arc::new(Answer(approval, Default::default())),
        cancel: CancellationToken::new(),
        policy: hermesd::agent::tools::policy::ToolPolicy::new(["mcp"]),
        admin: false,
    }
}

#[tokio::test]
async fn a_sandboxed_stdio_server_works_but_cannot_touch_the_data_dir() {
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".env"), "OPENROUTER_API_KEY=sk-the-daemons-secret\n").unwrap();
    let outside = root.path().join("outside.txt");
    std::fs::write(&outside, "public").unwrap();
    let config = format!(
        "[servers.boxed]\ncommand = {:?}\nsandbox = \"landlock\"\nenv = {{ FIXTURE_FILES = \"1\" }}\n",
        fixture().display().to_string()
    );
    let hub = hub(&home, &config);
    ready(&hub, "boxed", Duration::from_secs(20)).await;
    let ctx = context(&home).await;
    let read = |path: &Path| json!({ "path": path.display().to_string() });
    assert_eq!(tool(&hub, "mcp_boxed_add").call(&ctx, json!({ "a": 2, "b": 3 })).await.unwrap(), "5");
    assert_eq!(
        tool(&hub, "mcp_boxed_read").call(&ctx, read(&outside)).await.unwrap(),
        "public",
        "reads elsewhere work"
    );
    match tool(&hub, "mcp_boxed_read").call(&ctx, read(&home.join(".env"))).await {
        Err(ToolError::Failed(text)) => assert!(text.contains("refused"), "{text}"),
        other => panic!("the data dir must be unreadable, got {other:?}"),
    }
    match tool(&hub, "mcp_boxed_write").call(&ctx, read(&root.path().join("dropped.txt"))).await {
        Err(ToolError::Failed(text)) => assert!(text.contains("refused"), "{text}"),
        other => panic!("writes outside the server's paths must fail, got {other:?}"),
    }
    assert!(!root.path().join("dropped.txt").exists());
}

#[tokio::test]
async fn stdio_server_tools_are_listed_called_and_failures_are_tool_errors() {
    let home = tempfile::tempdir().unwrap();
    let hub = hub(home.path(), &stdio_server("servers.fix", "tools = { exclude = [\"pid\"] }"));
    ready(&hub, "fix", Duration::from_secs(20)).await;
    let names = hub.snapshot_names();
    assert_eq!(
        names,
        [
            "mcp_fix_add",
            "mcp_fix_crash",
            "mcp_fix_echo",
            "mcp_fix_fail",
            "mcp_fix_grow",
            "mcp_fix_image",
            "mcp_fix_slow"
        ],
        "sorted, prefixed, `pid` excluded"
    );
    let spec = tool(&hub, "mcp_fix_add").spec();
    assert_eq!(spec.toolset, "mcp:fix");
    assert_eq!(spec.parameters["required"], json!(["a", "b"]), "the server's schema is offered as is");

    let ctx = context(home.path()).await;
    assert_eq!(tool(&hub, "mcp_fix_echo").call(&ctx, json!({ "text": "hi" })).await.unwrap(), "echo: hi");
    assert_eq!(tool(&hub, "mcp_fix_add").call(&ctx, json!({ "a": 2, "b": 3 })).await.unwrap(), "5");
    match tool(&hub, "mcp_fix_fail").call(&ctx, json!({})).await {
        Err(ToolError::Failed(text)) => assert_eq!(text, "the thing broke"),
        other => panic!("isError must be a tool error, got {other:?}"),
    }
    let image = tool(&hub, "mcp_fix_image").call_output(&ctx, json!({})).await.unwrap();
    let [saved] = image.images.as_slice() else { panic!("one image reference: {image:?}") };
    assert!(saved.path.starts_with("media/api/c/mcp_fix_"), "in the chat's media folder: {saved:?}");
    assert_eq!(std::fs::read(home.path().join(&saved.path)).unwrap(), support::mcp_server::PNG_BYTES);
    assert!(image.text.contains(&format!("saved as {}]", saved.model_path())), "{image:?}");

    let report = hub.report();
    assert_eq!((report[0].calls, report[0].errors, report[0].tools), (4, 1, 7));
    let metrics = hub.render_metrics();
    assert!(metrics.contains("hermesd_mcp_calls_total{server=\"fix\"} 4"), "{metrics}");
    assert!(metrics.contains("hermesd_mcp_server_up{server=\"fix\"} 1"), "{metrics}");
    hub.shutdown().await;
    assert_eq!(hub.report()[0].state, "stopped");
}

#[tokio::test]
async fn http_server_lists_calls_and_refreshes_on_list_changed() {
    let home = tempfile::tempdir().unwrap();
    let stop = CancellationToken::new();
    let url = serve_http(TestServer::new(), stop.clone()).await;
    let hub = hub(home.path(), &format!("[servers.web]\nurl = \"{url}\"\nbearer_env = \"FIX_TOKEN\"\n"));
    ready(&hub, "web", Duration::from_secs(10)).await;
    assert_eq!(hub.tool_count(), 7, "{:?}", hub.snapshot_names());
    let ctx = context(home.path()).await;
    assert_eq!(tool(&hub, "mcp_web_echo").call(&ctx, json!({ "text": "over http" })).await.unwrap(), "echo: over http");

    let mut changes = hub.changes();
    let before = *changes.borrow_and_update();
    assert_eq!(tool(&hub, "mcp_web_grow").call(&ctx, json!({})).await.unwrap(), "grown");
    let grown = eventually(Duration::from_secs(5), || hub.snapshot_names().contains(&"mcp_web_extra".to_owned())).await;
    assert!(grown, "list_changed must refresh the tools: {:?}", hub.snapshot_names());
    assert!(*changes.borrow() > before, "the change is announced");
    hub.shutdown().await;
    stop.cancel();
}

#[tokio::test]
async fn a_call_past_its_timeout_is_cancelled_on_the_server() {
    let home = tempfile::tempdir().unwrap();
    let stop = CancellationToken::new();
    let server = TestServer::new();
    let url = serve_http(server.clone(), stop.clone()).await;
    let hub = hub(home.path(), &format!("[servers.web]\nurl = \"{url}\"\ntimeout = \"300ms\"\n"));
    ready(&hub, "web", Duration::from_secs(10)).await;
    let slow = tool(&hub, "mcp_web_slow");
    assert_eq!(slow.spec().timeout, Duration::from_millis(300), "the executor enforces the server's timeout");
    let ctx = context(home.path()).await;
    // The executor drops a call at its timeout; dropping it must cancel it on the server.
    let call = tokio::time::timeout(slow.spec().timeout, slow.call(&ctx, json!({ "ms": 20_000 }))).await;
    assert!(call.is_err(), "the slow call outlives its timeout");
    let cancelled = eventually(Duration::from_secs(5), || server.cancelled.load(Ordering::SeqCst) == 1).await;
    assert!(cancelled, "the server got notifications/cancelled");
    assert_eq!(tool(&hub, "mcp_web_echo").call(&ctx, json!({ "text": "still" })).await.unwrap(), "echo: still");
    hub.shutdown().await;
    stop.cancel();
}

#[tokio::test]
async fn stop_cancels_a_running_call_and_approval_gates_calls() {
    let home = tempfile::tempdir().unwrap();
    let stop = CancellationToken::new();
    let server = TestServer::new();
    let url = serve_http(server.clone(), stop.clone()).await;
    let hub = hub(home.path(), &format!("[servers.web]\nurl = \"{url}\"\napprove = true\n"));
    ready(&hub, "web", Duration::from_secs(10)).await;
    let mut registry = Registry::default();
    registry.add_source(hub.clone());
    let tools = registry.select(&["mcp:web".to_owned()]);
    assert!(registry.select(&["mcp:other".to_owned()]).is_empty(), "mcp:<server> admits only that server");

    // `/stop` cancels the turn's token; the executor drops the call and rmcp tells the server.
    let ctx = context(home.path()).await;
    let call = ToolCall { id: "1".into(), name: "mcp_web_slow".into(), arguments: r#"{"ms":20000}"#.into() };
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let outcomes = run_calls(&tools, &ctx, &[call], ExecutorLimits::default()).await;
    assert!(outcomes[0].error && outcomes[0].content.contains("cancelled"), "{:?}", outcomes[0].content);
    let cancelled = eventually(Duration::from_secs(5), || server.cancelled.load(Ordering::SeqCst) == 1).await;
    assert!(cancelled, "the server got notifications/cancelled");

    let denied = context_with(home.path(), Approval::Denied).await;
    match tool(&hub, "mcp_web_grow").call(&denied, json!({})).await {
        Err(ToolError::Denied(_)) => {}
        other => panic!("a refused call must not run, got {other:?}"),
    }
    assert!(!hub.snapshot_names().contains(&"mcp_web_extra".to_owned()), "the server never saw the call");
    let nobody = context_with(home.path(), Approval::Unavailable).await;
    assert!(matches!(
        tool(&hub, "mcp_web_echo").call(&nobody, json!({ "text": "x" })).await,
        Err(ToolError::Denied(_))
    ));
    hub.shutdown().await;
    stop.cancel();
}

#[tokio::test]
async fn a_crashed_server_restarts_and_its_tools_come_back() {
    let home = tempfile::tempdir().unwrap();
    let hub = hub(home.path(), &stdio_server("servers.fix", ""));
    ready(&hub, "fix", Duration::from_secs(20)).await;
    let ctx = context(home.path()).await;
    let pid_tool = tool(&hub, "mcp_fix_pid");
    let first = pid_tool.call(&ctx, json!({})).await.unwrap();
    assert!(tool(&hub, "mcp_fix_crash").call(&ctx, json!({})).await.is_err());
    // Called at once, while the server restarts: it waits for the new process instead of
    // failing with "not connected".
    let during = pid_tool.call(&ctx, json!({})).await.expect("served after the reconnect");
    assert_ne!(first, during, "by the restarted server");
    let back = eventually(Duration::from_secs(20), || {
        let r = &hub.report()[0];
        r.state == "ready" && r.tools == 8 && hub.tool_count() == 8
    })
    .await;
    assert!(back, "not reconnected: {:?}", hub.report());
    assert_eq!(
        hub.render_metrics().lines().find(|l| l.starts_with("hermesd_mcp_connects_total")),
        Some("hermesd_mcp_connects_total{server=\"fix\"} 2")
    );
    let second = tool(&hub, "mcp_fix_pid").call(&ctx, json!({})).await.unwrap();
    assert_ne!(first, second, "a new server process answers");
    hub.shutdown().await;
    let pid: i32 = second.parse().unwrap();
    assert!(gone(pid), "shutdown stops the server process");
}

#[tokio::test]
async fn a_broken_server_never_holds_back_the_others() {
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "{}[servers.broken]\ncommand = \"/nonexistent/mcp-server\"\nsandbox = \"none\"\n[servers.secretless]\nurl = \"http://127.0.0.1:9/mcp\"\nbearer_env = \"UNSET_TOKEN\"\n",
        stdio_server("servers.fix", "")
    );
    let started = Instant::now();
    let hub = hub(home.path(), &config);
    assert!(started.elapsed() < Duration::from_millis(100), "start returns at once: {:?}", started.elapsed());
    ready(&hub, "fix", Duration::from_secs(20)).await;
    let report = hub.report();
    let broken = report.iter().find(|r| r.name == "broken").unwrap();
    assert_ne!(broken.state, "ready");
    let secretless = report.iter().find(|r| r.name == "secretless").unwrap();
    assert_eq!(secretless.error.as_deref(), Some("UNSET_TOKEN is not set"));
    assert!(hub.snapshot_names().iter().all(|n| n.starts_with("mcp_fix_")));
    hub.shutdown().await;
}

/// Whether `pid` no longer runs (gone, or a zombie nobody reaped yet).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// A daemon with `config` (which configures the fixture server `fix`), once its 8 tools are in.
async fn start_with_fixture(home: &Path, config: &str) -> support::TestDaemon {
    let env_vars: Vec<(String, String)> =
        ["PATH", "HOME"].iter().filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v))).collect();
    let env: Vec<(&str, &str)> = env_vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let options = DaemonOptions { mcp_shim: Some(PathBuf::from(BIN)), ..Default::default() };
    let test = support::start_daemon_with(home, config, &env, options).await;
    let registered = eventually(Duration::from_secs(20), || test.daemon.mcp.tool_count() == 8).await;
    assert!(registered, "{:?}", test.daemon.mcp.report());
    test
}

#[tokio::test]
async fn the_model_calls_an_mcp_tool_and_sees_its_answer() {
    let home = tempfile::tempdir().unwrap();
    let llm =
        FakeLlm::builder().tool_calls(&[("mcp_fix_echo", r#"{"text":"from the model"}"#)]).reply("done").start().await;
    let mcp = stdio_server("mcp.servers.fix", "");
    let config = support::config_for(&llm, &format!("[tools]\ntoolsets = [\"memory\", \"mcp\"]\n\n{mcp}"));
    let test = start_with_fixture(home.path(), &config).await;

    let (status, body) = ask(&test.base, Some("mcp-1"), "use the echo tool").await;
    assert_eq!((status, answer(&body)), (200, "done"));
    let requests = llm.requests();
    let offered: Vec<&str> =
        requests[0]["tools"].as_array().unwrap().iter().filter_map(|t| t["function"]["name"].as_str()).collect();
    assert!(offered.contains(&"mcp_fix_echo") && offered.contains(&"memory"), "{offered:?}");
    let tool_result =
        requests[1]["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").cloned().unwrap();
    assert_eq!(tool_result["content"], "echo: from the model");

    let ready: serde_json::Value =
        client().get(format!("{}/readyz", test.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(ready["mcp"][0]["name"], "fix");
    assert_eq!(ready["mcp"][0]["state"], "ready");
    assert_eq!(ready["mcp"][0]["calls"], 1);
    let metrics = client().get(format!("{}/metrics", test.base)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("hermesd_mcp_tools{server=\"fix\"} 8"), "{metrics}");
    test.daemon.stop().await;
}

#[tokio::test]
async fn a_model_with_vision_is_shown_the_image_an_mcp_tool_returned() {
    let home = tempfile::tempdir().unwrap();
    let llm = FakeLlm::builder().tool_calls(&[("mcp_fix_image", "{}")]).reply("a tiny png").start().await;
    let mcp = stdio_server("mcp.servers.fix", "");
    let config = support::config_for(&llm, &format!("[tools]\ntoolsets = [\"mcp\"]\n\n{mcp}")).replacen(
        "timeout = \"30s\"\n",
        "timeout = \"30s\"\nvision = true\n",
        1,
    );
    let test = start_with_fixture(home.path(), &config).await;

    let (status, body) = ask(&test.base, Some("mcp-image"), "what does the image tool show?").await;
    assert_eq!((status, answer(&body)), (200, "a tiny png"));
    let requests = llm.requests();
    let messages = requests[1]["messages"].as_array().unwrap();
    let at = messages.iter().position(|m| m["role"] == "tool").expect("the tool result");
    let result = messages[at]["content"].as_str().unwrap();
    assert!(result.starts_with("[image image/png, 11 bytes, saved as media/mcp_fix_"), "{result}");
    let shown = &messages[at + 1];
    assert_eq!(shown["role"], "user", "the image follows the tool result: {messages:?}");
    assert_eq!(shown["content"][0]["text"], hermesd::vocab::message::TOOL_IMAGES_INTRO);
    let url = format!("data:image/png;base64,{}", support::mcp_server::PNG_BASE64);
    assert_eq!(shown["content"][2]["image_url"]["url"], url.as_str(), "{shown}");
    assert_eq!(llm.image_urls(), [url], "shown once, on the call after the tool ran");
    test.daemon.stop().await;
}

#[tokio::test]
async fn mcp_test_cli_connects_lists_and_fails_for_a_broken_server() {
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "[mcp.servers.fix]\ncommand = {:?}\nsandbox = \"none\"\n\n[mcp.servers.broken]\ncommand = \"/nonexistent/x\"\nsandbox = \"none\"\nconnect_timeout = \"2s\"\n",
        fixture().display().to_string()
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    assert!(Config::load(&home.path().join("config.toml")).is_ok());
    let run = |args: &[&str]| Command::new(BIN).arg("--home").arg(home.path()).args(args).output().unwrap();
    let ok = run(&["mcp", "test", "fix"]);
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{stdout}{}", String::from_utf8_lossy(&ok.stderr));
    assert!(stdout.contains("fix: connected, 8 tools") && stdout.contains("mcp_fix_echo"), "{stdout}");
    let broken = run(&["mcp", "test", "broken"]);
    assert!(!broken.status.success());
    let list = run(&["mcp", "list"]);
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(listed.contains("broken") && listed.contains("stdio") && listed.contains("daemon not running"), "{listed}");
}

#[tokio::test]
async fn kill_9_of_the_daemon_leaves_no_server_process() {
    let home = tempfile::tempdir().unwrap();
    let pids = home.path().join("pids");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[mcp.servers.fix]\ncommand = {:?}\nsandbox = \"none\"\nenv = {{ FIXTURE_PIDS = {:?} }}\n",
        fixture().display().to_string(),
        pids.display().to_string()
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let mut daemon = Command::new(BIN)
        .args(["--home", home.path().to_str().unwrap(), "run"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started =
        eventually(Duration::from_secs(20), || std::fs::read_to_string(&pids).is_ok_and(|t| t.ends_with('\n'))).await;
    assert!(started, "the server did not start");
    let text = std::fs::read_to_string(&pids).unwrap();
    let (server, grandchild) = text.trim().split_once(' ').unwrap();
    let (server, grandchild): (i32, i32) = (server.parse().unwrap(), grandchild.parse().unwrap());
    assert!(!gone(server) && !gone(grandchild));

    daemon.kill().unwrap(); // SIGKILL: no cleanup code of the daemon runs
    daemon.wait().unwrap();
    let cleaned = eventually(Duration::from_secs(10), || gone(server) && gone(grandchild)).await;
    assert!(cleaned, "server {server} or its grandchild {grandchild} outlived the daemon");
}
