//! MCP benchmark, in process through the hermesd library: a daemon with 3 MCP servers × 20
//! tools (rmcp's server side over Streamable HTTP on 127.0.0.1) against an instant fake model.
//!
//! It prints:
//! - start-to-ready (`Daemon::start` until READY) with the servers configured; the target is
//!   under 100 ms, since readiness never waits for MCP servers;
//! - the time until all 60 MCP tools are registered;
//! - the per-turn gateway overhead (sequential API turns, instant model) with and without the
//!   servers, both on the default toolsets, and the ratio of their medians; the target is within
//!   10 %. The daemons run side by side and take turns, so load drift hits them alike. A third
//!   run keeps the servers connected but leaves `mcp` out of the toolsets, separating the cost of
//!   running them from the cost of sending the model 60 more tool schemas. The fake model keeps
//!   no request bodies and skips the tool schemas it does not need, as a model server's own
//!   parsing is not gateway work.
//!
//! `cargo bench --bench mcp` (release). `HERMESD_BENCH_QUICK=1` runs fewer turns. Exits non-zero
//! when a target is missed.

#[path = "../tests/support/fake_llm.rs"]
#[allow(dead_code, unreachable_pub)]
mod fake_llm;
#[path = "../tests/support/mcp_server.rs"]
mod mcp_server;

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use hermesd::config::{Config, Env, Paths};
use hermesd::daemon::{Daemon, DaemonOptions};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const SERVERS: usize = 3;
const TOOLS_PER_SERVER: usize = 20;

/// A daemon on the default toolsets (every built-in, plus `mcp`), or on the built-ins alone
/// when `offered` is false.
async fn start(home: &std::path::Path, llm: &str, mcp: &str, offered: bool) -> Daemon {
    let tools = if offered {
        String::new()
    } else {
        let builtins: Vec<String> =
            hermesd::config::ALL_TOOLSETS.iter().filter(|set| **set != "mcp").map(|set| format!("{set:?}")).collect();
        format!("[tools]\ntoolsets = [{}]\n\n", builtins.join(", "))
    };
    let text = format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{llm}\"\nname = \"fake\"\n\n{tools}{mcp}"
    );
    let config = Config::parse(&text).expect("bench config parses");
    let paths = Paths { home: home.to_path_buf(), config: home.join("config.toml") };
    Daemon::start(config, paths, Env::from_map(HashMap::new()), DaemonOptions::default()).await.expect("daemon starts")
}

/// One API turn on `daemon`'s session `bench-<i mod 10>`, timed.
async fn turn(client: &reqwest::Client, daemon: &Daemon, i: usize) -> Duration {
    let base = format!("http://{}", daemon.addr.expect("http bound"));
    let request = client
        .post(format!("{base}/v1/chat/completions"))
        .header("X-Hermes-Session-Id", format!("bench-{}", i % 10))
        .json(&json!({ "model": "hermes-agent", "messages": [{ "role": "user", "content": format!("hi {i}") }] }));
    let started = Instant::now();
    let response = request.send().await.expect("request");
    assert_eq!(response.status(), 200);
    let _ = response.bytes().await;
    started.elapsed()
}

/// Mean and median latency of `turns` sequential API turns on each daemon, after a warm-up.
/// The daemons take turns (in a rotating order), so drift in the machine's load falls on all of
/// them alike and the ratios compare like with like.
async fn interleaved(daemons: &[&Daemon], turns: usize) -> Vec<(Duration, Duration)> {
    let client = reqwest::Client::builder().no_proxy().build().expect("client");
    for i in 0..turns / 5 {
        for daemon in daemons {
            turn(&client, daemon, i).await;
        }
    }
    let mut times = vec![Vec::with_capacity(turns); daemons.len()];
    for i in 0..turns {
        for k in 0..daemons.len() {
            let at = (i + k) % daemons.len();
            times[at].push(turn(&client, daemons[at], i).await);
        }
    }
    times
        .into_iter()
        .map(|mut times| {
            times.sort();
            (times.iter().sum::<Duration>() / turns as u32, times[turns / 2])
        })
        .collect()
}

fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let quick = std::env::var_os("HERMESD_BENCH_QUICK").is_some();
    let n_turns = if quick { 100 } else { 500 };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let llm = fake_llm::FakeLlm::builder().forget_requests().start().await;
        let stop = CancellationToken::new();
        let mut mcp = String::new();
        for s in 0..SERVERS {
            let url = mcp_server::serve_http(mcp_server::TestServer::numbered(TOOLS_PER_SERVER), stop.clone()).await;
            mcp.push_str(&format!("[mcp.servers.s{s}]\nurl = \"{url}\"\n\n"));
        }

        let home = tempfile::tempdir().expect("tempdir");
        let started = Instant::now();
        let with = start(home.path(), &llm.base_url(), &mcp, true).await;
        let ready = with.started_in;
        let expected = SERVERS * TOOLS_PER_SERVER;
        while with.mcp.tool_count() < expected {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let registered = started.elapsed();

        let bare_home = tempfile::tempdir().expect("tempdir");
        let without = start(bare_home.path(), &llm.base_url(), "", true).await;
        // The servers connected but their tools not offered: what running them costs a turn,
        // apart from the model being sent 60 more tool schemas.
        let hidden_home = tempfile::tempdir().expect("tempdir");
        let hidden = start(hidden_home.path(), &llm.base_url(), &mcp, false).await;
        while hidden.mcp.tool_count() < expected {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let measured = interleaved(&[&with, &without, &hidden], n_turns).await;
        let [(with_mean, with_p50), (bare_mean, bare_p50), (hidden_mean, _)] = measured[..] else {
            unreachable!("three daemons measured")
        };
        for daemon in [with, without, hidden] {
            daemon.stop().await;
        }
        stop.cancel();

        // Medians: a noisy machine's stalls land in the mean.
        let overhead = with_p50.as_secs_f64() / bare_p50.as_secs_f64() - 1.0;
        let overhead_mean = with_mean.as_secs_f64() / bare_mean.as_secs_f64() - 1.0;
        println!("MCP benchmark: {SERVERS} servers x {TOOLS_PER_SERVER} tools (Streamable HTTP, 127.0.0.1), {n_turns} turns each");
        println!("{:<40} {:>12}", "measure", "value");
        println!("{:<40} {:>9.1} ms", "start to ready (target < 100 ms)", ready.as_secs_f64() * 1e3);
        println!("{:<40} {:>9.1} ms", format!("start to all {expected} tools registered"), registered.as_secs_f64() * 1e3);
        println!("{:<40} {:>9.3} ms", "turn without MCP, mean", bare_mean.as_secs_f64() * 1e3);
        println!("{:<40} {:>9.3} ms", "turn without MCP, p50", bare_p50.as_secs_f64() * 1e3);
        println!("{:<40} {:>9.3} ms", format!("turn with {expected} MCP tools, mean"), with_mean.as_secs_f64() * 1e3);
        println!("{:<40} {:>9.3} ms", format!("turn with {expected} MCP tools, p50"), with_p50.as_secs_f64() * 1e3);
        println!("{:<40} {:>+10.1} %", "per-turn overhead, p50 (target within 10 %)", overhead * 100.0);
        println!("{:<40} {:>+10.1} %", "per-turn overhead, mean", overhead_mean * 100.0);
        let running = hidden_mean.as_secs_f64() / bare_mean.as_secs_f64() - 1.0;
        println!("{:<40} {:>+10.1} %", "  of which servers running, tools not offered", running * 100.0);
        let ok = ready < Duration::from_millis(100) && overhead <= 0.10;
        if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
    })
}
