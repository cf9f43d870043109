//! `Idempotency-Key` on the real in-process daemon: a retry gets the first response again (JSON
//! or SSE) with no second model call, for stateless and session requests alike; a retry while
//! the first runs gets 409; another body under the same key 422; keys are scoped per session;
//! and the stored answer survives a restart, including one that cut the first turn off.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{FakeLlm, answer, client, config_for, eventually, start_daemon};

/// POST a chat completion carrying `key`; `extra` headers and JSON fields added.
async fn send(base: &str, key: &str, body: Value, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = client().post(format!("{base}/v1/chat/completions")).header("Idempotency-Key", key).json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("request sent")
}

fn ask(text: &str) -> Value {
    json!({ "model": "hermes-agent", "messages": [{ "role": "user", "content": text }] })
}

/// The text of an SSE answer and whether it ended in `[DONE]`.
fn sse_text(text: &str) -> (String, bool) {
    let data: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    let content = data
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect();
    (content, data.last() == Some(&"[DONE]"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_retry_replays_the_stored_answer_without_a_second_turn() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;

    let first = send(&d.base, "k-1", ask("charge my card"), &[]).await;
    assert_eq!(first.status(), 200);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first: Value = first.json().await.unwrap();
    assert_eq!(answer(&first), "echo: charge my card");

    let again = send(&d.base, "k-1", ask("charge my card"), &[]).await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.json::<Value>().await.unwrap(), first, "the same response, byte for byte");

    // A streaming retry gets the stored answer as server-sent events.
    let mut streamed = ask("charge my card");
    streamed["stream"] = json!(true);
    let stream = send(&d.base, "k-1", streamed, &[]).await;
    assert_eq!(stream.status(), 200);
    assert!(stream.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let (text, done) = sse_text(&stream.text().await.unwrap());
    assert_eq!(text, "echo: charge my card");
    assert!(done, "the replayed stream ends in [DONE]");

    // The same key with another body is a client error, and runs nothing.
    let other = send(&d.base, "k-1", ask("charge it twice"), &[]).await;
    assert_eq!(other.status(), 422);
    assert_eq!(other.json::<Value>().await.unwrap()["error"]["code"], "idempotency_key_reused");
    // The quoted structured-field form names the same key.
    let quoted = send(&d.base, "\"k-1\"", ask("charge my card"), &[]).await;
    assert_eq!(quoted.status(), 200);
    assert_eq!(quoted.headers()["idempotent-replayed"], "true");

    let bad = send(&d.base, "", ask("x"), &[]).await;
    assert_eq!(bad.status(), 400);
    assert_eq!(llm.count(), 1, "exactly one model call for all of these");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_scoped_per_session_and_user() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    for session in ["alice", "bob"] {
        let response = send(&d.base, "same-key", ask("hello"), &[("X-Hermes-Session-Id", session)]).await;
        assert_eq!(response.status(), 200);
        assert!(response.headers().get("idempotent-replayed").is_none(), "{session} has its own key space");
    }
    let mut as_user = ask("hello");
    as_user["user"] = json!("carol");
    assert!(send(&d.base, "same-key", as_user.clone(), &[]).await.headers().get("idempotent-replayed").is_none());
    assert!(send(&d.base, "same-key", ask("hello"), &[]).await.headers().get("idempotent-replayed").is_none());
    assert_eq!(llm.count(), 4, "four scopes, four turns");
    let replay = send(&d.base, "same-key", ask("hello"), &[("X-Hermes-Session-Id", "alice")]).await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(answer(&replay.json::<Value>().await.unwrap()), "echo: hello");
    let replay = send(&d.base, "same-key", as_user, &[]).await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(llm.count(), 4);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_while_the_first_runs_gets_409_then_the_answer() {
    let llm = FakeLlm::builder().slow_reply(Duration::from_millis(1500), "slow answer").start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let base = d.base.clone();
    let headers = [("X-Hermes-Session-Id", "pay")];
    let first = tokio::spawn(async move { send(&base, "k-2", ask("pay the invoice"), &headers).await });
    assert!(eventually(Duration::from_secs(5), || llm.count() == 1).await);
    let during = send(&d.base, "k-2", ask("pay the invoice"), &headers).await;
    assert_eq!(during.status(), 409);
    assert_eq!(during.json::<Value>().await.unwrap()["error"]["code"], "request_in_progress");
    let first = first.await.unwrap();
    assert_eq!(first.status(), 200);
    let first: Value = first.json().await.unwrap();
    assert_eq!(answer(&first), "slow answer");
    let after = send(&d.base, "k-2", ask("pay the invoice"), &headers).await;
    assert_eq!(after.status(), 200);
    assert_eq!(after.json::<Value>().await.unwrap(), first);
    assert_eq!(llm.count(), 1);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_answer_survives_a_restart() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let config = config_for(&llm, "");
    let d = start_daemon(home.path(), &config, &[]).await;
    let mut streamed = ask("deploy v2");
    streamed["stream"] = json!(true);
    let first = send(&d.base, "k-3", streamed, &[]).await;
    let (text, done) = sse_text(&first.text().await.unwrap());
    assert!(done && text == "echo: deploy v2", "{text}");
    d.daemon.stop().await;

    let d = start_daemon(home.path(), &config, &[]).await;
    let again = send(&d.base, "k-3", ask("deploy v2"), &[]).await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(answer(&again.json::<Value>().await.unwrap()), "echo: deploy v2");
    assert_eq!(llm.count(), 1, "no second turn after the restart");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_cut_off_by_a_restart_is_answered_once_and_its_retry_replays() {
    let llm = FakeLlm::builder().slow_reply(Duration::from_secs(30), "never delivered").start().await;
    let home = tempfile::tempdir().unwrap();
    let config = config_for(&llm, "[agent]\ndrain_timeout = \"300ms\"\n");
    let d = start_daemon(home.path(), &config, &[]).await;
    let base = d.base.clone();
    let headers = [("X-Hermes-Session-Id", "ship")];
    let pending = tokio::spawn(async move { send(&base, "k-4", ask("ship it"), &headers).await });
    assert!(eventually(Duration::from_secs(5), || llm.count() == 1).await);
    d.daemon.stop().await;
    assert_eq!(pending.await.unwrap().status(), 503, "told it will be answered after the restart");

    // Recovery reruns the saved request once; its reply completes the key's record although no
    // client waits for it.
    let d = start_daemon(home.path(), &config, &[]).await;
    assert!(eventually(Duration::from_secs(5), || llm.count() == 2).await);
    let mut replayed = None;
    for _ in 0..100 {
        let retry = send(&d.base, "k-4", ask("ship it"), &headers).await;
        if retry.status() == 200 {
            replayed = Some(retry);
            break;
        }
        assert_eq!(retry.status(), 409, "only 'still running' before the rerun finishes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let retry = replayed.expect("the rerun's answer was stored");
    assert_eq!(retry.headers()["idempotent-replayed"], "true");
    assert_eq!(answer(&retry.json::<Value>().await.unwrap()), "echo: ship it");
    assert_eq!(llm.count(), 2, "the cut-off call and the one rerun; the retries ran nothing");
    d.daemon.stop().await;
}
