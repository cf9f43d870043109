//! Gateway overhead benchmark of the real `hermesd` binary.
//!
//! The bench runs an instant fake OpenAI-compatible LLM on a thread of its own (it answers every
//! `POST /v1/chat/completions` with a fixed completion), spawns the release `hermesd` as a child
//! process pointed at it, and drives `POST /v1/chat/completions` with server-side sessions
//! (`X-Hermes-Session-Id`). Because the model answers at once, the measured latency is the
//! gateway's own overhead (ingress, store, session actor, outbox, HTTP on both sides).
//!
//! It reports:
//! - start-to-ready: spawn until `GET /readyz` answers 200 (median of 5 fresh homes);
//! - idle RSS after ready plus 500 ms;
//! - for 1, 10 and 50 concurrent sessions × 20 sequential messages: turns/s, p50/p99 latency,
//!   daemon CPU per turn (utime + stime from `/proc/<pid>/stat`) and peak RSS (`VmHWM`), each the
//!   median of 3 runs;
//! - store growth per turn (`state.db` + `state.db-wal`) over the 50-session workload.
//!
//! Run it (release profile; Linux only, it reads `/proc`):
//!
//! ```text
//! CARGO_TARGET_DIR=$HOME/.cache/hermesd-target cargo bench --bench gateway
//! ```
//!
//! `HERMESD_BENCH_QUICK=1` runs each workload once with 5 messages per session (a smoke test).
//! All traffic stays on 127.0.0.1; arguments cargo passes (`--bench`, filters) are ignored.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{Value, json};
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_hermesd");

/// What the fake LLM answers, always.
const COMPLETION: &str = r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;

/// Concurrent sessions of each measured workload.
const WORKLOADS: [usize; 3] = [1, 10, 50];
/// Fresh daemons started to time start-to-ready.
const READY_RUNS: usize = 5;
/// Warm-up: sessions × messages = 200 turns.
const WARMUP_SESSIONS: usize = 10;
const WARMUP_MESSAGES: usize = 20;
const READY_POLL: Duration = Duration::from_millis(2);
const READY_TIMEOUT: Duration = Duration::from_secs(30);
const EXIT_TIMEOUT: Duration = Duration::from_secs(40);
const IDLE_SETTLE: Duration = Duration::from_millis(500);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How much work to do.
struct Settings {
    /// Repetitions of each workload (the median is reported).
    runs: usize,
    /// Messages each session sends.
    messages: usize,
    quick: bool,
}

impl Settings {
    fn from_env() -> Self {
        let quick = std::env::var("HERMESD_BENCH_QUICK").is_ok_and(|v| v == "1");
        if quick { Self { runs: 1, messages: 5, quick } } else { Self { runs: 3, messages: 20, quick } }
    }
}

fn main() {
    // `cargo bench` passes `--bench` (and maybe a filter): nothing to honour.
    let settings = Settings::from_env();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let llm = FakeLlm::start();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("build the bench runtime");
    let report = runtime.block_on(run(&settings, &llm));
    report.print(&settings);
}

// ---------------------------------------------------------------------------------------------
// The fake LLM
// ---------------------------------------------------------------------------------------------

/// An instant OpenAI-compatible endpoint on its own single-threaded runtime and thread.
struct FakeLlm {
    addr: SocketAddr,
    calls: Arc<AtomicU64>,
}

impl FakeLlm {
    fn start() -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("fake-llm".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("build the fake LLM runtime");
                runtime.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the fake LLM listener");
                    let calls = Arc::new(AtomicU64::new(0));
                    let addr = listener.local_addr().expect("fake LLM address");
                    tx.send((addr, calls.clone())).expect("report the fake LLM address");
                    let app = Router::new().route("/v1/chat/completions", post(completion)).with_state(calls);
                    axum::serve(listener, app).await.expect("fake LLM serves");
                });
            })
            .expect("spawn the fake LLM thread");
        let (addr, calls) = rx.recv().expect("fake LLM started");
        Self { addr, calls }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

