//! No head-of-line blocking: turns waiting for a person give their worker back, so a full pool
//! of waiting approvals never stalls another session; long control commands (`/compress`) run
//! off the adapter's receive loop; a hung platform API delays nobody else.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermesd::daemon::DaemonOptions;
use support::fake_llm::Step;
use support::recording_platform::RecordingPlatform;
use support::{FakeLlm, config_for, eventually, start_daemon_with};

/// Sessions waiting for an approval at once: as many as the pool has workers.
const WAITING: usize = 16;

/// A gauge as `/metrics` shows it.
async fn gauge(base: &str, name: &str) -> i64 {
    let text = support::client().get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(name).and_then(|rest| rest.trim().parse().ok()))
        .unwrap_or_else(|| panic!("{name} missing from /metrics:\n{text}"))
}

fn replies_to(platform: &RecordingPlatform, user: &str, needle: &str) -> usize {
    platform.sent().iter().filter(|(_, m)| m.chat.chat_id == user && m.text.contains(needle)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_parked_approvals_leave_room_for_a_seventeenth_session() {
    let llm = FakeLlm::builder().start().await;
    for _ in 0..WAITING {
        llm.push(
            Duration::ZERO,
            Step::ToolCalls(vec![("terminal".into(), r#"{"command":"git push --force origin nowhere"}"#.into())]),
        );
    }
    let config = config_for(
        &llm,
        &format!(
            "[agent]\nmax_concurrent_turns = {WAITING}\nbatch_window = \"0s\"\nprogress = false\n\n[tools]\napproval_timeout = \"120s\"\n"
        ),
    );
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let options = DaemonOptions { extra_platforms: vec![platform.clone() as Arc<_>], ..Default::default() };
    let d = start_daemon_with(home.path(), &config, &[("REC_ALLOW_ALL_USERS", "true")], options).await;
    assert!(eventually(Duration::from_secs(2), || platform.started()).await);

    for i in 0..WAITING {
        platform.inject(&format!("m{i}"), &format!("u{i}"), "force push please").await;
    }
    let all_asked = eventually(Duration::from_secs(30), || {
        (0..WAITING).all(|i| replies_to(&platform, &format!("u{i}"), "Approval needed") == 1)
    })
    .await;
    assert!(all_asked, "every session asks for approval: {:?}", platform.texts());
    assert!(eventually(Duration::from_secs(5), || llm.count() == WAITING).await);

    // Every worker's session waits for a person; a 17th session is answered at once.
    llm.push(Duration::ZERO, Step::Reply("hello from the seventeenth".into()));
    let started = Instant::now();
    platform.inject("m-17", "u17", "hi").await;
    assert!(
        eventually(Duration::from_secs(10), || replies_to(&platform, "u17", "hello from the seventeenth") == 1).await,
        "the 17th session was answered while 16 wait: {:?}",
        platform.texts()
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!((0..WAITING).all(|i| replies_to(&platform, &format!("u{i}"), "pushed") == 0), "nobody approved yet");
    assert_eq!(gauge(&d.base, "hermesd_turns_parked").await, WAITING as i64);
    assert_eq!(gauge(&d.base, "hermesd_turns_running").await, 0);
    let status_at = platform.sent().len();
    platform.inject("s-0", "u0", "/status").await;
    assert!(
        eventually(Duration::from_secs(5), || {
            platform.sent()[status_at..]
                .iter()
                .any(|(_, m)| m.chat.chat_id == "u0" && m.text.contains("waiting for your answer"))
        })
        .await,
        "/status tells a parked turn: {:?}",
        platform.texts()
    );

    // Approved, they take a worker again and all finish.
    for _ in 0..WAITING {
        llm.push(Duration::ZERO, Step::Reply("pushed (or tried)".into()));
    }
    for i in 0..WAITING {
        platform.inject(&format!("a{i}"), &format!("u{i}"), "/approve").await;
    }
    let all_done = eventually(Duration::from_secs(60), || {
        (0..WAITING).all(|i| replies_to(&platform, &format!("u{i}"), "pushed (or tried)") == 1)
    })
    .await;
    assert!(all_done, "every approved turn finished: {:?}", platform.texts());
    assert_eq!(gauge(&d.base, "hermesd_turns_parked").await, 0);
    let metrics = d.daemon.metrics.clone();
    let idle = || metrics.turns_running.load(std::sync::atomic::Ordering::Relaxed) == 0;
    assert!(eventually(Duration::from_secs(5), idle).await, "every worker was given back");
    d.daemon.stop().await;
}

const TOKEN: &str = "123:ABC";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compress_in_one_chat_does_not_hold_another_chat_on_the_same_platform() {
    use support::fake_telegram::{Chat, FakeTelegram, User};
    const HOLD: Duration = Duration::from_secs(3);
    let llm = FakeLlm::builder().summary_delay(HOLD).start().await;
    let tg = FakeTelegram::builder().token(TOKEN).bot("hermes_bot", 42).start().await;
    let home = tempfile::tempdir().unwrap();
    let config = config_for(
        &llm,
        &format!(
            "[agent]\nbatch_window = \"0s\"\nprogress = false\n\n[platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\n",
            tg.base_url()
        ),
    );
    let env = [("TELEGRAM_BOT_TOKEN", TOKEN), ("TELEGRAM_ALLOWED_USERS", "1001,1002")];
    let d = support::start_daemon(home.path(), &config, &env).await;
    let (ann, bob) = (User::new(1001, "Ann"), User::new(1002, "Bob"));
    let (chat_a, chat_b) = (Chat::private(&ann), Chat::private(&bob));
    let answered = |chat: i64, needle: &str| tg.texts(chat).iter().any(|t| t.contains(needle));
    for i in 0..12 {
        tg.push_message(&chat_a, &ann, &format!("fact {i}"));
        assert!(eventually(Duration::from_secs(10), || answered(chat_a.id, &format!("echo: fact {i}"))).await);
    }

    tg.push_message(&chat_a, &ann, "/compress");
    let summarising = || llm.requests().iter().any(|r| r.to_string().contains("handover summaries"));
    assert!(eventually(Duration::from_secs(10), summarising).await, "the compaction call started");
    let asked = Instant::now();
    tg.push_message(&chat_b, &bob, "are you there?");
    assert!(
        eventually(Duration::from_secs(10), || answered(chat_b.id, "echo: are you there?")).await,
        "{:?}",
        tg.texts(chat_b.id)
    );
    let waited = asked.elapsed();
    assert!(waited < HOLD / 2, "chat B waited {waited:?} behind chat A's compaction");
    assert!(!answered(chat_a.id, "History summarised"), "A's compaction was still running");
    assert!(
        eventually(Duration::from_secs(10), || answered(chat_a.id, "History summarised")).await,
        "{:?}",
        tg.texts(chat_a.id)
    );
    d.daemon.stop().await;
}

#[cfg(feature = "slack")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_slack_web_api_delays_no_other_platform_and_its_send_is_retried() {
    use support::fake_slack::FakeSlack;
    const BOT_TOKEN: &str = "xoxb-test-bot-token";
    const APP_TOKEN: &str = "xapp-test-app-token";
    let llm = FakeLlm::echo().await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let config = config_for(
        &llm,
        &format!(
            "[agent]\nbatch_window = \"0s\"\nprogress = false\n\n[platforms.slack]\nenabled = true\napi_url = \"{}\"\napi_timeout = \"1s\"\n",
            slack.api_url()
        ),
    );
    let env = [("SLACK_BOT_TOKEN", BOT_TOKEN), ("SLACK_APP_TOKEN", APP_TOKEN), ("SLACK_ALLOWED_USERS", "U1")];
    let d = support::start_daemon(home.path(), &config, &env).await;
    assert!(eventually(Duration::from_secs(10), || slack.sockets().hellos() > 0).await, "socket mode connected");

    // Slack takes the answer's chat.postMessage and never replies.
    slack.hang_next("chat.postMessage", 1);
    slack.push_event(slack.user_message("D1", "U1", "hello slack", None));
    let hung = || !slack.calls("chat.postMessage").is_empty();
    assert!(eventually(Duration::from_secs(10), hung).await, "the answer went to slack");
    let started = Instant::now();
    let (status, body) = support::ask(&d.base, Some("elsewhere"), "hello api").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(support::answer(&body), "echo: hello api");
    assert!(started.elapsed() < Duration::from_secs(1), "the API waited {:?} for slack", started.elapsed());

    // The hung call gave up after api_timeout and the outbox sent the answer again.
    let delivered = || slack.texts("D1").iter().any(|t| t == "echo: hello slack");
    assert!(eventually(Duration::from_secs(15), delivered).await, "{:?}", slack.calls("chat.postMessage"));
    assert_eq!(slack.calls("chat.postMessage").len(), 2, "one hung call, one retry");
    d.daemon.stop().await;
}
