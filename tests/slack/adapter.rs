//! Slack adapter behaviour that needs a closer look than a chat round trip: acks wait for the
//! ingress, a socket Slack stops feeding is replaced, a second consumer shows in `/readyz`, and
//! files are downloaded with the bot token under a size cap.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use hermesd_platform::conformance::RecordingIngress;
use hermesd_platform::{Accepted, Admission, InboundEvent, Ingress, IngressError, Platform, PlatformContext};
use hermesd_slack::{SlackMode, SlackPlatform, SlackSettings};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::support::fake_slack::FakeSlack;
use super::support::{FakeLlm, eventually};
use super::{APP_TOKEN, BOT_TOKEN, WAIT, settle, slack_config, start};

/// Refuses the first `refusals` accepts (a store that is briefly unavailable), then records.
struct Flaky {
    refusals: AtomicUsize,
    inner: Arc<RecordingIngress>,
}

#[async_trait]
impl Ingress for Flaky {
    async fn admit(&self, event: &InboundEvent) -> Result<Admission, IngressError> {
        self.inner.admit(event).await
    }

    async fn accept(&self, event: InboundEvent) -> Result<Accepted, IngressError> {
        if self.refusals.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
            return Err(IngressError("store unavailable".into()));
        }
        self.inner.accept(event).await
    }

    async fn load_cursor(&self, platform: &str) -> Result<Option<String>, IngressError> {
        self.inner.load_cursor(platform).await
    }

    async fn save_cursor(&self, platform: &str, cursor: &str) -> Result<(), IngressError> {
        self.inner.save_cursor(platform, cursor).await
    }
}

