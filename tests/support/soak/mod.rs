//! The soak driver shared by `benches/soak.rs` (an hour, release binary) and `tests/soak.rs`
//! (three minutes, debug binary): the real `hermesd` under mixed load — API sessions,
//! Telegram DMs through the fake Bot API, cron jobs every minute, signed webhooks — in cycles of
//! load and quiet, with both fakes going away for a while in every cycle (their ports refuse
//! and open connections are cut, then they come back on the same port). Sampled every few
//! seconds into a CSV and judged against flat-line criteria (`verdict.rs`).
//!
//! Cycle: load on → at `outage_at` both fakes down for `outage` → load off for `quiet` (an
//! operator's `hermesd sessions prune --older-than 10m` runs) → a quiet point is sampled. Cron
//! jobs fire at a fixed second 10 s after each cycle's start, so a quiet point never falls
//! within an actor's lifetime of a cron run.

pub mod daemon;
pub mod gate;
pub mod load;
pub mod report;
pub mod sample;
pub mod tally;
pub mod verdict;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Timelike;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::fake_llm::FakeLlm;
use crate::fake_telegram::{Chat, FakeTelegram, Incoming, User};
use daemon::{Daemon, TOKEN, Wiring};
use load::{Rates, Shared};
use sample::{Phase, Sample};
use verdict::{Answers, Check, Limits};

/// The webhook route's target chat; cron job `j` delivers to `CRON_CHAT + j`.
const WEBHOOK_CHAT: i64 = 499_999;
const CRON_CHAT: i64 = 499_000;
/// Longest wait after the last cycle for answers still on their way.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(90);
/// Sessions idle this long are pruned by the operator's command every cycle.
const PRUNE_OLDER_THAN: &str = "10m";

/// One soak run's shape.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Load and quiet cycles in all (rounded to whole cycles, at least 2).
    pub duration: Duration,
    /// Time between periodic samples.
    pub sample_every: Duration,
    /// One cycle: load, then quiet.
    pub cycle: Duration,
    /// The quiet end of each cycle.
    pub quiet: Duration,
    /// When in each cycle the fakes go away…
    pub outage_at: Duration,
    /// …and for how long.
    pub outage: Duration,
    /// Fake model latency per answer.
    pub model_latency: Duration,
    /// The load.
    pub rates: Rates,
    /// Cron jobs (each every minute).
    pub cron_jobs: usize,
    /// The criteria's margins.
    pub limits: Limits,
    /// Where the CSV goes.
    pub csv: PathBuf,
}

impl Plan {
    /// The bench's form: `HERMESD_SOAK_SECS` (default 3600) of ~30 turns/s on the release
    /// binary, 10 s samples, 3-minute cycles (150 s load with a 10 s outage, 30 s quiet).
    pub fn hour() -> Self {
        let secs = std::env::var("HERMESD_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3600);
        Self {
            duration: Duration::from_secs(secs),
            sample_every: Duration::from_secs(10),
            cycle: Duration::from_secs(180),
            quiet: Duration::from_secs(30),
            outage_at: Duration::from_secs(60),
            outage: Duration::from_secs(10),
            model_latency: Duration::from_millis(20),
            rates: Rates {
                api_per_s: 20.0,
                api_population: 60,
                api_rotate: Duration::from_millis(500),
                api_stream_every: 5,
                tg_per_s: 8.0,
                tg_population: 80,
                tg_rotate: Duration::from_secs(1),
                tg_gap: Duration::from_secs(3),
                webhook_per_s: 0.5,
            },
            cron_jobs: 3,
            limits: Limits { cron_jobs: 3, ..Limits::default() },
            csv: daemon::csv_path(),
        }
    }

    /// The CI form: 180 s (three 60 s cycles: 35 s load with a 10 s outage, 25 s quiet), 5 s
    /// samples, ~5 turns/s — far from what the debug binary can do.
    pub fn ci() -> Self {
        Self {
            duration: Duration::from_secs(180),
            sample_every: Duration::from_secs(5),
            cycle: Duration::from_secs(60),
            quiet: Duration::from_secs(25),
            outage_at: Duration::from_secs(10),
            outage: Duration::from_secs(10),
            model_latency: Duration::from_millis(10),
            rates: Rates {
                api_per_s: 3.0,
                api_population: 20,
                api_rotate: Duration::from_secs(1),
                api_stream_every: 5,
                tg_per_s: 2.0,
                tg_population: 20,
                tg_rotate: Duration::from_secs(2),
                tg_gap: Duration::from_secs(3),
                webhook_per_s: 0.25,
            },
            cron_jobs: 2,
            // CI machines are shared: latency may wobble more than on a quiet bench machine.
            limits: Limits { cron_jobs: 2, latency_ratio: 3.0, latency_slack_s: 0.5, ..Limits::default() },
            csv: daemon::csv_path(),
        }
    }

    fn cycles(&self) -> u32 {
        let n = (self.duration.as_secs_f64() / self.cycle.as_secs_f64()).round();
        (n as u32).max(2)
    }
}

/// What a run produced.
pub struct Outcome {
    /// Every sample, in order.
    pub samples: Vec<Sample>,
    /// The criteria.
    pub checks: Vec<Check>,
    /// The answer counts.
    pub answers: Answers,
    /// The printable report.
    pub report: String,
}

impl Outcome {
    /// Whether every criterion passed.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.pass)
    }
}

