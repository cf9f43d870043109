//! Gateway overhead benchmark of the real `hermesd` binary.
//!
//! The bench runs an instant fake OpenAI-compatible LLM on a thread of its own (it answers every
//! `POST /v1/chat/completions` at once), spawns the release `hermesd` as a child process pointed
//! at it, and drives `POST /v1/chat/completions` with server-side sessions
//! (`X-Hermes-Session-Id`). Because the model answers at once, the measured latency is the
//! gateway's own overhead (ingress, store, session actor, outbox, HTTP on both sides).
//!
//! It reports:
//! - start-to-ready: spawn until `GET /readyz` answers 200 (median of 5 fresh homes);
//! - idle RSS after ready plus 500 ms;
//! - closed loop, for 1, 10 and 50 concurrent sessions × 20 sequential messages (200 for the one
//!   session, so its p99 is a percentile; each session sends the next message as soon as it has
//!   the reply: saturation): turns/s, p50/p99 latency,
//!   daemon CPU per turn (utime + stime from `/proc/<pid>/stat`) and peak RSS (`VmHWM`), each the
//!   median of 3 runs;
//! - paced (open loop), 10 sessions × 20 messages, each session sending one message every
//!   100 ms (~100 turns/s, well under capacity): the per-turn overhead without queueing, on which
//!   the latency targets are judged;
//! - a tool turn, 10 sessions × 20 closed loop on a daemon of its own, with the fake LLM
//!   answering a `todo` tool call and then text (two model calls a turn): CPU per turn and per
//!   model call;
//! - store growth per turn (`state.db` + `state.db-wal`) over the 50-session workload;
//! - realistic traffic, on a daemon of its own (`load::Traffic::realistic`): 1 and 50 sessions ×
//!   40 messages, closed loop, with a bearer key, the default toolsets, messages of a few hundred
//!   bytes and paragraph answers with usage, so prompts grow with each session's history (the
//!   mean and largest prompt are printed); CPU per turn at 50 sessions is judged here (≤ 0.6 ms);
//! - profiles and accounts (benches/gateway/profiles.rs): idle RSS of a daemon with 10 profiles,
//!   and with 20 Telegram accounts on them, against the API alone, and turns/s spread over the
//!   profiles against the API alone (medians of 3, interleaved);
//! - scale (benches/gateway/scale.rs), every run on a daemon of its own, medians of 3: RSS with 10,000
//!   sessions alive at once and for 2 minutes after their actors exited, and daemon CPU per
//!   message for the first chats vs after 100,000 distinct chats;
//! - in process, through the hermesd library (benches/gateway/durability.rs): the price of a synced
//!   accept — `accept_inbound` as a platform acked before the turn needs it (`synchronous = FULL`)
//!   against as the API needs it (the caller waits for the answer), 1 and 50 callers;
//! - in process, through the hermesd library: a forced compaction of a 2,000-message session
//!   (median of 5 fresh sessions), `load_transcript` before and after, and FTS search latency;
//!   then (benches/gateway/search.rs) search p50/p99 over 1,000,000 messages, scoped to one
//!   chat and store-wide, for a word and a substring.
//!
//! Run it (release profile; Linux only, it reads `/proc`):
//!
//! ```text
//! CARGO_TARGET_DIR=$HOME/.cache/hermesd-target cargo bench --bench gateway
//! ```
//!
//! `HERMESD_BENCH_QUICK=1` runs each workload once with 5 messages per session (a smoke test).
//! `HERMESD_BENCH_SCALE=only` runs only the scale workloads (`=memory`, `=chats`: one of them;
//! `=search`: only the million-message search; `=profiles`: only the profiles and accounts rows; `=none`: only the first table and the price of a
//! synced accept, no scale or search workloads; `=realistic`: only the realistic rows); `HERMESD_BENCH_BIN=<path>` runs
//! another `hermesd` build (e.g. to compare allocators or versions).
//! All traffic stays on 127.0.0.1; arguments cargo passes (`--bench`, filters) are ignored.

#[path = "gateway/compress.rs"]
mod compress;
#[path = "gateway/daemon.rs"]
mod daemon;
#[path = "gateway/durability.rs"]
mod durability;
#[path = "gateway/fake_llm.rs"]
mod fake_llm;
#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fake_telegram/mod.rs"]
mod fake_telegram;
#[path = "gateway/load.rs"]
mod load;
#[path = "support/profile.rs"]
mod profile;
#[path = "gateway/profiles.rs"]
mod profiles;
#[path = "gateway/report.rs"]
mod report;
#[path = "gateway/scale.rs"]
mod scale;
#[path = "gateway/search.rs"]
mod search;

