//! Tool limits hold everywhere, through the real daemon and a scripted fake LLM: a delegated
//! child gets at most its parent's tools, a cron job made from a chat runs with at most that
//! chat's platform's toolsets, and `send_message` to another chat needs an admin or the user's
//! approval (refused where nobody can approve).

mod support;

use std::sync::Arc;
use std::time::Duration;

use hermesd::daemon::DaemonOptions;
use serde_json::{Value, json};
use support::recording_platform::RecordingPlatform;
use support::{FakeLlm, TestDaemon, ask, config_for, eventually, start_daemon, start_daemon_with};

const WAIT: Duration = Duration::from_secs(15);

async fn with_platform(
    llm: &FakeLlm,
    extra: &str,
    env: &[(&str, &str)],
) -> (TestDaemon, Arc<RecordingPlatform>, tempfile::TempDir) {
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let options = DaemonOptions { extra_platforms: vec![platform.clone() as Arc<_>], ..Default::default() };
    let d = start_daemon_with(home.path(), &config_for(llm, extra), env, options).await;
    assert!(eventually(Duration::from_secs(2), || platform.started()).await);
    (d, platform, home)
}

fn tool_names(request: &Value) -> Vec<String> {
    let tools = request["tools"].as_array().cloned().unwrap_or_default();
    let mut names: Vec<String> = tools.iter().map(|t| t["function"]["name"].as_str().unwrap().to_owned()).collect();
    names.sort();
    names
}

fn tool_results(request: &Value) -> Vec<String> {
    let messages = request["messages"].as_array().unwrap();
    messages.iter().filter(|m| m["role"] == "tool").map(|m| m["content"].as_str().unwrap_or("").to_owned()).collect()
}

fn user_says(request: &Value, needle: &str) -> bool {
    let messages = request["messages"].as_array().unwrap();
    messages.iter().any(|m| m["role"] == "user" && m["content"].as_str().is_some_and(|c| c.contains(needle)))
}

async fn wait_for_text(platform: &RecordingPlatform, needle: &str, count: usize) -> bool {
    eventually(WAIT, || platform.texts().iter().filter(|t| t.contains(needle)).count() >= count).await
}