/// The whole handler: count the call and answer the fixed completion (the body is not parsed).
async fn completion(State(calls): State<Arc<AtomicU64>>, _body: Bytes) -> impl IntoResponse {
    calls.fetch_add(1, Ordering::Relaxed);
    ([(header::CONTENT_TYPE, "application/json")], COMPLETION)
}

// ---------------------------------------------------------------------------------------------
// The daemon process
// ---------------------------------------------------------------------------------------------

/// A running `hermesd` child with its own home.
struct Daemon {
    child: Child,
    home: TempDir,
    base: String,
}

impl Daemon {
    /// Spawn on a fresh home and wait for `/readyz`; also returns the start-to-ready time.
    async fn start(client: &reqwest::Client, llm: &FakeLlm) -> (Self, Duration) {
        let home = tempfile::tempdir().expect("create a daemon home");
        let port = free_port();
        write_config(home.path(), port, llm);
        let log = std::fs::File::create(home.path().join("hermesd.log")).expect("create the daemon log");
        let started = Instant::now();
        let child = Command::new(BIN)
            .arg("--home")
            .arg(home.path())
            .arg("run")
            .env("HERMESD_LOG", "warn")
            .env("NO_PROXY", "127.0.0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn hermesd");
        let mut daemon = Self { child, home, base: format!("http://127.0.0.1:{port}") };
        daemon.wait_ready(client).await;
        (daemon, started.elapsed())
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn home(&self) -> &Path {
        self.home.path()
    }

    /// Poll `/readyz` every 2 ms; panic with the daemon's log if it never gets ready or exits.
    async fn wait_ready(&mut self, client: &reqwest::Client) {
        let url = format!("{}/readyz", self.base);
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(response) = client.get(&url).timeout(Duration::from_secs(1)).send().await
                && response.status() == 200
            {
                return;
            }
            if let Some(status) = self.child.try_wait().expect("poll the hermesd child") {
                panic!("hermesd exited before ready ({status}); its log:\n{}", self.log());
            }
            tokio::time::sleep(READY_POLL).await;
        }
        panic!("hermesd not ready within {READY_TIMEOUT:?}; its log:\n{}", self.log());
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.home().join("hermesd.log")).unwrap_or_default()
    }

    /// SIGTERM (through the `kill` command) and wait for the exit.
    async fn stop(mut self) -> (ExitStatus, String) {
        let status = Command::new("kill").args(["-TERM", &self.pid().to_string()]).status().expect("run kill -TERM");
        assert!(status.success(), "kill -TERM {} failed", self.pid());
        let deadline = Instant::now() + EXIT_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll the hermesd child") {
                return (status, self.log());
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let status = self.child.wait().expect("reap the killed hermesd");
                return (status, format!("did not exit within {EXIT_TIMEOUT:?}; killed\n{}", self.log()));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Daemon {
    /// A bench that panics midway must not leave its daemon running.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A port that was free a moment ago (bind :0, read it, release it).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a probe listener");
    listener.local_addr().expect("probe listener address").port()
}

fn write_config(home: &Path, port: u16, llm: &FakeLlm) {
    let text = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n\
         [model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"bench\"\n\n\
         [agent]\nmax_concurrent_turns = 64\nmax_queued_per_session = 64\n",
        llm.base_url()
    );
    std::fs::write(home.join("config.toml"), text).expect("write the daemon config");
}

// ---------------------------------------------------------------------------------------------
// /proc readings
// ---------------------------------------------------------------------------------------------

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in MB.
fn status_mb(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/<pid>/status");
    let kb: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    kb as f64 / 1024.0
}

/// utime + stime of a process (`pid`, or `"self"`), in clock ticks.
fn cpu_ticks(pid: impl std::fmt::Display) -> u64 {
    // Fields 14 and 15 of `/proc/<pid>/stat`.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/<pid>/stat");
    // The command name (field 2) may hold spaces; fields after its closing ')' start at field 3.
    let rest = stat.rsplit_once(')').map(|(_, rest)| rest).expect("a ')' in /proc/<pid>/stat");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> u64 { fields[n - 3].parse().expect("a numeric tick count in /proc/<pid>/stat") };
    field(14) + field(15)
}

/// CPU ticks of each live thread of `pid` by name (`/proc/<pid>/task/*/stat`), busiest first.
fn thread_ticks(pid: u32) -> Vec<(String, u64)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("list /proc/<pid>/task");
    let mut threads: Vec<(String, u64)> = tasks
        .filter_map(|task| {
            let task = task.ok()?.file_name().into_string().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{task}/stat")).ok()?;
            let name = stat.split_once('(')?.1.rsplit_once(')')?.0.to_owned();
            Some((name, cpu_ticks(format!("{pid}/task/{task}"))))
        })
        .collect();
    threads.sort_by_key(|thread| std::cmp::Reverse(thread.1));
    threads
}

