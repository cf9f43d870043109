//! Retention benchmark: 30 simulated days of steady traffic through the real SQLite store with
//! every retention age at 3 days, proving the database stops growing once retention bites.
//!
//! The store is driven directly with a simulated clock (every store method takes `now`): per
//! turn an inbound event is accepted, its turn begun (user message) and finished (assistant
//! message + one reply chunk), and the chunk marked sent. Traffic: `REGULARS` chats that talk
//! every day (a fresh session every `RESET_EVERY_DAYS`, as a daily/idle reset or `/new` does)
//! and one-off chats that appear for one day only; a session is compacted (all but the newest
//! `KEEP_LIVE` live messages archived behind a summary) when it reaches `COMPACT_AT` live
//! messages. Every simulated hour the retention round runs as `src/retention.rs` does it
//! (finished inbound events, sent outbound rows and archived messages older than 3 days, in
//! batches of `retention::BATCH`, then `PRAGMA incremental_vacuum`); once a day
//! `sessions prune --older-than 3d` runs (batches of 10 sessions, as the CLI does). While
//! pruning runs, a probe writes a tiny row every millisecond (real time) and records how long
//! its write waited: the writer stall a live gateway would see.
//!
//! Printed per day: DB file size (+ WAL), rows per table, FTS index size, prune batches with
//! their median/max time, the longest `sessions prune` batch, the longest `reclaim_space` (FTS
//! merge steps + incremental vacuum), and the longest writer stall. Then PASS/FAIL for
//! "day 30 size ≤ 1.5 × day 4" (exit code 1 on FAIL).
//!
//! ```text
//! CARGO_TARGET_DIR=$HOME/.cache/hermesd-target cargo bench --bench retention
//! ```
//!
//! `HERMESD_BENCH_TURNS` sets the total turns (default 200,000 over 30 days, i.e. ~6,700 a day);
//! `HERMESD_BENCH_DAYS` the number of days (default 30, at least 5).

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hermesd::store::{
    AcceptOutcome, Compaction, EventState, InboundStore, OutboxStore, Outlive, RetentionStore, SessionKey,
    SessionStore, SqliteStore, TurnEnd,
};
use hermesd::vocab::message::{Message, Role};
use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, OutboundKind, OutboundMessage, Sender};

const DAY_MS: i64 = 86_400_000;
const HOUR_MS: i64 = 3_600_000;
/// Every retention age (inbound, outbound, archived messages, sessions).
const RETENTION_MS: i64 = 3 * DAY_MS;
/// Chats that talk every day.
const REGULARS: usize = 300;
/// Share of each day's turns from one-off chats (new that day, never seen again), in percent.
const ONE_OFF_PERCENT: usize = 20;
/// Turns per one-off chat.
const ONE_OFF_TURNS: usize = 4;
/// A regular chat starts a fresh session every this many days.
const RESET_EVERY_DAYS: usize = 4;
/// Live messages at which a session is compacted.
const COMPACT_AT: usize = 24;
/// Live messages kept (after the summary) by a compaction.
const KEEP_LIVE: usize = 8;
/// Sessions per `prune_sessions` call, as `hermesd sessions prune` does.
const SESSION_BATCH: u32 = 10;
/// Pages returned per retention round, as `src/retention.rs` does.
const RECLAIM_PAGES: u32 = 16_384;

/// A small deterministic generator (no dependency, same text every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const WORDS: &[&str] = &[
    "invoice", "meeting", "deploy", "kayak", "budget", "server", "tomorrow", "report", "draft", "travel", "ticket",
    "review", "garden", "recipe", "python", "rust", "database", "backup", "holiday", "train", "flight", "doctor",
    "schedule", "project", "release", "customer", "contract", "weather", "music", "lesson", "family", "dinner",
    "update", "please", "thanks", "could", "would", "should", "the", "and", "with", "about", "for", "this", "that",
    "what", "when", "where", "which", "number", "price", "order", "delivery", "address", "password", "account",
];

fn text(rng: &mut Lcg, words: usize) -> String {
    let mut out = String::new();
    for i in 0..words {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(WORDS[rng.below(WORDS.len())]);
        if rng.below(12) == 0 {
            out.push_str(&format!(" {}", rng.next() % 100_000));
        }
    }
    out
}

fn chat_key(chat: &str) -> SessionKey {
    SessionKey {
        key: format!("agent:main:telegram:dm:{chat}"),
        platform: "telegram".into(),
        chat_id: chat.into(),
        chat_type: ChatType::Dm,
        thread_id: None,
        user_id: None,
    }
}

