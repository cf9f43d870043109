//! `hermesd mcp list | test`: the configured MCP servers and their state (asked from the running
//! daemon's `/readyz`), and a one-off connection test of one server that exits non-zero when it
//! fails.

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;

use super::Loaded;
use crate::agent::tools::mcp::{HubSettings, McpHub, ServerReport};
use crate::config::McpConfig;

/// `hermesd mcp …`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Configured servers, their state and tool count (from the running daemon when it runs).
    List,
    /// Connect to one server, list its tools, and exit non-zero on failure.
    Test {
        /// The server's name (`[mcp.servers.NAME]`).
        name: String,
    },
}

/// Run an `mcp` subcommand.
pub(super) async fn run(loaded: Loaded, command: McpCommand) -> ExitCode {
    match command {
        McpCommand::List => list(&loaded).await,
        McpCommand::Test { name } => test(&loaded, &name).await,
    }
}

async fn list(loaded: &Loaded) -> ExitCode {
    let servers = &loaded.config.mcp.servers;
    if servers.is_empty() {
        println!("no MCP servers configured ([mcp.servers.NAME] in {})", loaded.paths.config.display());
        return ExitCode::SUCCESS;
    }
    let live = live_report(&loaded.config.http.listen).await;
    println!("{:<20} {:<6} {:<12} {:>5}  detail", "server", "kind", "state", "tools");
    for (name, server) in servers {
        let kind = if server.command.is_some() { "stdio" } else { "http" };
        let report = live.as_ref().and_then(|r| r.iter().find(|s| s.name == *name));
        let (state, tools, detail) = match (server.enabled, report, &live) {
            (false, _, _) => ("disabled".to_owned(), "-".to_owned(), String::new()),
            (true, Some(r), _) => (r.state.to_owned(), r.tools.to_string(), r.error.clone().unwrap_or_default()),
            (true, None, Some(_)) => {
                ("unknown".to_owned(), "-".to_owned(), "the running daemon does not know it (restart it)".to_owned())
            }
            (true, None, None) => {
                ("-".to_owned(), "-".to_owned(), "daemon not running; try `hermesd mcp test NAME`".to_owned())
            }
        };
        println!("{name:<20} {kind:<6} {state:<12} {tools:>5}  {detail}");
    }
    ExitCode::SUCCESS
}

/// The running daemon's MCP report, when one answers on `listen`.
async fn live_report(listen: &str) -> Option<Vec<ServerReport>> {
    #[derive(serde::Deserialize)]
    struct Ready {
        mcp: Vec<Report>,
    }
    #[derive(serde::Deserialize)]
    struct Report {
        name: String,
        state: String,
        error: Option<String>,
        tools: usize,
        calls: u64,
        errors: u64,
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(3)).no_proxy().build().ok()?;
    let response = client.get(format!("http://{listen}/readyz")).send().await.ok()?;
    let ready: Ready = response.json().await.ok()?;
    let state_name = |s: String| -> &'static str {
        match s.as_str() {
            "connecting" => "connecting",
            "ready" => "ready",
            "failed" => "failed",
            "stopped" => "stopped",
            _ => "unknown",
        }
    };
    Some(
        ready
            .mcp
            .into_iter()
            .map(|r| ServerReport {
                name: r.name,
                state: state_name(r.state),
                error: r.error,
                tools: r.tools,
                calls: r.calls,
                errors: r.errors,
            })
            .collect(),
    )
}

async fn test(loaded: &Loaded, name: &str) -> ExitCode {
    let Some(server) = loaded.config.mcp.servers.get(name) else {
        eprintln!("hermesd: no MCP server named {name:?} in {}", loaded.paths.config.display());
        return ExitCode::from(super::EXIT_CONFIG);
    };
    let problems = loaded.config.mcp.problems();
    if !problems.is_empty() {
        eprintln!("hermesd: invalid configuration:\n  - {}", problems.join("\n  - "));
        return ExitCode::from(super::EXIT_CONFIG);
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut one = server.clone();
    one.enabled = true;
    let config = McpConfig { servers: [(name.to_owned(), one.clone())].into_iter().collect() };
    let shim_exe = match crate::sandbox::own_executable() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("hermesd: locate the hermesd binary: {e}");
            return ExitCode::FAILURE;
        }
    };
    let workdir = loaded.paths.workdir(&loaded.config.tools);
    if let Err(e) = std::fs::create_dir_all(&workdir) {
        eprintln!("hermesd: create {}: {e}", workdir.display());
        return ExitCode::FAILURE;
    }
    let settings =
        HubSettings { home: loaded.paths.home.clone(), workdir, shim_exe, approval_timeout: Duration::from_secs(1) };
    let hub = McpHub::start(&config, &loaded.env, settings);
    let deadline = tokio::time::Instant::now() + one.connect_timeout.get() + Duration::from_secs(2);
    let report = loop {
        let report = hub.report().into_iter().next();
        match &report {
            Some(r) if r.state != "connecting" => break report,
            _ if tokio::time::Instant::now() >= deadline => break report,
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let names: Vec<String> = hub.snapshot_names();
    hub.shutdown().await;
    match report {
        Some(r) if r.state == "ready" => {
            println!("{name}: connected, {} tools", names.len());
            for tool in names {
                println!("  {tool}");
            }
            ExitCode::SUCCESS
        }
        Some(r) => {
            eprintln!("{name}: {} {}", r.state, r.error.unwrap_or_default());
            ExitCode::FAILURE
        }
        None => ExitCode::FAILURE,
    }
}
