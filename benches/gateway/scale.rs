//! Scale workloads: memory with 10,000 sessions alive at once and given back after they go idle,
//! and daemon CPU per message as distinct chats pile up to 100,000.
//!
//! Each runs `settings.runs` times (3; 1 in quick mode), every run on a daemon of its own; the
//! targets are judged on the medians of the runs' figures. Every session or chat is a distinct `X-Hermes-Session-Id` on the API: one session, one
//! actor, one outbox pacer (the API's replies are delivered through the chat's pacer like any
//! platform's). `HERMESD_BENCH_QUICK=1` shrinks both to a smoke test.

use std::time::Duration;

use futures_util::StreamExt;
use tokio::time::Instant;

use crate::Settings;
use crate::daemon::{Daemon, cpu_ticks, status_mb};
use crate::fake_llm::FakeLlm;
use crate::load::turn;

/// Requests in flight at once in both workloads.
const IN_FLIGHT: usize = 200;
/// RSS targets (MB): all sessions alive, after they exited, idle daemon.
const ALIVE_TARGET_MB: f64 = 60.0;
const AFTER_TARGET_MB: f64 = 30.0;
const IDLE_TARGET_MB: f64 = 20.0;
/// CPU per message after many chats ÷ after a few, at most.
const CPU_RATIO_TARGET: f64 = 1.2;

/// Sizes of the two workloads.
struct Plan {
    /// Sessions of the memory workload.
    sessions: usize,
    /// Their actors' idle time: long enough that all are alive when the last reply is in.
    session_idle: &'static str,
    /// How long RSS is watched after the last actor exited.
    watch_after: Duration,
    /// Distinct chats of the CPU workload in all.
    chats: usize,
    /// Chats seen before the first measured window.
    first_after: usize,
    /// Chats (one message each) per measured window.
    window: usize,
    /// Chats per step of the unmeasured middle (CPU per step is still printed).
    step: usize,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Self {
                sessions: 500,
                session_idle: "3s",
                watch_after: Duration::from_secs(5),
                chats: 3_000,
                first_after: 100,
                window: 500,
                step: 1_000,
            }
        } else {
            Self {
                sessions: 10_000,
                session_idle: "60s",
                watch_after: Duration::from_secs(120),
                chats: 100_000,
                first_after: 100,
                window: 5_000,
                step: 10_000,
            }
        }
    }
}

/// What the memory workload saw.
#[derive(Default)]
struct Memory {
    errors: usize,
    first_error: Option<String>,
    /// RSS of the fresh daemon, ready + 500 ms.
    idle_mb: f64,
    /// Highest VmRSS sampled (every 100 ms) while the sessions were sent.
    sampled_peak_mb: f64,
    /// VmHWM when the last reply was in.
    hwm_mb: f64,
    /// VmRSS when the last reply was in, and the actors alive then.
    alive_mb: f64,
    alive_actors: i64,
    send_s: f64,
    /// From the last reply until `hermesd_active_sessions` was 0; `None` if it never was.
    exit_after_s: Option<f64>,
    /// VmRSS samples (seconds after the last actor exited, MB).
    after: Vec<(f64, f64)>,
    /// `hermesd_allocator_bytes` idle, when the last reply was in, and at the end of the watch.
    alloc_idle: Option<Allocator>,
    alloc_alive: Option<Allocator>,
    alloc_after: Option<Allocator>,
}

/// The daemon's allocator figures (`hermesd_allocator_bytes`, MB): what the program holds, the
/// pages that uses, and what is resident (with freed pages not purged yet, and metadata).
#[derive(Clone, Copy)]
struct Allocator {
    allocated: f64,
    active: f64,
    resident: f64,
}

impl std::fmt::Display for Allocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.1} / {:.1} / {:.1}", self.allocated, self.active, self.resident)
    }
}

impl Memory {
    fn first_under(&self, mb: f64) -> Option<f64> {
        self.after.iter().find(|(_, rss)| *rss < mb).map(|(t, _)| *t)
    }

    fn last_after(&self) -> f64 {
        self.after.last().map_or(f64::NAN, |(_, rss)| *rss)
    }
}

/// What the CPU workload saw.
#[derive(Default)]
struct Chats {
    /// (chats seen before, chats in the step, daemon CPU ms per message) of every step.
    steps: Vec<(usize, usize, f64)>,
    errors: usize,
    first_error: Option<String>,
    total_s: f64,
    rss_end_mb: f64,
}

impl Chats {
    fn first(&self) -> f64 {
        self.steps.first().map_or(f64::NAN, |s| s.2)
    }

    fn last(&self) -> f64 {
        self.steps.last().map_or(f64::NAN, |s| s.2)
    }
}

