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
    let mut one = server.clone();
    one.enabled = true;
    let config = McpConfig { servers: [(name.to_owned(), one)].into_iter().collect() };
    let (reports, names) = match connect(loaded, &config).await {
        Ok(connected) => connected,
        Err(e) => {
            eprintln!("hermesd: {e}");
            return ExitCode::FAILURE;
        }
    };
    let report = reports.into_iter().next();
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

/// Starts the servers of `config` (the enabled ones) as the daemon would, waits until each has
/// connected or failed (its `connect_timeout`, and 2 s more), and stops them: each server's
/// report and the names of the tools they offered.
pub(super) async fn connect(loaded: &Loaded, config: &McpConfig) -> Result<(Vec<ServerReport>, Vec<String>), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let shim_exe = crate::sandbox::own_executable().map_err(|e| format!("locate the hermesd binary: {e}"))?;
    let workdir = loaded.paths.workdir(&loaded.config.tools);
    std::fs::create_dir_all(&workdir).map_err(|e| format!("create {}: {e}", workdir.display()))?;
    let settings =
        HubSettings { home: loaded.paths.home.clone(), workdir, shim_exe, approval_timeout: Duration::from_secs(1) };
    let longest = config.servers.values().filter(|s| s.enabled).map(|s| s.connect_timeout.get()).max();
    let hub = McpHub::start(config, &loaded.env, settings);
    let deadline = tokio::time::Instant::now() + longest.unwrap_or_default() + Duration::from_secs(2);
    let reports = loop {
        let reports = hub.report();
        if !reports.iter().any(|r| r.state == "connecting") || tokio::time::Instant::now() >= deadline {
            break reports;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let names = hub.snapshot_names();
    hub.shutdown().await;
    Ok((reports, names))
}
