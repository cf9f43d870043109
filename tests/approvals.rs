//! Approvals that remember: `/approve session` covers the same command for the rest of the
//! session only, `/approve always` (a button here) survives a restart until `/approvals revoke`,
//! and the operator's `[tools] approved_commands` need no question at all. Through a recording
//! chat platform, with the real sandbox underneath.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hermesd::daemon::DaemonOptions;
use support::fake_llm::Step;
use support::recording_platform::RecordingPlatform;
use support::{FakeLlm, config_for, eventually, start_daemon_with};

const WAIT: Duration = Duration::from_secs(15);
const PUSH: &str = r#"{"command":"git push --force origin topic"}"#;

async fn start(llm: &FakeLlm, home: &Path) -> (support::TestDaemon, Arc<RecordingPlatform>) {
    let platform = RecordingPlatform::new(4096);
    let options = DaemonOptions { extra_platforms: vec![platform.clone() as Arc<_>], ..Default::default() };
    let extra = "[agent]\nbatch_window = \"0s\"\n\n[tools]\napproval_timeout = \"20s\"\n\
                 approved_commands = [\"git push --force origin preapproved *\"]\n";
    let env = [("REC_ALLOW_ALL_USERS", "true")];
    let d = start_daemon_with(home, &config_for(llm, extra), &env, options).await;
    assert!(eventually(Duration::from_secs(2), || platform.started()).await);
    (d, platform)
}

/// How many approval questions the platform was sent.
fn asked(platform: &RecordingPlatform) -> usize {
    platform.texts().iter().filter(|t| t.starts_with("Approval needed")).count()
}

fn last_tool_result(llm: &FakeLlm) -> String {
    let requests = llm.requests();
    let requests: Vec<serde_json::Value> = requests;
    let messages = requests.last().unwrap()["messages"].as_array().unwrap().clone();
    messages.iter().rev().find(|m| m["role"] == "tool").and_then(|m| m["content"].as_str()).unwrap_or("").to_owned()
}

/// One turn of `ann` that runs `command` and answers `done`.
async fn turn(llm: &FakeLlm, platform: &RecordingPlatform, id: &str, command: &str, done: &str) {
    llm.push(Duration::ZERO, Step::ToolCalls(vec![("terminal".into(), command.into())]));
    llm.push(Duration::ZERO, Step::Reply(done.into()));
    platform.inject(id, "ann", "push it").await;
}

async fn said(platform: &RecordingPlatform, text: &str) -> bool {
    eventually(WAIT, || platform.texts().iter().any(|t| t == text)).await
}

/// Presses the button `data` on the newest approval question.
async fn press(platform: &RecordingPlatform, id: &str, data: &str) {
    let sent = platform.sent();
    let index = sent.iter().rposition(|(_, m)| m.text.starts_with("Approval needed")).expect("a question");
    platform.press(id, "ann", &format!("m{}", index + 1), data).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_and_always_approvals_remember_the_command_as_long_as_they_say() {
    let llm = FakeLlm::builder().start().await;
    let home = tempfile::tempdir().unwrap();
    let (d, platform) = start(&llm, home.path()).await;

    // Asked once, approved for the session by command: the same command later in the session
    // runs without a question.
    turn(&llm, &platform, "m1", PUSH, "first done").await;
    assert!(eventually(WAIT, || asked(&platform) == 1).await, "{:?}", platform.texts());
    platform.inject("c1", "ann", "/approve session").await;
    assert!(said(&platform, "first done").await, "{:?}", platform.texts());
    assert!(platform.texts().iter().any(|t| t == "Approved for the rest of this session."));
    assert!(last_tool_result(&llm).contains("exit code"), "it ran");
    turn(&llm, &platform, "m2", PUSH, "second done").await;
    assert!(said(&platform, "second done").await, "{:?}", platform.texts());
    assert_eq!(asked(&platform), 1, "no second question in the session");
    assert!(last_tool_result(&llm).contains("exit code"));

    // A new session asks again; this time the Always button.
    platform.inject("c2", "ann", "/new").await;
    let started = || platform.texts().iter().any(|t| t.starts_with("Started a new session"));
    assert!(eventually(WAIT, started).await, "{:?}", platform.texts());
    turn(&llm, &platform, "m3", PUSH, "third done").await;
    assert!(eventually(WAIT, || asked(&platform) == 2).await, "/new forgets the session's approval");
    press(&platform, "p1", hermesd::turn::approvals::APPROVE_ALWAYS).await;
    assert!(said(&platform, "third done").await, "{:?}", platform.texts());

    // The operator's approved commands are never asked.
    turn(&llm, &platform, "m4", r#"{"command":"git push --force origin preapproved feature"}"#, "pre done").await;
    assert!(said(&platform, "pre done").await, "{:?}", platform.texts());
    assert_eq!(asked(&platform), 2);
    d.daemon.stop().await;

    // After a restart, the lasting approval still holds.
    let (d, platform) = start(&llm, home.path()).await;
    turn(&llm, &platform, "m5", PUSH, "after restart").await;
    assert!(said(&platform, "after restart").await, "{:?}", platform.texts());
    assert_eq!(asked(&platform), 0, "approved for good");
    assert!(last_tool_result(&llm).contains("exit code"));

    // /approvals lists it; revoked, the command asks again (and is denied here).
    platform.inject("c3", "ann", "/approvals").await;
    assert!(
        eventually(WAIT, || platform.texts().iter().any(|t| t.contains("1. `git push --force origin topic`"))).await,
        "{:?}",
        platform.texts()
    );
    platform.inject("c4", "ann", "/approvals revoke 1").await;
    assert!(said(&platform, "Revoked: `git push --force origin topic` asks again.").await, "{:?}", platform.texts());
    turn(&llm, &platform, "m6", PUSH, "denied now").await;
    assert!(eventually(WAIT, || asked(&platform) == 1).await, "{:?}", platform.texts());
    platform.inject("c5", "ann", "/deny").await;
    assert!(said(&platform, "denied now").await, "{:?}", platform.texts());
    assert!(last_tool_result(&llm).contains("denied"), "{}", last_tool_result(&llm));
    let (code, out) = {
        let out = support::hermesd_cli(home.path(), &["approvals", "list"]);
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    assert_eq!(code, Some(0));
    assert!(out.contains("no lasting approvals"), "{out}");
    d.daemon.stop().await;
}