use std::time::Duration;

use daemon::{Daemon, status_mb, thread_ticks, ticks_per_second};
use fake_llm::{FakeLlm, Mode};
use load::{Bench, Metrics, Pace, Traffic, warm_up};
use report::{Exit, Report, Row, Workload};

/// Concurrent sessions of each closed-loop workload.
const CLOSED: [usize; 3] = [1, 10, 50];
/// The paced workload: sessions, and the interval between one session's messages.
const PACED_SESSIONS: usize = 10;
const PACED_EVERY: Duration = Duration::from_millis(100);
/// Concurrent sessions of the realistic workloads (closed loop, each session's history growing
/// to twice the light workloads' messages: 40 turns).
const REALISTIC: [usize; 2] = [1, 50];
/// Sessions of the tool-turn workload.
const TOOL_SESSIONS: usize = 10;
/// Fresh daemons started to time start-to-ready.
const READY_RUNS: usize = 5;
/// Warm-up: sessions × messages = 200 turns (100 on the tool daemon).
const WARMUP_SESSIONS: usize = 10;
const WARMUP_MESSAGES: usize = 20;
const TOOL_WARMUP_MESSAGES: usize = 10;
const IDLE_SETTLE: Duration = Duration::from_millis(500);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How much work to do.
pub(crate) struct Settings {
    /// Repetitions of each workload (the median is reported).
    pub(crate) runs: usize,
    /// Messages each session sends.
    pub(crate) messages: usize,
    /// Fresh sessions compacted (the median is reported).
    compress_runs: usize,
    pub(crate) quick: bool,
}

