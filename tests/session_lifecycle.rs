//! The session lifecycle through the daemon, a recording platform and the fake LLM: `/new` gives
//! the model one memory-only turn (in the background, never delaying the answer, always before
//! the key's next turn), stops a running turn, and says how to come back; the sweep flushes and
//! archives a session the reset policy expired and the next message is told why; `/sessions` and
//! `/resume` round-trip between a chat's sessions, titled by the summary model.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermesd::daemon::DaemonOptions;
use serde_json::Value;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use support::fake_llm::Step;
use support::recording_platform::RecordingPlatform;
use support::{FakeLlm, TestDaemon, eventually, start_daemon_with};

const WAIT: Duration = Duration::from_secs(10);
const SAVE_TEA: &str = r#"{"action":"add","target":"user","content":"Ann drinks green tea, no sugar"}"#;

async fn daemon(home: &Path, llm: &FakeLlm, platform: &Arc<RecordingPlatform>, extra: &str) -> TestDaemon {
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"main-model\"\n\n{extra}\n",
        llm.base_url()
    );
    let options = DaemonOptions { extra_platforms: vec![platform.clone() as Arc<_>], ..Default::default() };
    let d = start_daemon_with(home, &config, &[("REC_ALLOWED_USERS", "ann")], options).await;
    assert!(eventually(Duration::from_secs(2), || platform.started()).await);
    d
}

/// Send `text` as event `id` and wait for the `n`-th message sent in all.
async fn say(platform: &RecordingPlatform, id: &str, text: &str, n: usize) -> String {
    platform.inject(id, "ann", text).await;
    assert!(eventually(WAIT, || platform.sent().len() >= n).await, "no answer to {text}: {:?}", platform.texts());
    platform.texts()[n - 1].clone()
}

fn users(request: &Value) -> Vec<String> {
    let messages = request["messages"].as_array().unwrap();
    messages.iter().filter(|m| m["role"] == "user").map(|m| m["content"].as_str().unwrap().to_owned()).collect()
}

fn system(request: &Value) -> String {
    request["messages"][0]["content"].as_str().unwrap_or_default().to_owned()
}

