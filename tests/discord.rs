//! Discord end to end: the real daemon (in-process) against the fake Discord (REST + gateway
//! websocket) and the fake LLM — DMs, mention gating and auto threads in guilds, resume after a
//! dropped socket, replayed dispatches, chunking, 429s, approval buttons, access control.
#![cfg(feature = "discord")]

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::fake_discord::{Channel, FakeDiscord, User};
use support::{FakeLlm, TestDaemon, config_for, eventually, start_daemon};

const TOKEN: &str = "discord-test-token";
const WAIT: Duration = Duration::from_secs(10);
const GUILD: u64 = 5000;
const ANN: u64 = 1001;

async fn fake_discord() -> FakeDiscord {
    FakeDiscord::builder().token(TOKEN).start().await
}

/// `[platforms.discord]` pointing at `dc` with `settings` lines added, after `extra` TOML.
fn discord_config(llm: &FakeLlm, dc: &FakeDiscord, settings: &str, extra: &str) -> String {
    let table = format!("{extra}\n[platforms.discord]\nenabled = true\napi_url = \"{}\"\n{settings}\n", dc.base_url());
    config_for(llm, &table)
}

/// A daemon with the Discord adapter; `env` is added to the bot token.
async fn start(home: &Path, config: &str, env: &[(&str, &str)]) -> TestDaemon {
    let mut all = vec![("DISCORD_BOT_TOKEN", TOKEN)];
    all.extend_from_slice(env);
    start_daemon(home, config, &all).await
}

fn ann() -> User {
    User::new(ANN, "ann")
}

fn mention(dc: &FakeDiscord) -> String {
    format!("<@{}>", dc.bot().id)
}

/// The last user message of a recorded LLM request.
fn last_user(request: &Value) -> String {
    let messages = request["messages"].as_array().expect("messages");
    let user = messages.iter().rev().find(|m| m["role"] == "user");
    user.and_then(|m| m["content"].as_str()).unwrap_or_default().to_owned()
}

fn count(texts: &[String], text: &str) -> usize {
    texts.iter().filter(|t| *t == text).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_is_answered_in_its_channel_as_a_reply() {
    let llm = FakeLlm::builder().latency(Duration::from_millis(400)).start().await;
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &discord_config(&llm, &dc, "", ""), &[("DISCORD_ALLOWED_USERS", "1001")]).await;
    let dm = Channel::dm(7001);
    let hello = dc.post(&dm, &ann(), "hello there");
    assert!(eventually(WAIT, || !dc.sent_to(dm.id).is_empty()).await, "{:?}", dc.calls());
    let reply = dc.sent_to(dm.id).remove(0);
    assert_eq!(reply.content, "echo: hello there");
    assert_eq!(reply.reference, Some(hello), "answered as a reply to the user's message");
    assert_eq!(reply.allowed_mentions["parse"], json!(["users"]), "never @everyone or roles");
    assert_eq!(last_user(&llm.requests()[0]), "hello there");
    assert!(eventually(WAIT, || dc.typing().contains(&dm.id)).await, "typing shown while the model thinks");
    let intents = dc.identifies()[0]["intents"].as_u64().unwrap_or_default();
    // GUILD_MESSAGES (1 << 9), DIRECT_MESSAGES (1 << 12), MESSAGE_CONTENT (1 << 15).
    assert_eq!(intents & (1 << 9 | 1 << 12 | 1 << 15), 1 << 9 | 1 << 12 | 1 << 15, "intents {intents}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(dc.sent().len(), 1, "{:?}", dc.sent());
    d.daemon.stop().await;
}
