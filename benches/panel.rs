//! Control panel benchmark: every page of `/ui` and every `/api/*` read, timed against a store of
//! 10,000 sessions and 1,000,000 messages, on the real binary; and what the panel costs in idle
//! RSS and in binary size.
//!
//! The store is made through the hermesd library (`SqliteStore`: its migrations, `start_session`,
//! `record_usage`), the messages written straight into its `messages` table in large
//! transactions (the same rows and insert trigger as the gateway's writes, only faster to make),
//! and indexed by the store's own indexer. Then the release binary runs on that home with the
//! API key set; after it is ready and has idled, its RSS is read (the panel never used); the
//! bench logs in like a browser and requests each page `ROUNDS` times, one at a time, timing each
//! round trip on loopback (an upper bound of the server's time); then it idles again and the RSS
//! is read a second time (each read after 45 s: past the store's quiet spell, after which the
//! page caches its reads filled go back). The memory judged is the anonymous part; the file
//! pages are the binary's code the pages ran, mapped from disk (shared, dropped first when
//! memory is short), printed beside it. The binary's share of the panel is the size of its
//! `hermesd::http::panel` functions (`nm`) plus the compiled-in stylesheet and script.
//!
//! Printed: per page p50, p95 and max (ms) and FAIL where its p95 is not under 50 ms; the
//! daemon's CPU time per request; idle RSS before
//! and after the panel was used; the panel's bytes in the binary (PASS/FAIL under 1.5 MB). The
//! exit code is 1 when any check fails.
//!
//! ```text
//! CARGO_TARGET_DIR=$HOME/.cache/hermesd-target cargo bench --bench panel
//! ```
//!
//! `HERMESD_BENCH_QUICK=1`: 100,000 messages instead of 1,000,000.

#[path = "support/procfs.rs"]
mod procfs;

use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use hermesd::store::{
    ModelUsage, SearchStore, SessionKey, SessionStore, SqliteStore, TokenTotals, UsageRecord, UsageStore,
};
use hermesd_platform::ChatType;
use procfs::{cpu_ticks, status_mb, ticks_per_second};

const BIN: &str = env!("CARGO_BIN_EXE_hermesd");
const ALLOCATOR: &str = "hermesd_allocator_bytes";
const KEY: &str = "panel-bench-key";
const SESSIONS: usize = 10_000;
const MESSAGES: usize = 1_000_000;
const QUICK_MESSAGES: usize = 100_000;
/// People charged for usage, each on every one of 30 days.
const PAYERS: usize = 200;
/// Timed requests of each page.
const ROUNDS: usize = 30;
/// Page p95 target, ms.
const TARGET_MS: f64 = 50.0;
/// The binary's share target, bytes.
const TARGET_BINARY: u64 = 1_536 * 1024;
/// Seconds of idling before RSS is read: past the store's 30 s quiet spell.
const IDLE_SECS: u64 = 45;
/// Idle RSS growth target once the panel was used, MB.
const TARGET_RSS_MB: f64 = 2.0;

fn key(i: usize) -> SessionKey {
    let chat_id = format!("user:person-{i}");
    SessionKey {
        key: format!("agent:main:api:dm:{chat_id}"),
        platform: "api".into(),
        chat_id,
        chat_type: ChatType::Dm,
        thread_id: None,
        user_id: None,
    }
}

/// A message's text: ~200 chars of words, the planted word `heronbill` in every 100th.
fn text(n: usize) -> String {
    const WORDS: &[&str] = &[
        "the", "deploy", "config", "branch", "please", "check", "server", "merge", "review", "because", "error",
        "tomorrow", "weather", "garden", "invoice", "meeting", "draft", "summary", "ticket", "kitchen",
    ];
    let mut out = format!("#{n}");
    if n % 100 == 42 {
        out.push_str(" heronbill");
    }
    let mut x = n.wrapping_mul(2_654_435_761) | 1;
    while out.len() < 200 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(' ');
        out.push_str(WORDS[x % WORDS.len()]);
    }
    out
}

