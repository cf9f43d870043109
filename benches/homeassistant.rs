//! Home Assistant throughput benchmark of the real `hermesd` binary against the fake HA
//! websocket API (`tests/support/fake_hass/`) and an instant fake LLM that answers "echo: <last
//! user message>".
//!
//! U users (default 50) each fire M `hermesd_request` events (default 10) in one conversation
//! of their own, all at t0 on a running, subscribed daemon. Measured: seconds until every
//! request has its `hermesd_response` (matched by `request_id`, bounded by 300 s), replies/s,
//! lost requests (no reply naming them), duplicated ones (answered more than once, counted after
//! a 2 s grace), other responses (notices such as "queued (n)"), the daemon's peak RSS (`VmHWM`)
//! and CPU ms per reply (from `/proc/<pid>/stat`). Lost and duplicated must be 0 (FAIL exits
//! non-zero).
//!
//! ```text
//! cargo bench --bench homeassistant            # release
//! HERMESD_BENCH_QUICK=1 cargo bench --bench homeassistant --profile dev   # 10 × 3 smoke run
//! ```
//!
//! All traffic stays on 127.0.0.1; arguments cargo passes are ignored.

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fake_hass/mod.rs"]
mod fake_hass;
#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fake_llm.rs"]
mod fake_llm;
#[allow(dead_code)]
#[path = "support/procfs.rs"]
mod procfs;

use std::collections::HashMap;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use fake_hass::FakeHass;
use fake_llm::FakeLlm;
use procfs::{cpu_ticks, status_mb, ticks_per_second};
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_hermesd");
const TOKEN: &str = "bench-hass-token-0123456789";
const REPLY_TIMEOUT: Duration = Duration::from_secs(300);
const DUPLICATE_GRACE: Duration = Duration::from_secs(2);
const START_TIMEOUT: Duration = Duration::from_secs(30);

struct Daemon {
    child: Child,
    home: TempDir,
}

impl Daemon {
    fn spawn(llm: &FakeLlm, hass: &FakeHass) -> Self {
        let home = tempfile::tempdir().expect("create a daemon home");
        let config = format!(
            "[http]\nlisten = \"127.0.0.1:0\"\n\n[agent]\nbatch_window = \"0s\"\n\n\
             [model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"bench\"\n\n\
             [platforms.homeassistant]\nenabled = true\nurl = \"{}\"\n",
            llm.base_url(),
            hass.url()
        );
        std::fs::write(home.path().join("config.toml"), config).expect("write the daemon config");
        let log = std::fs::File::create(home.path().join("hermesd.log")).expect("create the daemon log");
        let child = Command::new(BIN)
            .arg("--home")
            .arg(home.path())
            .arg("run")
            .env("HERMESD_LOG", "warn")
            .env("HASS_TOKEN", TOKEN)
            .env("HASS_ALLOW_ALL_USERS", "true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn hermesd");
        Self { child, home }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("hermesd.log")).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let quick = std::env::var("HERMESD_BENCH_QUICK").is_ok_and(|v| v == "1");
    let (users, messages) = if quick { (10, 3) } else { (50, 10) };
    let llm = FakeLlm::builder().forget_requests().start().await;
    let hass = FakeHass::start(TOKEN).await;
    let daemon = Daemon::spawn(&llm, &hass);
    let pid = daemon.child.id();
    let subscribed = hass.wait_until(START_TIMEOUT, |h| h.subscriptions().iter().any(|s| s == "hermesd_request")).await;
    assert!(subscribed, "hermesd did not subscribe within {START_TIMEOUT:?}; log:\n{}", daemon.log());

    let cpu_start = cpu_ticks(pid).unwrap_or(0);
    let t0 = Instant::now();
    let mut expected: HashMap<String, String> = HashMap::new();
    for m in 0..messages {
        for u in 0..users {
            let text = format!("u{u} m{m}");
            let id = hass.request(&text, Some(&format!("conv-{u}")), Some(&format!("user{u:03}")));
            expected.insert(id, format!("echo: {text}"));
        }
    }
    let total = expected.len();
    let answered = |h: &FakeHass| {
        let responses = h.responses();
        let done: std::collections::HashSet<&str> = responses
            .iter()
            .filter(|r| {
                r["text"].as_str() == r["request_id"].as_str().and_then(|id| expected.get(id)).map(String::as_str)
            })
            .filter_map(|r| r["request_id"].as_str())
            .collect();
        done.len() == total
    };
    let complete = hass.wait_until(REPLY_TIMEOUT, answered).await;
    let seconds = t0.elapsed().as_secs_f64();
    let cpu_end = cpu_ticks(pid).unwrap_or(cpu_start);
    tokio::time::sleep(DUPLICATE_GRACE).await;
    let peak = status_mb(pid, "VmHWM");
    let responses = hass.responses();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    let mut other = 0;
    for r in &responses {
        match r["request_id"].as_str().filter(|id| expected.get(*id).map(String::as_str) == r["text"].as_str()) {
            Some(id) => *counts.entry(id).or_default() += 1,
            None => other += 1,
        }
    }
    let lost = total - counts.len();
    let duplicated = counts.values().filter(|&&n| n > 1).count();
    let cpu_ms = (cpu_end - cpu_start) as f64 * 1000.0 / ticks_per_second() / total.max(1) as f64;
    println!("Home Assistant bench: {users} users × {messages} requests, fake HA websocket, instant fake model");
    println!("| requests | seconds | replies/s | lost | duplicated | other responses | peak RSS MB | CPU ms/reply |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {total} | {seconds:.2} | {:.1} | {lost} | {duplicated} | {other} | {} | {cpu_ms:.2} |",
        total as f64 / seconds,
        peak.map_or("?".to_owned(), |mb| format!("{mb:.1}"))
    );
    let pass = complete && lost == 0 && duplicated == 0;
    println!("{}", if pass { "PASS" } else { "FAIL" });
    if !pass {
        eprintln!("log:\n{}", daemon.log());
    }
    drop(daemon);
    if pass { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