impl Settings {
    fn from_env() -> Self {
        let quick = std::env::var("HERMESD_BENCH_QUICK").is_ok_and(|v| v == "1");
        if quick {
            Self { runs: 1, messages: 5, compress_runs: 1, quick }
        } else {
            Self { runs: 3, messages: 20, compress_runs: 5, quick }
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench` (and maybe a filter): nothing to honour.
    let settings = Settings::from_env();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let llm = FakeLlm::start();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("build the bench runtime");
    // `HERMESD_BENCH_SCALE=only|memory|chats` runs just the scale workloads (they take minutes),
    // `=search` just the million-message search, `=none` just the first table, `=realistic` just
    // the realistic rows (e.g. under `perf record`).
    let only = std::env::var("HERMESD_BENCH_SCALE").ok();
    println!("hermesd gateway bench: binary built with the `{}` profile", profile::of(env!("CARGO_BIN_EXE_hermesd")));
    if only.is_none() || only.as_deref() == Some("none") {
        let report = runtime.block_on(run(&settings, &llm));
        report.print(&settings);
        durability::run(settings.quick).print();
    }
    if only.as_deref() == Some("realistic") {
        let mut errors = Vec::new();
        let (realistic, exit) = runtime.block_on(run_realistic(&settings, &llm, &client(), &mut errors));
        report::print_realistic(&realistic, &settings);
        report::print_problems(&errors, &[exit]);
        return;
    }
    if only.is_none() || only.as_deref() == Some("profiles") {
        runtime.block_on(profiles::run(&settings, &client(), &llm)).print();
        if only.is_some() {
            return;
        }
    }
    if only.is_none() || only.as_deref() == Some("search") {
        runtime.block_on(search::run(settings.quick)).print();
    }
    if only.as_deref() != Some("search") && only.as_deref() != Some("none") {
        let scale = runtime.block_on(scale::run(&settings, &client(), &llm, ticks_per_second()));
        scale.print();
    }
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

/// `settings.runs` measured runs of one workload; the row holds their medians.
async fn measure_row(bench: &Bench<'_>, settings: &Settings, workload: Workload, errors: &mut Vec<String>) -> Row {
    let (sessions, pace, tag) = match workload {
        Workload::Closed(n) => (n, Pace::Closed, "closed"),
        Workload::Paced(n, every) => (n, Pace::Every(every), "paced"),
        Workload::Tool(n) => (n, Pace::Closed, "tool"),
        Workload::Realistic(n) => (n, Pace::Closed, "realistic"),
    };
    let mut runs: Vec<Metrics> = Vec::with_capacity(settings.runs);
    for run in 0..settings.runs {
        let messages = workload.messages(settings.messages);
        eprintln!("{tag}: {sessions} sessions × {messages} messages, run {}/{}…", run + 1, settings.runs);
        let label = format!("bench-{tag}-{sessions}-{run}-{}", uuid::Uuid::new_v4());
        let (metrics, error) = bench.measure(&label, sessions, messages, pace).await;
        errors.extend(error.map(|e| format!("{tag} {sessions} sessions, run {}: {e}", run + 1)));
        runs.push(metrics);
    }
    Row { workload, metrics: Metrics::median(&runs) }
}

/// The realistic rows, on a daemon of their own: a key, growing histories, paragraph answers
/// with usage.
async fn run_realistic(
    settings: &Settings,
    llm: &FakeLlm,
    client: &reqwest::Client,
    errors: &mut Vec<String>,
) -> (Vec<Row>, Exit) {
    llm.set_mode(Mode::Realistic);
    let traffic = Traffic::realistic();
    let (daemon, _) = Daemon::start_with_key(client, llm, "", traffic.key).await;
    eprintln!("realistic warm-up ({} turns)…", WARMUP_SESSIONS * TOOL_WARMUP_MESSAGES);
    let warmup = warm_up(client, &daemon, "real-warmup", WARMUP_SESSIONS, TOOL_WARMUP_MESSAGES, traffic).await;
    errors.extend(warmup.map(|e| format!("realistic warm-up: {e}")));
    let bench = Bench { client, daemon: &daemon, llm, ticks_per_s: ticks_per_second(), traffic };
    let mut rows = Vec::new();
    for sessions in REALISTIC {
        rows.push(measure_row(&bench, settings, Workload::Realistic(sessions), errors).await);
    }
    let (status, log) = daemon.stop().await;
    llm.set_mode(Mode::Plain);
    (rows, Exit { name: "realistic", status, log })
}

async fn run(settings: &Settings, llm: &FakeLlm) -> Report {
    let client = client();
    let ticks_per_s = ticks_per_second();
    eprintln!("timing start-to-ready ({READY_RUNS} fresh daemons)…");
    let ready_ms = ready_times(&client, llm).await;

    // The main daemon: closed-loop rows and the paced row.
    let (daemon, _) = Daemon::start(&client, llm).await;
    tokio::time::sleep(IDLE_SETTLE).await;
    let idle_rss_mb = status_mb(daemon.pid(), "VmRSS");
    eprintln!("warm-up ({} turns)…", WARMUP_SESSIONS * WARMUP_MESSAGES);
    let mut errors: Vec<String> = warm_up(&client, &daemon, "warmup", WARMUP_SESSIONS, WARMUP_MESSAGES, Traffic::LIGHT)
        .await
        .into_iter()
        .map(|e| format!("warm-up: {e}"))
        .collect();
    let bench = Bench { client: &client, daemon: &daemon, llm, ticks_per_s, traffic: Traffic::LIGHT };
    let workloads = [
        Workload::Closed(CLOSED[0]),
        Workload::Closed(CLOSED[1]),
        Workload::Paced(PACED_SESSIONS, PACED_EVERY),
        Workload::Closed(CLOSED[2]),
    ];
    let mut rows = Vec::new();
    for workload in workloads {
        rows.push(measure_row(&bench, settings, workload, &mut errors).await);
    }
    let threads = thread_ticks(daemon.pid())
        .into_iter()
        .map(|(name, ticks)| (name, ticks as f64 * 1000.0 / ticks_per_s))
        .collect();
    let (status, log) = daemon.stop().await;
    let mut exits = vec![Exit { name: "main", status, log }];

    // The tool-turn daemon: the fake LLM answers a tool call, then text.
    llm.set_mode(Mode::Tool);
    let (daemon, _) = Daemon::start(&client, llm).await;
    eprintln!("tool warm-up ({} turns)…", WARMUP_SESSIONS * TOOL_WARMUP_MESSAGES);
    let warmup = warm_up(&client, &daemon, "tool-warmup", WARMUP_SESSIONS, TOOL_WARMUP_MESSAGES, Traffic::LIGHT).await;
    errors.extend(warmup.map(|e| format!("tool warm-up: {e}")));
    let bench = Bench { client: &client, daemon: &daemon, llm, ticks_per_s, traffic: Traffic::LIGHT };
    rows.push(measure_row(&bench, settings, Workload::Tool(TOOL_SESSIONS), &mut errors).await);
    let (status, log) = daemon.stop().await;
    exits.push(Exit { name: "tool-turn", status, log });

    let (realistic, exit) = run_realistic(settings, llm, &client, &mut errors).await;
    exits.push(exit);

    eprintln!("compression: {} fresh {}-message session(s)…", settings.compress_runs, compress::MESSAGES);
    let compression = compress::run(settings.compress_runs).await;
    Report { ready_ms, idle_rss_mb, rows, realistic, threads, errors, exits, compression }
}