/// The store: sessions through the library, messages in bulk, indexed, 30 days of usage.
async fn fill(home: &Path, messages: usize) -> Vec<String> {
    let path = home.join("state.db");
    let store = SqliteStore::open(&path, Duration::from_secs(5), 2).await.expect("open the store");
    let mut ids = Vec::with_capacity(SESSIONS);
    for i in 0..SESSIONS {
        ids.push(store.start_session(&key(i), 1_700_000_000_000 + i as i64).await.expect("start a session").id);
    }
    let started = Instant::now();
    let mut conn = rusqlite::Connection::open(&path).expect("open the store for bulk writes");
    conn.busy_timeout(Duration::from_secs(5)).expect("busy timeout");
    let per_session = messages / SESSIONS;
    let rows: Vec<(usize, usize)> = (0..per_session).flat_map(|m| (0..SESSIONS).map(move |s| (s, m))).collect();
    let mut n = 0usize;
    for chunk in rows.chunks(50_000) {
        let tx = conn.transaction().expect("begin");
        {
            let mut insert = tx
                .prepare_cached("INSERT INTO messages (session_id, role, content, created_at) VALUES (?1, ?2, ?3, ?4)")
                .expect("prepare");
            for &(s, m) in chunk {
                let role = if m % 2 == 0 { "user" } else { "assistant" };
                let at = 1_700_000_000_000 + n as i64;
                insert.execute(rusqlite::params![ids[s], role, text(n), at]).expect("insert");
                n += 1;
            }
        }
        tx.commit().expect("commit");
    }
    conn.execute("UPDATE sessions SET updated_at = created_at + 1000000", []).expect("touch the sessions");
    drop(conn);
    eprintln!("panel bench: {n} messages written in {:.1} s; indexing…", started.elapsed().as_secs_f64());
    let started = Instant::now();
    while store.index_pending(hermesd::store::search::INDEX_BATCH).await.expect("index") > 0 {}
    eprintln!("panel bench: indexed in {:.1} s", started.elapsed().as_secs_f64());
    let today = chrono::Utc::now().date_naive();
    for day in 0..30 {
        let day = (today - chrono::Duration::days(day)).format("%Y-%m-%d").to_string();
        for (payer, session_id) in ids.iter().take(PAYERS).enumerate() {
            let tokens = TokenTotals { calls: 2, prompt: 1_500, completion: 300, cache_read: 0, cache_write: 0 };
            let user = format!("person-{payer}");
            let models = [ModelUsage { model: "big-model", tokens, cost_micros: 1_800, unpriced_calls: 0 }];
            let record = UsageRecord {
                session_id,
                day: &day,
                platform: "api",
                profile: "default",
                user: &user,
                chat: &format!("user:{user}"),
                tokens,
                cost_micros: 1_800,
                unpriced_calls: 0,
                models: &models,
                turn: true,
            };
            store.record_usage(&record).await.expect("record usage");
        }
    }
    store.close().await;
    ids
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("its address").port()
}

fn spawn(home: &Path) -> Child {
    let log = std::fs::File::create(home.join("hermesd.log")).expect("log file");
    Command::new(BIN)
        .args(["--home", home.to_str().expect("utf-8 home"), "run"])
        .env("HERMESD_LOG", "info")
        .env("API_SERVER_KEY", KEY)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn hermesd")
}