fn settings(slack: &FakeSlack) -> SlackSettings {
    let _ = rustls::crypto::ring::default_provider().install_default();
    SlackSettings {
        bot_token: BOT_TOKEN.into(),
        api_url: slack.api_url(),
        mode: SlackMode::Socket { app_token: APP_TOKEN.into() },
        ..SlackSettings::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_envelope_is_acknowledged_only_after_the_ingress_accepted_it() {
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let platform = Arc::new(SlackPlatform::new(settings(&slack)));
    let recorded = RecordingIngress::new();
    let ingress = Arc::new(Flaky { refusals: AtomicUsize::new(1), inner: recorded.clone() });
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (platform, cancel) = (platform.clone(), cancel.clone());
        async move { platform.run(PlatformContext { ingress }, cancel).await }
    });
    let envelope = slack.push_event(slack.user_message("D1", "U1", "store me", None));
    assert!(eventually(WAIT, || slack.sockets().sent().iter().any(|e| e.envelope_id == envelope.envelope_id)).await);
    settle().await;
    assert!(!slack.sockets().acked(&envelope), "a refused accept must leave the envelope unacknowledged");
    assert!(recorded.events().is_empty());

    // Slack delivers an unacknowledged envelope again; this time the store takes it.
    let again = slack.redeliver(&envelope);
    assert!(eventually(WAIT, || slack.sockets().acked(&again)).await, "{:?}", slack.sockets().acks());
    assert_eq!(recorded.events().len(), 1);
    assert!(!slack.sockets().acked(&envelope), "only the accepted delivery was acknowledged");
    cancel.cancel();
    assert!(matches!(tokio::time::timeout(WAIT, run).await, Ok(Ok(Ok(())))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_slack_stopped_feeding_is_replaced_though_it_answers_pings() {
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let quick = SlackSettings {
        socket_ping_interval: Duration::from_millis(200),
        socket_idle_reconnect: Duration::from_millis(900),
        ..settings(&slack)
    };
    let platform = Arc::new(SlackPlatform::new(quick));
    let cancel = CancellationToken::new();
    let ingress = RecordingIngress::new();
    let run = tokio::spawn({
        let (platform, cancel, ingress) = (platform.clone(), cancel.clone(), ingress.clone());
        async move { platform.run(PlatformContext { ingress }, cancel).await }
    });
    assert!(eventually(WAIT, || slack.sockets().hellos() >= 3).await, "hellos: {}", slack.sockets().hellos());
    assert!(slack.sockets().open() <= 1, "the quiet socket was closed, not kept beside the new one");
    // A fresh socket still receives.
    slack.push_event(slack.user_message("D1", "U1", "still there?", None));
    assert_eq!(ingress.wait_for(1, WAIT).await.len(), 1);
    cancel.cancel();
    assert!(matches!(tokio::time::timeout(WAIT, run).await, Ok(Ok(Ok(())))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_that_stops_answering_pings_is_replaced() {
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let quick = SlackSettings {
        socket_ping_interval: Duration::from_millis(200),
        // Far away: only the unanswered pings can end the socket in this test.
        socket_idle_reconnect: Duration::from_secs(600),
        ..settings(&slack)
    };
    let platform = Arc::new(SlackPlatform::new(quick));
    let cancel = CancellationToken::new();
    let ingress = RecordingIngress::new();
    let run = tokio::spawn({
        let (platform, cancel, ingress) = (platform.clone(), cancel.clone(), ingress.clone());
        async move { platform.run(PlatformContext { ingress }, cancel).await }
    });
    assert!(eventually(WAIT, || slack.sockets().hellos() == 1).await);
    slack.sockets().mute_all();
    assert!(eventually(WAIT, || slack.sockets().hellos() == 2).await, "a new socket replaced the silent one");
    let report = platform.health().expect("health once run started");
    assert!(report.seconds_since_progress.is_some(), "{report:?}");
    slack.push_event(slack.user_message("D1", "U1", "are you back?", None));
    assert_eq!(ingress.wait_for(1, WAIT).await.len(), 1);
    cancel.cancel();
    assert!(matches!(tokio::time::timeout(WAIT, run).await, Ok(Ok(Ok(())))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_consumer_of_the_app_token_is_reported_by_readyz() {
    let llm = FakeLlm::echo().await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    slack.sockets().other_consumers(1);
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &slack_config(&llm, &slack, ""), &[]).await;
    assert!(eventually(WAIT, || slack.sockets().hellos() == 1).await);
    let readyz = || async {
        let response = super::support::client().get(format!("{}/readyz", d.base)).send().await.unwrap();
        (response.status().as_u16(), response.json::<Value>().await.unwrap_or(Value::Null))
    };
    let mut seen = (0, Value::Null);
    for _ in 0..50 {
        seen = readyz().await;
        if seen.0 == 503 && seen.1.to_string().contains("stealing events") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen.0, 503, "{}", seen.1);
    assert!(seen.1.to_string().contains("another consumer is stealing events"), "{}", seen.1);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_downloaded_with_the_bot_token_under_a_size_cap() {
    let llm = FakeLlm::echo().await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &slack_config(&llm, &slack, "max_file_mb = 1"), &[]).await;
    let url = slack.add_file("F1/notes.txt", b"remember the milk");
    let big = slack.add_file("F2/big.bin", &vec![7u8; 3 * 1024 * 1024]);
    let mut event = slack.user_message("D1", "U1", "read these", None);
    event["subtype"] = json!("file_share");
    event["files"] = json!([
        {"id": "F1", "name": "notes.txt", "mimetype": "text/plain", "size": 17, "url_private_download": url},
        // Slack under-reports nothing here, so the cap is decided before any download.
        {"id": "F2", "name": "big.bin", "mimetype": "application/octet-stream", "size": 3 * 1024 * 1024, "url_private": big},
    ]);
    slack.push_event(event);
    assert!(eventually(WAIT, || !slack.texts("D1").is_empty()).await, "{:?}", slack.posted());
    let prompt = llm.requests()[0].to_string();
    // The file is named by the path the file tools open (`media/<file>`, the chat's folder).
    let file = prompt
        .split("[file media/")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("{prompt}"));
    let path = format!("media/{file}");
    let saved = home.path().join("media/slack/D1").join(file);
    assert_eq!(std::fs::read(saved).unwrap(), b"remember the milk", "{path}");
    assert!(prompt.contains("its text follows]\\nremember the milk"), "a text file is inlined: {prompt}");
    assert!(prompt.contains("[file too large: big.bin, 3.0 MB]"), "{prompt}");
    assert_eq!(slack.downloads(), ["F1/notes.txt"], "the oversized file was never fetched");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_replies_count_as_addressed_only_in_threads_the_bot_is_in() {
    let llm = FakeLlm::echo().await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let config = slack_config(&llm, &slack, "");
    let d = start(home.path(), &config, &[]).await;
    let mention = slack.user_message("C1", "U1", &format!("<@{}> start", super::BOT_USER), None);
    let ts = mention["ts"].as_str().unwrap().to_owned();
    slack.push_event(mention);
    assert!(eventually(WAIT, || slack.texts("C1").len() == 1).await, "{:?}", slack.posted());
    d.daemon.stop().await;

    // A fresh adapter remembers no threads: Slack is asked who posted in each one.
    let d = start(home.path(), &config, &[]).await;
    let elsewhere = slack.user_message("C1", "U2", "a thread without the bot", None);
    let elsewhere_ts = elsewhere["ts"].as_str().unwrap().to_owned();
    let stray = slack.push_event(slack.user_message("C1", "U1", "reply elsewhere", Some(&elsewhere_ts)));
    slack.push_event(slack.user_message("C1", "U1", "still there?", Some(&ts)));
    assert!(eventually(WAIT, || slack.texts("C1").len() == 2).await, "{:?}", slack.posted());
    assert_eq!(slack.posted_to("C1")[1].thread_ts.as_deref(), Some(ts.as_str()));
    assert!(eventually(WAIT, || slack.sockets().acked(&stray)).await);
    settle().await;
    let asked: Vec<_> = slack.calls("conversations.replies").iter().map(|c| c["ts"].clone()).collect();
    assert!(asked.contains(&json!(ts)) && asked.contains(&json!(elsewhere_ts)), "{asked:?}");
    assert_eq!(slack.texts("C1"), ["echo: [U1] start", "echo: [U1] still there?"]);
    assert!(!llm.requests().iter().any(|r| r.to_string().contains("reply elsewhere")));
    d.daemon.stop().await;
}
