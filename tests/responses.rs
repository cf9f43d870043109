//! The Responses API (`POST /v1/responses`, `GET`/`DELETE /v1/responses/{id}`) end to end: a real
//! daemon (in-process), real HTTP, real SQLite, fake LLM; by hand-written requests, and by the
//! official openai Python client (pinned, in a venv this test makes).

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::fake_llm::Step;
use support::{FakeLlm, client, config_for, prompt, start_daemon};

const KEY: &str = "responses-test-key";
/// The openai client the Python test runs (PyPI).
const OPENAI_VERSION: &str = "3.57.0";

async fn create(base: &str, body: Value) -> (u16, Value, reqwest::header::HeaderMap) {
    let response = client().post(format!("{base}/v1/responses")).bearer_auth(KEY).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, response.json().await.unwrap_or(Value::Null), headers)
}

fn text(response: &Value) -> &str {
    response["output"][0]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no output text in {response}"))
}

/// The events of an SSE body: (event name, data).
fn sse_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter_map(|block| {
            let mut kind = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(k) = line.strip_prefix("event: ") {
                    kind = Some(k.to_owned());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            Some((kind?, serde_json::from_str(&data).ok()?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_continues_by_previous_response_and_is_kept_retrieved_and_deleted() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, "[profiles.helper]\n"), &[("API_SERVER_KEY", KEY)]).await;
    let base = &d.base;

    // A conversation stays with its profile: a continuation naming no model takes it, one
    // naming another profile's is refused.
    let (status, helped, _) = create(base, json!({ "model": "helper", "input": "I am Bo" })).await;
    assert_eq!(status, 200, "{helped}");
    let (status, again, _) = create(base, json!({ "input": "who am I?", "previous_response_id": helped["id"] })).await;
    assert_eq!((status, again["model"].as_str()), (200, Some("helper")), "{again}");
    let sent = prompt(llm.requests().last().unwrap());
    assert!(sent.iter().any(|(_, text)| text == "I am Bo"), "the helper's history: {sent:?}");
    let (status, other, _) =
        create(base, json!({ "model": "hermes-agent", "input": "x", "previous_response_id": again["id"] })).await;
    assert_eq!((status, other["error"]["code"].as_str()), (400, Some("model_mismatch")), "{other}");

    // A conversation opened with earlier messages keeps them: a continuation's model sees them.
    let opened = json!([
        {"role": "user", "content": "my dog is Rex"},
        {"role": "assistant", "content": "A fine name."},
        {"role": "user", "content": "hello"},
    ]);
    let (status, opening, _) = create(base, json!({ "input": opened })).await;
    assert_eq!(status, 200, "{opening}");
    let (status, _, _) =
        create(base, json!({ "input": "what is my dog called?", "previous_response_id": opening["id"] })).await;
    assert_eq!(status, 200);
    let sent = prompt(llm.requests().last().unwrap());
    let turns: Vec<&str> = sent.iter().filter(|(role, _)| role != "system").map(|(_, text)| text.as_str()).collect();
    assert_eq!(turns, ["my dog is Rex", "A fine name.", "hello", "echo: hello", "what is my dog called?"], "{sent:?}");

    let (status, first, _) =
        create(base, json!({ "model": "hermes-agent", "input": "my name is Ada", "instructions": "Answer briefly." }))
            .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!((first["object"].as_str(), first["status"].as_str()), (Some("response"), Some("completed")));
    assert_eq!(text(&first), "echo: my name is Ada");
    assert!(first["usage"]["total_tokens"].as_u64().is_some(), "{first}");
    let sent = prompt(llm.requests().last().unwrap());
    assert!(
        sent.iter().any(|(role, text)| role == "system" && text == "Answer briefly."),
        "instructions reach the model: {sent:?}"
    );
    let first_id = first["id"].as_str().unwrap().to_owned();

    // The next request continues the same conversation: the first exchange is in its prompt,
    // the instructions (that request's only) are not.
    let (status, second, _) =
        create(base, json!({ "input": [{"role": "user", "content": [{"type": "input_text", "text": "what is my name?"}]}], "previous_response_id": first_id })).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["previous_response_id"], first_id.as_str());
    let sent = prompt(llm.requests().last().unwrap());
    let turns: Vec<&str> = sent.iter().filter(|(role, _)| role != "system").map(|(_, text)| text.as_str()).collect();
    assert_eq!(turns, ["my name is Ada", "echo: my name is Ada", "what is my name?"], "{sent:?}");
    assert!(!sent.iter().any(|(_, text)| text == "Answer briefly."), "{sent:?}");
    let second_id = second["id"].as_str().unwrap().to_owned();

    // Only the newest response of a conversation continues it.
    let (status, branch, _) = create(base, json!({ "input": "branch", "previous_response_id": first_id })).await;
    assert_eq!(status, 409, "{branch}");
    let (status, unknown, _) = create(base, json!({ "input": "x", "previous_response_id": "resp_nope" })).await;
    assert_eq!((status, unknown["error"]["code"].as_str()), (404, Some("previous_response_not_found")));

    // Retrieved as given; deleted for good.
    let got = client().get(format!("{base}/v1/responses/{second_id}")).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.json::<Value>().await.unwrap(), second);
    let deleted = client().delete(format!("{base}/v1/responses/{first_id}")).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(deleted.status(), 200);
    let gone = client().get(format!("{base}/v1/responses/{first_id}")).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(gone.status(), 404);

    // `store: false` keeps nothing to retrieve or continue.
    let (_, unstored, _) = create(base, json!({ "input": "forget me", "store": false })).await;
    assert_eq!(unstored["store"], false);
    let id = unstored["id"].as_str().unwrap();
    let got = client().get(format!("{base}/v1/responses/{id}")).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(got.status(), 404);

    // A wrong key, a broken body and a tool type other than functions are refused with clear errors.
    let wrong = client()
        .post(format!("{base}/v1/responses"))
        .bearer_auth("nope")
        .json(&json!({"input": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let broken = client()
        .post(format!("{base}/v1/responses"))
        .bearer_auth(KEY)
        .header("content-type", "application/json")
        .body("{\"input\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(broken.status(), 400);
    for asked in [
        json!({ "text": { "format": { "type": "json_schema", "name": "x", "schema": {} } } }),
        json!({ "tool_choice": "required" }),
    ] {
        let mut body = json!({ "input": "hi" });
        body.as_object_mut().unwrap().extend(asked.as_object().unwrap().clone());
        let (status, refused, _) = create(base, body).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (400, Some("unsupported_parameter")), "{refused}");
    }
    let (status, tools, _) = create(base, json!({ "input": "hi", "tools": [{"type": "web_search_preview"}] })).await;
    assert_eq!(status, 400, "{tools}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_sends_the_responses_events_in_order_and_a_retry_replays_the_stored_answer() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[("API_SERVER_KEY", KEY)]).await;
    let body = client()
        .post(format!("{}/v1/responses", d.base))
        .bearer_auth(KEY)
        .json(&json!({ "input": "stream this", "stream": true }))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = sse_events(&body);
    let kinds: Vec<&str> = events.iter().map(|(kind, _)| kind.as_str()).collect();
    let opening =
        ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"];
    assert_eq!(&kinds[..4], opening, "{kinds:?}");
    let closing =
        ["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"];
    assert_eq!(&kinds[kinds.len() - 4..], closing, "{kinds:?}");
    let deltas: String = events
        .iter()
        .filter(|(k, _)| k == "response.output_text.delta")
        .map(|(_, e)| e["delta"].as_str().unwrap())
        .collect();
    let completed = &events.last().unwrap().1["response"];
    assert_eq!(deltas, "echo: stream this");
    assert_eq!(text(completed), deltas);
    let numbers: Vec<u64> = events.iter().map(|(_, e)| e["sequence_number"].as_u64().unwrap()).collect();
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
    for (kind, data) in &events {
        assert_eq!(data["type"], kind.as_str());
    }

    // The same Idempotency-Key again: the stored answer, not a second turn.
    let keyed = |stream: bool| {
        client()
            .post(format!("{}/v1/responses", d.base))
            .bearer_auth(KEY)
            .header("Idempotency-Key", "k-1")
            .json(&json!({ "input": "once", "stream": stream }))
            .send()
    };
    let first: Value = keyed(false).await.unwrap().json().await.unwrap();
    let calls = llm.count();
    let again = keyed(false).await.unwrap();
    assert_eq!(again.headers().get("idempotent-replayed").map(|v| v.to_str().unwrap()), Some("true"));
    assert_eq!(again.json::<Value>().await.unwrap()["id"], first["id"]);
    let replayed = sse_events(&keyed(true).await.unwrap().text().await.unwrap());
    assert_eq!(replayed.last().unwrap().0, "response.completed");
    assert_eq!(replayed.last().unwrap().1["response"]["id"], first["id"]);
    assert_eq!(llm.count(), calls, "no second turn");

    // A retried continuation finds its own answer newest: the key replays it, no 409.
    let first_id = first["id"].as_str().unwrap().to_owned();
    let continued = || {
        client()
            .post(format!("{}/v1/responses", d.base))
            .bearer_auth(KEY)
            .header("Idempotency-Key", "k-2")
            .json(&json!({ "input": "and then?", "previous_response_id": first_id }))
            .send()
    };
    let answer: Value = continued().await.unwrap().json().await.unwrap();
    let retry = continued().await.unwrap();
    assert_eq!(retry.status(), 200);
    assert_eq!(retry.json::<Value>().await.unwrap()["id"], answer["id"], "the stored answer, replayed");
    d.daemon.stop().await;
}

/// A venv with the pinned openai client, made once per target directory.
fn openai_python() -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("openai-venv-{OPENAI_VERSION}"));
    let ready = venv.join("installed");
    if !ready.exists() {
        let _ = std::fs::remove_dir_all(&venv);
        let made =
            std::process::Command::new("python3").args(["-m", "venv"]).arg(&venv).status().expect("python3 runs");
        assert!(made.success(), "python3 -m venv failed (Debian: python3-venv)");
        let pip = std::process::Command::new(venv.join("bin/python"))
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
            .arg(format!("openai=={OPENAI_VERSION}"))
            .status()
            .expect("pip runs");
        assert!(pip.success(), "pip install openai=={OPENAI_VERSION} failed (needs PyPI)");
        std::fs::write(&ready, OPENAI_VERSION).unwrap();
    }
    venv.join("bin/python")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_openai_client_holds_a_conversation_streams_retrieves_deletes_and_calls_functions() {
    let python = tokio::task::spawn_blocking(openai_python).await.unwrap();
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[("API_SERVER_KEY", KEY)]).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/openai_responses.py");
    let out = tokio::process::Command::new(&python).arg(&script).arg(&d.base).arg(KEY).output().await.unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim_end().ends_with("ok"), "{said}");

    // A function the client declares: called, answered, and called again in a stream.
    llm.push(Duration::ZERO, Step::ToolCalls(vec![("get_weather".into(), "{\"city\":\"Berlin\"}".into())]));
    llm.push(Duration::ZERO, Step::Reply("It is sunny in Berlin.".into()));
    llm.push(Duration::ZERO, Step::ToolCalls(vec![("get_weather".into(), "{\"city\":\"Paris\"}".into())]));
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(&d.base)
        .arg(KEY)
        .arg("functions")
        .output()
        .await
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim_end().ends_with("ok"), "{said}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_function_call_ends_the_response_and_its_output_continues_the_turn() {
    let llm = FakeLlm::builder()
        .tool_calls(&[("get_weather", "{\"city\":\"Berlin\"}")])
        .reply("It is sunny in Berlin.")
        .start()
        .await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[("API_SERVER_KEY", KEY)]).await;
    let tools = json!([{
        "type": "function", "name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }]);
    let (status, first, _) = create(&d.base, json!({ "input": "weather in Berlin?", "tools": tools })).await;
    assert_eq!(status, 200, "{first}");
    let output = first["output"].as_array().unwrap();
    assert_eq!(output.len(), 1, "only the call, no empty message: {first}");
    assert_eq!((output[0]["type"].as_str(), output[0]["name"].as_str()), (Some("function_call"), Some("get_weather")));
    assert_eq!(output[0]["arguments"], "{\"city\":\"Berlin\"}");
    let call_id = output[0]["call_id"].as_str().unwrap().to_owned();
    let offered: Vec<String> = llm.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect();
    assert!(offered.contains(&"get_weather".to_owned()), "offered beside hermesd's own: {offered:?}");
    let first_id = first["id"].as_str().unwrap();

    // An output for a call the response did not make is refused.
    let (status, stray, _) = create(
        &d.base,
        json!({ "previous_response_id": first_id, "input": [{"type": "function_call_output", "call_id": "nope", "output": "x"}] }),
    )
    .await;
    assert_eq!(status, 400, "{stray}");

    // The output continues the turn: the model sees its call and the result, and answers.
    let (status, second, _) = create(
        &d.base,
        json!({
            "previous_response_id": first_id, "tools": tools,
            "input": [{"type": "function_call_output", "call_id": call_id, "output": "sunny, 21°C"}],
        }),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(text(&second), "It is sunny in Berlin.");
    let request = llm.requests().last().unwrap().clone();
    let messages = request["messages"].as_array().unwrap();
    let at = messages.iter().position(|m| m["tool_calls"][0]["function"]["name"] == "get_weather").expect("the call");
    assert_eq!(messages[at + 1]["role"], "tool");
    assert_eq!(messages[at + 1]["tool_call_id"], call_id.as_str());
    assert!(messages[at + 1].to_string().contains("sunny, 21°C"), "{}", messages[at + 1]);
    let users = messages.iter().filter(|m| m["role"] == "user").count();
    assert_eq!(users, 1, "the output is no user message: {messages:?}");

    // Streamed, a response of one call alone has no message item: the call is output 0, in the
    // events as in the final object.
    llm.push(Duration::ZERO, Step::ToolCalls(vec![("get_weather".into(), "{}".into())]));
    let body = client()
        .post(format!("{}/v1/responses", d.base))
        .bearer_auth(KEY)
        .json(&json!({ "input": "and in Rome?", "tools": tools, "stream": true }))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = sse_events(&body);
    let added: Vec<(u64, &str)> = events
        .iter()
        .filter(|(k, _)| k == "response.output_item.added")
        .map(|(_, e)| (e["output_index"].as_u64().unwrap(), e["item"]["type"].as_str().unwrap()))
        .collect();
    assert_eq!(added, [(0, "function_call")], "{body}");
    let completed = &events.last().unwrap().1["response"];
    assert_eq!(completed["output"][0]["type"], "function_call", "{completed}");
    assert_eq!(completed["output"].as_array().unwrap().len(), 1, "{completed}");

    // A client function named like one of hermesd's own tools is refused.
    let taken = json!([{"type": "function", "name": "memory", "parameters": {"type": "object"}}]);
    let (status, refused, _) = create(&d.base, json!({ "input": "hi", "tools": taken })).await;
    assert_eq!((status, refused["error"]["type"].as_str()), (400, Some("invalid_request_error")), "{refused}");
    assert!(refused.to_string().contains("own tools"), "{refused}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_answered_after_a_kill_is_kept_as_a_response_and_continues() {
    let llm = FakeLlm::builder()
        .slow_reply(Duration::from_secs(60), "never sent")
        .reply("answered after the restart")
        .start()
        .await;
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = config_for(&llm, "").replace("127.0.0.1:0", &format!("127.0.0.1:{port}"));
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let env = [("API_SERVER_KEY", KEY)];
    let mut child = support::spawn_gateway_with_env(home.path(), &env);
    support::wait_ready(port, home.path()).await;
    let keyed = |body: Value| {
        client()
            .post(format!("{base}/v1/responses"))
            .bearer_auth(KEY)
            .header("Idempotency-Key", "kill-1")
            .json(&body)
            .send()
    };
    let asked = json!({ "input": "survive this", "metadata": { "case": "kill" } });
    let first = tokio::spawn(keyed(asked.clone()));
    assert!(support::eventually(Duration::from_secs(15), || llm.count() == 1).await);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(first.await.unwrap().is_err(), "the client lost its connection");

    // The turn runs again after the restart; the retried key finds a response object, kept.
    let mut child = support::spawn_gateway_with_env(home.path(), &env);
    support::wait_ready(port, home.path()).await;
    let mut answer = Value::Null;
    for _ in 0..400 {
        let retried = keyed(asked.clone()).await.unwrap();
        if retried.status() == 200 {
            answer = retried.json().await.unwrap();
            break;
        }
        assert_eq!(retried.status(), 409, "in progress until the rerun ends");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        (answer["object"].as_str(), answer["status"].as_str()),
        (Some("response"), Some("completed")),
        "{answer}"
    );
    assert_eq!(text(&answer), "answered after the restart");
    assert_eq!(answer["metadata"]["case"], "kill", "{answer}");
    let id = answer["id"].as_str().unwrap();
    let got = client().get(format!("{base}/v1/responses/{id}")).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.json::<Value>().await.unwrap()["status"], "completed");
    let (status, next, _) = create(&base, json!({ "input": "and now?", "previous_response_id": id })).await;
    assert_eq!(status, 200, "{next}");
    let sent = prompt(llm.requests().last().unwrap());
    assert!(sent.iter().any(|(_, text)| text == "survive this"), "{sent:?}");
    let _ = child.kill();
    let _ = child.wait();
}
