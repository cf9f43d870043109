//! Secret redaction end to end, through the real daemon and the scripted fake LLM: a tool that
//! prints the model key, a reply carrying an `sk-…` token, and a token split across streamed
//! deltas all come out masked — in the model's next request, the stored transcript, and what the
//! chat client receives.

mod support;

use serde_json::{Value, json};
use support::{FakeLlm, answer, ask, client, start_daemon};

/// The model key, as the daemon reads it from its environment.
const MODEL_KEY: &str = "or-live-7f3a9c2e51d84b06";
/// A token the model writes that the daemon never loaded: masked by its shape.
const FOREIGN: &str = "sk-proj-Zx81bQ2mN4vL7pR0sT5w";

fn config(llm: &FakeLlm) -> String {
    format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"fake-model\"\napi_key_env = \"FAKE_LLM_KEY\"\ntimeout = \"30s\"\n",
        llm.base_url()
    )
}

fn tool_results(request: &Value) -> Vec<String> {
    let messages = request["messages"].as_array().unwrap();
    messages.iter().filter(|m| m["role"] == "tool").map(|m| m["content"].as_str().unwrap_or("").to_owned()).collect()
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &std::path::Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if std::fs::read(&path).unwrap().windows(needle.len()).any(|w| w == needle.as_bytes()) {
            found.push(path.display().to_string());
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_printing_the_model_key_reaches_the_transcript_masked() {
    let llm = FakeLlm::builder().tool_calls(&[("read_file", r#"{"path":"notes.txt"}"#)]).reply("read it").start().await;
    let home = tempfile::tempdir().unwrap();
    // An API session without `user` works in its chat's own folder.
    let workspace = home.path().join("workspace/chats/api/keys");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(
        workspace.join("notes.txt"),
        format!("deploy notes\nkey = {MODEL_KEY}\ngh = ghp_0123456789abcdefghijABCDEFGHIJ0123\n"),
    )
    .unwrap();
    let d = start_daemon(home.path(), &config(&llm), &[("FAKE_LLM_KEY", MODEL_KEY)]).await;
    let (status, body) = ask(&d.base, Some("keys"), "read my notes").await;
    assert_eq!((status, answer(&body)), (200, "read it"), "{body}");
    let results = tool_results(&llm.requests()[1]);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].contains("key = [redacted]") && results[0].contains("gh = [redacted]"), "{results:?}");
    assert!(!results[0].contains(MODEL_KEY), "{results:?}");
    // The next turn's history comes from the store: the stored result is the masked one.
    ask(&d.base, Some("keys"), "and now?").await;
    assert_eq!(tool_results(&llm.requests()[2]), results);
    d.daemon.stop().await;
    let leaks = files_containing(home.path(), MODEL_KEY);
    assert_eq!(leaks, [workspace.join("notes.txt").display().to_string()], "only the file itself holds the key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_carrying_a_token_reaches_the_chat_masked() {
    let reply = format!("Use {MODEL_KEY} or {FOREIGN} with Authorization: Bearer abcdef0123456789xyz");
    let llm = FakeLlm::builder().reply(&reply).start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config(&llm), &[("FAKE_LLM_KEY", MODEL_KEY)]).await;
    let (status, body) = ask(&d.base, Some("reply"), "what key?").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(answer(&body), "Use [redacted] or [redacted] with Authorization: Bearer [redacted]");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_split_across_streamed_deltas_is_masked() {
    // The fake streams a reply in three deltas; the token spans all three.
    let reply = format!("key {FOREIGN} end");
    let llm = FakeLlm::builder().reply(&reply).start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config(&llm), &[("FAKE_LLM_KEY", MODEL_KEY)]).await;
    let response = client()
        .post(format!("{}/v1/chat/completions", d.base))
        .json(&json!({ "stream": true, "messages": [{ "role": "user", "content": "stream it" }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let pieces: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(pieces.concat(), "key [redacted] end", "{pieces:?}");
    assert!(pieces.iter().all(|p| !p.contains("sk-") && !p.contains("Zx81")), "{pieces:?}");
    assert_eq!(llm.requests()[0]["stream"], true, "the model was asked to stream");
    d.daemon.stop().await;
}
