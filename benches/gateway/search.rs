//! Full-text search over a million messages, in process, through the hermesd library.
//!
//! A `SqliteStore` in a temp dir gets `SESSIONS` sessions through the store's API, then
//! `SESSIONS × PER_SESSION` messages (1,000,000) written straight into its `messages` table in
//! large transactions — the same rows and the same insert trigger as the gateway's writes, only
//! faster to produce — and the store's own batched indexer (`index_pending`) indexes them all.
//! The same generator as the compression bench makes the text: ~300 chars, with the planted word
//! in every 50th message (20,000 hits store-wide).
//!
//! Timed, `SEARCHES` times each (p50 and p99): the agent's search (`search_scoped`, one chat's
//! sessions) and the store-wide search (`search`, as `hermesd sessions search` runs it), each for
//! the word and for a substring of it that is no word (so the trigram index answers). Every
//! search is also checked: the hits must contain the query and, scoped, come from the scope.

use std::time::{Duration, Instant};

use hermesd::store::{SearchScope, SearchStore, SessionKey, SessionStore, SqliteStore};
use hermesd_platform::ChatType;
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::compress::{SUBSTRING_QUERY, WORD_QUERY, text};

/// Sessions, and messages in each: 1,000,000 in all (`HERMESD_BENCH_QUICK=1`: 20,000).
const SESSIONS: usize = 1_000;
const PER_SESSION: usize = 1_000;
const QUICK_PER_SESSION: usize = 20;
/// Timed repetitions of each search.
const SEARCHES: usize = 100;
/// The search p99 target, ms.
const TARGET_P99_MS: f64 = 20.0;

/// What the search bench measured.
pub(crate) struct SearchReport {
    messages: usize,
    fill_s: f64,
    index_s: f64,
    /// (label, hits of the last run, timings ms).
    rows: Vec<(String, usize, Vec<f64>)>,
}

pub(crate) async fn run(quick: bool) -> SearchReport {
    let per_session = if quick { QUICK_PER_SESSION } else { PER_SESSION };
    let dir = tempfile::tempdir().expect("create the search store dir");
    let path = dir.path().join("state.db");
    let store = SqliteStore::open(&path, Duration::from_secs(5), 2).await.expect("open the search store");
    let mut sessions = Vec::with_capacity(SESSIONS);
    for i in 0..SESSIONS {
        let key = key(i);
        sessions.push((key.key.clone(), store.start_session(&key, 1).await.expect("start a session").id));
    }
    eprintln!("search: writing {} messages…", SESSIONS * per_session);
    let started = Instant::now();
    fill(&path, &sessions, per_session);
    let fill_s = started.elapsed().as_secs_f64();
    eprintln!("search: indexing them…");
    let started = Instant::now();
    while store.index_pending(hermesd::store::search::INDEX_BATCH).await.expect("index") > 0 {}
    let index_s = started.elapsed().as_secs_f64();
    let mut report = SearchReport { messages: SESSIONS * per_session, fill_s, index_s, rows: Vec::new() };
    // The agent's search in one chat: the session in the middle of the store.
    let (scope_key, scope_session) = &sessions[SESSIONS / 2];
    for query in [WORD_QUERY, SUBSTRING_QUERY] {
        let scope = SearchScope { session_key: scope_key, person: None };
        let mut times = Vec::with_capacity(SEARCHES);
        let mut hits = 0;
        for _ in 0..SEARCHES {
            let started = Instant::now();
            let found = store.search_scoped(query, &scope, 10).await.expect("scoped search");
            times.push(ms(started.elapsed()));
            assert!(found.iter().all(|h| &h.session_id == scope_session), "a scoped hit outside its scope");
            let missing: Vec<&str> =
                found.iter().map(|h| h.snippet.as_str()).filter(|s| !s.to_lowercase().contains(query)).collect();
            assert!(missing.is_empty(), "scoped hits without {query:?}: {missing:?}");
            hits = found.len();
        }
        assert!(hits > 0, "the scoped search for {query:?} found nothing");
        report.rows.push((format!("one chat's sessions (`search_scoped`), {query:?}"), hits, times));
    }
    for query in [WORD_QUERY, SUBSTRING_QUERY] {
        let mut times = Vec::with_capacity(SEARCHES);
        let mut hits = 0;
        for _ in 0..SEARCHES {
            let started = Instant::now();
            let found = store.search(query, None, 10).await.expect("search");
            times.push(ms(started.elapsed()));
            let missing: Vec<&str> =
                found.iter().map(|h| h.snippet.as_str()).filter(|s| !s.to_lowercase().contains(query)).collect();
            assert!(missing.is_empty(), "hits without {query:?}: {missing:?}");
            hits = found.len();
        }
        assert!(hits > 0, "the store-wide search for {query:?} found nothing");
        report.rows.push((format!("the whole store (`search`), {query:?}"), hits, times));
    }
    store.close().await;
    report
}

fn key(i: usize) -> SessionKey {
    let chat_id = format!("search-{i}");
    SessionKey {
        key: format!("agent:main:api:dm:{chat_id}"),
        platform: "api".into(),
        chat_id,
        chat_type: ChatType::Dm,
        thread_id: None,
        user_id: None,
    }
}

/// `per_session` messages in every session, alternating user and assistant, in transactions of
/// 50,000 rows on a connection of its own.
fn fill(path: &std::path::Path, sessions: &[(String, String)], per_session: usize) {
    let mut conn = rusqlite::Connection::open(path).expect("open the store for bulk writes");
    conn.busy_timeout(Duration::from_secs(5)).expect("busy timeout");
    let mut rng = StdRng::seed_from_u64(0x7365_6172_6368);
    let mut n = 0;
    let rows: Vec<(usize, usize)> = (0..per_session).flat_map(|m| (0..sessions.len()).map(move |s| (s, m))).collect();
    for chunk in rows.chunks(50_000) {
        let tx = conn.transaction().expect("begin");
        {
            let mut insert = tx
                .prepare_cached("INSERT INTO messages (session_id, role, content, created_at) VALUES (?1, ?2, ?3, ?4)")
                .expect("prepare");
            for &(s, m) in chunk {
                let role = if m % 2 == 0 { "user" } else { "assistant" };
                insert
                    .execute(rusqlite::params![sessions[s].1, role, text(&mut rng, m), 1 + n as i64])
                    .expect("insert");
                n += 1;
            }
        }
        tx.commit().expect("commit");
    }
}

/// Nearest-rank percentile of `times` (ms).
fn percentile(times: &[f64], p: f64) -> f64 {
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len().max(1)) - 1).copied().unwrap_or(f64::NAN)
}

fn ms(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1000.0
}

impl SearchReport {
    pub(crate) fn print(&self) {
        println!(
            "### full-text search over {} messages (in process, {SEARCHES} searches each, limit 10)\n",
            self.messages
        );
        println!(
            "- written in {:.1} s (bulk, in-process), indexed by the store's batched indexer in {:.1} s",
            self.fill_s, self.index_s
        );
        println!("\n| search | hits | p50 ms | p99 ms | target p99 | |");
        println!("|---|---:|---:|---:|---:|---|");
        for (label, hits, times) in &self.rows {
            let (p50, p99) = (percentile(times, 50.0), percentile(times, 99.0));
            let verdict = if p99 < TARGET_P99_MS { "PASS" } else { "MISS" };
            println!("| {label} | {hits} | {p50:.2} | {p99:.2} | < {TARGET_P99_MS} | {verdict} |");
        }
        println!();
    }
}
