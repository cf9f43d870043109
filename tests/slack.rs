//! Slack end to end: the real daemon (in-process) against the fake Slack and the fake LLM — DMs
//! over Socket Mode and over the signed Events API, channel mentions answered in threads,
//! unmentioned chatter ignored, redelivered envelopes and Slack retries handled once, dropped
//! sockets replaced, bad signatures refused, 429s waited out, and the conformance kit.
#![cfg(feature = "slack")]

mod support;

#[path = "slack/adapter.rs"]
mod adapter;
#[path = "slack/interactive.rs"]
mod interactive;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hermesd_platform::conformance::{check_reports_rate_limit, check_run_honours_cancel, check_send_chunks};
use hermesd_platform::{ChatRef, ChatType, OutboundKind, OutboundMessage, Platform};
use hermesd_slack::{SlackMode, SlackPlatform, SlackSettings};
use serde_json::{Value, json};
use support::fake_slack::events::{EventPost, post_event};
use support::fake_slack::{BOT_USER, FakeSlack};
use support::{FakeLlm, TestDaemon, config_for, eventually, start_daemon};

const BOT_TOKEN: &str = "xoxb-test-bot-token";
const APP_TOKEN: &str = "xapp-test-app-token";
const SECRET: &str = "test-signing-secret";
const WAIT: Duration = Duration::from_secs(10);

/// `[platforms.slack]` pointing at `slack` with `settings` lines added.
fn slack_config(llm: &FakeLlm, slack: &FakeSlack, settings: &str) -> String {
    let table = format!("[platforms.slack]\nenabled = true\napi_url = \"{}\"\n{settings}\n", slack.api_url());
    config_for(llm, &table)
}

/// A daemon with the Slack adapter; U1 and U2 are allowed unless `env` says otherwise.
async fn start(home: &Path, config: &str, env: &[(&str, &str)]) -> TestDaemon {
    let mut all =
        vec![("SLACK_BOT_TOKEN", BOT_TOKEN), ("SLACK_APP_TOKEN", APP_TOKEN), ("SLACK_SIGNING_SECRET", SECRET)];
    if !env.iter().any(|(k, _)| *k == "SLACK_ALLOWED_USERS") {
        all.push(("SLACK_ALLOWED_USERS", "U1,U2"));
    }
    all.extend_from_slice(env);
    start_daemon(home, config, &all).await
}

fn llm_saw(llm: &FakeLlm, needle: &str) -> bool {
    llm.requests().iter().any(|r| r.to_string().contains(needle))
}

