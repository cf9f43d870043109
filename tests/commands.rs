//! Every chat command through a platform: answered on the control lane, transcript-changing ones
//! refused mid-turn, `/retry` and `/undo` acting on the stored transcript, `/model` switching the
//! model the next turn starts on, `/sethome` making a chat the target `hermesd send` reaches, and
//! both refused to users who are not admins.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hermesd::daemon::DaemonOptions;
use serde_json::{Value, json};
use support::recording_platform::RecordingPlatform;
use support::{FakeLlm, TestDaemon, client, eventually, start_daemon_with};

const WAIT: Duration = Duration::from_secs(10);

async fn daemon(home: &Path, llm: &FakeLlm, fallback: &FakeLlm, platform: &Arc<RecordingPlatform>) -> TestDaemon {
    // Listed by id with no admin list set: ann is an admin.
    daemon_with_env(home, llm, fallback, platform, &[("REC_ALLOWED_USERS", "ann")]).await
}

async fn daemon_with_env(
    home: &Path,
    llm: &FakeLlm,
    fallback: &FakeLlm,
    platform: &Arc<RecordingPlatform>,
    env: &[(&str, &str)],
) -> TestDaemon {
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"main-model\"\n\
         context_length = 10000\n\n[[model.fallback]]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"small-model\"\n",
        llm.base_url(),
        fallback.base_url()
    );
    let options = DaemonOptions { extra_platforms: vec![platform.clone() as Arc<_>], ..Default::default() };
    let d = start_daemon_with(home, &config, env, options).await;
    assert!(eventually(Duration::from_secs(2), || platform.started()).await);
    d
}

/// Send `text` as event `id` and wait for the `n`-th message sent in all.
async fn say(platform: &RecordingPlatform, id: &str, text: &str, n: usize) -> String {
    say_as(platform, "ann", id, text, n).await
}

/// `say` as `user`.
async fn say_as(platform: &RecordingPlatform, user: &str, id: &str, text: &str, n: usize) -> String {
    platform.inject(id, user, text).await;
    assert!(eventually(WAIT, || platform.sent().len() >= n).await, "no answer to {text}: {:?}", platform.texts());
    platform.texts()[n - 1].clone()
}

