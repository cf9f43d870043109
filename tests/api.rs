//! The API platform end to end: real daemon (in-process), real HTTP, real SQLite, fake LLM.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::fake_llm::Step;
use support::{FakeLlm, answer, ask, client, config_for, eventually, prompt, start_daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_reaches_the_model_and_answers() {
    let llm = FakeLlm::builder().reply("hello from the model").start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let (status, body) = ask(&d.base, None, "hi there").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(answer(&body), "hello from the model");
    assert_eq!(body["object"], "chat.completion");
    let requests = llm.requests();
    assert_eq!(requests.len(), 1);
    let sent = prompt(&requests[0]);
    assert_eq!(sent[0].0, "system");
    assert_eq!(sent.last().unwrap(), &("user".to_owned(), "hi there".to_owned()));
    assert_eq!(requests[0]["model"], "fake-model");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_arriving_mid_turn_returns_its_own_answer_under_every_busy_policy() {
    // Under `steer` the second request used to be folded into the running turn and never
    // returned. An API request is answered by its own turn, after the one running (`interrupt`
    // has its own test below).
    for policy in ["queue", "steer"] {
        let llm = FakeLlm::builder().latency(Duration::from_millis(1500)).start().await;
        let home = tempfile::tempdir().unwrap();
        let config = config_for(&llm, &format!("[agent]\nbusy_policy = \"{policy}\"\n"));
        let d = start_daemon(home.path(), &config, &[]).await;
        let base = d.base.clone();
        let first = tokio::spawn(async move { ask(&base, Some("s-busy"), "first").await });
        assert!(eventually(Duration::from_secs(20), || llm.count() >= 1).await, "{policy}: the first turn runs");
        let (status, second) =
            tokio::time::timeout(Duration::from_secs(30), ask(&d.base, Some("s-busy"), "second")).await.expect(policy);
        assert_eq!(status, 200, "{policy}: {second}");
        assert_eq!(answer(&second), "echo: second", "{policy}");
        let (status, first) = first.await.unwrap();
        assert_eq!(status, 200, "{policy}: {first}");
        assert_eq!(answer(&first), "echo: first", "{policy}");
        d.daemon.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_header_and_user_field_keep_history_server_side() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    ask(&d.base, Some("s-1"), "my name is Ada").await;
    let (_, body) = ask(&d.base, Some("s-1"), "what is my name?").await;
    assert_eq!(answer(&body), "echo: what is my name?");
    let second = prompt(&llm.requests()[1]);
    let roles_texts: Vec<_> = second.iter().skip(1).map(|(r, t)| format!("{r}:{t}")).collect();
    assert_eq!(roles_texts, ["user:my name is Ada", "assistant:echo: my name is Ada", "user:what is my name?"]);

    // The OpenAI `user` field is a session of its own, separate from the header's.
    for text in ["one", "two"] {
        let response = client()
            .post(format!("{}/v1/chat/completions", d.base))
            .json(&json!({ "messages": [{ "role": "user", "content": text }], "user": "bob" }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.headers()["x-hermes-session-id"], "user:bob");
    }
    let last = prompt(&llm.requests()[3]);
    assert_eq!(last.len(), 4, "system + one, echo, two: {last:?}");

    // Without either, requests are stateless: the client's own history is the context.
    let response = client()
        .post(format!("{}/v1/chat/completions", d.base))
        .json(&json!({ "messages": [
            { "role": "system", "content": "be brief" },
            { "role": "user", "content": "a" },
            { "role": "assistant", "content": "b" },
            { "role": "user", "content": "c" },
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let stateless = prompt(&llm.requests()[4]);
    let texts: Vec<_> = stateless.iter().skip(1).map(|(r, t)| format!("{r}:{t}")).collect();
    assert_eq!(texts, ["system:be brief", "user:a", "assistant:b", "user:c"]);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_event_runs_once() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let send = || {
        client()
            .post(format!("{}/v1/chat/completions", d.base))
            .header("X-Hermes-Session-Id", "dup")
            .header("Idempotency-Key", "abc-123")
            .json(&json!({ "messages": [{ "role": "user", "content": "charge my card" }] }))
            .send()
    };
    let first = send().await.unwrap();
    assert_eq!(first.status(), 200);
    let first: Value = first.json().await.unwrap();
    let second = send().await.unwrap();
    assert_eq!(second.status(), 200, "the retry gets the stored answer");
    assert_eq!(second.headers()["idempotent-replayed"], "true");
    let body: Value = second.json().await.unwrap();
    assert_eq!(body, first);
    assert_eq!(llm.count(), 1, "the model was called once");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_messages_in_one_session_are_answered_in_order() {
    let llm = FakeLlm::builder().latency(Duration::from_millis(150)).start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let mut handles = Vec::new();
    for i in 0..3 {
        let base = d.base.clone();
        handles.push(tokio::spawn(async move { ask(&base, Some("burst"), &format!("message {i}")).await }));
        // Spaced a little so the arrival order is defined.
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    for (i, handle) in handles.into_iter().enumerate() {
        let (status, body) = handle.await.unwrap();
        assert_eq!(status, 200);
        assert_eq!(answer(&body), format!("echo: message {i}"));
    }
    // One turn at a time: each model call saw the previous exchange complete.
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    let last = prompt(&requests[2]);
    let texts: Vec<_> = last.iter().skip(1).map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts, ["message 0", "echo: message 0", "message 1", "echo: message 1", "message 2"]);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_cancels_the_running_turn_without_waiting_behind_it() {
    let llm = FakeLlm::builder().slow_reply(Duration::from_secs(20), "too late").start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let base = d.base.clone();
    let slow = tokio::spawn(async move { ask(&base, Some("st"), "write a novel").await });
    assert!(eventually(Duration::from_secs(5), || llm.count() == 1).await);
    let started = std::time::Instant::now();
    let (status, body) = ask(&d.base, Some("st"), "/stop").await;
    assert_eq!(status, 200);
    assert_eq!(answer(&body), "Stopping the current turn.");
    let (status, body) = slow.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(answer(&body), "Stopped.");
    assert!(started.elapsed() < Duration::from_secs(5), "stop took {:?}", started.elapsed());
    let (_, body) = ask(&d.base, Some("st"), "/status").await;
    assert!(answer(&body).contains("idle"), "{body}");
    let (_, body) = ask(&d.base, Some("st"), "/stop").await;
    assert_eq!(answer(&body), "Nothing is running.");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_starts_a_fresh_session() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    ask(&d.base, Some("n"), "remember 42").await;
    let (_, body) = ask(&d.base, Some("n"), "/new").await;
    assert!(answer(&body).starts_with("Started a new session"), "{body}");
    ask(&d.base, Some("n"), "what number?").await;
    let fresh = prompt(&llm.requests()[1]);
    assert_eq!(fresh.len(), 2, "system + the new message only: {fresh:?}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_policy_cancels_the_running_turn() {
    let llm = FakeLlm::builder().slow_reply(Duration::from_secs(20), "slow").start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, "[agent]\nbusy_policy = \"interrupt\"\n"), &[]).await;
    let base = d.base.clone();
    let slow = tokio::spawn(async move { ask(&base, Some("i"), "first").await });
    assert!(eventually(Duration::from_secs(5), || llm.count() == 1).await);
    let (_, body) = ask(&d.base, Some("i"), "second").await;
    // The interrupted message stays in the history; the model sees both, merged into one turn.
    assert_eq!(answer(&body), "echo: first\n\nsecond");
    let (_, body) = slow.await.unwrap();
    assert_eq!(answer(&body), "Interrupted by your newer message.");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_openai_style_errors() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let config = config_for(&llm, "").replace("[http]\n", "[http]\nmax_body_bytes = 2048\n");
    let d = start_daemon(home.path(), &config, &[("API_SERVER_KEY", "sekret")]).await;
    let url = format!("{}/v1/chat/completions", d.base);
    let post = |body: String, key: Option<&str>| {
        let mut request = client().post(&url).header("content-type", "application/json").body(body);
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        request.send()
    };
    let cases: [(String, Option<&str>, u16, &str); 6] = [
        ("{not json".into(), Some("sekret"), 400, "invalid_json"),
        (json!({"messages":[{"role":"user","content":"x"}]}).to_string(), None, 401, "invalid_api_key"),
        (json!({"messages":[{"role":"user","content":"x"}]}).to_string(), Some("wrong"), 401, "invalid_api_key"),
        (
            json!({"messages":[{"role":"user","content":"x".repeat(4096)}]}).to_string(),
            Some("sekret"),
            413,
            "body_too_large",
        ),
        (json!({"messages":[{"role":"system","content":"x"}]}).to_string(), Some("sekret"), 400, "no_user_message"),
        (json!({"messages":"nope"}).to_string(), Some("sekret"), 400, "invalid_json"),
    ];
    for (body, key, status, code) in cases {
        let response = post(body.clone(), key).await.unwrap();
        assert_eq!(response.status().as_u16(), status, "body {body:.60}");
        let json: Value = response.json().await.unwrap();
        assert_eq!(json["error"]["code"], code, "body {body:.60}");
        assert!(json["error"]["message"].as_str().is_some_and(|m| !m.contains("sekret")));
    }
    assert_eq!(llm.count(), 0, "nothing bad reached the model");
    let ok = post(json!({"messages":[{"role":"user","content":"x"}]}).to_string(), Some("sekret")).await.unwrap();
    assert_eq!(ok.status(), 200);
    let models = client().get(format!("{}/v1/models", d.base)).bearer_auth("sekret").send().await.unwrap();
    let models: Value = models.json().await.unwrap();
    assert_eq!(models["data"][0]["id"], "hermes-agent");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_failures_become_clear_replies() {
    let llm = FakeLlm::builder()
        .fail(500, "upstream exploded")
        .step(Duration::ZERO, Step::Status(429, "{}".into(), Some(7)))
        .step(Duration::ZERO, Step::Garbage)
        .fail(401, "bad key")
        .start()
        .await;
    let home = tempfile::tempdir().unwrap();
    // One attempt each, so every scripted failure reaches the user as it is (retries and
    // fallback have tests of their own).
    let d = start_daemon(home.path(), &config_for(&llm, "[agent]\nretry_attempts = 1\n"), &[]).await;
    for expected in ["unavailable: HTTP 500", "rate limited", "could not read", "refused the API key"] {
        let (status, body) = ask(&d.base, Some("f"), "hello").await;
        assert_eq!(status, 502, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{message:?} should contain {expected:?}");
    }
    // Failed turns leave no half-written assistant messages in the history.
    let (_, body) = ask(&d.base, Some("f"), "again").await;
    // The failed messages stay in the history (merged into one user turn); no answer was invented.
    assert!(answer(&body).starts_with("echo: hello\n\nhello") && answer(&body).ends_with("again"), "{body}");
    let history = prompt(&llm.requests()[4]);
    assert!(history.iter().all(|(role, _)| role != "assistant"), "{history:?}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_model_configured_still_answers_with_a_hint() {
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), "[http]\nlisten = \"127.0.0.1:0\"\n", &[]).await;
    let (status, body) = ask(&d.base, None, "hello?").await;
    assert_eq!(status, 200);
    assert!(answer(&body).starts_with("no model provider configured:"), "{body}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_answers_as_server_sent_events() {
    // Several words: streamed text goes out a word at a time (the unfinished last word waits
    // until it can be checked for secrets).
    let llm = FakeLlm::builder().reply("a streamed answer in words").start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let response = client()
        .post(format!("{}/v1/chat/completions", d.base))
        .json(&json!({ "stream": true, "messages": [{ "role": "user", "content": "hi" }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let text = response.text().await.unwrap();
    let data: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{text}");
    let chunks: Vec<Value> = data[..data.len() - 1].iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk"));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let pieces: Vec<&str> = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert!(pieces.len() >= 3, "the model's deltas are forwarded as they come: {pieces:?}");
    assert_eq!(pieces.concat(), "a streamed answer in words");
    assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], "stop");
    assert_eq!(llm.requests()[0]["stream"], true, "the model was asked to stream");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_metrics() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let get = |path: &str| client().get(format!("{}{path}", d.base)).send();
    assert_eq!(get("/healthz").await.unwrap().status(), 200);
    assert_eq!(get("/readyz").await.unwrap().status(), 200);
    ask(&d.base, Some("m"), "count me").await;
    let metrics = get("/metrics").await.unwrap().text().await.unwrap();
    for needle in [
        "hermesd_inbound_events_total{platform=\"api\",outcome=\"new\"} 1",
        "hermesd_turns_total{outcome=\"ok\",profile=\"default\"} 1",
        "hermesd_outbound_messages_total{platform=\"api\",outcome=\"sent\"} 1",
        "hermesd_turn_duration_seconds_count 1",
        "hermesd_queue_depth 0",
    ] {
        assert!(metrics.contains(needle), "missing {needle} in\n{metrics}");
    }
    assert!(!metrics.contains("\"m\""), "no session ids as labels");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_restart_mid_turn_answers_exactly_once_after_start() {
    let llm = FakeLlm::builder().slow_reply(Duration::from_secs(30), "never delivered").start().await;
    let home = tempfile::tempdir().unwrap();
    let config = config_for(&llm, "[agent]\ndrain_timeout = \"300ms\"\n");
    let d = start_daemon(home.path(), &config, &[]).await;
    let base = d.base.clone();
    let pending = tokio::spawn(async move { ask(&base, Some("g"), "survive the restart").await });
    assert!(eventually(Duration::from_secs(5), || llm.count() == 1).await);
    d.daemon.stop().await;
    let (status, body) = pending.await.unwrap();
    assert_eq!(status, 503, "the client is told it will be answered later: {body}");
    assert_eq!(body["error"]["code"], "restarting");

    // Next start: recovery runs the saved message once (the fake now echoes instantly).
    let d = start_daemon(home.path(), &config, &[]).await;
    assert_eq!(d.daemon.recovery.rerun, 1);
    assert!(eventually(Duration::from_secs(5), || llm.count() == 2).await);
    let (_, body) = ask(&d.base, Some("g"), "and now?").await;
    assert_eq!(answer(&body), "echo: and now?");
    let history = prompt(&llm.requests()[2]);
    let texts: Vec<_> = history.iter().skip(1).map(|(r, t)| format!("{r}:{t}")).collect();
    assert_eq!(texts, ["user:survive the restart", "assistant:echo: survive the restart", "user:and now?"]);
    d.daemon.stop().await;
}