/// Waits until `/readyz` answers 200 (the adapter knows who the bot is).
async fn ready(base: &str) -> bool {
    for _ in 0..100 {
        let response = support::client().get(format!("{base}/readyz")).send().await;
        if response.is_ok_and(|r| r.status().as_u16() == 200) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Lets a duplicate or a late turn show up before asserting there was none.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(700)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_over_socket_mode_is_answered_and_acked_after_accept() {
    let llm = FakeLlm::echo().await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &slack_config(&llm, &slack, ""), &[]).await;
    let event = slack.user_message("D1", "U1", "hello there", None);
    let envelope = slack.push_event(event.clone());
    assert!(eventually(WAIT, || !slack.posted_to("D1").is_empty()).await, "{:?}", slack.posted());
    let reply = slack.posted_to("D1").remove(0);
    assert_eq!(reply.text, "echo: hello there");
    assert_eq!(reply.thread_ts, None, "a top-level DM is answered top-level");
    assert!(slack.sockets().acked(&envelope), "the envelope was acknowledged");
    assert_eq!(slack.sockets().open(), 1, "exactly one socket per app token");
    let readyz = support::client().get(format!("{}/readyz", d.base)).send().await.unwrap();
    assert_eq!(readyz.status().as_u16(), 200, "{:?}", readyz.text().await);
    settle().await;
    assert_eq!(llm.count(), 1);
    assert_eq!(slack.posted().len(), 1, "{:?}", slack.posted());
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_over_the_events_api_is_answered_and_the_challenge_is_met() {
    let llm = FakeLlm::echo().await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &slack_config(&llm, &slack, "mode = \"events\""), &[]).await;
    let challenge = json!({"token": "legacy", "challenge": "c-123", "type": "url_verification"});
    let (status, body) = post_event(&d.base, &challenge, &EventPost::signed(SECRET)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["challenge"], "c-123");

    assert!(ready(&d.base).await, "events mode became ready once auth.test answered");
    let callback = slack.callback(slack.user_message("D1", "U1", "over http", None));
    let (status, body) = post_event(&d.base, &callback, &EventPost::signed(SECRET)).await;
    assert_eq!(status, 200, "{body}");
    assert!(eventually(WAIT, || !slack.posted_to("D1").is_empty()).await, "{:?}", slack.posted());
    assert_eq!(slack.texts("D1"), ["echo: over http"]);
    assert_eq!(slack.sockets().hellos(), 0, "events mode opens no socket");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_mention_is_answered_in_its_thread_and_chatter_is_ignored() {
    let llm = FakeLlm::echo().await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &slack_config(&llm, &slack, ""), &[]).await;

    let chatter = slack.push_event(slack.user_message("C1", "U1", "just chatting among ourselves", None));
    let mention = slack.user_message("C1", "U2", &format!("<@{BOT_USER}> what is up?"), None);
    let ts = mention["ts"].as_str().unwrap().to_owned();
    slack.push_event(mention.clone());
    // Slack also sends app_mention for the same message: one turn, not two.
    let mut app_mention = mention.clone();
    app_mention["type"] = json!("app_mention");
    app_mention.as_object_mut().unwrap().remove("channel_type");
    slack.push_event(app_mention);
    assert!(eventually(WAIT, || slack.posted_to("C1").len() == 1).await, "{:?}", slack.posted());
    let answer = slack.posted_to("C1").remove(0);
    assert_eq!(answer.text, "echo: [U2] what is up?", "a channel thread is shared: the speaker is named");
    assert_eq!(answer.thread_ts.as_deref(), Some(ts.as_str()), "answered in a thread started on the mention");

    // A reply in that thread needs no mention, and continues the same session.
    slack.push_event(slack.user_message("C1", "U1", "and then?", Some(&ts)));
    assert!(eventually(WAIT, || slack.posted_to("C1").len() == 2).await, "{:?}", slack.posted());
    let second = slack.posted_to("C1").remove(1);
    assert_eq!(second.text, "echo: [U1] and then?");
    assert_eq!(second.thread_ts.as_deref(), Some(ts.as_str()));
    let history = llm.requests()[1].to_string();
    assert!(history.contains("what is up?"), "the thread is one session: {history}");

    // `@bot !status` is a command to the host, answered in its own thread.
    let status = slack.user_message("C1", "U1", &format!("<@{BOT_USER}> !status"), None);
    slack.push_event(status.clone());
    assert!(eventually(WAIT, || slack.posted_to("C1").len() == 3).await, "{:?}", slack.posted());
    let third = slack.posted_to("C1").remove(2);
    assert!(third.text.contains("fake-model"), "the host answered !status: {third:?}");
    assert_eq!(third.thread_ts.as_deref(), status["ts"].as_str());

    settle().await;
    assert!(slack.sockets().acked(&chatter), "ignored events are acknowledged too");
    assert!(!llm_saw(&llm, "just chatting"), "an unmentioned message reached the model");
    assert_eq!(llm.count(), 2, "the mention (once) and the thread reply");
    assert_eq!(slack.posted().len(), 3, "{:?}", slack.posted());
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_envelope_redelivered_after_reconnect_is_handled_once() {
    let llm = FakeLlm::echo().await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &slack_config(&llm, &slack, ""), &[]).await;
    let first = slack.push_event(slack.user_message("D1", "U1", "only once", None));
    assert!(eventually(WAIT, || slack.texts("D1").len() == 1).await, "{:?}", slack.posted());
    assert!(eventually(WAIT, || slack.sockets().acked(&first)).await);

    slack.sockets().disconnect("refresh_requested");
    assert!(eventually(WAIT, || slack.sockets().hellos() == 2).await, "a new socket after a disconnect envelope");
    let again = slack.redeliver(&first);
    assert!(eventually(WAIT, || slack.sockets().acked(&again)).await, "the redelivery is acknowledged");
    settle().await;
    assert_eq!(llm.count(), 1, "the redelivered envelope ran no second turn");
    assert_eq!(slack.texts("D1"), ["echo: only once"]);
    assert!(eventually(WAIT, || slack.sockets().open() == 1).await, "the old socket was closed");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_dropped_mid_stream_reconnects_and_later_events_arrive() {
    let llm = FakeLlm::echo().await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &slack_config(&llm, &slack, ""), &[]).await;
    slack.push_event(slack.user_message("D1", "U1", "before", None));
    assert!(eventually(WAIT, || slack.texts("D1").len() == 1).await, "{:?}", slack.posted());

    slack.sockets().drop_all();
    assert!(eventually(WAIT, || slack.sockets().open() == 0).await);
    // Sent while no socket is open: Slack keeps it for the next connection.
    let later = slack.push_event(slack.user_message("D1", "U1", "after", None));
    assert!(eventually(WAIT, || slack.sockets().hellos() == 2).await, "the adapter opened a new socket");
    assert!(eventually(WAIT, || slack.texts("D1").len() == 2).await, "{:?}", slack.posted());
    assert_eq!(slack.texts("D1"), ["echo: before", "echo: after"]);
    assert!(slack.sockets().acked(&later));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_signatures_and_stale_timestamps_are_refused_and_retries_run_once() {
    let llm = FakeLlm::echo().await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &slack_config(&llm, &slack, "mode = \"events\""), &[]).await;
    let forged = slack.callback(slack.user_message("D1", "U1", "forged", None));
    let refusals = [
        EventPost { tamper: true, ..EventPost::signed(SECRET) },
        EventPost::signed("another-secret"),
        EventPost { skew_secs: -301, ..EventPost::signed(SECRET) },
        EventPost { skew_secs: 400, ..EventPost::signed(SECRET) },
    ];
    for how in &refusals {
        let (status, body) = post_event(&d.base, &forged, how).await;
        assert_eq!(status, 401, "{how:?}: {body}");
    }

    let callback = slack.callback(slack.user_message("D1", "U1", "deliver me", None));
    assert!(ready(&d.base).await, "events mode became ready once auth.test answered");
    let (status, body) = post_event(&d.base, &callback, &EventPost::signed(SECRET)).await;
    assert_eq!(status, 200, "{body}");
    // Slack retries when it thinks the answer was late: same event, x-slack-retry-num set.
    let retry = EventPost { retry_num: Some(1), ..EventPost::signed(SECRET) };
    assert_eq!(post_event(&d.base, &callback, &retry).await.0, 200);
    assert!(eventually(WAIT, || !slack.texts("D1").is_empty()).await, "{:?}", slack.posted());
    settle().await;
    assert_eq!(slack.texts("D1"), ["echo: deliver me"]);
    assert_eq!(llm.count(), 1, "the retry ran no second turn");
    assert!(!llm_saw(&llm, "forged"));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_post_is_delivered_once_after_retry_after() {
    let llm = FakeLlm::echo().await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &slack_config(&llm, &slack, ""), &[]).await;
    slack.fail_next("chat.postMessage", 429, Some(2), json!({"ok": false, "error": "ratelimited"}));
    let started = std::time::Instant::now();
    slack.push_event(slack.user_message("D1", "U1", "hurry", None));
    assert!(
        eventually(Duration::from_secs(15), || slack.texts("D1").len() == 1).await,
        "{:?}",
        slack.calls("chat.postMessage")
    );
    let waited = started.elapsed();
    settle().await;
    assert_eq!(slack.calls("chat.postMessage").len(), 2, "one refused attempt, one delivery");
    assert_eq!(slack.texts("D1"), ["echo: hurry"]);
    assert!(waited >= Duration::from_secs(2), "delivered {waited:?} after the 429, before Retry-After");
    d.daemon.stop().await;
}

fn adapter(slack: &FakeSlack, home: &Path) -> Arc<SlackPlatform> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let settings = SlackSettings {
        bot_token: BOT_TOKEN.into(),
        api_url: slack.api_url(),
        mode: SlackMode::Socket { app_token: APP_TOKEN.into() },
        media_dir: home.join("media").join("slack"),
        ..SlackSettings::default()
    };
    assert_eq!(settings.validate(), Ok(()));
    Arc::new(SlackPlatform::new(settings))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adapter_passes_the_conformance_kit() {
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let platform = adapter(&slack, home.path());
    let pending = slack.push_event(slack.user_message("D1", "U1", "hi from the kit", None));
    let ingress = check_run_honours_cancel(platform.clone(), Duration::from_millis(1500), Duration::from_secs(2)).await;
    let events = ingress.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].chat(), &ChatRef::new("slack", "D1", ChatType::Dm));
    assert!(slack.sockets().acked(&pending));

    let mut thread = ChatRef::new("slack", "C1", ChatType::Thread);
    thread.thread_id = Some("1700000000.000100".into());
    let long = "A sentence that goes on for a while, with **bold** words. ".repeat(1500);
    let refs = check_send_chunks(platform.as_ref(), &thread, &long).await;
    assert!(refs.len() >= 3, "{} chunks", refs.len());
    let posted = slack.posted_to("C1");
    assert_eq!(posted.len(), refs.len());
    assert!(
        posted.iter().all(|p| p.thread_ts.as_deref() == Some("1700000000.000100") && p.text.chars().count() <= 39_000)
    );
    assert!(
        posted[0].text.contains("*bold*") && !posted[0].text.contains("**bold**"),
        "mrkdwn: {}",
        &posted[0].text[..80]
    );

    slack.fail_next("chat.postMessage", 429, Some(3), json!({"ok": false, "error": "ratelimited"}));
    let message = OutboundMessage {
        chat: thread,
        text: "limited".into(),
        reply_to: None,
        kind: OutboundKind::Reply,
        buttons: Vec::new(),
        chunk: (0, 1),
        file: None,
    };
    check_reports_rate_limit(|| platform.send(&message), Duration::from_secs(3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_route_changes_the_model_for_that_channel_only() {
    let (llm, alt_llm) = (FakeLlm::echo().await, FakeLlm::echo().await);
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let routes = format!(
        "[[model.fallback]]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"alt-model\"\n\n\
         [[routes]]\nplatform = \"slack\"\nguild = \"T1\"\nchat = \"C2\"\nmodel = \"alt-model\"\n",
        alt_llm.base_url()
    );
    let config = format!("{}\n{routes}", slack_config(&llm, &slack, ""));
    let d = start(home.path(), &config, &[]).await;
    for channel in ["C1", "C2"] {
        slack.push_event(slack.user_message(channel, "U1", &format!("<@{BOT_USER}> hello {channel}"), None));
        assert!(eventually(WAIT, || slack.posted_to(channel).len() == 1).await, "{:?}", slack.posted());
    }
    assert!(llm_saw(&llm, "hello C1") && !llm_saw(&llm, "hello C2"), "C1 stays on the primary");
    assert!(llm_saw(&alt_llm, "hello C2") && !llm_saw(&alt_llm, "hello C1"), "C2 starts on the route's model");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_apps_are_two_accounts_each_verified_with_its_own_secret() {
    let (home_llm, work_llm) = (FakeLlm::echo().await, FakeLlm::echo().await);
    let home_app = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let work_app = FakeSlack::start("xoxb-work-bot", "xapp-unused").await;
    let home = tempfile::tempdir().unwrap();
    // The table's app keeps Socket Mode; the work app is an account on the Events API with its
    // own token, signing secret, Web API and profile.
    let work = format!(
        "[platforms.slack.accounts.work]\nmode = \"events\"\nbot_token_env = \"SLACK_WORK_BOT_TOKEN\"\n\
         signing_secret_env = \"SLACK_WORK_SIGNING_SECRET\"\napi_url = \"{}\"\nprofile = \"work\"\n\n\
         [profiles.work.model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"work-model\"\n",
        work_app.api_url(),
        work_llm.base_url()
    );
    let config = format!("{}\n{work}", slack_config(&home_llm, &home_app, ""));
    let env = [("SLACK_WORK_BOT_TOKEN", "xoxb-work-bot"), ("SLACK_WORK_SIGNING_SECRET", "work-secret")];
    let d = start(home.path(), &config, &env).await;
    assert!(ready(&d.base).await, "both apps know who they are");

    home_app.push_event(home_app.user_message("D1", "U1", "hello home", None));
    let callback = work_app.callback(work_app.user_message("D1", "U1", "hello work", None));
    let (status, _) = post_event(&d.base, &callback, &EventPost::to_account(SECRET, "work")).await;
    assert_eq!(status, 401, "the work app's path takes only the work app's signature");
    let (status, _) = post_event(&d.base, &callback, &EventPost::signed("work-secret")).await;
    assert_eq!(status, 404, "the table's app is on Socket Mode: no /slack/events");
    let (status, body) = post_event(&d.base, &callback, &EventPost::to_account("work-secret", "work")).await;
    assert_eq!(status, 200, "{body}");

    let answered = || home_app.texts("D1").len() == 1 && work_app.texts("D1").len() == 1;
    assert!(eventually(WAIT, answered).await, "{:?} {:?}", home_app.posted(), work_app.posted());
    settle().await;
    assert_eq!(home_app.texts("D1"), ["echo: hello home"], "answered once, by its own app");
    assert_eq!(work_app.texts("D1"), ["echo: hello work"]);
    assert!(llm_saw(&home_llm, "hello home") && !llm_saw(&home_llm, "hello work"));
    assert!(llm_saw(&work_llm, "hello work") && !llm_saw(&work_llm, "hello home"), "the work profile's model");
    let ready: Value = support::client().get(format!("{}/readyz", d.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(ready["platforms"], json!({"slack": "ok", "slack@work": "ok"}), "{ready}");
    d.daemon.stop().await;
}