fn addr_of(url: &str) -> SocketAddr {
    let host = url.trim_start_matches("http://").split('/').next().expect("a host in the fake's URL");
    host.parse().expect("the fake listens on an IP address")
}

/// Run the soak described by `plan`.
pub async fn run(plan: &Plan) -> Outcome {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The daemon closes a keep-alive connection after `http.header_read_timeout` (10 s) of
    // silence; a client that reuses one at that very moment sends into a closed socket (the
    // likely cause of the one request in 56,550 that failed at once, with no answer, in an
    // hour's run). Dropping idle connections well before the server does keeps that client-side
    // race out of the daemon's verdict.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(8)
        .pool_idle_timeout(Duration::from_secs(5))
        .no_proxy()
        .build()
        .expect("build the soak's HTTP client");
    let llm = FakeLlm::builder().forget_requests().latency(plan.model_latency).start().await;
    let tg = FakeTelegram::builder().token(TOKEN).start().await;
    // The webhook's and the cron jobs' target chats exist on the fake (Telegram refuses sends
    // to chats it does not know); building an update registers a chat without queueing it.
    for chat in std::iter::once(WEBHOOK_CHAT).chain((0..plan.cron_jobs as i64).map(|j| CRON_CHAT + j)) {
        let user = User::new(chat, "Ops");
        let _ = tg.build(Incoming::text(&Chat::private(&user), &user, "hello"));
    }
    let mut llm_gate = gate::Gate::open(addr_of(&llm.base_url())).await;
    let mut tg_gate = gate::Gate::open(addr_of(&tg.base_url())).await;
    let llm_url = format!("{}/v1", llm_gate.url());
    let tg_url = tg_gate.url();
    let wiring = Wiring { llm_url: &llm_url, telegram_url: &tg_url, webhook_chat: WEBHOOK_CHAT };
    let mut daemon = Daemon::start(&client, &wiring).await;
    let shared = Shared::new(daemon.base.clone(), WEBHOOK_CHAT, plan.cron_jobs);
    let cron_created = add_cron_jobs(&daemon, plan.cron_jobs).await;

    let samples = Arc::new(Mutex::new(Vec::new()));
    let (phase_tx, phase_rx) = watch::channel(Phase::Load);
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    tasks.spawn(sampler(
        client.clone(),
        shared.clone(),
        daemon.pid(),
        daemon.home().to_owned(),
        plan.sample_every,
        phase_rx,
        samples.clone(),
        cancel.clone(),
    ));
    load::spawn(&mut tasks, &shared, &plan.rates, &client, &tg, &cancel);
    let cycles = plan.cycles();
    eprintln!("soak: {cycles} cycles of {:?} against {} (pid {})", plan.cycle, daemon.base, daemon.pid());

    for cycle in 0..cycles {
        let cycle_start = shared.start + plan.cycle * cycle;
        shared.load_on.store(true, Ordering::Relaxed);
        phase_tx.send_replace(Phase::Load);
        tokio::time::sleep_until((cycle_start + plan.outage_at).into()).await;
        shared.outage.store(true, Ordering::Relaxed);
        phase_tx.send_replace(Phase::Outage);
        tokio::join!(llm_gate.go_down(), tg_gate.go_down());
        tokio::time::sleep(plan.outage).await;
        tokio::join!(llm_gate.come_back(), tg_gate.come_back());
        shared.outage.store(false, Ordering::Relaxed);
        phase_tx.send_replace(Phase::Load);
        tokio::time::sleep_until((cycle_start + plan.cycle - plan.quiet).into()).await;
        shared.load_on.store(false, Ordering::Relaxed);
        phase_tx.send_replace(Phase::Quiet);
        let (ok, out) = daemon.cli(&["sessions", "prune", "--older-than", PRUNE_OLDER_THAN]).await;
        if !ok {
            shared.tally.lock().expect("tally lock").note(format!("sessions prune failed: {out}"));
        }
        tokio::time::sleep_until((cycle_start + plan.cycle).into()).await;
        let quiet = sample::take(&client, &shared, daemon.pid(), daemon.home(), Phase::QuietEnd).await;
        eprintln!(
            "soak: cycle {}/{cycles} quiet point: rss {:.1} MB, fds {}, threads {}, tasks {:?}, actors {:?}, pacers {:?}, answers {}",
            cycle + 1,
            quiet.rss_mb,
            quiet.fds,
            quiet.threads,
            quiet.tasks,
            quiet.actors,
            quiet.pacers,
            quiet.turns
        );
        samples.lock().expect("samples lock").push(quiet);
        if daemon.exited().is_some() {
            break;
        }
    }

    phase_tx.send_replace(Phase::Drain);
    let drain_until = Instant::now() + DRAIN_TIMEOUT;
    while Instant::now() < drain_until && daemon.exited().is_none() {
        load::absorb_once(&shared, &tg);
        if shared.tally.lock().expect("tally lock").settled() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // A duplicate needs a moment to show up after the last first reply.
    tokio::time::sleep(Duration::from_secs(2)).await;
    load::absorb_once(&shared, &tg);
    let last = sample::take(&client, &shared, daemon.pid(), daemon.home(), Phase::Drain).await;
    samples.lock().expect("samples lock").push(last);
    cancel.cancel();
    while tasks.join_next().await.is_some() {}

    let alive = daemon.exited().is_none();
    let (status, stop_took) = daemon.stop().await;
    let log = daemon.log();
    let errors = daemon::error_lines(&log);
    let samples = std::mem::take(&mut *samples.lock().expect("samples lock"));
    let answers = answers(&shared, plan, cron_created, &errors, alive && status.is_some_and(|s| s.success()));
    let checks = verdict::judge(&samples, &answers, &plan.limits);
    std::fs::write(&plan.csv, sample::csv(&samples)).unwrap_or_else(|e| panic!("write {}: {e}", plan.csv.display()));
    let notes = shared.tally.lock().expect("tally lock").samples.clone();
    let report = report::render(&report::Inputs {
        plan,
        samples: &samples,
        answers: &answers,
        checks: &checks,
        notes: &notes,
        errors: &errors,
        stop_took,
        status,
        log_tail: if alive { "" } else { log.get(log.len().saturating_sub(4000)..).unwrap_or("") },
    });
    Outcome { samples, checks, answers, report }
}

/// Create the cron jobs through the CLI: every minute at the second 10 s from now, each to
/// its own chat. Returns when they were created.
async fn add_cron_jobs(daemon: &Daemon, jobs: usize) -> chrono::DateTime<chrono::Utc> {
    let created = chrono::Utc::now();
    let second = (created.second() + 10) % 60;
    for job in 0..jobs {
        let schedule = format!("{second} * * * * *");
        let chat = format!("telegram:{}", CRON_CHAT + job as i64);
        let prompt = format!("soak cron job {job}");
        let name = format!("soak-{job}");
        let (ok, out) = daemon.cli(&["cron", "add", &schedule, &prompt, "--name", &name, "--deliver", &chat]).await;
        assert!(ok, "hermesd cron add failed: {out}");
    }
    created
}

/// Occurrences of the jobs' second from just after `from` up to `to`.
fn fires(from: chrono::DateTime<chrono::Utc>, to: chrono::DateTime<chrono::Utc>) -> u32 {
    let first = from + chrono::Duration::seconds(10);
    if to < first { 0 } else { u32::try_from((to - first).num_seconds() / 60 + 1).unwrap_or(u32::MAX) }
}

fn answers(
    shared: &Shared,
    plan: &Plan,
    cron_created: chrono::DateTime<chrono::Utc>,
    errors: &[String],
    clean: bool,
) -> Answers {
    let tally = shared.tally.lock().expect("tally lock");
    let now = chrono::Utc::now();
    // A fire in the last 20 s (tick, turn, delivery) may not have arrived yet; a fire the
    // cron add raced with may be the next minute's.
    let most = fires(cron_created, now);
    let least = fires(cron_created, now - chrono::Duration::seconds(20)).saturating_sub(1);
    Answers {
        api_sent: tally.api_sent,
        api_ok: tally.api_ok,
        api_wrong: tally.api_wrong,
        api_failed: tally.api_failed,
        api_latency: tally.api_latency.clone(),
        tg_sent: tally.tg_sent,
        tg_lost: tally.tg_lost(),
        tg_duplicated: tally.tg_duplicated(),
        wh_accepted: tally.wh_accepted,
        wh_refused: tally.wh_refused,
        wh_lost: tally.wh_lost(),
        wh_duplicated: tally.wh_duplicated(),
        wh_repeats: tally.wh_repeats,
        wh_repeats_run: tally.wh_repeats_run,
        cron: tally.cron.iter().map(|&got| (got, least, most)).take(plan.cron_jobs).collect(),
        error_lines: errors.len(),
        clean_exit: clean,
    }
}

/// Sample every `every` until `cancel`, tagging each with the current phase.
#[allow(clippy::too_many_arguments)]
async fn sampler(
    client: reqwest::Client,
    shared: Arc<Shared>,
    pid: u32,
    home: PathBuf,
    every: Duration,
    phase: watch::Receiver<Phase>,
    samples: Arc<Mutex<Vec<Sample>>>,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = cancel.cancelled() => break,
        }
        let current = *phase.borrow();
        let sample = sample::take(&client, &shared, pid, &home, current).await;
        samples.lock().expect("samples lock").push(sample);
    }
}
