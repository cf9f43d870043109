//! Slack end to end, the interactive parts: Block Kit approval buttons pressed over Socket Mode
//! and over the Events API's interactivity form, pairing for unknown DM senders, strangers in
//! channels ignored, and tool progress kept out of channels while DMs get it.

use std::time::Duration;

use serde_json::{Value, json};

use super::support::fake_llm::Step;
use super::support::fake_slack::events::{EventPost, post_interaction};
use super::support::fake_slack::{BOT_ID, BOT_USER, FakeSlack, Posted};
use super::support::{FakeLlm, eventually};
use super::{APP_TOKEN, BOT_TOKEN, SECRET, WAIT, ready, settle, slack_config, start};

/// The `block_actions` payload Slack sends when `user` presses the button with `value`.
fn press(posted: &Posted, user: &str, value: &str) -> Value {
    let mut message =
        json!({"type": "message", "ts": posted.ts, "user": BOT_USER, "bot_id": BOT_ID, "text": posted.text});
    if let Some(thread) = &posted.thread_ts {
        message["thread_ts"] = json!(thread);
    }
    json!({
        "type": "block_actions", "token": "legacy", "api_app_id": "A1", "trigger_id": "trig-1",
        "user": {"id": user, "username": "ann", "team_id": "T1"}, "team": {"id": "T1"},
        "container": {"type": "message", "message_ts": posted.ts, "channel_id": posted.channel, "is_ephemeral": false},
        "channel": {"id": posted.channel, "name": "directmessage"},
        "message": message,
        "actions": [{"action_id": "hermesd:0", "block_id": "b1", "type": "button", "value": value, "action_ts": "1700000100.000001"}],
    })
}