fn tool_names(request: &Value) -> Vec<String> {
    let tools = request["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().map(|t| t["function"]["name"].as_str().unwrap_or_default().to_owned()).collect()
}

async fn database(home: &Path) -> SqlitePool {
    let options = SqliteConnectOptions::new().filename(home.join("state.db")).busy_timeout(Duration::from_secs(5));
    SqlitePoolOptions::new().max_connections(1).connect_with(options).await.unwrap()
}

/// Make every session look last active two hours ago.
async fn age_sessions(pool: &SqlitePool) {
    sqlx::query("UPDATE sessions SET updated_at = updated_at - 7200000").execute(pool).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_flushes_memory_once_then_the_fresh_session_remembers() {
    let llm = FakeLlm::builder().flush_step(Step::ToolCalls(vec![("memory".into(), SAVE_TEA.into())])).start().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = daemon(home.path(), &llm, &platform, "[memory]\nflush_notice = true").await;

    assert_eq!(
        say(&platform, "a", "I take my green tea without sugar", 1).await,
        "echo: I take my green tea without sugar"
    );
    let reply = say(&platform, "n", "/new", 2).await;
    assert!(reply.starts_with("Started a new session") && reply.contains("/resume"), "{reply}");

    // One memory-only turn over the old conversation: the memory call, then DONE.
    assert!(eventually(WAIT, || llm.flush_requests().len() == 2).await, "{:?}", llm.flush_requests());
    let flush = &llm.flush_requests()[0];
    assert_eq!(tool_names(flush), ["memory"], "only the memory tool");
    let said = users(flush);
    assert_eq!(said[0], "I take my green tea without sugar");
    assert!(said.last().unwrap().starts_with("[Memory flush]"), "{said:?}");
    assert_eq!(flush["messages"][0]["role"], "system", "on the session's own system prompt");
    assert!(
        eventually(WAIT, || platform.texts().iter().any(|t| t == "💾 memory updated")).await,
        "{:?}",
        platform.texts()
    );
    // The flush's two model calls are Ann's spending, not a turn of hers.
    let store = hermesd::store::SqliteStore::open(&home.path().join("state.db"), WAIT, 1).await.unwrap();
    let today = hermesd::usage::utc_day(hermesd::clock::now_ms());
    let spent = hermesd::store::UsageStore::usage_between(
        &store,
        hermesd::store::UsageScope::User,
        "rec",
        "default",
        "ann",
        &today,
        &today,
    )
    .await
    .unwrap();
    assert_eq!((spent.turns, spent.tokens.calls), (1, 3), "one turn's call and the flush's two: {spent:?}");

    // The next message runs in the fresh session, whose prompt already holds what was saved.
    let n = platform.sent().len() + 1;
    assert_eq!(say(&platform, "b", "what do I drink?", n).await, "echo: what do I drink?");
    let request = llm.requests().last().unwrap().clone();
    assert_eq!(users(&request), ["what do I drink?"]);
    assert!(system(&request).contains("Ann drinks green tea, no sugar"), "{}", system(&request));

    // A session with nothing new said since its flush is not flushed again.
    assert!(say(&platform, "n2", "/new", n + 1).await.starts_with("Started a new session"));
    assert!(eventually(WAIT, || llm.flush_requests().len() == 3).await, "the second session is flushed");
    assert!(say(&platform, "n3", "/new", n + 2).await.starts_with("Started a new session"));
    assert_eq!(say(&platform, "c", "still there?", n + 3).await, "echo: still there?");
    assert_eq!(llm.flush_requests().len(), 3, "an empty session has nothing to flush");
    assert_eq!(llm.count(), 3, "flushes never reach the turn's script");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_stops_a_running_turn_and_never_waits_for_a_slow_flush() {
    let llm = FakeLlm::builder()
        .reply("hello")
        .slow_reply(Duration::from_secs(20), "too late")
        .flush_step_after(Duration::from_secs(30), Step::Reply("DONE".into()))
        .start()
        .await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = daemon(home.path(), &llm, &platform, "[memory]\nflush_timeout = \"2s\"").await;
    assert_eq!(say(&platform, "a", "hi", 1).await, "hello");
    platform.inject("b", "ann", "write me a long essay").await;
    assert!(eventually(WAIT, || llm.count() == 2).await);

    let asked = Instant::now();
    platform.inject("n", "ann", "/new").await;
    assert!(eventually(WAIT, || platform.texts().iter().any(|t| t.starts_with("Started a new session"))).await);
    assert!(asked.elapsed() < Duration::from_secs(2), "/new answered at once: {:?}", asked.elapsed());
    assert!(eventually(WAIT, || platform.texts().iter().any(|t| t == "Stopped.")).await, "{:?}", platform.texts());
    let reply = platform.texts().into_iter().find(|t| t.starts_with("Started")).unwrap();
    assert!(reply.contains("after stopping the running turn"), "{reply}");

    // The next message waits for the stuck flush no longer than its deadline, then starts afresh.
    let n = platform.sent().len() + 1;
    let sent = Instant::now();
    assert_eq!(say(&platform, "c", "fresh start", n).await, "echo: fresh start");
    assert!(sent.elapsed() < Duration::from_secs(6), "{:?}", sent.elapsed());
    assert_eq!(users(llm.requests().last().unwrap()), ["fresh start"]);
    assert_eq!(llm.flush_requests().len(), 1);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_flushes_an_expired_session_and_the_next_message_is_told() {
    let llm = FakeLlm::builder().flush_step(Step::ToolCalls(vec![("memory".into(), SAVE_TEA.into())])).start().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let sessions = "[sessions]\nreset = \"idle\"\nidle_minutes = 60\nsweep_interval = \"1s\"";
    let d = daemon(home.path(), &llm, &platform, sessions).await;
    assert_eq!(say(&platform, "a", "green tea, always", 1).await, "echo: green tea, always");
    let pool = database(home.path()).await;
    age_sessions(&pool).await;

    // The sweep, not the next message, flushes and archives the session.
    assert!(eventually(WAIT, || llm.flush_requests().len() == 2).await, "the sweep flushed");
    let mut archived = 0;
    for _ in 0..250 {
        (archived,) =
            sqlx::query_as::<_, (i64,)>("SELECT COUNT(*) FROM session_resets").fetch_one(&pool).await.unwrap();
        if archived == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(archived, 1, "the route was archived with its reason");
    assert_eq!(platform.sent().len(), 1, "nothing is said until the user writes");

    // The first thing the user sends — a command here — is answered after the notice.
    assert!(say(&platform, "t", "/title", 3).await.contains("no title"));
    let texts = platform.texts();
    assert_eq!(texts[1], "The previous conversation was archived after 1 h idle — /resume to return to it.");
    assert_eq!(say(&platform, "b", "morning", 4).await, "echo: morning", "told once");
    let request = llm.requests().last().unwrap().clone();
    assert_eq!(users(&request), ["morning"]);
    assert!(system(&request).contains("Ann drinks green tea, no sugar"));
    assert_eq!(llm.flush_requests().len(), 2, "flushed once");
    let metrics = support::client().get(format!("{}/metrics", d.base)).send().await.unwrap().text().await.unwrap();
    for needle in [
        "hermesd_session_resets_total{reason=\"idle\",by=\"sweep\"} 1",
        "hermesd_memory_flushes_total{outcome=\"saved\"} 1",
    ] {
        assert!(metrics.contains(needle), "missing {needle} in\n{metrics}");
    }

    // /resume goes back to the archived conversation.
    assert!(say(&platform, "r", "/resume", 5).await.starts_with("Resumed"));
    assert_eq!(say(&platform, "c", "and tomorrow?", 6).await, "echo: and tomorrow?");
    assert_eq!(users(llm.requests().last().unwrap()), ["green tea, always", "and tomorrow?"]);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_before_the_sweep_flushes_and_resets_on_its_own() {
    let llm = FakeLlm::builder().flush_step(Step::ToolCalls(vec![("memory".into(), SAVE_TEA.into())])).start().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let sessions = "[sessions]\nreset = \"both\"\nidle_minutes = 60\nsweep_interval = \"1h\"";
    let d = daemon(home.path(), &llm, &platform, sessions).await;
    assert_eq!(say(&platform, "a", "green tea, always", 1).await, "echo: green tea, always");
    // The first sweep ran at start, before anything was stale; the next is an hour away.
    age_sessions(&database(home.path()).await).await;
    assert_eq!(say(&platform, "b", "morning", 3).await, "echo: morning");
    assert_eq!(platform.texts()[1], "The previous conversation was archived after 1 h idle — /resume to return to it.");
    assert_eq!(llm.flush_requests().len(), 2, "flushed before the fresh session started");
    assert!(system(llm.requests().last().unwrap()).contains("Ann drinks green tea, no sugar"));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_and_resume_round_trip_with_titles_from_the_summary_model() {
    let llm = FakeLlm::echo().await;
    let titles = FakeLlm::builder().reply("\"Rocket launch plans.\"").reply("Tea break").start().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let summary = format!(
        "[auxiliary.summary]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"titler\"",
        titles.base_url()
    );
    let d = daemon(home.path(), &llm, &platform, &summary).await;

    assert_eq!(say(&platform, "a", "let us plan the launch", 1).await, "echo: let us plan the launch");
    assert!(eventually(WAIT, || titles.count() == 1).await);
    assert!(say(&platform, "n", "/new", 2).await.starts_with("Started a new session"));
    assert_eq!(say(&platform, "b", "time for tea", 3).await, "echo: time for tea");
    assert!(eventually(WAIT, || titles.count() == 2).await);
    assert_eq!(
        users(&titles.requests()[0]),
        ["User: let us plan the launch\n\nAssistant: echo: let us plan the launch"]
    );

    // The titles land in the background; ask until both are there.
    let mut listing = String::new();
    for i in 0..50 {
        listing = say(&platform, &format!("s{i}"), "/sessions", platform.sent().len() + 1).await;
        if listing.contains("Tea break") && listing.contains("Rocket launch plans") {
            break;
        }
    }
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(lines[0], "Sessions in this chat, newest first:", "{listing}");
    assert!(lines[1].starts_with("1. \"Tea break\" · ") && lines[1].ends_with("· 2 messages ← current"), "{listing}");
    assert!(lines[2].starts_with("2. \"Rocket launch plans\" · ") && lines[2].ends_with("· 2 messages"), "{listing}");

    let n = platform.sent().len();
    let resumed = say(&platform, "r1", "/resume launch", n + 1).await;
    assert!(resumed.starts_with("Resumed \"Rocket launch plans\""), "{resumed}");
    assert_eq!(say(&platform, "c", "what date?", n + 2).await, "echo: what date?");
    assert_eq!(users(llm.requests().last().unwrap()), ["let us plan the launch", "what date?"]);

    // Without an argument: the previous one; a number from the list; nothing that is not there.
    assert!(say(&platform, "r2", "/resume", n + 3).await.starts_with("Resumed \"Tea break\""));
    assert!(say(&platform, "r3", "/resume 1", n + 4).await.starts_with("That is the current session"));
    assert!(say(&platform, "r4", "/resume 7", n + 5).await.starts_with("No session matches \"7\""));
    assert!(say(&platform, "r5", "/resume 2", n + 6).await.starts_with("Resumed \"Rocket launch plans\""));
    // A /title set by the user is never overwritten by a generated one.
    assert_eq!(titles.count(), 2);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compress_flushes_memory_before_summarising() {
    let llm = FakeLlm::builder().flush_step(Step::ToolCalls(vec![("memory".into(), SAVE_TEA.into())])).start().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = daemon(home.path(), &llm, &platform, "").await;
    for i in 0..12 {
        assert_eq!(say(&platform, &format!("m{i}"), &format!("fact {i}"), i + 1).await, format!("echo: fact {i}"));
    }
    assert!(say(&platform, "c", "/compress", 13).await.starts_with("History summarised"));
    let flushes = llm.flush_requests();
    assert_eq!(flushes.len(), 2, "the memory call, then DONE");
    let said = users(&flushes[0]);
    assert!(said.iter().any(|t| t == "fact 0") && said.iter().any(|t| t == "fact 11"), "{said:?}");
    assert!(said.last().unwrap().contains("compressed"), "{said:?}");
    // The summary call came after the flush and saw the same history; the next turn sees both.
    assert_eq!(say(&platform, "d", "still there?", 14).await, "echo: still there?");
    let last = llm.requests().last().unwrap().clone();
    assert!(system(&last).contains("Ann drinks green tea, no sugar"), "compaction rebuilt the prompt after the flush");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_flush_when_it_is_off_or_the_platform_has_no_memory_tool() {
    for extra in ["[memory]\nflush = false", "[tools.platforms]\nrec = [\"todo\"]"] {
        let llm = FakeLlm::echo().await;
        let platform = RecordingPlatform::new(4096);
        let home = tempfile::tempdir().unwrap();
        let d = daemon(home.path(), &llm, &platform, extra).await;
        assert_eq!(say(&platform, "a", "remember this", 1).await, "echo: remember this");
        assert!(say(&platform, "n", "/new", 2).await.starts_with("Started a new session"));
        assert_eq!(say(&platform, "b", "next", 3).await, "echo: next");
        assert!(llm.flush_requests().is_empty(), "{extra}: {:?}", llm.flush_requests());
        assert_eq!(users(llm.requests().last().unwrap()), ["next"], "{extra}");
        d.daemon.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_command_on_an_expired_session_waits_in_the_mailbox_not_in_the_receive_loop() {
    const HOLD: Duration = Duration::from_secs(3);
    let llm = FakeLlm::builder().flush_step_after(HOLD, Step::Reply("DONE".into())).start().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let sessions = "[sessions]\nreset = \"idle\"\nidle_minutes = 60\nsweep_interval = \"1h\"";
    let d = daemon(home.path(), &llm, &platform, sessions).await;
    assert_eq!(say(&platform, "a", "green tea, always", 1).await, "echo: green tea, always");
    age_sessions(&database(home.path()).await).await;

    // The session expired: `/title` needs the reset policy's flush (a 3 s model call) first.
    let asked = Instant::now();
    platform.inject("t", "ann", "/title Tea notes").await;
    let held = asked.elapsed();
    assert!(held < HOLD / 3, "the receive loop was held {held:?} by the flush");
    assert!(eventually(WAIT, || llm.flush_requests().len() == 1).await, "the expired session was flushed");
    assert!(
        eventually(WAIT, || platform.texts().iter().any(|t| t == "Title set: Tea notes")).await,
        "{:?}",
        platform.texts()
    );
    assert!(asked.elapsed() >= HOLD, "answered only after the flush");
    // The title went to the fresh session, which the next message continues.
    let n = platform.sent().len();
    assert!(say(&platform, "s", "/title", n + 1).await.ends_with("Title: Tea notes"), "{:?}", platform.texts());
    d.daemon.stop().await;
}
