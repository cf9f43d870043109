//! The providers through the daemon: the Responses API (`provider = "responses"`) with reasoning
//! items returned on every later call — within a turn and, from the store, on the next turn —
//! and cached tokens counted in `/usage`; Claude models behind an OpenAI-compatible router get
//! rolling `cache_control` breakpoints.

mod support;

use serde_json::{Value, json};
use support::fake_llm::{CACHE_READ, CACHE_WRITE, CACHED_TOKENS, INPUT_TOKENS};
use support::{FakeLlm, answer, ask, start_daemon};

fn config(llm: &FakeLlm, provider: &str, model: &str) -> String {
    format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[model]\nprovider = \"{provider}\"\nbase_url = \"{}\"\nname = \"{model}\"\ntimeout = \"30s\"\n",
        llm.base_url()
    )
}

/// The `type` of each input item, with the reasoning items' encrypted content.
fn input_shape(request: &Value) -> Vec<String> {
    request["input"]
        .as_array()
        .expect("input items")
        .iter()
        .map(|item| match item["type"].as_str().expect("typed item") {
            "reasoning" => format!("reasoning:{}", item["encrypted_content"].as_str().unwrap_or("")),
            "message" => {
                format!("{}:{}", item["role"].as_str().unwrap_or(""), item["content"][0]["text"].as_str().unwrap_or(""))
            }
            other => other.to_owned(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_provider_round_trips_reasoning_items_across_calls_and_turns() {
    let llm = FakeLlm::builder().tool_calls(&[("todo", "{}")]).reply("One list, empty.").start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config(&llm, "responses", "gpt-test"), &[]).await;

    let (status, body) = ask(&d.base, Some("s1"), "what is on my list?").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(answer(&body), "One list, empty.");
    let (status, body) = ask(&d.base, Some("s1"), "thanks").await;
    assert_eq!((status, answer(&body)), (200, "echo: thanks"));

    let requests = llm.requests();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    for request in &requests {
        assert_eq!(request["store"], false);
        assert_eq!(request["include"], json!(["reasoning.encrypted_content"]));
        assert!(
            request["instructions"].as_str().is_some_and(|i| !i.is_empty()),
            "the system prompt is the instructions"
        );
        assert!(request["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["name"] == "todo")));
    }
    // Within the turn: the reasoning that led to the call goes back right before it.
    assert_eq!(
        input_shape(&requests[1]),
        ["user:what is on my list?", "reasoning:enc-1", "function_call", "function_call_output"]
    );
    assert_eq!(requests[1]["input"][2]["call_id"], requests[1]["input"][3]["call_id"]);
    // The next turn reads the transcript from the store: both reasoning items come back.
    assert_eq!(
        input_shape(&requests[2]),
        [
            "user:what is on my list?",
            "reasoning:enc-1",
            "function_call",
            "function_call_output",
            "reasoning:enc-2",
            "assistant:One list, empty.",
            "user:thanks",
        ]
    );

    // Every call's cached tokens are counted in the session's usage.
    let (_, usage) = ask(&d.base, Some("s1"), "/usage").await;
    let usage = answer(&usage);
    assert!(
        usage.contains(&format!("{} prompt ({} read from the cache", 3 * INPUT_TOKENS, 3 * CACHED_TOKENS)),
        "{usage}"
    );
    assert!(usage.contains("3 model calls"), "{usage}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_behind_a_router_gets_rolling_cache_breakpoints() {
    let texts = ["one", "two", "three", "four", "five"];
    let llm = texts.iter().fold(FakeLlm::builder(), |llm, text| llm.reply(&format!("re: {text}"))).start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config(&llm, "chat_completions", "anthropic/claude-sonnet-4.5"), &[]).await;
    for text in texts {
        let (status, body) = ask(&d.base, Some("c1"), text).await;
        assert_eq!((status, answer(&body)), (200, format!("re: {text}").as_str()));
    }
    let last = llm.requests().pop().expect("requests");
    let messages = last["messages"].as_array().expect("messages");
    let marked: Vec<(String, String)> = messages
        .iter()
        .filter_map(|m| {
            let part = m["content"].as_array()?.last()?;
            part.get("cache_control")?;
            Some((m["role"].as_str()?.to_owned(), part["text"].as_str()?.to_owned()))
        })
        .collect();
    assert_eq!(marked.len(), 4, "{messages:#?}");
    assert_eq!(marked[0].0, "system");
    assert_eq!(
        &marked[1..],
        [("user".into(), "three".into()), ("user".into(), "four".into()), ("user".into(), "five".into())]
    );
    // Assistant turns stay plain text.
    assert!(messages.iter().filter(|m| m["role"] == "assistant").all(|m| m["content"].is_string()));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_rolls_its_cache_breakpoints_and_counts_cache_reads_and_writes() {
    let llm = FakeLlm::builder().tool_calls(&[("todo", "{}")]).reply("Listed.").start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config(&llm, "anthropic_messages", "claude-test"), &[]).await;
    for text in ["one", "two", "three", "four"] {
        let (status, body) = ask(&d.base, Some("a1"), text).await;
        assert_eq!(status, 200, "{body}");
    }
    let requests = llm.requests();
    assert_eq!(requests.len(), 5, "a tool call, then four answers");
    let markers = |request: &Value| request.to_string().matches("cache_control").count();
    // The system prompt and, as the conversation grows, up to three user turns.
    assert_eq!(requests.iter().map(markers).collect::<Vec<_>>(), [2, 3, 4, 4, 4]);
    assert!(requests[0]["system"].as_array().unwrap().last().unwrap().get("cache_control").is_some());
    // Within the turn, the tool result is the newest user turn and carries a breakpoint.
    let step = requests[1]["messages"].as_array().unwrap();
    assert_eq!(step.last().unwrap()["content"][0]["type"], "tool_result");
    assert!(step.last().unwrap()["content"][0].get("cache_control").is_some());
    // The last request marks the three newest user turns.
    let last = requests[4]["messages"].as_array().unwrap();
    let marked: Vec<&str> = last
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_array()?.iter().rev().find(|b| b.get("cache_control").is_some()))
        .map(|b| b["text"].as_str().unwrap_or("tool_result"))
        .collect();
    assert_eq!(marked, ["two", "three", "four"]);

    let (_, usage) = ask(&d.base, Some("a1"), "/usage").await;
    let usage = answer(&usage);
    assert!(
        usage.contains(&format!("({} read from the cache, {} written to it)", 5 * CACHE_READ, 5 * CACHE_WRITE)),
        "{usage}"
    );
    d.daemon.stop().await;
}
