//! `session_search` end to end: the real daemon, a scripted fake model that calls the tool, and a
//! second fake as the `[auxiliary.summary]` model. The caller's conversation is summarised from
//! its own messages; another person's never reach the summary model or the answer.

mod support;

use serde_json::Value;
use support::{FakeLlm, ask, config_for, start_daemon};

/// The tool results of the first recorded request that carries any.
fn tool_results(requests: &[Value]) -> Vec<String> {
    requests
        .iter()
        .map(|r| {
            r["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| m["content"].as_str().unwrap_or("").to_owned())
                .collect::<Vec<_>>()
        })
        .find(|results| !results.is_empty())
        .unwrap_or_default()
}

fn summary_section(summary: &FakeLlm) -> String {
    format!(
        "[auxiliary.summary]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"small\"\ntimeout = \"10s\"",
        summary.base_url()
    )
}

/// Alice and Bob both talk about kayaks (API sessions `alice` and `bob`); then Alice's next turn
/// searches her history.
async fn alice_searches(summary: &FakeLlm) -> (Vec<String>, FakeLlm) {
    let llm = FakeLlm::builder()
        .reply("noted")
        .reply("ok")
        .tool_calls(&[("session_search", r#"{"query":"kayak"}"#)])
        .reply("you picked the blue one")
        .start()
        .await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, &summary_section(summary)), &[]).await;
    ask(&d.base, Some("alice"), "we pick the blue kayak for 340 euros").await;
    ask(&d.base, Some("bob"), "bob wants a red kayak, secret plan").await;
    let (status, body) = ask(&d.base, Some("alice"), "which kayak did we pick?").await;
    assert_eq!(status, 200, "{body}");
    let results = tool_results(&llm.requests());
    d.daemon.stop().await;
    (results, llm)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_model_summarises_only_the_callers_conversation() {
    let mut summary = FakeLlm::builder();
    for _ in 0..8 {
        summary = summary.reply("They chose a blue kayak for 340 euros.");
    }
    let summary = summary.start().await;
    let (results, _) = alice_searches(&summary).await;
    assert_eq!(results.len(), 1, "{results:?}");
    let result = &results[0];
    assert!(result.contains("Summary: They chose a blue kayak for 340 euros."), "{result}");
    assert!(result.contains("this conversation"), "{result}");
    assert!(!result.contains("red") && !result.contains("secret"), "{result}");
    let asked: Vec<Value> = summary
        .requests()
        .into_iter()
        .filter(|r| r["messages"][1]["content"].as_str().is_some_and(|c| c.starts_with("Query: kayak")))
        .collect();
    assert_eq!(asked.len(), 1, "one conversation matched: one summary request");
    let text = asked[0]["messages"][1]["content"].as_str().unwrap();
    assert!(text.contains("user: we pick the blue kayak for 340 euros"), "{text}");
    assert!(!text.contains("red kayak") && !text.contains("secret plan"), "Bob's words reached the model: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_summary_model_leaves_the_snippets() {
    let mut summary = FakeLlm::builder();
    for _ in 0..8 {
        summary = summary.fail(500, r#"{"error":{"message":"overloaded"}}"#);
    }
    let summary = summary.start().await;
    let (results, _) = alice_searches(&summary).await;
    assert_eq!(results.len(), 1, "{results:?}");
    let result = &results[0];
    assert!(result.contains("some summaries failed"), "{result}");
    assert!(result.contains("user: we pick the blue [kayak] for 340 euros"), "{result}");
    assert!(!result.contains("Summary:") && !result.contains("red"), "{result}");
}