fn event(id: u64, chat: &str, text: String, now: i64) -> InboundEvent {
    InboundEvent::Message {
        event_id: format!("u{id}"),
        message: InboundMessage {
            profile: None,
            message_id: id.to_string(),
            chat: ChatRef::new("telegram", chat, ChatType::Dm),
            sender: Sender { id: chat.into(), name: None, is_bot: false, roles: Vec::new() },
            text,
            attachments: vec![],
            reply_to: None,
            addressed: true,
            timestamp_ms: now,
            history: vec![],
            chat_title: None,
            client: None,
        },
    }
}

/// What the bench remembers of a chat's current session.
struct Live {
    session_id: String,
    live_messages: usize,
    /// The day its reset cycle began (staggered per chat, so resets spread over the days).
    started_day: i64,
}

struct Traffic {
    store: SqliteStore,
    rng: Lcg,
    next_event: u64,
    sessions: HashMap<String, Live>,
}

impl Traffic {
    /// One turn of `chat` at `now`.
    async fn turn(&mut self, chat: &str, day: usize, now: i64) -> Result<(), String> {
        let day = day as i64;
        let cycle = RESET_EVERY_DAYS as i64;
        let reset = self.sessions.get(chat).is_some_and(|live| day >= live.started_day + cycle);
        if reset || !self.sessions.contains_key(chat) {
            let session = self.store.start_session(&chat_key(chat), now).await.map_err(|e| e.to_string())?;
            let stagger = if reset { 0 } else { chat.bytes().map(i64::from).sum::<i64>() % cycle };
            let live = Live { session_id: session.id, live_messages: 0, started_day: day - stagger };
            self.sessions.insert(chat.to_owned(), live);
        }
        self.next_event += 1;
        let words = 12 + self.rng.below(20);
        let said = text(&mut self.rng, words);
        let AcceptOutcome::New { seq } = self
            .store
            .accept_inbound(&event(self.next_event, chat, said.clone(), now), now, Outlive::PowerCut)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Err("a fresh event id was a duplicate".into());
        };
        let live = self.sessions.get_mut(chat).expect("inserted above");
        let session_id = live.session_id.clone();
        self.store
            .begin_turn(seq, &session_id, &Message::text(Role::User, said), now)
            .await
            .map_err(|e| e.to_string())?;
        let words = 40 + self.rng.below(80);
        let answer = text(&mut self.rng, words);
        let reply = OutboundMessage {
            chat: ChatRef::new("telegram", chat, ChatType::Dm),
            text: answer.clone(),
            reply_to: None,
            kind: OutboundKind::Reply,
            buttons: vec![],
            chunk: (0, 1),
            file: None,
        };
        let end = TurnEnd {
            messages: &[Message::text(Role::Assistant, answer)],
            reply: std::slice::from_ref(&reply),
            state: EventState::Done,
            error: None,
            prompt_tokens: Some(2_000),
            also_done: &[],
            usage: Default::default(),
        };
        let chunks = self.store.finish_turn(seq, &session_id, &end, now + 1_500).await.map_err(|e| e.to_string())?;
        for id in chunks {
            self.store.mark_sent(id, "tg-1", now + 1_800, Outlive::PowerCut).await.map_err(|e| e.to_string())?;
        }
        live.live_messages += 2;
        if live.live_messages >= COMPACT_AT {
            let transcript = self.store.load_transcript(&session_id).await.map_err(|e| e.to_string())?;
            let cut = transcript.len().saturating_sub(KEEP_LIVE);
            if cut >= 2 {
                let summary = Message::text(Role::User, format!("[summary] {}", text(&mut self.rng, 60)));
                let compaction = Compaction {
                    from: transcript[0].position,
                    to: transcript[cut - 1].position,
                    summary: &summary,
                    system_prompt: "You are the bench agent.",
                };
                self.store.compact(&session_id, &compaction, now + 2_000).await.map_err(|e| e.to_string())?;
                live.live_messages = KEEP_LIVE + 1;
            }
        }
        Ok(())
    }
}

/// Prune timings of one day.
#[derive(Default)]
struct PruneStats {
    batches: Vec<Duration>,
    /// Longest `prune_sessions` batch (the daily `sessions prune`).
    session_batch: Duration,
    /// Longest `reclaim_space` (FTS merge steps + incremental vacuum).
    reclaim: Duration,
    stall: Duration,
    deleted: u64,
}

/// Run `prune(limit)` until it deletes fewer than `limit` rows, timing each call.
async fn batches<F, Fut>(stats: &mut PruneStats, limit: u32, mut prune: F) -> Result<(), String>
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = hermesd::store::StoreResult<u64>>,
{
    loop {
        let started = Instant::now();
        let n = prune(limit).await.map_err(|e| e.to_string())?;
        stats.batches.push(started.elapsed());
        stats.deleted += n;
        if n < u64::from(limit) {
            return Ok(());
        }
        tokio::task::yield_now().await;
    }
}