/// `getconf CLK_TCK` (normally 100).
fn ticks_per_second() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().expect("run getconf CLK_TCK");
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("getconf CLK_TCK prints a number")
}

/// Bytes of `state.db` plus its WAL.
fn store_bytes(home: &Path) -> u64 {
    ["state.db", "state.db-wal"]
        .iter()
        .filter_map(|name| std::fs::metadata(home.join(name)).ok())
        .map(|m| m.len())
        .sum()
}

// ---------------------------------------------------------------------------------------------
// Load
// ---------------------------------------------------------------------------------------------

/// What the sessions of one workload run saw.
#[derive(Default)]
struct Outcome {
    latencies: Vec<Duration>,
    errors: usize,
    first_error: Option<String>,
}

/// One request: `Ok(latency)` when the answer is a 200 with "ok".
async fn turn(client: &reqwest::Client, url: &str, session: &str, text: String) -> Result<Duration, String> {
    let body = json!({ "model": "hermes-agent", "messages": [{ "role": "user", "content": text }] });
    let started = Instant::now();
    let response = client
        .post(url)
        .header("X-Hermes-Session-Id", session)
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("send: {e}"))?;
    let status = response.status();
    let reply: Value = response.json().await.map_err(|e| format!("read body ({status}): {e}"))?;
    let elapsed = started.elapsed();
    match reply["choices"][0]["message"]["content"].as_str() {
        Some("ok") if status == 200 => Ok(elapsed),
        _ => Err(format!("{status}: {reply}")),
    }
}

/// One session sending `messages` messages, each after the previous reply.
async fn session(client: &reqwest::Client, url: &str, id: String, messages: usize) -> Outcome {
    let mut outcome = Outcome::default();
    for i in 0..messages {
        match turn(client, url, &id, format!("message {i}")).await {
            Ok(latency) => outcome.latencies.push(latency),
            Err(e) => {
                outcome.errors += 1;
                outcome.first_error.get_or_insert(e);
            }
        }
    }
    outcome
}

/// `sessions` concurrent sessions with ids `<label>-<n>`; returns the merged outcome and wall time.
async fn drive(
    client: &reqwest::Client,
    base: &str,
    label: &str,
    sessions: usize,
    messages: usize,
) -> (Outcome, Duration) {
    let url = format!("{base}/v1/chat/completions");
    let started = Instant::now();
    let outcomes =
        futures_util::future::join_all((0..sessions).map(|n| session(client, &url, format!("{label}-{n}"), messages)))
            .await;
    let wall = started.elapsed();
    let mut merged = Outcome::default();
    for outcome in outcomes {
        merged.latencies.extend(outcome.latencies);
        merged.errors += outcome.errors;
        if merged.first_error.is_none() {
            merged.first_error = outcome.first_error;
        }
    }
    (merged, wall)
}

