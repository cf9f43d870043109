//! Tokens, cost and limits through the daemon: a reached daily cap answers with its message and
//! runs no model call (per user, per chat, by cost; named admins exempt; a chat-made cron job
//! counted against its creator), each call is priced by
//! the model entry that served it (a fallback's prices for a fallback's answer), `/usage` shows
//! the session and the day, `/metrics` carries the totals, and the API's `usage` field is the sum
//! over the turn's model calls — in the last SSE chunk with `stream_options.include_usage`.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hermesd::daemon::DaemonOptions;
use serde_json::{Value, json};
use support::recording_platform::RecordingPlatform;
use support::{FakeLlm, TestDaemon, ask, client, config_for, eventually, start_daemon, start_daemon_with};

const WAIT: Duration = Duration::from_secs(10);

/// A daemon with the recording platform, `model` TOML (with `[model]`) and `extra` sections.
async fn daemon(
    home: &Path,
    model: &str,
    extra: &str,
    env: &[(&str, &str)],
    platform: &Arc<RecordingPlatform>,
) -> TestDaemon {
    let config = format!("[http]\nlisten = \"127.0.0.1:0\"\n\n{model}\n\n{extra}\n");
    let options = DaemonOptions { extra_platforms: vec![platform.clone() as Arc<_>], ..Default::default() };
    let d = start_daemon_with(home, &config, env, options).await;
    assert!(eventually(Duration::from_secs(2), || platform.started()).await);
    d
}

fn model(llm: &FakeLlm, prices: &str) -> String {
    format!(
        "[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"main-model\"\n{prices}\n",
        llm.base_url()
    )
}

/// Send a DM as `user` and wait for the `n`-th message sent in all.
async fn say(platform: &RecordingPlatform, user: &str, id: &str, text: &str, n: usize) -> String {
    platform.inject(id, user, text).await;
    assert!(eventually(WAIT, || platform.sent().len() >= n).await, "no answer to {text}: {:?}", platform.texts());
    platform.texts()[n - 1].clone()
}