/// A writer that saves a cursor every millisecond while pruning runs, keeping its longest wait.
struct Probe {
    running: Arc<AtomicBool>,
    longest_us: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Probe {
    fn start(store: &SqliteStore, now: i64) -> Self {
        let running = Arc::new(AtomicBool::new(true));
        let longest_us = Arc::new(AtomicU64::new(0));
        let (store, flag, longest) = (store.clone(), running.clone(), longest_us.clone());
        let task = tokio::spawn(async move {
            let mut n = 0u64;
            while flag.load(Ordering::Relaxed) {
                n += 1;
                let started = Instant::now();
                if store.save_cursor("bench-probe", &n.to_string(), now, None).await.is_err() {
                    return;
                }
                let waited = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                longest.fetch_max(waited, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        Self { running, longest_us, task }
    }

    async fn stop(self) -> Duration {
        self.running.store(false, Ordering::Relaxed);
        let _ = self.task.await;
        Duration::from_micros(self.longest_us.load(Ordering::Relaxed))
    }
}

/// The hourly retention round of `src/retention.rs`, at simulated time `now`.
async fn retention_round(store: &SqliteStore, now: i64, stats: &mut PruneStats) -> Result<(), String> {
    let before = now - RETENTION_MS;
    let probe = Probe::start(store, now);
    let deleted = stats.deleted;
    let batch = hermesd::retention::BATCH;
    batches(stats, batch, |limit| store.prune_inbound(before, limit)).await?;
    batches(stats, batch, |limit| store.prune_outbound(before, limit)).await?;
    batches(stats, batch, |limit| store.prune_archived_messages(before, limit)).await?;
    if stats.deleted > deleted {
        reclaim(store, stats).await?;
    }
    stats.stall = stats.stall.max(probe.stop().await);
    Ok(())
}

/// `reclaim_space` as the retention round calls it, timed.
async fn reclaim(store: &SqliteStore, stats: &mut PruneStats) -> Result<(), String> {
    let started = Instant::now();
    store.reclaim_space(RECLAIM_PAGES).await.map_err(|e| e.to_string())?;
    stats.reclaim = stats.reclaim.max(started.elapsed());
    Ok(())
}

/// The daily `hermesd sessions prune --older-than 3d`, then the space given back.
async fn prune_sessions(store: &SqliteStore, now: i64, stats: &mut PruneStats) -> Result<(), String> {
    let probe = Probe::start(store, now);
    let mut sessions = PruneStats::default();
    batches(&mut sessions, SESSION_BATCH, |limit| store.prune_sessions(now - RETENTION_MS, limit)).await?;
    stats.session_batch = sessions.batches.iter().copied().max().unwrap_or_default();
    stats.batches.extend(sessions.batches);
    reclaim(store, stats).await?;
    stats.stall = stats.stall.max(probe.stop().await);
    Ok(())
}

/// One day's line of the table.
struct DayRow {
    day: usize,
    db_bytes: u64,
    wal_bytes: u64,
    counts: Vec<i64>,
    fts_bytes: i64,
    batches: usize,
    median: Duration,
    max: Duration,
    session_batch: Duration,
    reclaim: Duration,
    stall: Duration,
    traffic: Duration,
}

const TABLES: [(&str, &str); 6] = [
    ("sessions", "SELECT COUNT(*) FROM sessions"),
    ("live", "SELECT COUNT(*) FROM messages WHERE archived = 0"),
    ("archived", "SELECT COUNT(*) FROM messages WHERE archived = 1"),
    ("inbound", "SELECT COUNT(*) FROM inbound_events"),
    ("outbound", "SELECT COUNT(*) FROM outbound_messages"),
    ("routes", "SELECT COUNT(*) FROM session_routes"),
];

/// Row counts and the FTS index size, read over a separate read-only connection (measurement
/// only; the gateway's own code never reads SQL outside the store).
async fn measure(path: &Path) -> Result<(Vec<i64>, i64), String> {
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path).read_only(true);
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .map_err(|e| e.to_string())?;
    let mut counts = Vec::new();
    for (_, sql) in TABLES {
        let (n,): (i64,) = sqlx::query_as(sql).fetch_one(&pool).await.map_err(|e| e.to_string())?;
        counts.push(n);
    }
    let (fts,): (i64,) = sqlx::query_as(
        "SELECT COALESCE(SUM(LENGTH(block)), 0) FROM (SELECT block FROM messages_fts_data \
         UNION ALL SELECT block FROM messages_fts_trigram_data)",
    )
    .fetch_one(&pool)
    .await
    .map_err(|e| e.to_string())?;
    pool.close().await;
    Ok((counts, fts))
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn print_header() {
    let tables: Vec<String> = TABLES.iter().map(|(name, _)| format!("{name:>9}")).collect();
    println!(
        "{:>3} {:>9} {:>8} {} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "day",
        "db MiB",
        "wal MiB",
        tables.join(" "),
        "fts MiB",
        "batches",
        "med ms",
        "max ms",
        "sess ms",
        "reclm ms",
        "stall ms",
        "turns s"
    );
}

fn print_row(row: &DayRow) {
    let counts: Vec<String> = row.counts.iter().map(|n| format!("{n:>9}")).collect();
    println!(
        "{:>3} {:>9.2} {:>8.2} {} {:>8.2} {:>7} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>8.1}",
        row.day,
        mib(row.db_bytes),
        mib(row.wal_bytes),
        counts.join(" "),
        mib(u64::try_from(row.fts_bytes).unwrap_or(0)),
        row.batches,
        ms(row.median),
        ms(row.max),
        ms(row.session_batch),
        ms(row.reclaim),
        ms(row.stall),
        row.traffic.as_secs_f64()
    );
}

async fn run() -> Result<bool, String> {
    let total = env_usize("HERMESD_BENCH_TURNS", 200_000);
    let days = env_usize("HERMESD_BENCH_DAYS", 30).max(5);
    let per_day = (total / days).max(REGULARS);
    let home = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = home.path().join("state.db");
    let wal = home.path().join("state.db-wal");
    let store = SqliteStore::open(&path, Duration::from_secs(5), 2).await.map_err(|e| e.to_string())?;
    println!(
        "retention bench: {days} days × {per_day} turns ({REGULARS} daily chats, {ONE_OFF_PERCENT}% one-off chats), \
         every retention age 3 days, retention round hourly, sessions prune daily"
    );
    print_header();
    let start = 1_767_225_600_000_i64; // 2026-01-01, a Thursday
    let mut traffic = Traffic { store: store.clone(), rng: Lcg(15), next_event: 0, sessions: HashMap::new() };
    let mut rows = Vec::new();
    let one_off_per_day = per_day * ONE_OFF_PERCENT / 100;
    for day in 0..days {
        let day_start = start + day as i64 * DAY_MS;
        // Turns in a fixed random order over the day: regular chats round-robin, one-off chats
        // in runs of `ONE_OFF_TURNS`.
        let mut plan: Vec<String> = (0..per_day - one_off_per_day).map(|i| format!("r{}", i % REGULARS)).collect();
        plan.extend((0..one_off_per_day).map(|i| format!("o{day}-{}", i / ONE_OFF_TURNS)));
        for i in (1..plan.len()).rev() {
            let j = traffic.rng.below(i + 1);
            plan.swap(i, j);
        }
        let mut stats = PruneStats::default();
        let mut busy = Duration::ZERO;
        let per_hour = plan.len().div_ceil(24);
        for (hour, chunk) in plan.chunks(per_hour).enumerate() {
            let hour_start = day_start + hour as i64 * HOUR_MS;
            let started = Instant::now();
            for (i, chat) in chunk.iter().enumerate() {
                let now = hour_start + (i as i64 * HOUR_MS / chunk.len() as i64);
                traffic.turn(chat, day, now).await?;
            }
            busy += started.elapsed();
            retention_round(&store, hour_start + HOUR_MS, &mut stats).await?;
        }
        // The one-off chats of this day never come back: forget them (their sessions age out).
        traffic.sessions.retain(|chat, _| chat.starts_with('r'));
        prune_sessions(&store, day_start + DAY_MS, &mut stats).await?;
        let (counts, fts_bytes) = measure(&path).await?;
        let mut sorted = stats.batches.clone();
        sorted.sort();
        let row = DayRow {
            day: day + 1,
            db_bytes: file_len(&path),
            wal_bytes: file_len(&wal),
            counts,
            fts_bytes,
            batches: sorted.len(),
            median: sorted.get(sorted.len() / 2).copied().unwrap_or_default(),
            max: sorted.last().copied().unwrap_or_default(),
            session_batch: stats.session_batch,
            reclaim: stats.reclaim,
            stall: stats.stall,
            traffic: busy,
        };
        print_row(&row);
        rows.push(row);
    }
    store.close().await;
    let size = |day: usize| rows.get(day - 1).map_or(0, |r| r.db_bytes + r.wal_bytes);
    let (day4, last) = (size(4), size(days));
    let pass = last as f64 <= 1.5 * day4 as f64;
    println!(
        "{}: day {days} size {:.2} MiB ≤ 1.5 × day 4 size {:.2} MiB (ratio {:.2})",
        if pass { "PASS" } else { "FAIL" },
        mib(last),
        mib(day4),
        last as f64 / day4.max(1) as f64
    );
    Ok(pass)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("retention bench: {e}");
            ExitCode::FAILURE
        }
    }
}
