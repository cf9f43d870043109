//! Signal throughput benchmark of the real `hermesd` binary against the fake signal-cli.
//!
//! The fake signal-cli (`tests/support/fake_signal/`: the `/api/v1/events` stream and JSON-RPC)
//! feeds U people × M direct messages (default 20 × 5), texts unique ("u{u} m{m}"); the daemon
//! holds the event stream open and answers through JSON-RPC `send`, with an instant fake LLM
//! that echoes the last user message, so every reply names the message it answers. Two
//! variants, each on a fresh home and fresh fakes:
//! - live: the stream is open; every message is written to it at t0;
//! - backlog: the messages wait before the daemon starts (signal-cli in `--receive-mode=manual`
//!   keeps them at Signal until a stream connects); t0 is the spawn.
//!
//! Measured: seconds from t0 until every message has its reply, replies/s, lost replies (no
//! "echo: …" for a message), duplicated replies (after a 2 s grace), other sends (notices), the
//! daemon's peak RSS (`VmHWM`) and CPU ms per reply. Replies are paced by the adapter's
//! capabilities (1/s per chat, burst 5; 5/s in all), so replies/s is bounded near 5/s by design.
//! Lost and duplicated must both be 0 (PASS/FAIL; FAIL exits non-zero).
//!
//! ```text
//! cargo bench --bench signal              # release
//! HERMESD_BENCH_QUICK=1 cargo test --bench signal   # 5 × 2, debug build, a smoke run
//! ```
//!
//! All traffic stays on 127.0.0.1; arguments cargo passes are ignored.

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fake_llm.rs"]
mod fake_llm;
#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fake_signal/mod.rs"]
mod fake_signal;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use fake_llm::FakeLlm;
use fake_signal::FakeSignal;
use fake_signal::envelopes::{self, ACCOUNT, Person};

const BIN: &str = env!("CARGO_BIN_EXE_hermesd");
const REPLY_TIMEOUT: Duration = Duration::from_secs(600);
const DUPLICATE_GRACE: Duration = Duration::from_secs(2);
const POLL_EVERY: Duration = Duration::from_millis(20);

struct Outcome {
    label: &'static str,
    total: usize,
    seconds: Option<f64>,
    lost: usize,
    duplicated: usize,
    other: usize,
    peak_rss_mb: Option<f64>,
    cpu_ms_per_reply: Option<f64>,
}

fn people(users: usize) -> Vec<Person> {
    (0..users)
        .map(|u| {
            // Leaked on purpose: a handful of strings for the process's lifetime.
            let uuid: &'static str = Box::leak(format!("0000{u:04x}-0000-4000-8000-000000000000").into_boxed_str());
            let number: &'static str = Box::leak(format!("+1555{u:07}").into_boxed_str());
            Person { uuid, number, name: "bench" }
        })
        .collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(18_642)
}

fn spawn(home: &Path) -> std::io::Result<Child> {
    let log = std::fs::File::create(home.join("hermesd.log"))?;
    Command::new(BIN)
        .args(["--home", &home.to_string_lossy(), "run"])
        .env("HERMESD_LOG", "warn")
        .env("SIGNAL_ACCOUNT", ACCOUNT)
        .env("SIGNAL_ALLOW_ALL_USERS", "true")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
}

/// `VmHWM` in MB and utime + stime in ms of `pid`.
fn proc_stats(pid: u32) -> (Option<f64>, Option<f64>) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map(|kb| kb / 1024.0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks =
        fields.get(11).and_then(|u| u.parse::<f64>().ok()).zip(fields.get(12).and_then(|s| s.parse::<f64>().ok()));
    // Linux reports 100 ticks per second.
    (hwm, ticks.map(|(u, s)| (u + s) * 10.0))
}

/// Echo replies per (recipient, text), and sends that answer nothing injected.
fn tally(fake: &FakeSignal, expected: &HashMap<(String, String), usize>) -> (Vec<usize>, usize) {
    let mut counts = vec![0; expected.len()];
    let mut other = 0;
    for params in fake.calls("send") {
        let to = params["recipient"][0].as_str().unwrap_or_default().to_owned();
        let text = params["message"].as_str().unwrap_or_default().to_owned();
        match expected.get(&(to, text)) {
            Some(&i) => counts[i] += 1,
            None => other += 1,
        }
    }
    (counts, other)
}