// ---------------------------------------------------------------------------------------------
// Metrics
// ---------------------------------------------------------------------------------------------

/// The numbers of one workload run (or the medians of several).
#[derive(Clone, Default)]
struct Metrics {
    turns: f64,
    errors: f64,
    wall_s: f64,
    turns_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    cpu_ms_per_turn: f64,
    bench_cpu_ms_per_turn: f64,
    peak_rss_mb: f64,
    llm_calls_per_turn: f64,
    store_bytes_per_turn: f64,
}

impl Metrics {
    /// The median of each field over `runs`.
    fn median(runs: &[Metrics]) -> Metrics {
        let m = |f: fn(&Metrics) -> f64| median(runs.iter().map(f).collect());
        Metrics {
            turns: m(|r| r.turns),
            errors: m(|r| r.errors),
            wall_s: m(|r| r.wall_s),
            turns_per_s: m(|r| r.turns_per_s),
            p50_ms: m(|r| r.p50_ms),
            p99_ms: m(|r| r.p99_ms),
            cpu_ms_per_turn: m(|r| r.cpu_ms_per_turn),
            bench_cpu_ms_per_turn: m(|r| r.bench_cpu_ms_per_turn),
            peak_rss_mb: m(|r| r.peak_rss_mb),
            llm_calls_per_turn: m(|r| r.llm_calls_per_turn),
            store_bytes_per_turn: m(|r| r.store_bytes_per_turn),
        }
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 { values[mid] } else { (values[mid - 1] + values[mid]) / 2.0 }
}

/// Nearest-rank percentile of sorted latencies, in ms.
fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1000.0
}

/// Shared context of the measured runs.
struct Bench<'a> {
    client: &'a reqwest::Client,
    daemon: &'a Daemon,
    llm: &'a FakeLlm,
    ticks_per_s: f64,
}

impl Bench<'_> {
    /// One run of `sessions` × `messages`, with the daemon's CPU, RSS and store measured around it.
    async fn measure(&self, label: &str, sessions: usize, messages: usize) -> (Metrics, Option<String>) {
        let pid = self.daemon.pid();
        let ticks_before = cpu_ticks(pid);
        let own_ticks_before = cpu_ticks("self");
        let store_before = store_bytes(self.daemon.home());
        let calls_before = self.llm.calls();
        let (mut outcome, wall) = drive(self.client, &self.daemon.base, label, sessions, messages).await;
        let ticks = cpu_ticks(pid) - ticks_before;
        let own_ticks = cpu_ticks("self") - own_ticks_before;
        let store_growth = store_bytes(self.daemon.home()) as f64 - store_before as f64;
        let calls = (self.llm.calls() - calls_before) as f64;
        outcome.latencies.sort();
        let turns = outcome.latencies.len() as f64;
        let metrics = Metrics {
            turns,
            errors: outcome.errors as f64,
            wall_s: wall.as_secs_f64(),
            turns_per_s: turns / wall.as_secs_f64(),
            p50_ms: percentile_ms(&outcome.latencies, 50.0),
            p99_ms: percentile_ms(&outcome.latencies, 99.0),
            cpu_ms_per_turn: ticks as f64 * 1000.0 / self.ticks_per_s / turns,
            bench_cpu_ms_per_turn: own_ticks as f64 * 1000.0 / self.ticks_per_s / turns,
            peak_rss_mb: status_mb(pid, "VmHWM"),
            llm_calls_per_turn: calls / turns,
            store_bytes_per_turn: store_growth / turns,
        };
        (metrics, outcome.first_error)
    }
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

/// One row of the results table.
struct Row {
    sessions: usize,
    metrics: Metrics,
}

