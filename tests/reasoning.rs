//! The model's reasoning through the daemon: stored with the assistant message, shown in chat
//! only while the session has `/reasoning on` (a quoted block before the answer), never sent back
//! to a chat-completions model, and streamed by the API as `reasoning_content` deltas.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hermesd::daemon::DaemonOptions;
use serde_json::{Value, json};
use support::fake_llm::Step;
use support::recording_platform::RecordingPlatform;
use support::{FakeLlm, TestDaemon, client, eventually, start_daemon, start_daemon_with};

const WAIT: Duration = Duration::from_secs(10);

fn config(llm: &FakeLlm, provider: &str) -> String {
    format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[model]\nprovider = \"{provider}\"\nbase_url = \"{}\"\nname = \"fake-model\"\ntimeout = \"30s\"\n",
        llm.base_url()
    )
}

async fn chat_daemon(home: &Path, llm: &FakeLlm, platform: &Arc<RecordingPlatform>) -> TestDaemon {
    let options = DaemonOptions { extra_platforms: vec![platform.clone() as Arc<_>], ..Default::default() };
    let d = start_daemon_with(home, &config(llm, "chat_completions"), &[("REC_ALLOWED_USERS", "ann")], options).await;
    assert!(eventually(Duration::from_secs(2), || platform.started()).await);
    d
}

/// Send `text` and return the `n`-th message sent in all.
async fn say(platform: &RecordingPlatform, id: &str, text: &str, n: usize) -> String {
    platform.inject(id, "ann", text).await;
    assert!(eventually(WAIT, || platform.sent().len() >= n).await, "no answer to {text}: {:?}", platform.texts());
    platform.texts()[n - 1].clone()
}

fn reasoned(reasoning: &str, text: &str) -> Step {
    Step::Reasoned(reasoning.into(), text.into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_is_shown_in_chat_only_while_the_session_asks_for_it() {
    let llm = FakeLlm::builder()
        .step(Duration::ZERO, reasoned("weighing the first question", "Answer one."))
        .step(Duration::ZERO, reasoned("second thoughts", "Answer two."))
        .step(Duration::ZERO, reasoned("third thoughts", "Answer three."))
        .start()
        .await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = chat_daemon(home.path(), &llm, &platform).await;

    // Off by default: the answer alone.
    assert_eq!(say(&platform, "q1", "first?", 1).await, "Answer one.");
    assert!(say(&platform, "r0", "/reasoning", 2).await.contains("hidden"));
    assert!(say(&platform, "r1", "/reasoning on", 3).await.contains("will be shown"));
    assert_eq!(say(&platform, "q2", "second?", 4).await, "> Reasoning:\n> second thoughts\n\nAnswer two.");
    assert!(say(&platform, "r2", "/reasoning", 5).await.contains("shown before answers"));
    assert!(say(&platform, "r3", "/reasoning off", 6).await.contains("no longer"));
    assert_eq!(say(&platform, "q3", "third?", 7).await, "Answer three.");
    assert!(say(&platform, "bad", "/reasoning loud", 8).await.to_lowercase().contains("invalid"));

    // Reasoning is stored, but never sent back to a chat-completions model, and the history the
    // model sees holds the plain answers (showing it did not rewrite them).
    let last = llm.requests().pop().expect("requests");
    assert!(!last.to_string().contains("thoughts"), "{last}");
    let assistants: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(assistants, ["Answer one.", "Answer two."]);
    d.daemon.stop().await;

    // The setting is kept with the session across a restart.
    let d = chat_daemon(home.path(), &llm, &platform).await;
    assert!(say(&platform, "r4", "/reasoning", 9).await.contains("hidden"));
    assert!(say(&platform, "r5", "/reasoning on", 10).await.contains("will be shown"));
    d.daemon.stop().await;
    let d = chat_daemon(home.path(), &llm, &platform).await;
    assert!(say(&platform, "r6", "/reasoning", 11).await.contains("shown before answers"));
    d.daemon.stop().await;
}

/// A streamed API answer: the `reasoning_content` and `content` deltas, in order, and the rest.
async fn stream(base: &str) -> (Vec<(String, String)>, Value) {
    let response = client()
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({ "stream": true, "messages": [{ "role": "user", "content": "why?" }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let data: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{text}");
    let chunks: Vec<Value> = data[..data.len() - 1].iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    let deltas = chunks
        .iter()
        .flat_map(|c| {
            let delta = &c["choices"][0]["delta"];
            ["reasoning_content", "content"]
                .into_iter()
                .filter_map(|key| delta[key].as_str().map(|t| (key.to_owned(), t.to_owned())))
                .collect::<Vec<_>>()
        })
        .collect();
    (deltas, chunks.last().cloned().unwrap_or_default())
}

/// Join consecutive deltas of the same kind.
fn runs(deltas: &[(String, String)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (kind, text) in deltas {
        match out.last_mut() {
            Some((last, joined)) if last == kind => joined.push_str(text),
            _ => out.push((kind.clone(), text.clone())),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_streams_reasoning_as_reasoning_content_before_the_answer() {
    for provider in ["chat_completions", "responses"] {
        let llm = FakeLlm::builder()
            .step(Duration::ZERO, reasoned("because the sky scatters blue", "Rayleigh."))
            .start()
            .await;
        let home = tempfile::tempdir().unwrap();
        let d = start_daemon(home.path(), &config(&llm, provider), &[]).await;
        let (deltas, last) = stream(&d.base).await;
        assert_eq!(
            runs(&deltas),
            [
                ("reasoning_content".to_owned(), "because the sky scatters blue".to_owned()),
                ("content".to_owned(), "Rayleigh.".to_owned()),
            ],
            "{provider}: {deltas:?}"
        );
        assert!(
            deltas.iter().filter(|(kind, _)| kind == "reasoning_content").count() >= 2,
            "{provider}: streamed in pieces"
        );
        assert_eq!(last["choices"][0]["finish_reason"], "stop");
        assert_eq!(llm.requests()[0]["stream"], true);

        // A non-streamed answer is the answer alone, whatever the session's setting.
        let (_, body) = support::ask(&d.base, Some("api-r"), "/reasoning on").await;
        assert!(support::answer(&body).contains("will be shown"), "{body}");
        llm.push(Duration::ZERO, reasoned("hidden from the API text", "Plain."));
        let (_, body) = support::ask(&d.base, Some("api-r"), "again").await;
        assert_eq!(support::answer(&body), "Plain.", "{provider}");
        d.daemon.stop().await;
    }
}