/// Both workloads' results, one entry per run.
pub(crate) struct ScaleReport {
    plan: Plan,
    memory: Vec<Memory>,
    chats: Vec<Chats>,
}

/// The median of `values` (NaN for none); an even count takes the mean of the middle two.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Send one message each to sessions `<label>-<from>` … `<label>-<to - 1>`, `IN_FLIGHT` at once.
async fn send_range(
    client: &reqwest::Client,
    base: &str,
    label: &str,
    range: std::ops::Range<usize>,
) -> (usize, Option<String>) {
    let url = format!("{base}/v1/chat/completions");
    let results: Vec<_> = futures_util::stream::iter(range)
        .map(|n| {
            let (url, session) = (&url, format!("{label}-{n}"));
            async move { turn(client, url, &session, format!("hello from {n}")).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let mut errors = 0;
    let mut first = None;
    for result in results {
        if let Err(e) = result {
            errors += 1;
            first.get_or_insert(e);
        }
    }
    (errors, first)
}

/// `hermesd_active_sessions` from `/metrics` (actors alive); `None` if unreadable.
async fn active_sessions(client: &reqwest::Client, base: &str) -> Option<i64> {
    let text = client.get(format!("{base}/metrics")).send().await.ok()?.text().await.ok()?;
    text.lines().find_map(|l| l.strip_prefix("hermesd_active_sessions "))?.trim().parse().ok()
}

/// `hermesd_allocator_bytes` from `/metrics`; `None` when unreadable or not a jemalloc build.
async fn allocator(client: &reqwest::Client, base: &str) -> Option<Allocator> {
    let text = client.get(format!("{base}/metrics")).send().await.ok()?.text().await.ok()?;
    let kind = |kind: &str| {
        let prefix = format!("hermesd_allocator_bytes{{kind=\"{kind}\"}} ");
        text.lines().find_map(|l| l.strip_prefix(prefix.as_str())?.trim().parse::<f64>().ok()).map(|b| b / 1e6)
    };
    Some(Allocator { allocated: kind("allocated")?, active: kind("active")?, resident: kind("resident")? })
}

/// Run both workloads, each on a fresh daemon.
pub(crate) async fn run(settings: &Settings, client: &reqwest::Client, llm: &FakeLlm, ticks_per_s: f64) -> ScaleReport {
    let plan = Plan::new(settings.quick);
    // `HERMESD_BENCH_SCALE=memory` or `=chats` runs only that one.
    let only = std::env::var("HERMESD_BENCH_SCALE").unwrap_or_default();
    let (mut memory_runs, mut chats_runs) = (Vec::new(), Vec::new());
    for run in 1..=settings.runs {
        if only != "chats" {
            eprintln!("scale: memory run {run}/{}…", settings.runs);
            memory_runs.push(memory(&plan, client, llm).await);
        }
        if only != "memory" {
            eprintln!("scale: chats run {run}/{}…", settings.runs);
            chats_runs.push(chats(&plan, client, llm, ticks_per_s).await);
        }
    }
    ScaleReport { plan, memory: memory_runs, chats: chats_runs }
}

async fn memory(plan: &Plan, client: &reqwest::Client, llm: &FakeLlm) -> Memory {
    let extra = format!("session_idle = \"{}\"\n", plan.session_idle);
    let (daemon, _) = Daemon::start_with(client, llm, &extra).await;
    let pid = daemon.pid();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut memory = Memory { idle_mb: status_mb(pid, "VmRSS"), ..Memory::default() };
    memory.alloc_idle = allocator(client, &daemon.base).await;
    eprintln!("scale: {} sessions, one message each, {IN_FLIGHT} in flight…", plan.sessions);
    let started = Instant::now();
    let label = format!("mem-{}", uuid::Uuid::new_v4());
    let (errors, first_error) = {
        let send = send_range(client, &daemon.base, &label, 0..plan.sessions);
        tokio::pin!(send);
        let mut sample = tokio::time::interval(Duration::from_millis(100));
        loop {
            tokio::select! {
                done = &mut send => break done,
                _ = sample.tick() => memory.sampled_peak_mb = memory.sampled_peak_mb.max(status_mb(pid, "VmRSS")),
            }
        }
    };
    memory.send_s = started.elapsed().as_secs_f64();
    memory.alive_mb = status_mb(pid, "VmRSS");
    memory.sampled_peak_mb = memory.sampled_peak_mb.max(memory.alive_mb);
    memory.hwm_mb = status_mb(pid, "VmHWM");
    memory.alive_actors = active_sessions(client, &daemon.base).await.unwrap_or(-1);
    memory.alloc_alive = allocator(client, &daemon.base).await;
    (memory.errors, memory.first_error) = (errors, first_error);
    let last_reply = Instant::now();
    eprintln!("scale: waiting for the {} actors to go idle and exit…", memory.alive_actors);
    let give_up = last_reply + Duration::from_secs(600);
    while Instant::now() < give_up {
        if active_sessions(client, &daemon.base).await == Some(0) {
            memory.exit_after_s = Some(last_reply.elapsed().as_secs_f64());
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let exited = Instant::now();
    eprintln!("scale: watching RSS for {:?} after the last actor exited…", plan.watch_after);
    loop {
        let t = exited.elapsed();
        memory.after.push((t.as_secs_f64(), status_mb(pid, "VmRSS")));
        if t >= plan.watch_after {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    memory.alloc_after = allocator(client, &daemon.base).await;
    let (status, log) = daemon.stop().await;
    if !status.success() {
        eprintln!("warning: the memory daemon exited with {status}; its log:\n{log}");
    }
    memory
}

async fn chats(plan: &Plan, client: &reqwest::Client, llm: &FakeLlm, ticks_per_s: f64) -> Chats {
    let (daemon, _) = Daemon::start(client, llm).await;
    let pid = daemon.pid();
    let label = format!("chat-{}", uuid::Uuid::new_v4());
    let mut result = Chats::default();
    let started = Instant::now();
    let mut seen = 0;
    // The steps: warm-up, the first window, the middle in steps, the last window. Only the
    // warm-up goes unmeasured.
    let mut bounds = vec![plan.first_after, plan.first_after + plan.window];
    let last_from = plan.chats.saturating_sub(plan.window).max(plan.first_after + plan.window);
    let mut at = plan.first_after + plan.window;
    while at + plan.step < last_from {
        at += plan.step;
        bounds.push(at);
    }
    bounds.extend([last_from, last_from + plan.window]);
    bounds.dedup();
    for (i, end) in bounds.into_iter().enumerate() {
        let before = cpu_ticks(pid);
        let (errors, first_error) = send_range(client, &daemon.base, &label, seen..end).await;
        let ticks = cpu_ticks(pid) - before;
        result.errors += errors;
        if result.first_error.is_none() {
            result.first_error = first_error;
        }
        if i > 0 {
            let ms = ticks as f64 * 1000.0 / ticks_per_s / (end - seen) as f64;
            eprintln!(
                "scale: chats {seen}..{end}: {ms:.3} ms CPU per message ({:.0} s in)",
                started.elapsed().as_secs_f64()
            );
            result.steps.push((seen, end - seen, ms));
        }
        seen = end;
    }
    result.total_s = started.elapsed().as_secs_f64();
    result.rss_end_mb = status_mb(pid, "VmRSS");
    let (status, log) = daemon.stop().await;
    if !status.success() {
        eprintln!("warning: the chats daemon exited with {status}; its log:\n{log}");
    }
    result
}

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "MISS" }
}

impl ScaleReport {
    pub(crate) fn print(&self) {
        let runs = self.memory.len().max(self.chats.len());
        println!("### scale ({runs} run(s) of each, every run on a daemon of its own; targets judged on medians)\n");
        println!("| scale workload | run | figure | value | target |");
        println!("|---|---:|---|---:|---|");
        // A workload left out (`HERMESD_BENCH_SCALE=memory|chats`) has no rows.
        for (i, m) in self.memory.iter().enumerate() {
            self.memory_rows(i + 1, m);
        }
        for (i, c) in self.chats.iter().enumerate() {
            self.chats_rows(i + 1, c);
        }
        println!();
        if !self.memory.is_empty() {
            self.memory_targets();
        }
        if !self.chats.is_empty() {
            self.chats_target();
        }
        let errors = self.memory.iter().map(|m| &m.first_error).chain(self.chats.iter().map(|c| &c.first_error));
        for error in errors.flatten() {
            println!("warning: scale request error: {error}");
        }
        println!();
    }

    fn memory_rows(&self, run: usize, m: &Memory) {
        let p = &self.plan;
        let sessions = format!("{} sessions, 1 message each, {IN_FLIGHT} in flight", p.sessions);
        println!("| {sessions} | {run} | idle RSS before (MB) | {:.1} | < {IDLE_TARGET_MB} |", m.idle_mb);
        println!("| {sessions} | {run} | send time (s) | {:.1} | |", m.send_s);
        println!("| {sessions} | {run} | actors alive at the last reply | {} | {} |", m.alive_actors, p.sessions);
        println!("| {sessions} | {run} | RSS with all alive (MB) | {:.1} | < {ALIVE_TARGET_MB} |", m.alive_mb);
        println!(
            "| {sessions} | {run} | peak RSS sampled / VmHWM (MB) | {:.1} / {:.1} | < {ALIVE_TARGET_MB} |",
            m.sampled_peak_mb, m.hwm_mb
        );
        let exit = m.exit_after_s.map_or("never".to_owned(), |s| format!("{s:.1}"));
        println!(
            "| {sessions} | {run} | last actor exited, s after the last reply (idle {}) | {exit} | |",
            p.session_idle
        );
        let under = m.first_under(AFTER_TARGET_MB).map_or("never".to_owned(), |s| format!("{s:.0}"));
        println!("| {sessions} | {run} | first RSS < {AFTER_TARGET_MB} MB, s after exit | {under} | ≤ 120 |");
        let samples: Vec<String> = m
            .after
            .iter()
            .filter(|(t, _)| *t < 0.5 || [10.0, 30.0, 60.0, 90.0, 120.0].iter().any(|x| (t - x).abs() < 0.5))
            .map(|(t, rss)| format!("{t:.0} s: {rss:.1}"))
            .collect();
        println!("| {sessions} | {run} | RSS after exit (MB) | {} | |", samples.join(", "));
        let shown = |a: Option<Allocator>| a.map_or("n/a".to_owned(), |a| a.to_string());
        println!(
            "| {sessions} | {run} | allocator MB, allocated / active / resident: idle; all alive; end of watch | {}; {}; {} | |",
            shown(m.alloc_idle),
            shown(m.alloc_alive),
            shown(m.alloc_after)
        );
        println!("| {sessions} | {run} | errors | {} | 0 |", m.errors);
    }

    fn chats_rows(&self, run: usize, c: &Chats) {
        let chats = format!("{} distinct chats, 1 message each, {IN_FLIGHT} in flight", self.plan.chats);
        for (from, n, ms) in &c.steps {
            println!("| {chats} | {run} | CPU ms/message, chats {from}..{} | {ms:.3} | |", from + n);
        }
        println!("| {chats} | {run} | last ÷ first window | {:.2} | ≤ {CPU_RATIO_TARGET} |", c.last() / c.first());
        println!(
            "| {chats} | {run} | total time (s) / RSS at end (MB) | {:.0} / {:.1} | < 600 s |",
            c.total_s, c.rss_end_mb
        );
        println!("| {chats} | {run} | errors | {} | 0 |", c.errors);
    }

    fn memory_targets(&self) {
        let (p, runs) = (&self.plan, &self.memory);
        let of = |f: &dyn Fn(&Memory) -> f64| median(runs.iter().map(f).collect());
        let all_alive = runs.iter().all(|m| m.alive_actors == p.sessions as i64);
        let peak = of(&|m| m.sampled_peak_mb);
        println!(
            "- {}: RSS with {} sessions alive, median of {}: {:.1} MB (sampled peak {peak:.1}; target < {ALIVE_TARGET_MB} MB)",
            verdict(peak < ALIVE_TARGET_MB && all_alive),
            p.sessions,
            runs.len(),
            of(&|m| m.alive_mb),
        );
        // A run never under the target counts as the whole watch plus one second.
        let never = p.watch_after.as_secs_f64() + 1.0;
        let under = of(&|m| m.first_under(AFTER_TARGET_MB).unwrap_or(never));
        println!(
            "- {}: RSS {:.0} s after the last actor exited, median: {:.1} MB; first under {AFTER_TARGET_MB} MB after {} (target < {AFTER_TARGET_MB} MB within 120 s)",
            verdict(under <= 120.0),
            p.watch_after.as_secs_f64(),
            of(&|m| m.last_after()),
            if under > p.watch_after.as_secs_f64() { "never".to_owned() } else { format!("{under:.0} s") },
        );
        let idle = of(&|m| m.idle_mb);
        println!(
            "- {}: idle RSS of the default build, median: {idle:.1} MB (target < {IDLE_TARGET_MB} MB)",
            verdict(idle < IDLE_TARGET_MB),
        );
    }

    fn chats_target(&self) {
        let (p, runs) = (&self.plan, &self.chats);
        let ratio = median(runs.iter().map(|c| c.last() / c.first()).collect());
        let total = median(runs.iter().map(|c| c.total_s).collect());
        let seen = runs.first().and_then(|c| c.steps.last()).map_or(0, |s| s.0);
        println!(
            "- {}: CPU per message after {seen} chats ÷ after {}, median of {}: {:.3} / {:.3} ms = {ratio:.2} (target ≤ {CPU_RATIO_TARGET}; {} s in all, target < 600 s)",
            verdict(ratio <= CPU_RATIO_TARGET && total < 600.0),
            p.first_after,
            runs.len(),
            median(runs.iter().map(Chats::last).collect()),
            median(runs.iter().map(Chats::first).collect()),
            total.round()
        );
    }
}