/// Send in group `chat` as `user` and wait for the `n`-th message sent in all.
async fn say_in(platform: &RecordingPlatform, chat: &str, user: &str, id: &str, text: &str, n: usize) -> String {
    platform.inject_group(id, chat, user, text).await;
    assert!(eventually(WAIT, || platform.sent().len() >= n).await, "no answer to {text}: {:?}", platform.texts());
    platform.texts()[n - 1].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reached_turn_cap_answers_with_the_message_and_runs_no_model_call() {
    let llm = FakeLlm::echo().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let env = [("REC_ALLOWED_USERS", "ann,boss"), ("REC_ADMIN_USERS", "boss")];
    let _d = daemon(home.path(), &model(&llm, ""), "[limits]\nuser_daily_turns = 2\n", &env, &platform).await;

    assert_eq!(say(&platform, "ann", "a1", "one", 1).await, "echo: one");
    assert_eq!(say(&platform, "ann", "a2", "two", 2).await, "echo: two");
    let refused = say(&platform, "ann", "a3", "three", 3).await;
    assert!(refused.starts_with("Daily limit reached: You have used 2 turns of the 2 turns allowed"), "{refused}");
    assert!(refused.contains("(limits.user_daily_turns)") && refused.contains("resets at 00:00 UTC, in "), "{refused}");
    assert_eq!(llm.count(), 2, "the refused turn made no model call");

    // /usage: the session (no prices: cost unknown), the day, and the cap that binds.
    let usage = say(&platform, "ann", "a4", "/usage", 4).await;
    assert!(
        usage.contains(
            "this session: 20 prompt (0 read from the cache, 0 written to it) · 10 completion · 2 model calls"
        ),
        "{usage}"
    );
    assert!(usage.contains("cost unknown (no prices configured for the model)"), "{usage}");
    assert!(usage.contains("you today (UTC): 2 turns · 30 tokens (20 prompt, 10 completion)"), "{usage}");
    assert!(usage.contains("you, last 30 days: 2 turns"), "{usage}");
    assert!(usage.contains("daily limits (UTC): 2 turns of 2 turns (you)"), "{usage}");
    assert_eq!(llm.count(), 2);

    // A named admin is not capped, and sees no caps in /usage.
    for (i, word) in ["x", "y", "z"].iter().enumerate() {
        assert_eq!(say(&platform, "boss", &format!("b{i}"), word, 5 + i).await, format!("echo: {word}"));
    }
    assert_eq!(llm.count(), 5);
    let boss_usage = say(&platform, "boss", "b9", "/usage", 8).await;
    assert!(!boss_usage.contains("daily limits"), "{boss_usage}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fallbacks_answer_is_priced_with_its_own_prices_and_a_cost_cap_stops_the_next_turn() {
    let primary = FakeLlm::builder().fail(401, "bad key").fail(401, "bad key").start().await;
    let fallback = FakeLlm::echo().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    // Per fallback call: 10 prompt × $0.04 + 5 completion × $0.08 = $0.80; the primary's prices
    // would make it $0.015.
    let models = format!(
        "{}\n[[model.fallback]]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"small-model\"\n\
         input_per_mtok = 40000\noutput_per_mtok = 80000\n",
        model(&primary, "input_per_mtok = 1000\noutput_per_mtok = 1000"),
        fallback.base_url()
    );
    let env = [("REC_ALLOWED_USERS", "ann")];
    let d = daemon(home.path(), &models, "[limits]\nuser_daily_cost = 1.0\n", &env, &platform).await;

    assert_eq!(say(&platform, "ann", "c1", "one", 1).await, "echo: one");
    assert_eq!(say(&platform, "ann", "c2", "two", 2).await, "echo: two");
    let refused = say(&platform, "ann", "c3", "three", 3).await;
    assert!(refused.contains("You have used $1.60 of the $1.00 allowed per day (limits.user_daily_cost)"), "{refused}");
    assert_eq!((primary.count(), fallback.count()), (2, 2), "no model call for the refused turn");

    let usage = say(&platform, "ann", "c4", "/usage", 4).await;
    assert!(usage.contains("2 model calls · 30 tokens in all · $1.60"), "{usage}");
    assert!(usage.contains("you today (UTC): 2 turns · 30 tokens (20 prompt, 10 completion) · $1.60"), "{usage}");
    assert!(usage.contains("daily limits (UTC): $1.60 of $1.00 (you)"), "{usage}");

    let metrics = client().get(format!("{}/metrics", d.base)).send().await.unwrap().text().await.unwrap();
    for line in [
        "hermesd_model_cost_usd_total 1.600000000000",
        "hermesd_model_tokens_total{kind=\"input\"} 20",
        "hermesd_model_tokens_total{kind=\"output\"} 10",
        "hermesd_model_calls_total{priced=\"yes\"} 2",
        "hermesd_turns_total{outcome=\"limited\",profile=\"default\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} missing in\n{metrics}");
    }
    assert!(!metrics.contains("user=") && !metrics.contains("chat="), "no user or chat labels: {metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_cap_counts_everyone_in_the_chat() {
    let llm = FakeLlm::echo().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let env = [("REC_ALLOWED_USERS", "ann,bob")];
    let _d = daemon(home.path(), &model(&llm, ""), "[limits]\nchat_daily_tokens = 20\n", &env, &platform).await;

    assert_eq!(say_in(&platform, "g1", "ann", "g1", "hi", 1).await, "echo: hi");
    assert_eq!(say_in(&platform, "g1", "bob", "g2", "yo", 2).await, "echo: yo");
    let refused = say_in(&platform, "g1", "ann", "g3", "again", 3).await;
    assert!(
        refused.contains("This chat has used 30 tokens of the 20 tokens allowed per day (limits.chat_daily_tokens)"),
        "{refused}"
    );
    // Another chat, and the same people in a DM, are not this chat.
    assert_eq!(say(&platform, "ann", "d1", "dm", 4).await, "echo: dm");
    assert_eq!(llm.count(), 3);
    let usage = say_in(&platform, "g1", "bob", "g4", "/usage", 5).await;
    assert!(usage.contains("this chat today: 2 turns · 30 tokens"), "{usage}");
    assert!(usage.contains("you today (UTC): 1 turn · 15 tokens"), "{usage}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_usage_field_is_the_sum_over_the_turns_model_calls() {
    let llm = FakeLlm::builder().cached_tokens(4).tool_calls(&[("todo", "{}")]).reply("done").start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;

    let (status, body) = ask(&d.base, Some("s1"), "plan it").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(llm.count(), 2);
    assert_eq!(
        body["usage"],
        json!({ "prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30,
                "prompt_tokens_details": { "cached_tokens": 8 } })
    );
    // A command runs no model call: nothing used.
    let (_, body) = ask(&d.base, Some("s1"), "/status").await;
    assert_eq!(body["usage"], json!({ "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0 }));
}

/// The `data:` payloads of a streamed completion.
async fn stream(base: &str, body: Value) -> Vec<String> {
    let response = client().post(format!("{base}/v1/chat/completions")).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    text.lines().filter_map(|l| l.strip_prefix("data: ")).map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_with_include_usage_ends_with_a_usage_chunk_and_without_it_has_none() {
    let llm = FakeLlm::builder().tool_calls(&[("todo", "{}")]).reply("streamed answer").start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;

    let request = json!({ "stream": true, "stream_options": { "include_usage": true },
                          "messages": [{ "role": "user", "content": "go" }] });
    let data = stream(&d.base, request).await;
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{data:?}");
    let chunks: Vec<Value> = data[..data.len() - 1].iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    let (last, rest) = chunks.split_last().unwrap();
    assert_eq!(last["choices"], json!([]), "{last}");
    assert_eq!(last["usage"], json!({ "prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30 }));
    assert!(rest.iter().all(|c| c["usage"].is_null() && c.as_object().unwrap().contains_key("usage")), "{rest:?}");
    let text: String = rest.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(text, "streamed answer");

    // Without stream_options no chunk carries usage (as OpenAI streams).
    llm.push(Duration::ZERO, support::fake_llm::Step::Reply("plain".into()));
    let data = stream(&d.base, json!({ "stream": true, "messages": [{ "role": "user", "content": "again" }] })).await;
    let chunks: Vec<Value> = data[..data.len() - 1].iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    assert!(
        chunks.iter().all(|c| c.get("usage").is_none() && !c["choices"].as_array().unwrap().is_empty()),
        "{chunks:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compress_commands_model_calls_are_charged_without_counting_a_turn() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    for i in 0..14 {
        ask(&d.base, Some("long"), &format!("note {i} about the aardvark project")).await;
    }
    let (_, body) = ask(&d.base, Some("long"), "/compress").await;
    assert!(support::answer(&body).starts_with("History summarised"), "{body}");
    assert_eq!(llm.count(), 15, "14 turns and one summary call");
    assert_eq!(llm.flush_requests().len(), 1, "and the memory flush before it");
    let (_, body) = ask(&d.base, Some("long"), "/usage").await;
    let usage = support::answer(&body);
    assert!(
        usage.contains("160 prompt (0 read from the cache, 0 written to it) · 80 completion · 16 model calls"),
        "{usage}"
    );
    assert!(usage.contains("you today (UTC): 14 turns · 240 tokens (160 prompt, 80 completion)"), "{usage}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_job_made_from_a_chat_counts_against_its_creators_caps() {
    let create = json!({"action": "create", "schedule": "every 2s", "prompt": "check the plants", "deliver": "origin"});
    let llm = FakeLlm::builder().tool_calls(&[("cronjob", &create.to_string())]).reply("Scheduled.").start().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let extra = "[cron]\ntick = \"1s\"\n\n[limits]\nuser_daily_turns = 2\n";
    let _d = daemon(home.path(), &model(&llm, ""), extra, &[("REC_ALLOWED_USERS", "ann")], &platform).await;

    platform.inject("e1", "ann", "check the plants every 2s").await;
    // A tool progress line ("⚙ cronjob") may come first when the turn outlasts a progress tick.
    let scheduled = || platform.texts().iter().any(|t| t == "Scheduled.");
    assert!(eventually(WAIT, scheduled).await, "{:?}", platform.texts());
    // The first run is ann's second turn; the next one is refused and says so where the job
    // delivers, without a model call.
    let refused = |t: &String| t.contains("Daily limit reached: You have used 2 turns");
    assert!(
        eventually(Duration::from_secs(20), || platform.texts().iter().any(refused)).await,
        "{:?}",
        platform.texts()
    );
    assert_eq!(llm.count(), 3, "two calls for the chat turn, one for the first run");
    assert!(platform.texts().iter().any(|t| t.contains("echo: check the plants")), "{:?}", platform.texts());
}