/// Everything printed at the end.
struct Report {
    ready_ms: Vec<f64>,
    idle_rss_mb: f64,
    rows: Vec<Row>,
    /// CPU ms of each daemon thread over its whole life (warm-up and every workload), busiest first.
    threads: Vec<(String, f64)>,
    errors: Vec<String>,
    exit: ExitStatus,
    exit_log: String,
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(256)
        .timeout(REQUEST_TIMEOUT)
        .build()
        .expect("build the HTTP client")
}

/// Start-to-ready of `READY_RUNS` fresh daemons, each stopped again; in ms.
async fn ready_times(client: &reqwest::Client, llm: &FakeLlm) -> Vec<f64> {
    let mut times = Vec::with_capacity(READY_RUNS);
    for _ in 0..READY_RUNS {
        let (daemon, ready) = Daemon::start(client, llm).await;
        times.push(ready.as_secs_f64() * 1000.0);
        let (status, log) = daemon.stop().await;
        if !status.success() {
            eprintln!("warning: a start-to-ready daemon exited with {status}; its log:\n{log}");
        }
    }
    times
}

async fn run(settings: &Settings, llm: &FakeLlm) -> Report {
    let client = client();
    let ticks_per_s = ticks_per_second();
    eprintln!("timing start-to-ready ({READY_RUNS} fresh daemons)…");
    let ready_ms = ready_times(&client, llm).await;

    let (daemon, _) = Daemon::start(&client, llm).await;
    tokio::time::sleep(IDLE_SETTLE).await;
    let idle_rss_mb = status_mb(daemon.pid(), "VmRSS");

    eprintln!("warm-up ({} turns)…", WARMUP_SESSIONS * WARMUP_MESSAGES);
    let (warmup, _) = drive(&client, &daemon.base, "warmup", WARMUP_SESSIONS, WARMUP_MESSAGES).await;
    let mut errors: Vec<String> = warmup.first_error.into_iter().map(|e| format!("warm-up: {e}")).collect();

    let bench = Bench { client: &client, daemon: &daemon, llm, ticks_per_s };
    let mut rows = Vec::new();
    for sessions in WORKLOADS {
        let mut runs = Vec::with_capacity(settings.runs);
        for run in 0..settings.runs {
            eprintln!("{sessions} sessions × {} messages, run {}/{}…", settings.messages, run + 1, settings.runs);
            let label = format!("bench-{sessions}-{run}-{}", uuid::Uuid::new_v4());
            let (metrics, error) = bench.measure(&label, sessions, settings.messages).await;
            errors.extend(error.map(|e| format!("{sessions} sessions, run {}: {e}", run + 1)));
            runs.push(metrics);
        }
        rows.push(Row { sessions, metrics: Metrics::median(&runs) });
    }

    let threads = thread_ticks(daemon.pid())
        .into_iter()
        .map(|(name, ticks)| (name, ticks as f64 * 1000.0 / ticks_per_s))
        .collect();
    let (exit, exit_log) = daemon.stop().await;
    Report { ready_ms, idle_rss_mb, rows, threads, errors, exit, exit_log }
}

// ---------------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------------

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "MISS" }
}

impl Report {
    fn row(&self, sessions: usize) -> Option<&Metrics> {
        self.rows.iter().find(|r| r.sessions == sessions).map(|r| &r.metrics)
    }

    fn print(&self, settings: &Settings) {
        let mode = if settings.quick { "quick (HERMESD_BENCH_QUICK=1)" } else { "full" };
        println!("## hermesd gateway benchmark (instant fake LLM)\n");
        println!(
            "mode: {mode}; {} message(s) per session; median of {} run(s) per workload\n",
            settings.messages, settings.runs
        );
        self.print_table(settings);
        self.print_summary();
        self.print_targets();
        self.print_problems();
    }