async fn wait_ready(client: &reqwest::Client, base: &str) {
    for _ in 0..1200 {
        if client.get(format!("{base}/healthz")).send().await.is_ok_and(|r| r.status() == 200) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("hermesd did not answer /healthz");
}

/// RSS after `seconds` of idling, MB: (all, anonymous memory, pages of files: the binary's code).
async fn idle_rss(pid: u32, seconds: u64) -> (f64, f64, f64) {
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let read = |field| status_mb(pid, field).expect("the daemon runs");
    (read("VmRSS"), read("RssAnon"), read("RssFile"))
}

/// The allocator's figures from `/metrics` (allocated, active, resident), MB.
async fn allocator(client: &reqwest::Client, base: &str) -> String {
    let text = match client.get(format!("{base}/metrics")).bearer_auth(KEY).send().await {
        Ok(response) => response.text().await.unwrap_or_default(),
        Err(_) => return String::new(),
    };
    text.lines()
        .filter(|l| l.starts_with(ALLOCATOR))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            let kind = name.split('"').nth(1)?;
            Some(format!("{kind} {:.1}", value.parse::<f64>().ok()? / 1_048_576.0))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Bytes of the binary that are the panel's: its functions' sizes (`nm`) and its assets.
fn panel_bytes() -> (u64, u64) {
    let out = Command::new("nm").args(["--size-sort", "-C", "-S", BIN]).output().expect("run nm");
    let symbols: u64 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|line| line.contains("hermesd::http::panel::"))
        .filter_map(|line| u64::from_str_radix(line.split_whitespace().nth(1)?, 16).ok())
        .sum();
    let assets =
        (include_str!("../src/http/panel/panel.css").len() + include_str!("../src/http/panel/panel.js").len()) as u64;
    (symbols, assets)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let quick = std::env::var("HERMESD_BENCH_QUICK").is_ok_and(|v| v == "1");
    let messages = if quick { QUICK_MESSAGES } else { MESSAGES };
    let home = tempfile::tempdir().expect("a home");
    let ids = fill(home.path(), messages).await;
    let port = free_port();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[model]\nprovider = \"chat_completions\"\n\
             base_url = \"http://127.0.0.1:9/v1\"\nname = \"big-model\"\n\n[platforms.api]\nenabled = true\n"
        ),
    )
    .expect("write the config");
    let mut child = spawn(home.path());
    let pid = child.id();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    wait_ready(&client, &base).await;
    // Past the store's first quiet spell (30 s without use hands the page caches back).
    let rss_fresh = idle_rss(pid, IDLE_SECS).await;
    let heap_fresh = allocator(&client, &base).await;

    let login = client
        .post(format!("{base}/ui/login"))
        .header("origin", &base)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("key={KEY}"))
        .send()
        .await
        .expect("log in");
    assert_eq!(login.status(), 303, "the login worked");
    let cookie = login.headers()["set-cookie"].to_str().expect("a cookie").split(';').next().unwrap_or("").to_owned();
    let transcript = format!("/ui/sessions/{}", ids[SESSIONS / 2]);
    let api_session = format!("/api/sessions/{}", ids[SESSIONS / 2]);
    let pages = [
        "/ui",
        "/ui/sessions",
        "/ui/sessions?q=heronbill",
        "/ui/sessions?q=ronbi",
        transcript.as_str(),
        "/ui/chat",
        "/ui/people",
        "/ui/people/person?platform=api&user=person-7",
        "/ui/cron",
        "/ui/deliveries",
        "/ui/usage",
        "/ui/logs",
        "/ui/config",
        "/api/sessions",
        api_session.as_str(),
        "/api/usage",
        "/api/people",
        "/api/jobs",
        "/api/pairing",
        "/api/deliveries",
    ];
    println!(
        "hermesd panel bench: {SESSIONS} sessions, {messages} messages, {} usage days; {ROUNDS} requests per page",
        30 * PAYERS
    );
    println!("{:<48} {:>8} {:>8} {:>8} {:>9}", "page", "p50 ms", "p95 ms", "max ms", "bytes");
    let mut failed = false;
    let ticks = cpu_ticks(pid).unwrap_or(0);
    for path in pages {
        let mut times = Vec::with_capacity(ROUNDS);
        let mut bytes = 0;
        for _ in 0..ROUNDS {
            let started = Instant::now();
            let response = client.get(format!("{base}{path}")).header("cookie", &cookie).send().await.expect("a page");
            let status = response.status();
            let body = response.bytes().await.expect("its body");
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
            bytes = body.len();
        }
        times.sort_by(f64::total_cmp);
        let p95 = percentile(&times, 95.0);
        let verdict = if p95 < TARGET_MS { "" } else { "  FAIL" };
        failed |= p95 >= TARGET_MS;
        println!(
            "{path:<48} {:>8.2} {p95:>8.2} {:>8.2} {bytes:>9}{verdict}",
            percentile(&times, 50.0),
            times[times.len() - 1]
        );
    }
    let cpu_ms = (cpu_ticks(pid).unwrap_or(0) - ticks) as f64 * 1000.0 / ticks_per_second();
    println!(
        "daemon CPU while serving them: {cpu_ms:.0} ms for {} requests ({:.2} ms each)",
        pages.len() * ROUNDS,
        cpu_ms / (pages.len() * ROUNDS) as f64
    );
    let rss_used = idle_rss(pid, IDLE_SECS).await;
    let heap_used = allocator(&client, &base).await;
    let anon_delta = rss_used.1 - rss_fresh.1;
    println!("allocator (MB): before {heap_fresh}; after {heap_used}");
    let (symbols, assets) = panel_bytes();
    let binary = std::fs::metadata(BIN).map(|m| m.len()).unwrap_or(0);
    println!(
        "idle RSS (MB), each after {IDLE_SECS} s idle: before the panel was used {:.1} (anonymous {:.1}, file pages \
         {:.1}); after every page was read {:.1} (anonymous {:.1}, file pages {:.1}); anonymous {anon_delta:+.1} — {}",
        rss_fresh.0,
        rss_fresh.1,
        rss_fresh.2,
        rss_used.0,
        rss_used.1,
        rss_used.2,
        if anon_delta < TARGET_RSS_MB { "PASS (< 2 MB)" } else { "FAIL (≥ 2 MB)" }
    );
    println!(
        "binary: {:.1} MB; the panel's functions {:.0} KB + stylesheet and script {:.1} KB = {:.0} KB — {}",
        binary as f64 / 1_048_576.0,
        symbols as f64 / 1024.0,
        assets as f64 / 1024.0,
        (symbols + assets) as f64 / 1024.0,
        if symbols + assets < TARGET_BINARY { "PASS (< 1.5 MB)" } else { "FAIL (≥ 1.5 MB)" }
    );
    failed |= anon_delta >= TARGET_RSS_MB || symbols + assets >= TARGET_BINARY;
    println!("panel bench: {}", if failed { "FAIL" } else { "PASS" });
    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let _ = child.wait();
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
