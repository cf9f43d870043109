//! The host pipeline seen from a platform: busy-policy acks, quick messages batched into one
//! turn, deduplication at the ingress, chunking to the platform's limit, and pacing on
//! retry_after.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermesd::daemon::DaemonOptions;
use hermesd_platform::{Accepted, OutboundKind, PlatformError};
use support::recording_platform::RecordingPlatform;
use support::{FakeLlm, config_for, eventually, start_daemon_with};

async fn daemon_with(
    platform: &Arc<RecordingPlatform>,
    llm: &FakeLlm,
    home: &std::path::Path,
    extra: &str,
) -> support::TestDaemon {
    let options = DaemonOptions { extra_platforms: vec![platform.clone() as Arc<_>], ..Default::default() };
    let d = start_daemon_with(home, &config_for(llm, extra), &[("REC_ALLOW_ALL_USERS", "true")], options).await;
    // The platform's `run` receives the ingress right after start.
    assert!(eventually(Duration::from_secs(2), || platform.started()).await);
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_messages_are_acked_at_once_and_answered_in_order() {
    let llm = FakeLlm::builder().latency(Duration::from_millis(300)).start().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    // Batching off: each quick message is a turn of its own, queued behind the first.
    let d = daemon_with(&platform, &llm, home.path(), "[agent]\nbatch_window = \"0s\"\n").await;
    for i in 0..3 {
        assert_eq!(platform.inject(&format!("e{i}"), "ann", &format!("m{i}")).await, Accepted::New);
    }
    assert!(eventually(Duration::from_secs(10), || platform.sent().len() == 5).await, "{:?}", platform.texts());
    assert_eq!(platform.texts(), ["queued (1)", "queued (2)", "echo: m0", "echo: m1", "echo: m2"]);
    let kinds: Vec<_> = platform.sent().into_iter().map(|(_, m)| m.kind).collect();
    assert_eq!(kinds[..2], [OutboundKind::Notice, OutboundKind::Notice]);
    let replies: Vec<_> = platform.sent().into_iter().map(|(_, m)| m.reply_to).collect();
    assert_eq!(replies, [Some("e1"), Some("e2"), Some("e0"), Some("e1"), Some("e2")].map(|r| r.map(str::to_owned)));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_event_is_a_duplicate_and_runs_once() {
    let llm = FakeLlm::echo().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = daemon_with(&platform, &llm, home.path(), "").await;
    assert_eq!(platform.inject("same-id", "bo", "hi").await, Accepted::New);
    assert_eq!(platform.inject("same-id", "bo", "hi").await, Accepted::Duplicate);
    assert!(eventually(Duration::from_secs(5), || platform.sent().len() == 1).await);
    d.daemon.stop().await;
    assert!(eventually(Duration::from_secs(2), || !platform.started()).await);
    // Still a duplicate after a restart: the dedup key is durable.
    let d = daemon_with(&platform, &llm, home.path(), "").await;
    assert_eq!(platform.inject("same-id", "bo", "hi").await, Accepted::Duplicate);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(llm.count(), 1);
    assert_eq!(platform.texts(), ["echo: hi"]);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_replies_are_chunked_to_the_platform_limit_in_order() {
    let long = "word ".repeat(200);
    let llm = FakeLlm::builder().reply(&long).start().await;
    let platform = RecordingPlatform::new(100);
    let home = tempfile::tempdir().unwrap();
    let d = daemon_with(&platform, &llm, home.path(), "").await;
    platform.inject("long", "cy", "talk a lot").await;
    assert!(eventually(Duration::from_secs(5), || platform.sent().len() >= 10).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let sent = platform.sent();
    let count = u32::try_from(sent.len()).unwrap();
    for (i, (_, message)) in sent.iter().enumerate() {
        assert!(message.text.chars().count() <= 100);
        assert_eq!(message.chunk, (u32::try_from(i).unwrap(), count));
    }
    let joined: String = sent.iter().map(|(_, m)| m.text.as_str()).collect::<Vec<_>>().join(" ");
    assert_eq!(joined.split_whitespace().count(), 200);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_send_waits_for_retry_after_then_delivers_once() {
    let llm = FakeLlm::echo().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = daemon_with(&platform, &llm, home.path(), "").await;
    platform.fail_next_send(PlatformError::RateLimited { retry_after: Duration::from_millis(700) });
    let injected = Instant::now();
    platform.inject("rl", "di", "hello").await;
    assert!(eventually(Duration::from_secs(5), || platform.sent().len() == 1).await);
    let (at, message) = platform.sent().remove(0);
    assert_eq!(message.text, "echo: hello");
    assert!(at - injected >= Duration::from_millis(700), "sent {:?} after inject, before retry_after", at - injected);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(platform.sent().len(), 1, "delivered exactly once");
    let metrics = d.daemon.metrics.render();
    assert!(metrics.contains("hermesd_outbound_messages_total{platform=\"rec\",outcome=\"retried\"} 1"), "{metrics}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_session_actors_exit() {
    let llm = FakeLlm::echo().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = daemon_with(&platform, &llm, home.path(), "[agent]\nsession_idle = \"200ms\"\n").await;
    for i in 0..20 {
        platform.inject(&format!("idle-{i}"), &format!("user{i}"), "hi").await;
    }
    assert!(eventually(Duration::from_secs(5), || platform.sent().len() == 20).await);
    let active = || d.daemon.metrics.render().lines().any(|l| l == "hermesd_active_sessions 0");
    assert!(eventually(Duration::from_secs(3), active).await, "{}", d.daemon.metrics.render());
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_users_pair_by_code_and_are_answered_once_approved() {
    let llm = FakeLlm::echo().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let options = DaemonOptions { extra_platforms: vec![platform.clone() as Arc<_>], ..Default::default() };
    // No allowlist: default deny.
    let d = start_daemon_with(home.path(), &config_for(&llm, ""), &[], options).await;
    assert!(eventually(Duration::from_secs(2), || platform.started()).await);
    platform.inject("p1", "zed", "hello?").await;
    assert!(eventually(Duration::from_secs(5), || platform.sent().len() == 1).await);
    let greeting = platform.texts().remove(0);
    assert!(greeting.contains("pairing code is"), "{greeting}");
    let code = greeting.split_whitespace().last().unwrap().to_owned();
    assert_eq!(code.len(), 8, "{greeting}");
    assert_eq!(llm.count(), 0, "nothing reached the model");

    // The operator approves; the user is answered from then on.
    let store =
        hermesd::store::SqliteStore::open(&home.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
    let key = hermesd::access::PairingKey::load_or_create(home.path()).unwrap();
    let approved = hermesd::access::approve(&store, &key, "rec", &code).await.unwrap();
    assert!(matches!(approved, hermesd::store::PairingApproval::Approved { ref user_id, .. } if user_id == "zed"));
    platform.inject("p2", "zed", "now?").await;
    assert!(eventually(Duration::from_secs(5), || platform.texts().contains(&"echo: now?".to_owned())).await);
    store.close().await;
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_quick_messages_are_one_turn_and_all_three_events_close_with_it() {
    let llm = FakeLlm::builder().reply("one answer for all three").start().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = daemon_with(&platform, &llm, home.path(), "[agent]\nbatch_window = \"400ms\"\n").await;
    let started = Instant::now();
    for (i, text) in ["look at this", "and this", "what do you think?"].into_iter().enumerate() {
        assert_eq!(platform.inject(&format!("q{i}"), "ann", text).await, Accepted::New);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(eventually(Duration::from_secs(10), || !platform.sent().is_empty()).await);
    assert!(started.elapsed() >= Duration::from_millis(400), "the turn waited for the window");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(platform.texts(), ["one answer for all three"], "one reply, no queued notices");
    assert_eq!(platform.sent()[0].1.reply_to.as_deref(), Some("q2"), "the reply answers the latest message");
    assert_eq!(llm.count(), 1, "one turn");
    let user = support::prompt(&llm.requests()[0]).into_iter().rfind(|(role, _)| role == "user").unwrap().1;
    assert_eq!(user, "look at this\nand this\nwhat do you think?");
    d.daemon.stop().await;
    // Every batched event was closed with the turn: a restart reruns nothing.
    let store =
        hermesd::store::SqliteStore::open(&home.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
    use hermesd::store::InboundStore;
    assert!(store.unfinished_events().await.unwrap().events.is_empty());
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_during_a_running_turn_is_queued_not_batched() {
    let llm = FakeLlm::builder().latency(Duration::from_millis(800)).start().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = daemon_with(&platform, &llm, home.path(), "[agent]\nbatch_window = \"200ms\"\n").await;
    platform.inject("r0", "bea", "first").await;
    // Past the window: the first turn is running now.
    assert!(eventually(Duration::from_secs(5), || llm.count() == 1).await);
    platform.inject("r1", "bea", "second").await;
    platform.inject("r2", "bea", "third").await;
    assert!(eventually(Duration::from_secs(10), || platform.sent().len() == 5).await, "{:?}", platform.texts());
    assert_eq!(platform.texts(), ["queued (1)", "queued (2)", "echo: first", "echo: second", "echo: third"]);
    // Two people writing at once each get their own turn.
    platform.inject("s0", "cai", "mine").await;
    platform.inject("s1", "dov", "yours").await;
    assert!(eventually(Duration::from_secs(10), || platform.sent().len() == 7).await, "{:?}", platform.texts());
    d.daemon.stop().await;
}