    fn print_table(&self, settings: &Settings) {
        println!(
            "| workload | turns | wall s | turns/s | p50 ms | p99 ms | CPU ms/turn | bench CPU ms/turn | peak RSS MB | LLM calls/turn | errors |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for Row { sessions, metrics: m } in &self.rows {
            println!(
                "| {sessions} session(s) × {} | {:.0} | {:.2} | {:.0} | {:.2} | {:.2} | {:.3} | {:.3} | {:.1} | {:.2} | {:.0} |",
                settings.messages,
                m.turns,
                m.wall_s,
                m.turns_per_s,
                m.p50_ms,
                m.p99_ms,
                m.cpu_ms_per_turn,
                m.bench_cpu_ms_per_turn,
                m.peak_rss_mb,
                m.llm_calls_per_turn,
                m.errors
            );
        }
        println!();
    }

    fn print_summary(&self) {
        let ready: Vec<String> = self.ready_ms.iter().map(|t| format!("{t:.1}")).collect();
        println!(
            "- start-to-ready, median of {}: {:.1} ms (target < 200 ms); all: [{}] ms",
            self.ready_ms.len(),
            median(self.ready_ms.clone()),
            ready.join(", ")
        );
        println!("- idle RSS (ready + 500 ms): {:.1} MB (target < 30 MB)", self.idle_rss_mb);
        if let Some(m) = self.row(50) {
            println!(
                "- store growth (state.db + state.db-wal) over the 50-session workload: {:.0} bytes/turn",
                m.store_bytes_per_turn
            );
        }
        let busiest: Vec<String> = self.threads.iter().take(6).map(|(name, ms)| format!("{name} {ms:.0} ms")).collect();
        println!("- daemon CPU by thread over the whole run, busiest first: {}", busiest.join(", "));
        println!(
            "- latency is client-side wall time per request (keep-alive, one shared client); the fake LLM \
             answers a constant body without parsing the request, so it is gateway overhead plus two loopback \
             HTTP hops. CPU ms/turn is the daemon's utime + stime; bench CPU ms/turn is this process (load \
             client and fake LLM) on the same cores. Peak RSS is VmHWM, the daemon's lifetime high-water mark. CPU comes in \
             1/CLK_TCK ticks (10 ms at 100 Hz), so the 1-session CPU figure is coarse; p99 over fewer than 100 \
             samples is their maximum."
        );
        println!();
    }

    fn print_targets(&self) {
        println!("### targets\n");
        if let Some(m) = self.row(50) {
            let ok = m.turns_per_s >= 500.0;
            println!("- {}: 50 sessions {:.0} turns/s (target ≥ 500)", verdict(ok), m.turns_per_s);
        }
        if let Some(m) = self.row(10) {
            println!("- {}: 10 sessions p50 {:.2} ms (target < 2 ms)", verdict(m.p50_ms < 2.0), m.p50_ms);
            println!("- {}: 10 sessions p99 {:.2} ms (target < 20 ms)", verdict(m.p99_ms < 20.0), m.p99_ms);
        }
        // Judged on the row with the most turns: 10 ms ticks make small rows too coarse to judge.
        if let Some(Row { sessions, metrics: m }) =
            self.rows.iter().max_by(|a, b| a.metrics.turns.total_cmp(&b.metrics.turns))
        {
            let cpu = m.cpu_ms_per_turn;
            println!("- {}: {sessions} sessions CPU per turn {cpu:.3} ms (target < 2 ms)", verdict(cpu < 2.0));
        }
        println!("- {}: idle RSS {:.1} MB (target < 30 MB)", verdict(self.idle_rss_mb < 30.0), self.idle_rss_mb);
        let ready = median(self.ready_ms.clone());
        println!("- {}: start-to-ready {ready:.1} ms (target < 200 ms)", verdict(ready < 200.0));
        println!();
    }

    fn print_problems(&self) {
        for error in &self.errors {
            println!("warning: request error: {error}");
        }
        if self.exit.code() == Some(0) {
            println!("daemon exited 0 after SIGTERM");
        } else {
            println!("warning: daemon exited with {} after SIGTERM; its log:\n{}", self.exit, self.exit_log);
        }
    }
}
