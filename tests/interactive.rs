//! Turns with a person in the loop, through a recording chat platform: approvals (timeout,
//! button, command), clarifying questions, steering, heartbeats and the inactivity timeout.

mod support;

use std::sync::Arc;
use std::time::Duration;

use hermesd::daemon::DaemonOptions;
use hermesd_platform::OutboundKind;
use serde_json::Value;
use support::recording_platform::RecordingPlatform;
use support::{FakeLlm, config_for, eventually, start_daemon_with};

async fn start(llm: &FakeLlm, extra: &str) -> (support::TestDaemon, Arc<RecordingPlatform>, tempfile::TempDir) {
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let options = DaemonOptions { extra_platforms: vec![platform.clone() as Arc<_>], ..Default::default() };
    let d = start_daemon_with(home.path(), &config_for(llm, extra), &[("REC_ALLOW_ALL_USERS", "true")], options).await;
    assert!(eventually(Duration::from_secs(2), || platform.started()).await);
    (d, platform, home)
}

fn tool_result(request: &Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    messages.iter().rev().find(|m| m["role"] == "tool").and_then(|m| m["content"].as_str()).unwrap_or("").to_owned()
}

async fn wait_for_text(platform: &RecordingPlatform, needle: &str) -> bool {
    eventually(Duration::from_secs(10), || platform.texts().iter().any(|t| t.contains(needle))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dangerous_command_with_no_answer_is_denied_after_the_timeout() {
    let llm =
        FakeLlm::builder().tool_calls(&[("terminal", r#"{"command":"rm -rf /"}"#)]).reply("understood").start().await;
    let (d, platform, _home) = start(&llm, "[tools]\napproval_timeout = \"1s\"\n").await;
    platform.inject("m1", "ann", "clean up everything").await;
    assert!(wait_for_text(&platform, "understood").await, "{:?}", platform.texts());
    let ask =
        platform.sent().into_iter().find(|(_, m)| m.text.contains("Approval needed")).expect("an approval request").1;
    assert_eq!(ask.kind, OutboundKind::Notice);
    let labels: Vec<&str> = ask.buttons.iter().map(|b| b.label.as_str()).collect();
    assert_eq!(labels, ["Approve", "This session", "Always", "Deny"]);
    assert!(platform.texts().iter().any(|t| t.contains("No answer in time")));
    let result = tool_result(&llm.requests()[1]);
    assert!(result.contains("not run") && result.contains("fail closed"), "{result}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_button_press_lets_the_command_run() {
    let llm = FakeLlm::builder()
        .tool_calls(&[("terminal", r#"{"command":"git push --force origin nowhere"}"#)])
        .reply("pushed (or tried)")
        .start()
        .await;
    let (d, platform, _home) = start(&llm, "[tools]\napproval_timeout = \"20s\"\n").await;
    platform.inject("m1", "bo", "force push please").await;
    assert!(wait_for_text(&platform, "Approval needed").await);
    let (message_id, _) = {
        let sent = platform.sent();
        let index = sent.iter().position(|(_, m)| m.text.contains("Approval needed")).unwrap();
        (format!("m{}", index + 1), sent[index].1.clone())
    };
    platform.press("press-1", "bo", &message_id, hermesd::turn::approvals::APPROVE).await;
    assert!(wait_for_text(&platform, "pushed (or tried)").await, "{:?}", platform.texts());
    assert!(platform.texts().contains(&"Approved.".to_owned()));
    let result = tool_result(&llm.requests()[1]);
    assert!(result.contains("exit code"), "the command ran: {result}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_by_command_and_clarify_by_reply() {
    let llm = FakeLlm::builder()
        .tool_calls(&[("terminal", r#"{"command":"sudo reboot"}"#)])
        .tool_calls(&[("clarify", r#"{"question":"Which colour?","choices":["red","blue"]}"#)])
        .reply("blue it is")
        .start()
        .await;
    let (d, platform, _home) = start(&llm, "").await;
    platform.inject("m1", "cy", "reboot and paint").await;
    assert!(wait_for_text(&platform, "Approval needed").await);
    platform.inject("m2", "cy", "/deny").await;
    assert!(wait_for_text(&platform, "Which colour?").await, "{:?}", platform.texts());
    let question = platform.sent().into_iter().find(|(_, m)| m.text == "Which colour?").unwrap().1;
    assert_eq!(question.buttons.iter().map(|b| b.label.as_str()).collect::<Vec<_>>(), ["red", "blue"]);
    // The answer is the user's next message, taken on the control lane, not queued.
    platform.inject("m3", "cy", "blue").await;
    assert!(wait_for_text(&platform, "blue it is").await);
    let requests = llm.requests();
    assert!(tool_result(&requests[1]).contains("denied"), "{}", tool_result(&requests[1]));
    assert!(tool_result(&requests[2]).contains("The user answered: blue"));
    assert!(!platform.texts().iter().any(|t| t.starts_with("queued")));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_text_joins_the_running_turn_after_its_next_tool_call() {
    let llm = FakeLlm::builder().start().await;
    llm.push(Duration::from_millis(800), support::fake_llm::Step::ToolCalls(vec![("todo".into(), "{}".into())]));
    llm.push(Duration::ZERO, support::fake_llm::Step::Reply("did both".into()));
    let (d, platform, _home) = start(&llm, "[agent]\nbusy_policy = \"steer\"\n").await;
    platform.inject("m1", "di", "start the report").await;
    assert!(eventually(Duration::from_secs(5), || llm.count() == 1).await);
    platform.inject("m2", "di", "also add a chart").await;
    assert!(wait_for_text(&platform, "did both").await, "{:?}", platform.texts());
    let second = &llm.requests()[1];
    let steer =
        second["messages"].as_array().unwrap().iter().any(|m| {
            m["content"].as_str().is_some_and(|c| c.contains("[The user adds while you work] also add a chart"))
        });
    assert!(steer, "{second}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(llm.count(), 2, "the steering message did not start a turn of its own");
    assert!(platform.texts().iter().any(|t| t.starts_with("Noted")));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_show_typing_progress_and_still_working() {
    let llm = FakeLlm::builder().start().await;
    llm.push(Duration::ZERO, support::fake_llm::Step::ToolCalls(vec![("todo".into(), "{}".into())]));
    llm.push(Duration::from_millis(2600), support::fake_llm::Step::ToolCalls(vec![("todo".into(), "{}".into())]));
    llm.push(Duration::from_millis(2000), support::fake_llm::Step::Reply("finally".into()));
    let (d, platform, _home) = start(&llm, "[agent]\nheartbeat_interval = \"1s\"\n").await;
    platform.inject("m1", "ed", "take your time").await;
    assert!(wait_for_text(&platform, "finally").await);
    assert!(platform.typing().len() >= 2, "typing refreshed: {}", platform.typing().len());
    assert!(platform.texts().iter().any(|t| t.starts_with("Still working — 0 min, step")), "{:?}", platform.texts());
    let progress: Vec<_> = platform.sent().into_iter().filter(|(_, m)| m.kind == OutboundKind::Progress).collect();
    assert_eq!(progress.len(), 1, "one progress message per turn");
    let edits = platform.edits();
    assert!(!edits.is_empty(), "the progress message was edited as tools ran");
    let mut times: Vec<_> = vec![progress[0].0];
    times.extend(edits.iter().map(|e| e.0));
    for pair in times.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_millis(1400),
            "edits faster than the floor: {:?}",
            pair[1] - pair[0]
        );
    }
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inactive_turn_is_stopped_and_the_user_told() {
    let llm = FakeLlm::builder().slow_reply(Duration::from_secs(30), "too late").start().await;
    let (d, platform, _home) = start(&llm, "[agent]\ninactivity_timeout = \"1s\"\n").await;
    platform.inject("m1", "fi", "think hard").await;
    assert!(wait_for_text(&platform, "made no progress").await, "{:?}", platform.texts());
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compress_command_summarises_history() {
    let llm = FakeLlm::echo().await;
    let (d, platform, _home) = start(&llm, "").await;
    for i in 0..12 {
        platform.inject(&format!("m{i}"), "gi", &format!("fact {i}")).await;
        assert!(wait_for_text(&platform, &format!("echo: fact {i}")).await);
    }
    platform.inject("c", "gi", "/compress").await;
    assert!(wait_for_text(&platform, "History summarised").await, "{:?}", platform.texts());
    platform.inject("after", "gi", "still there?").await;
    assert!(wait_for_text(&platform, "echo: still there?").await);
    let last = llm.requests().pop().unwrap();
    let texts: Vec<&str> = last["messages"].as_array().unwrap().iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(texts.iter().any(|t| t.contains(support::fake_llm::SUMMARY)), "{texts:?}");
    d.daemon.stop().await;
}