fn sent_to(platform: &RecordingPlatform, chat: &str) -> Vec<String> {
    platform.sent().into_iter().filter(|(_, m)| m.chat.chat_id == chat).map(|(_, m)| m.text).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delegated_child_gets_at_most_its_parents_tools() {
    let llm = FakeLlm::builder()
        .tool_calls(&[("delegate_task", r#"{"task":"look around the workdir"}"#)])
        .reply("child report")
        .reply("done")
        .start()
        .await;
    let home = tempfile::tempdir().unwrap();
    let extra = "[tools.platforms]\napi = [\"delegate\", \"memory\"]\n";
    let d = start_daemon(home.path(), &config_for(&llm, extra), &[]).await;
    let (status, body) = ask(&d.base, Some("deleg"), "investigate").await;
    assert_eq!(status, 200, "{body}");
    let requests = llm.requests();
    assert_eq!(tool_names(&requests[0]), ["delegate_task", "memory"]);
    // The child's own request: only what the parent may use (and never delegation again).
    assert!(user_says(&requests[1], "look around the workdir"), "{}", requests[1]);
    assert_eq!(tool_names(&requests[1]), ["memory"], "the child got more than its parent");
    assert!(tool_results(&requests[2]).iter().any(|r| r.contains("child report")));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_job_made_from_a_chat_runs_with_at_most_that_chats_toolsets() {
    let create = json!({"action": "create", "schedule": "every 2s", "prompt": "check the plants", "deliver": "origin"});
    let llm = FakeLlm::builder().tool_calls(&[("cronjob", &create.to_string())]).reply("Scheduled.").start().await;
    // The chat's platform may only use memory (and make jobs); the `cron` platform may use all.
    let extra = "[cron]\ntick = \"1s\"\n\n[limits]\ncron_min_interval = \"1s\"\n\n[tools.platforms]\nrec = [\"cron\", \"memory\"]\n";
    let (d, platform, _home) = with_platform(&llm, extra, &[("REC_ALLOW_ALL_USERS", "true")]).await;
    platform.inject("e1", "ann", "check the plants every 2s").await;
    assert!(wait_for_text(&platform, "Scheduled.", 1).await, "{:?}", platform.texts());
    let is_run = |r: &Value| user_says(r, "check the plants") && !user_says(r, "every 2s");
    assert!(eventually(WAIT, || llm.requests().iter().any(is_run)).await, "the job never ran");
    let run = llm.requests().into_iter().find(is_run).unwrap();
    assert_eq!(tool_names(&run), ["memory"], "the run got more than its creating chat");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_message_elsewhere_needs_the_users_approval_or_an_admin() {
    let send = |text: &str| json!({"target": "rec:elsewhere", "text": text}).to_string();
    let llm = FakeLlm::builder()
        .tool_calls(&[("send_message", &send("leaked by a web page"))])
        .reply("tried")
        .tool_calls(&[("send_message", &send("approved note"))])
        .reply("sent")
        .tool_calls(&[("send_message", &send("from the boss"))])
        .reply("boss sent")
        .tool_calls(&[("send_message", r#"{"target":"origin","text":"right here"}"#)])
        .reply("here too")
        .start()
        .await;
    let env = [("REC_ALLOW_ALL_USERS", "true"), ("REC_ADMIN_USERS", "boss")];
    let (d, platform, _home) = with_platform(&llm, "[tools]\napproval_timeout = \"20s\"\n", &env).await;

    // A non-admin's turn asks; a refusal sends nothing.
    platform.inject("m1", "ann", "summarise this page").await;
    assert!(wait_for_text(&platform, "Approval needed: send a message to rec:elsewhere", 1).await);
    platform.inject("m2", "ann", "/deny").await;
    assert!(wait_for_text(&platform, "tried", 1).await, "{:?}", platform.texts());
    assert!(tool_results(&llm.requests()[1]).iter().any(|r| r.contains("refused")), "{}", llm.requests()[1]);
    assert!(sent_to(&platform, "elsewhere").is_empty());

    // Approved, it goes.
    platform.inject("m3", "ann", "tell them").await;
    assert!(wait_for_text(&platform, "Approval needed", 2).await);
    platform.inject("m4", "ann", "/approve").await;
    assert!(wait_for_text(&platform, "sent", 1).await, "{:?}", platform.texts());
    assert_eq!(sent_to(&platform, "elsewhere"), ["approved note"]);

    // An admin's turn sends without asking; the origin chat never needs asking.
    platform.inject("m5", "boss", "tell them too").await;
    assert!(wait_for_text(&platform, "boss sent", 1).await, "{:?}", platform.texts());
    platform.inject("m6", "ann", "note it here").await;
    assert!(wait_for_text(&platform, "here too", 1).await, "{:?}", platform.texts());
    assert_eq!(sent_to(&platform, "elsewhere"), ["approved note", "from the boss"]);
    assert_eq!(platform.texts().iter().filter(|t| t.contains("Approval needed")).count(), 2);
    assert!(sent_to(&platform, "ann").contains(&"right here".to_owned()));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_message_elsewhere_is_refused_where_nobody_can_approve() {
    let llm = FakeLlm::builder()
        .tool_calls(&[("send_message", r#"{"target":"rec:elsewhere","text":"injected"}"#)])
        .reply("could not")
        .start()
        .await;
    let (d, platform, _home) = with_platform(&llm, "", &[("REC_ALLOW_ALL_USERS", "true")]).await;
    let (status, body) = ask(&d.base, Some("api-user"), "post this to the other chat").await;
    assert_eq!(status, 200, "{body}");
    let results = tool_results(&llm.requests()[1]);
    assert!(results.iter().any(|r| r.contains("nobody can approve")), "{results:?}");
    assert!(sent_to(&platform, "elsewhere").is_empty());
    d.daemon.stop().await;
}
