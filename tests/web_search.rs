//! `web_search` end to end: the real daemon, the fake LLM calling the tool, and a fake search
//! service on 127.0.0.1 speaking SearXNG's and Brave's JSON; the results reach the model, the key
//! reaches only the service, and a daemon without `[tools.web_search]` offers no such tool.

mod support;

use serde_json::Value;
use support::fake_search::FakeSearch;
use support::{FakeLlm, answer, ask, config_for, start_daemon};

const KEY: &str = "BSA-e2e-secret-key-4242";

/// The text of the tool result in a recorded LLM request.
fn tool_result(request: &Value) -> String {
    let messages = request["messages"].as_array().expect("messages");
    let tool = messages.iter().find(|m| m["role"] == "tool").expect("a tool result");
    tool["content"].as_str().unwrap_or_default().to_owned()
}

fn offered(request: &Value) -> Vec<String> {
    let tools = request["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().filter_map(|t| t["function"]["name"].as_str().map(str::to_owned)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_finds_pages_through_a_local_searxng() {
    let search = FakeSearch::start(KEY).await;
    let llm = FakeLlm::builder()
        .tool_calls(&[("web_search", r#"{"query": "hermesd release notes"}"#)])
        .reply("found them")
        .start()
        .await;
    let home = tempfile::tempdir().unwrap();
    let extra =
        format!("[tools.web_search]\nbackend = \"searxng\"\nurl = \"{}\"\nmax_results = 2\n", search.searxng_url());
    let d = start_daemon(home.path(), &config_for(&llm, &extra), &[]).await;
    let (status, body) = ask(&d.base, Some("s1"), "find the release notes").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(answer(&body), "found them");
    let requests = llm.requests();
    assert!(offered(&requests[0]).contains(&"web_search".to_owned()), "{:?}", offered(&requests[0]));
    let result = tool_result(&requests[1]);
    assert_eq!(
        result,
        "Results for \"hermesd release notes\":\n\n\
         1. hermesd release notes — result 1\n   https://searx1.example/hermesd-release-notes\n   What page 1 says about hermesd release notes.\n\n\
         2. hermesd release notes — result 2\n   https://searx2.example/hermesd-release-notes\n   What page 2 says about hermesd release notes.",
        "capped at max_results"
    );
    let searches = search.searches();
    assert_eq!(searches.len(), 1);
    assert_eq!(searches[0].params.get("q").map(String::as_str), Some("hermesd release notes"));
    assert_eq!(searches[0].key, None, "keyless");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brave_search_gets_the_key_and_the_model_never_sees_it() {
    let search = FakeSearch::start(KEY).await;
    let llm = FakeLlm::builder()
        .tool_calls(&[("web_search", r#"{"query": "rust 2024 edition", "max_results": 2}"#)])
        .reply("done")
        .start()
        .await;
    let home = tempfile::tempdir().unwrap();
    let extra = format!(
        "[tools.web_search]\nbackend = \"brave\"\nurl = \"{}\"\napi_key_env = \"BRAVE_KEY\"\n",
        search.brave_url()
    );
    let d = start_daemon(home.path(), &config_for(&llm, &extra), &[("BRAVE_KEY", KEY)]).await;
    let (status, body) = ask(&d.base, Some("s2"), "search for it").await;
    assert_eq!(status, 200, "{body}");
    let result = tool_result(&llm.requests()[1]);
    assert!(result.starts_with("Results for \"rust 2024 edition\":\n\n1. Brave 1: rust 2024 edition\n   https://brave1.example/\n   All about rust 2024 edition, part 1."), "{result}");
    assert!(result.contains("2. Brave 2") && !result.contains("3. "), "{result}");
    let searches = search.searches();
    assert_eq!(searches[0].params.get("count").map(String::as_str), Some("2"));
    assert_eq!(searches[0].key.as_deref(), Some(KEY));
    assert!(!llm.requests().iter().any(|r| r.to_string().contains(KEY)), "the key never reaches the model");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_backend_there_is_no_web_search_tool() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let (status, _) = ask(&d.base, Some("s3"), "hello").await;
    assert_eq!(status, 200);
    let tools = offered(&llm.requests()[0]);
    assert!(tools.contains(&"web_fetch".to_owned()) && !tools.contains(&"web_search".to_owned()), "{tools:?}");
    d.daemon.stop().await;
}
