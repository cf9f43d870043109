//! MCP benchmark, in process through the hermesd library: a daemon with 3 MCP servers × 20
//! tools (rmcp's server side over Streamable HTTP on 127.0.0.1) against an instant fake model.
//!
//! It prints:
//! - start-to-ready (`Daemon::start` until READY) with the servers configured; the target is
//!   under 100 ms, since readiness never waits for MCP servers;
//! - the time until all 60 MCP tools are registered;
//! - the per-turn gateway overhead (sequential API turns, instant model) with and without the
//!   servers, both on the default toolsets, and their ratio; the target is within 10 %. A third
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

/// Mean and median latency of `turns` sequential API turns, after a warm-up.
async fn turns(daemon: &Daemon, turns: usize) -> (Duration, Duration) {
    let base = format!("http://{}", daemon.addr.expect("http bound"));
    let client = reqwest::Client::builder().no_proxy().build().expect("client");
    let ask = |i: usize| {
        let request = client
            .post(format!("{base}/v1/chat/completions"))
            .header("X-Hermes-Session-Id", format!("bench-{}", i % 10))
            .json(&json!({ "model": "hermes-agent", "messages": [{ "role": "user", "content": format!("hi {i}") }] }));
        async move {
            let response = request.send().await.expect("request");
            assert_eq!(response.status(), 200);
            let _ = response.bytes().await;
        }
    };
    for i in 0..turns / 5 {
        ask(i).await;
    }
    let mut times = Vec::with_capacity(turns);
    for i in 0..turns {
        let started = Instant::now();
        ask(i).await;
        times.push(started.elapsed());
    }
    times.sort();
    let mean = times.iter().sum::<Duration>() / turns as u32;
    (mean, times[turns / 2])
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
        let (with_mean, with_p50) = turns(&with, n_turns).await;
        with.stop().await;

        let bare_home = tempfile::tempdir().expect("tempdir");
        let without = start(bare_home.path(), &llm.base_url(), "", true).await;
        let (bare_mean, bare_p50) = turns(&without, n_turns).await;
        without.stop().await;

        // The servers connected but their tools not offered: what running them costs a turn,
        // apart from the model being sent 60 more tool schemas.
        let hidden_home = tempfile::tempdir().expect("tempdir");
        let hidden = start(hidden_home.path(), &llm.base_url(), &mcp, false).await;
        while hidden.mcp.tool_count() < expected {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let (hidden_mean, _) = turns(&hidden, n_turns).await;
        hidden.stop().await;
        stop.cancel();

        let overhead = with_mean.as_secs_f64() / bare_mean.as_secs_f64() - 1.0;
        println!("MCP benchmark: {SERVERS} servers x {TOOLS_PER_SERVER} tools (Streamable HTTP, 127.0.0.1), {n_turns} turns each");
        println!("{:<40} {:>12}", "measure", "value");
        println!("{:<40} {:>9.1} ms", "start to ready (target < 100 ms)", ready.as_secs_f64() * 1e3);
        println!("{:<40} {:>9.1} ms", format!("start to all {expected} tools registered"), registered.as_secs_f64() * 1e3);
        println!("{:<40} {:>9.3} ms", "turn without MCP, mean", bare_mean.as_secs_f64() * 1e3);
        println!("{:<40} {:>9.3} ms", "turn without MCP, p50", bare_p50.as_secs_f64() * 1e3);
        println!("{:<40} {:>9.3} ms", format!("turn with {expected} MCP tools, mean"), with_mean.as_secs_f64() * 1e3);
        println!("{:<40} {:>9.3} ms", format!("turn with {expected} MCP tools, p50"), with_p50.as_secs_f64() * 1e3);
        println!("{:<40} {:>+10.1} %", "per-turn overhead (target within 10 %)", overhead * 100.0);
        let running = hidden_mean.as_secs_f64() / bare_mean.as_secs_f64() - 1.0;
        println!("{:<40} {:>+10.1} %", "  of which servers running, tools not offered", running * 100.0);
        let ok = ready < Duration::from_millis(100) && overhead <= 0.10;
        if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
    })
}
