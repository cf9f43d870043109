//! One sample of the soaked daemon: RSS, open fds and threads from `/proc`, the gauges of
//! `/metrics` (tasks, actors, pacers, queue depth, turns running), `state.db` and its WAL, and
//! the driver's own counts (answers so far, chats and keys active lately). Written as CSV.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use super::daemon::{SESSION_IDLE, file_bytes, open_fds, status_field};
use super::load::Shared;

/// How long a pacer may outlive its chat's last use: twice `IDLE_PRUNE` (2 min, in
/// `src/outbox/pacer.rs`; an entry used just before its check waits one more) plus the 15 s
/// expiry tick.
pub const PACER_IDLE: Duration = Duration::from_secs(255);
/// Keys count as live for an actor this long after their last message or answer: the
/// actor's idle time plus a margin.
pub const ACTOR_WINDOW: Duration = Duration::from_secs(SESSION_IDLE.as_secs() + 20);

/// What the soak was doing when a sample was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Load on.
    Load,
    /// Load on and a fake down.
    Outage,
    /// Load off, waiting for the daemon to settle.
    Quiet,
    /// The end of a quiet window: what is judged against the baseline.
    QuietEnd,
    /// After the last cycle, waiting for the last answers.
    Drain,
}

impl Phase {
    fn label(self) -> &'static str {
        match self {
            Phase::Load => "load",
            Phase::Outage => "outage",
            Phase::Quiet => "quiet",
            Phase::QuietEnd => "quiet_end",
            Phase::Drain => "drain",
        }
    }
}

/// One row of the CSV.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Seconds since the start of the load.
    pub t: f64,
    /// What the soak was doing.
    pub phase: Phase,
    /// Resident set, MB.
    pub rss_mb: f64,
    /// Open file descriptors.
    pub fds: f64,
    /// OS threads.
    pub threads: f64,
    /// `hermesd_tasks`.
    pub tasks: Option<f64>,
    /// `hermesd_active_sessions` (session actors alive).
    pub actors: Option<f64>,
    /// `hermesd_pacers`.
    pub pacers: Option<f64>,
    /// `hermesd_queue_depth`.
    pub queue: Option<f64>,
    /// `hermesd_turns_running`.
    pub running: Option<f64>,
    /// `state.db` bytes.
    pub db_bytes: u64,
    /// `state.db-wal` bytes.
    pub wal_bytes: u64,
    /// Answers received so far.
    pub turns: u64,
    /// Chats used within `PACER_IDLE`.
    pub live_chats: u64,
    /// Session keys used within `ACTOR_WINDOW`.
    pub live_keys: u64,
}

/// Take a sample of the daemon `pid` living in `home`.
pub async fn take(client: &reqwest::Client, shared: &Shared, pid: u32, home: &Path, phase: Phase) -> Sample {
    let gauges = match client.get(format!("{}/metrics", shared.base)).timeout(Duration::from_secs(5)).send().await {
        Ok(response) => response.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    let gauge = |name: &str| {
        gauges.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse::<f64>().ok())
    };
    let (live_chats, live_keys) = {
        let activity = shared.activity.lock().expect("activity lock");
        (activity.since(PACER_IDLE) as u64, activity.since(ACTOR_WINDOW) as u64)
    };
    Sample {
        t: shared.now_s(),
        phase,
        rss_mb: status_field(pid, "VmRSS").unwrap_or(f64::NAN),
        fds: open_fds(pid).map_or(f64::NAN, |n| n as f64),
        threads: status_field(pid, "Threads").unwrap_or(f64::NAN),
        tasks: gauge("hermesd_tasks"),
        actors: gauge("hermesd_active_sessions"),
        pacers: gauge("hermesd_pacers"),
        queue: gauge("hermesd_queue_depth"),
        running: gauge("hermesd_turns_running"),
        db_bytes: file_bytes(home, "state.db"),
        wal_bytes: file_bytes(home, "state.db-wal"),
        turns: shared.tally.lock().expect("tally lock").turns(),
        live_chats,
        live_keys,
    }
}

/// The samples as CSV, one row each, with a header.
pub fn csv(samples: &[Sample]) -> String {
    let mut out = String::from(
        "t_s,phase,rss_mb,fds,threads,tasks,actors,pacers,queue_depth,turns_running,db_bytes,wal_bytes,turns,live_chats_10m,live_keys\n",
    );
    let opt = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v}"));
    for s in samples {
        let _ = writeln!(
            out,
            "{:.1},{},{:.1},{},{},{},{},{},{},{},{},{},{},{},{}",
            s.t,
            s.phase.label(),
            s.rss_mb,
            s.fds,
            s.threads,
            opt(s.tasks),
            opt(s.actors),
            opt(s.pacers),
            opt(s.queue),
            opt(s.running),
            s.db_bytes,
            s.wal_bytes,
            s.turns,
            s.live_chats,
            s.live_keys
        );
    }
    out
}
