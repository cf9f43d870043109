//! The agent runtime end to end: tool calls, budgets, retries, fallback, nudges, stream retries,
//! compression, prompt stability — through the real daemon and a scripted fake LLM.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::fake_llm::{SUMMARY, Step};
use support::{FakeLlm, answer, ask, client, config_for, prompt, start_daemon};

fn tool_messages(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| (m["tool_call_id"].as_str().unwrap().to_owned(), m["content"].as_str().unwrap_or("").to_owned()))
        .collect()
}

fn is_summary_request(request: &Value) -> bool {
    request["messages"][0]["content"].as_str().is_some_and(|c| c.contains("handover summaries"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_round_trip_is_answered_and_remembered() {
    let todo = r#"{"todos":[{"id":"1","content":"write the tests","status":"in_progress"}]}"#;
    let llm = FakeLlm::builder().tool_calls(&[("todo", todo)]).reply("done: one task in progress").start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let (status, body) = ask(&d.base, Some("tools"), "plan my day").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(answer(&body), "done: one task in progress");
    let requests = llm.requests();
    let offered: Vec<&str> =
        requests[0]["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    for name in ["memory", "todo", "terminal", "read_file", "web_fetch", "session_search", "delegate_task"] {
        assert!(offered.contains(&name), "{name} missing from {offered:?}");
    }
    let results = tool_messages(&requests[1]);
    assert_eq!(results.len(), 1);
    assert!(results[0].1.contains("write the tests"), "{results:?}");
    // The next turn sees the call and its result in the stored history.
    ask(&d.base, Some("tools"), "and now?").await;
    let history = &llm.requests()[2];
    assert_eq!(tool_messages(history), results);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_keep_their_order() {
    let calls = [
        ("session_search", r#"{"query":"alpha"}"#),
        ("todo", "{}"),
        ("session_search", r#"{"query":"beta"}"#),
        ("no_such_tool", "{}"),
    ];
    let llm = FakeLlm::builder().tool_calls(&calls).reply("ok").start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    ask(&d.base, Some("p"), "go").await;
    let results = tool_messages(&llm.requests()[1]);
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["call_0", "call_1", "call_2", "call_3"]);
    assert!(results[0].1.contains("alpha") && results[2].1.contains("beta"), "{results:?}");
    assert!(results[3].1.contains("no tool named"), "{results:?}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_exhaustion_ends_in_a_summary_reply() {
    let llm = FakeLlm::builder()
        .tool_calls(&[("todo", "{}")])
        .tool_calls(&[("todo", "{}")])
        .reply("I listed the tasks twice; nothing is left.")
        .start()
        .await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, "[agent]\nmax_iterations = 2\n"), &[]).await;
    let (status, body) = ask(&d.base, Some("b"), "loop forever").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(answer(&body), "I listed the tasks twice; nothing is left.");
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[2].get("tools").is_none(), "the summary call offers no tools");
    let last = prompt(&requests[2]).pop().unwrap();
    assert!(last.1.contains("step limit"), "{last:?}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_with_retry_after_is_waited_out_then_answered() {
    let llm = FakeLlm::builder()
        .step(Duration::ZERO, Step::Status(429, "{}".into(), Some(1)))
        .reply("patience pays")
        .start()
        .await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let started = Instant::now();
    let (status, body) = ask(&d.base, Some("r"), "hi").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(answer(&body), "patience pays");
    assert!(started.elapsed() >= Duration::from_secs(1), "retried before Retry-After: {:?}", started.elapsed());
    assert_eq!(llm.count(), 2);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_5xx_falls_back_and_the_next_turn_starts_on_the_primary() {
    let primary = FakeLlm::builder().fail(500, "down").fail(502, "down").start().await;
    let fallback = FakeLlm::builder().reply("from the fallback").start().await;
    let home = tempfile::tempdir().unwrap();
    let extra = format!(
        "[[model.fallback]]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"backup\"\n\n[agent]\nretry_attempts = 2\n",
        fallback.base_url()
    );
    let config = config_for(&primary, &extra);
    let d = start_daemon(home.path(), &config, &[]).await;
    let (_, body) = ask(&d.base, Some("fb"), "are you there?").await;
    assert_eq!(answer(&body), "from the fallback");
    assert_eq!(primary.count(), 2);
    assert_eq!(fallback.requests()[0]["model"], "backup");
    let (_, body) = ask(&d.base, Some("fb"), "again").await;
    assert_eq!(answer(&body), "echo: again", "the next turn is on the primary again");
    assert_eq!(fallback.count(), 1);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_reply_is_nudged_then_answered() {
    let llm = FakeLlm::builder().step(Duration::ZERO, Step::Empty).reply("here you go").start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let (_, body) = ask(&d.base, Some("e"), "answer me").await;
    assert_eq!(answer(&body), "here you go");
    let nudge = prompt(&llm.requests()[1]).pop().unwrap();
    assert!(nudge.1.contains("Your last reply was empty"), "{nudge:?}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_stream_is_retried_and_no_partial_text_is_stored() {
    let llm = FakeLlm::builder()
        .step(Duration::ZERO, Step::CutStream("The answer is".into()))
        .reply("The answer is forty-two.")
        .start()
        .await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let response = client()
        .post(format!("{}/v1/chat/completions", d.base))
        .header("X-Hermes-Session-Id", "cut")
        .json(&json!({ "stream": true, "messages": [{ "role": "user", "content": "what is it?" }] }))
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    let streamed: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(streamed, "The answer is forty-two.", "no text repeated across the retry");
    assert_eq!(llm.count(), 2);
    ask(&d.base, Some("cut"), "thanks").await;
    let history: Vec<_> = prompt(&llm.requests()[2]).into_iter().filter(|(r, _)| r == "assistant").collect();
    assert_eq!(history, [("assistant".to_owned(), "The answer is forty-two.".to_owned())]);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_overflow_compresses_in_place_and_answers() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    for i in 0..14 {
        ask(&d.base, Some("long"), &format!("note {i} about the aardvark project")).await;
    }
    llm.push(Duration::ZERO, Step::ContextTooLong);
    let (status, body) = ask(&d.base, Some("long"), "where are we?").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(answer(&body), "echo: where are we?");
    let requests = llm.requests();
    let summary_at = requests.iter().position(is_summary_request).expect("a summary call");
    assert!(prompt(&requests[summary_at])[1].1.contains("note 3 about the aardvark"), "the middle was summarised");
    let after = prompt(requests.last().unwrap());
    assert!(after.iter().any(|(_, c)| c.contains(SUMMARY)), "the summary replaced the middle: {after:?}");
    assert!(after.len() < 30, "history shrank: {} messages", after.len());
    d.daemon.stop().await;

    // Same session id, old rows archived and still found by search.
    let store =
        hermesd::store::SqliteStore::open(&home.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
    use hermesd::store::SessionStore;
    let sessions = store.list_sessions(10).await.unwrap();
    assert_eq!(sessions.len(), 1, "compaction kept the session");
    let history = store.full_history(&sessions[0].id).await.unwrap();
    assert!(history.iter().filter(|m| m.archived).count() >= 5);
    let hits = store.search("note 3 about", Some(&sessions[0].id), 10).await.unwrap();
    assert!(!hits.is_empty(), "archived messages stay searchable");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_past_the_threshold_compacts_before_the_next_turn() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let config =
        config_for(&llm, "").replace("name = \"fake-model\"\n", "name = \"fake-model\"\ncontext_length = 20000\n");
    let d = start_daemon(home.path(), &config, &[]).await;
    for i in 0..12 {
        ask(&d.base, Some("u"), &format!("step {i}")).await;
    }
    // The provider reports 90 % of the window used.
    llm.push(Duration::ZERO, Step::ReplyWithUsage("noted".into(), 18_000));
    ask(&d.base, Some("u"), "one more").await;
    let before = llm.count();
    let (_, body) = ask(&d.base, Some("u"), "next turn").await;
    assert_eq!(answer(&body), "echo: next turn");
    let requests = llm.requests();
    assert!(is_summary_request(&requests[before]), "the turn began by compacting");
    assert!(prompt(&requests[before + 1]).iter().any(|(_, c)| c.contains(SUMMARY)));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_turns_send_a_byte_identical_system_prompt() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("workspace")).unwrap();
    std::fs::write(home.path().join("workspace/AGENTS.md"), "Always answer in haiku.").unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    for i in 0..5 {
        ask(&d.base, Some("stable"), &format!("turn {i}")).await;
        if i == 2 {
            // Memory changes mid-session do not touch this session's prompt.
            std::fs::create_dir_all(home.path().join("memory")).unwrap();
            std::fs::write(home.path().join("memory/MEMORY.md"), "The user likes tea.").unwrap();
        }
    }
    let prompts: Vec<String> =
        llm.requests().iter().map(|r| r["messages"][0]["content"].as_str().unwrap().to_owned()).collect();
    assert_eq!(prompts.len(), 5);
    assert!(prompts.iter().all(|p| p == &prompts[0]));
    assert!(prompts[0].contains("Always answer in haiku.") && prompts[0].contains("Today is"));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_running_longer_than_the_model_deadline_do_not_end_the_turn() {
    // A 2 s budget of model time; each call takes 0.3 s, and the two tool rounds sleep 2.5 s
    // each: 5 s of tools, about 1 s of model time.
    let llm = FakeLlm::builder()
        .latency(Duration::from_millis(300))
        .tool_calls(&[("terminal", r#"{"command":"sleep 2.5"}"#)])
        .tool_calls(&[("terminal", r#"{"command":"sleep 2.5"}"#)])
        .reply("both naps taken")
        .start()
        .await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, "[agent]\nmodel_deadline = \"2s\"\n"), &[]).await;
    let started = Instant::now();
    let (status, body) = ask(&d.base, Some("naps"), "take two naps").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(answer(&body), "both naps taken", "{body}");
    assert!(started.elapsed() >= Duration::from_secs(5), "the tools really ran: {:?}", started.elapsed());
    let results = tool_messages(&llm.requests()[2]);
    assert!(results.iter().all(|(_, out)| !out.contains("timed out") && !out.contains("refused")), "{results:?}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_tool_turn_compresses_its_own_steps_and_notes_its_budget() {
    const TURN_SUMMARY: &str = "[Summary of the earlier steps of this turn]";
    let read = ("read_file", r#"{"path":"big.txt"}"#);
    let mut builder = FakeLlm::builder();
    for _ in 0..6 {
        builder = builder.tool_calls(&[read]);
    }
    let llm = builder.reply("done reading").start().await;
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("workspace/chats/api/reader")).unwrap();
    let line = "the quick brown fox jumps over the lazy dog, again and again.";
    std::fs::write(home.path().join("workspace/chats/api/reader/big.txt"), format!("{line}\n").repeat(200)).unwrap();
    // A 12,000-token window: three reads of ~3,300 tokens each cross the 85 % threshold.
    let config = config_for(&llm, "[agent]\nmax_iterations = 7\n\n[tools]\ntoolsets = [\"files\"]\n")
        .replace("name = \"fake-model\"\n", "name = \"fake-model\"\ncontext_length = 12000\n");
    let d = start_daemon(home.path(), &config, &[]).await;
    let (status, body) = ask(&d.base, Some("reader"), "read big.txt six times").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(answer(&body), "done reading", "the turn went on instead of asking for /new");

    let requests = llm.requests();
    let summaries: Vec<&Value> = requests.iter().filter(|r| is_summary_request(r)).collect();
    assert!(!summaries.is_empty(), "the turn compressed itself");
    assert!(prompt(summaries[0])[1].1.contains("[calls read_file"), "its own tool steps were summarised");
    let calls: Vec<&Value> = requests.iter().filter(|r| !is_summary_request(r)).collect();
    assert_eq!(calls.len(), 7);
    let last = prompt(calls[6]);
    assert!(last.iter().any(|(_, c)| c.contains(TURN_SUMMARY)), "{last:?}");
    assert!(last.iter().any(|(_, c)| c.contains(SUMMARY)));
    // The latest call kept its result, and the request fits the window again.
    let messages = calls[6]["messages"].as_array().unwrap();
    let tail = &messages[messages.len() - 2..];
    assert_eq!(tail[0]["tool_calls"][0]["function"]["name"], "read_file");
    assert_eq!(tail[1]["role"], "tool");
    assert!(tail[1]["content"].as_str().unwrap().contains("200|the quick brown fox"));
    assert!(serde_json::to_string(messages).unwrap().len() < 12_000 * 4);

    // Budget notes: none before 70 %, "wrap up" from step 5 of 7, "answer now" at step 7; only
    // on the last tool result.
    let last_content =
        |r: &Value| r["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap_or("").to_owned();
    assert!(!last_content(calls[3]).contains("[Budget"));
    assert!(last_content(calls[4]).contains("[Budget: step 5 of 7, 2 left. Start wrapping up"));
    assert!(last_content(calls[6]).contains("[Budget: step 7 of 7, 0 left. Stop exploring"));
    let earlier = calls[6]["messages"].as_array().unwrap().iter().rev().skip(1);
    assert!(earlier.into_iter().all(|m| !m["content"].as_str().unwrap_or("").contains("[Budget")));

    // The next turn starts from the compacted steps, and no note reached the store.
    ask(&d.base, Some("reader"), "and now?").await;
    let next = serde_json::to_string(&llm.requests().last().unwrap()["messages"]).unwrap();
    assert!(next.contains("summarised by the fake"), "{next}");
    assert!(!next.contains("[Budget"), "budget notes are never stored");
    d.daemon.stop().await;
    let store =
        hermesd::store::SqliteStore::open(&home.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
    use hermesd::store::SessionStore;
    let session = &store.list_sessions(10).await.unwrap()[0];
    let history = store.full_history(&session.id).await.unwrap();
    let texts: Vec<&str> = history.iter().filter_map(|m| m.message.content.as_deref()).collect();
    assert!(texts.iter().any(|t| t.starts_with(TURN_SUMMARY)), "the compacted steps were stored");
    assert!(texts.iter().all(|t| !t.contains("[Budget")));
    store.close().await;
}