fn users(request: &Value) -> Vec<String> {
    let messages = request["messages"].as_array().unwrap();
    messages.iter().filter(|m| m["role"] == "user").map(|m| m["content"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_commands_retry_undo_title_model_usage_and_help() {
    let (llm, small) = (FakeLlm::echo().await, FakeLlm::echo().await);
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = daemon(home.path(), &llm, &small, &platform).await;

    let help = say(&platform, "h", "/help", 1).await;
    for name in [
        "/retry",
        "/undo",
        "/model",
        "/title",
        "/sethome",
        "/queue",
        "/steer",
        "/usage",
        "/compress",
        "/sessions",
        "/resume",
    ] {
        assert!(help.contains(name), "{help}");
    }
    assert_eq!(say(&platform, "r0", "/retry", 2).await, "There is nothing to retry yet.");
    assert_eq!(say(&platform, "a", "first", 3).await, "echo: first");
    assert_eq!(say(&platform, "b", "second", 4).await, "echo: second");

    // /undo drops the last exchange: the next prompt no longer holds it.
    assert!(say(&platform, "u", "/undo", 5).await.contains("\"second\""));
    assert_eq!(say(&platform, "c", "third", 6).await, "echo: third");
    assert_eq!(users(&llm.requests()[2]), ["first", "third"]);

    // /retry runs the last message again, in place of its old answer.
    assert_eq!(say(&platform, "r1", "/retry", 7).await, "echo: third");
    assert_eq!(users(&llm.requests()[3]), ["first", "third"]);

    // Without a summary model, the first message named the session after its first reply.
    assert_eq!(say(&platform, "t0", "/title", 8).await, "Title: first");
    assert_eq!(say(&platform, "t1", "/title Rocket  plans", 9).await, "Title set: Rocket plans");
    let status = say(&platform, "s", "/status", 10).await;
    assert!(status.contains("\"Rocket plans\"") && status.contains("model: main-model"), "{status}");

    // /model lists, refuses unknown names, and switches the session's first model.
    let models = say(&platform, "m0", "/model", 11).await;
    assert!(models.contains("main-model, small-model"), "{models}");
    assert!(say(&platform, "m1", "/model gpt-9", 12).await.contains("not a configured model"));
    assert_eq!(say(&platform, "m2", "/model small-model", 13).await, "This session now uses small-model.");
    assert_eq!(say(&platform, "d", "fourth", 14).await, "echo: fourth");
    assert_eq!(small.count(), 1);
    assert_eq!(small.requests()[0]["model"], "small-model");
    assert!(say(&platform, "s2", "/status", 15).await.contains("model: small-model"));
    assert_eq!(say(&platform, "m3", "/model default", 16).await, "This session now uses main-model.");

    let usage = say(&platform, "us", "/usage", 17).await;
    assert!(usage.contains("of 10000 tokens") && usage.contains("messages"), "{usage}");
    assert_eq!(say(&platform, "ap", "/approve", 18).await, "Nothing is waiting for approval.");
    assert_eq!(say(&platform, "de", "/deny", 19).await, "Nothing is waiting for approval.");
    assert!(say(&platform, "n", "/new", 20).await.starts_with("Started a new session"));
    assert_eq!(say(&platform, "e", "fifth", 21).await, "echo: fifth");
    assert_eq!(users(llm.requests().last().unwrap()), ["fifth"]);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mid_turn_commands_answer_at_once_and_queue_and_steer_feed_turns() {
    let llm = FakeLlm::builder().slow_reply(Duration::from_millis(1500), "slow answer").start().await;
    let small = FakeLlm::echo().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = daemon(home.path(), &llm, &small, &platform).await;
    platform.inject("a", "ann", "take your time").await;
    assert!(eventually(WAIT, || llm.count() == 1).await);
    // While the turn runs: transcript changes are refused, /status answers at once.
    assert!(say(&platform, "u", "/undo", 1).await.starts_with("A turn is running"));
    assert!(say(&platform, "r", "/retry", 2).await.starts_with("A turn is running"));
    assert!(say(&platform, "c", "/compress", 3).await.starts_with("A turn is running"));
    assert!(say(&platform, "s", "/status", 4).await.contains("running for"));
    // /queue waits behind the turn; /steer folds into it.
    assert_eq!(say(&platform, "q", "/queue then summarise", 5).await, "queued (1)");
    assert!(say(&platform, "st", "/steer   mention the budget", 6).await.starts_with("Noted"));
    assert!(eventually(WAIT, || platform.texts().len() >= 8).await, "{:?}", platform.texts());
    // The running turn took the steer before answering; the queued message ran after it.
    let texts = platform.texts();
    assert_eq!(texts[6], "echo: [The user adds while you work] mention the budget");
    assert_eq!(texts[7], "echo: then summarise");
    assert_eq!(
        say(&platform, "q0", "/queue", platform.sent().len() + 1).await,
        "Usage: /queue <message> or /steer <message>"
    );
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sethome_makes_the_chat_the_target_of_hermesd_send() {
    let (llm, small) = (FakeLlm::echo().await, FakeLlm::echo().await);
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = daemon(home.path(), &llm, &small, &platform).await;
    let send = |target: &str, text: &str| {
        client()
            .post(format!("{}/admin/send", d.base))
            .bearer_auth(support::local_key(home.path()))
            .json(&json!({ "target": target, "text": text }))
            .send()
    };
    let response = send("rec", "hello home").await.unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let error: Value = response.json().await.unwrap();
    assert!(error["error"].as_str().unwrap().contains("/sethome"), "{error}");

    assert!(say(&platform, "h", "/sethome", 1).await.contains("rec home channel"));
    let response = send("rec", "hello home").await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!((body["status"].as_str(), body["message_ids"][0].as_str()), (Some("delivered"), Some("m2")));
    let (_, sent) = &platform.sent()[1];
    assert_eq!((sent.chat.chat_id.as_str(), sent.text.as_str()), ("ann", "hello home"));

    let response = send("local", "to the file").await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let file = std::fs::read_to_string(home.path().join("deliveries").join("inbox.md")).unwrap();
    assert!(file.contains("to the file"));
    assert_eq!(send("slack:C1", "x").await.unwrap().status().as_u16(), 400);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sethome_and_switching_the_model_need_an_admin() {
    let (llm, small) = (FakeLlm::echo().await, FakeLlm::echo().await);
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    // Everyone may talk; boss is listed by id, so with no admin list boss is the admin.
    let env = [("REC_ALLOW_ALL_USERS", "true"), ("GATEWAY_ALLOWED_USERS", "boss")];
    let d = daemon_with_env(home.path(), &llm, &small, &platform, &env).await;

    let refused = say_as(&platform, "ann", "h1", "/sethome", 1).await;
    assert!(
        refused.starts_with("Only an admin can set the home channel") && refused.contains("REC_ADMIN_USERS"),
        "{refused}"
    );
    let refused = say_as(&platform, "ann", "m1", "/model small-model", 2).await;
    assert!(refused.starts_with("Only an admin can switch the model"), "{refused}");
    // Looking is fine.
    assert!(say_as(&platform, "ann", "m2", "/model", 3).await.contains("main-model, small-model"));
    assert_eq!(say_as(&platform, "ann", "a", "hello", 4).await, "echo: hello");
    assert_eq!(small.count(), 0, "the model was not switched");
    let store = hermesd::store::SqliteStore::open(&home.path().join("state.db"), WAIT, 1).await.unwrap();
    assert!(hermesd::store::ExtrasStore::home_channel(&store, "rec").await.unwrap().is_none());

    assert!(say_as(&platform, "boss", "h2", "/sethome", 5).await.contains("rec home channel"));
    assert_eq!(say_as(&platform, "boss", "m3", "/model small-model", 6).await, "This session now uses small-model.");
    let home_chat = hermesd::store::ExtrasStore::home_channel(&store, "rec").await.unwrap().unwrap();
    assert_eq!(home_chat.chat_id, "boss");
    store.close().await;
    d.daemon.stop().await;
}