/// The button values of a posted message's actions block.
fn button_values(posted: &Posted) -> Vec<String> {
    let blocks = posted.blocks.clone().unwrap_or(Value::Null);
    let actions = blocks.as_array().into_iter().flatten().find(|b| b["type"] == "actions").cloned();
    let elements = actions.map(|a| a["elements"].clone()).unwrap_or(Value::Null);
    elements.as_array().into_iter().flatten().filter_map(|e| e["value"].as_str().map(str::to_owned)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_button_pressed_over_socket_mode_lets_the_command_run() {
    let llm = FakeLlm::builder()
        .tool_calls(&[("terminal", r#"{"command":"git push --force origin x"}"#)])
        .reply("pushed (or tried)")
        .start()
        .await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let config = slack_config(&llm, &slack, "\n[tools]\napproval_timeout = \"20s\"");
    let d = start(home.path(), &config, &[]).await;
    slack.push_event(slack.user_message("D1", "U1", "force push please", None));
    let asked = || slack.posted_to("D1").into_iter().find(|p| !button_values(p).is_empty());
    assert!(eventually(WAIT, || asked().is_some()).await, "{:?}", slack.posted());
    let approval = asked().unwrap();
    let values = button_values(&approval);
    assert!(values.contains(&hermesd::turn::approvals::APPROVE.to_owned()), "{values:?}");
    assert!(values.contains(&hermesd::turn::approvals::DENY.to_owned()), "{values:?}");

    let envelope = slack.push_interaction(press(&approval, "U1", hermesd::turn::approvals::APPROVE));
    let finished = || slack.texts("D1").iter().any(|t| t.contains("pushed (or tried)"));
    assert!(eventually(Duration::from_secs(20), finished).await, "{:?}", slack.texts("D1"));
    let requests = llm.requests();
    let result = requests[1]["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "tool").cloned();
    let result = result.and_then(|m| m["content"].as_str().map(str::to_owned)).unwrap_or_default();
    assert!(result.contains("exit code"), "the command ran: {result}");
    assert!(slack.sockets().acked(&envelope), "the press was acknowledged");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_button_press_posted_to_the_events_api_reaches_the_host() {
    let llm = FakeLlm::echo().await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &slack_config(&llm, &slack, "mode = \"events\""), &[]).await;
    assert!(ready(&d.base).await);
    let thread = "1700000000.000100".to_owned();
    let stale = Posted {
        channel: "C1".into(),
        thread_ts: Some(thread.clone()),
        ts: "1700000050.000200".into(),
        text: "Run it?".into(),
        blocks: None,
    };
    let payload = press(&stale, "U1", hermesd::turn::approvals::APPROVE);
    let (status, body) =
        post_interaction(&d.base, &payload, &EventPost { tamper: true, ..EventPost::signed(SECRET) }).await;
    assert_eq!(status, 401, "a forged press is refused: {body}");
    let (status, body) = post_interaction(&d.base, &payload, &EventPost::signed(SECRET)).await;
    assert_eq!(status, 200, "{body}");
    assert!(eventually(WAIT, || !slack.posted_to("C1").is_empty()).await, "{:?}", slack.posted());
    let answer = slack.posted_to("C1").remove(0);
    assert_eq!(answer.text, "That button is no longer active.", "nothing was pending");
    assert_eq!(answer.thread_ts, Some(thread), "answered in the button's thread");
    assert_eq!(llm.count(), 0);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_dm_senders_pair_and_unknown_channel_users_are_ignored() {
    let llm = FakeLlm::echo().await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    // No allowlist: default deny.
    let d = start(home.path(), &slack_config(&llm, &slack, ""), &[("SLACK_ALLOWED_USERS", "")]).await;
    slack.push_event(slack.user_message("D9", "U9", "hello?", None));
    assert!(eventually(WAIT, || slack.texts("D9").len() == 1).await, "{:?}", slack.posted());
    let greeting = slack.texts("D9").remove(0);
    assert!(greeting.contains("pairing code is") && greeting.contains("hermesd pairing approve slack"), "{greeting}");

    let intrusion = slack.push_event(slack.user_message("C1", "U8", &format!("<@{BOT_USER}> let me in"), None));
    assert!(eventually(WAIT, || slack.sockets().acked(&intrusion)).await);
    settle().await;
    assert!(slack.posted_to("C1").is_empty(), "a stranger in a channel gets nothing: {:?}", slack.posted());
    assert_eq!(llm.count(), 0, "nothing reached the model");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_progress_stays_out_of_channels_but_dms_get_it() {
    // Step n keeps n + 1 tasks, so every progress text differs; about 3 s of tools per turn.
    let todo = |n: u32| {
        let tasks: Vec<Value> = (0..=n).map(|i| json!({"id": i.to_string(), "content": format!("step {i}")})).collect();
        Step::ToolCalls(vec![("todo".to_owned(), json!({ "todos": tasks }).to_string())])
    };
    let mut builder = FakeLlm::builder();
    for done in ["channel done", "dm done"] {
        for n in 0..5 {
            builder = builder.step(Duration::from_millis(700), todo(n));
        }
        builder = builder.step(Duration::from_millis(700), Step::Reply(done.into()));
    }
    let llm = builder.start().await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &slack_config(&llm, &slack, ""), &[]).await;

    let mention = slack.user_message("C1", "U1", &format!("<@{BOT_USER}> work through the list"), None);
    slack.push_event(mention.clone());
    let fake = &slack;
    let done = |channel: &'static str, text: &'static str| move || fake.texts(channel).iter().any(|t| t == text);
    assert!(eventually(Duration::from_secs(20), done("C1", "channel done")).await, "{:?}", slack.posted());
    assert_eq!(slack.texts("C1"), ["channel done"], "no progress message in the channel");
    assert!(slack.updates().is_empty(), "{:?}", slack.updates());
    let statuses = slack.statuses();
    assert!(
        statuses.iter().any(|s| s["channel_id"] == "C1" && s["thread_ts"] == mention["ts"]),
        "the assistant status showed while the turn ran: {statuses:?}"
    );

    slack.push_event(slack.user_message("D1", "U1", "work through it here", None));
    assert!(eventually(Duration::from_secs(20), done("D1", "dm done")).await, "{:?}", slack.posted());
    let texts = slack.texts("D1");
    assert_eq!(texts.len(), 2, "one progress message, then the answer: {texts:?}");
    let updates = slack.updates();
    assert!(!updates.is_empty() && updates.iter().all(|u| u.channel == "D1"), "{updates:?}");
    for pair in updates.windows(2) {
        assert_ne!(pair[0].text, pair[1].text, "a no-op edit was sent");
        assert!(pair[1].at - pair[0].at >= Duration::from_millis(950), "edits closer than 1 s: {updates:?}");
    }
    d.daemon.stop().await;
}