async fn run(label: &'static str, backlog: bool, users: usize, messages: usize) -> Result<Outcome, String> {
    let llm = FakeLlm::echo().await;
    let fake = FakeSignal::start().await;
    let home = tempfile::tempdir().map_err(|e| e.to_string())?;
    let port = free_port();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[agent]\nbatch_window = \"0s\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"fake\"\n\n[platforms.signal]\nenabled = true\nhttp_url = \"{}\"\n",
        llm.base_url(),
        fake.url()
    );
    std::fs::write(home.path().join("config.toml"), config).map_err(|e| e.to_string())?;
    let people = people(users);
    let mut expected = HashMap::new();
    let mut inject = || {
        for (u, person) in people.iter().enumerate() {
            for m in 0..messages {
                let text = format!("u{u} m{m}");
                expected.insert((person.uuid.to_owned(), format!("echo: {text}")), expected.len());
                fake.push(envelopes::dm(*person, 1_700_000_000_000 + (u * messages + m) as i64, &text));
            }
        }
    };
    let (mut child, t0) = if backlog {
        inject();
        let t0 = Instant::now();
        (spawn(home.path()).map_err(|e| e.to_string())?, t0)
    } else {
        let child = spawn(home.path()).map_err(|e| e.to_string())?;
        let started = Instant::now();
        while fake.connections() == 0 && started.elapsed() < Duration::from_secs(30) {
            tokio::time::sleep(POLL_EVERY).await;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        let t0 = Instant::now();
        inject();
        (child, t0)
    };
    let cpu_at_t0 = if backlog { Some(0.0) } else { proc_stats(child.id()).1 };
    let total = users * messages;
    let mut seconds = None;
    while t0.elapsed() < REPLY_TIMEOUT {
        let (counts, _) = tally(&fake, &expected);
        if counts.iter().all(|&c| c > 0) {
            seconds = Some(t0.elapsed().as_secs_f64());
            break;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
    tokio::time::sleep(DUPLICATE_GRACE).await;
    let (counts, other) = tally(&fake, &expected);
    let (peak_rss_mb, cpu) = proc_stats(child.id());
    let _ = child.kill();
    let _ = child.wait();
    let answered = counts.iter().filter(|&&c| c > 0).count();
    Ok(Outcome {
        label,
        total,
        seconds,
        lost: total - answered,
        duplicated: counts.iter().map(|&c| c.saturating_sub(1)).sum(),
        other,
        peak_rss_mb,
        cpu_ms_per_reply: cpu.zip(cpu_at_t0).map(|(end, start)| (end - start) / answered.max(1) as f64),
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (users, messages) = if std::env::var_os("HERMESD_BENCH_QUICK").is_some() { (5, 2) } else { (20, 5) };
    println!(
        "signal bench: {users} people × {messages} DMs through the fake signal-cli (release hermesd unless run by cargo test)"
    );
    println!(
        "| variant | replies | seconds | replies/s | lost | duplicated | other sends | peak RSS MB | CPU ms/reply |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut pass = true;
    for (label, backlog) in [("live", false), ("backlog", true)] {
        match run(label, backlog, users, messages).await {
            Ok(o) => {
                let secs = o.seconds.map_or("timeout".to_owned(), |s| format!("{s:.2}"));
                let rate = o.seconds.map_or("-".to_owned(), |s| format!("{:.1}", o.total as f64 / s));
                let rss = o.peak_rss_mb.map_or("-".to_owned(), |m| format!("{m:.1}"));
                let cpu = o.cpu_ms_per_reply.map_or("-".to_owned(), |c| format!("{c:.1}"));
                println!(
                    "| {} | {} | {secs} | {rate} | {} | {} | {} | {rss} | {cpu} |",
                    o.label, o.total, o.lost, o.duplicated, o.other
                );
                pass &= o.lost == 0 && o.duplicated == 0;
            }
            Err(error) => {
                println!("| {label} | error: {error} |");
                pass = false;
            }
        }
    }
    println!("{}", if pass { "PASS: nothing lost, nothing duplicated" } else { "FAIL" });
    if pass { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
