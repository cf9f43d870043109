//! Discord end to end: the real daemon (in-process) against the fake Discord (REST + gateway
//! websocket) and the fake LLM — DMs, mention gating and auto threads in guilds, forum posts,
//! channel filters, resume after a dropped socket, catching up after a new session, replayed
//! dispatches, chunking, 429s, progress edits, approval and clarify buttons, access control.
//! `discord/adapter.rs` runs the adapter alone against the same fake (conformance kit).
#![cfg(feature = "discord")]

mod support;

#[path = "discord/adapter.rs"]
mod adapter;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::fake_discord::{Channel, FakeDiscord, User};
use support::fake_llm::Step;
use support::{FakeLlm, TestDaemon, client, config_for, eventually, start_daemon};

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
    let calls = dc.calls();
    assert!(calls.iter().all(|c| !c.contains("/guilds/")), "a DM needs no guild lookups: {calls:?}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guild_mention_is_answered_in_a_thread_opened_on_it() {
    let llm = FakeLlm::echo().await;
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &discord_config(&llm, &dc, "", ""), &[("DISCORD_ALLOWED_USERS", "1001")]).await;
    let general = Channel::text(GUILD, 8001);
    let asked = dc.post(&general, &ann(), &format!("{} what is the plan?", mention(&dc)));
    assert!(eventually(WAIT, || !dc.sent_to(asked).is_empty()).await, "{:?} {:?}", dc.sent(), dc.calls());
    let threads = dc.threads();
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert_eq!((threads[0].channel, threads[0].message), (general.id, asked));
    assert_eq!(threads[0].name, "what is the plan?");
    let answer = dc.sent_to(asked).remove(0);
    assert_eq!(
        answer.content, "echo: [ann] what is the plan?",
        "the mention is not part of the prompt; the speaker is named"
    );
    assert_eq!(answer.reference, None, "the message the thread was opened on lives in the parent channel");
    assert!(dc.texts(general.id).is_empty(), "nothing in the channel itself: {:?}", dc.texts(general.id));

    // Later messages in the bot's thread need no mention and continue the same session.
    let thread = Channel::thread(&general, asked, dc.bot().id);
    let follow_up = dc.post(&thread, &ann(), "and after that?");
    assert!(eventually(WAIT, || dc.sent_to(asked).len() == 2).await, "{:?}", dc.texts(asked));
    let second = dc.sent_to(asked).remove(1);
    assert_eq!(second.content, "echo: [ann] and after that?");
    assert_eq!(second.reference, Some(follow_up));
    let history = support::prompt(&llm.requests()[1]);
    assert!(history.iter().any(|(_, text)| text == "[ann] what is the plan?"), "one session: {history:?}");
    assert_eq!(dc.threads().len(), 1, "no thread inside a thread");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmentioned_guild_messages_and_unknown_users_are_ignored() {
    let llm = FakeLlm::echo().await;
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    let d =
        start(home.path(), &discord_config(&llm, &dc, "auto_thread = false", ""), &[("DISCORD_ALLOWED_USERS", "1001")])
            .await;
    let general = Channel::text(GUILD, 8002);
    dc.post(&general, &ann(), "just chatting among ourselves");
    dc.post(&general, &User::new(2002, "zed"), &format!("{} let me in", mention(&dc)));
    let asked = dc.post(&general, &ann(), &format!("{} hi", mention(&dc)));
    assert!(eventually(WAIT, || dc.sent_to(general.id).len() == 1).await, "{:?}", dc.texts(general.id));
    let answer = dc.sent_to(general.id).remove(0);
    assert_eq!(answer.content, "echo: hi");
    assert_eq!(answer.reference, Some(asked), "auto_thread off: a reply in the channel");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(llm.count(), 1, "only the allowed user's mention reached the model");
    assert_eq!(dc.sent().len(), 1, "unknown users in guilds get no pairing code: {:?}", dc.sent());
    assert!(dc.threads().is_empty());
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_dm_senders_pair_and_allowed_roles_and_gateway_users_pass() {
    let llm = FakeLlm::echo().await;
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    let config = discord_config(&llm, &dc, "auto_thread = false", "");
    let d = start(home.path(), &config, &[("DISCORD_ALLOWED_ROLES", "4242"), ("GATEWAY_ALLOWED_USERS", "3005")]).await;
    let dm = Channel::dm(7002);
    dc.post(&dm, &User::new(3003, "stranger"), "hello?");
    assert!(eventually(WAIT, || dc.sent_to(dm.id).len() == 1).await, "{:?}", dc.calls());
    assert!(dc.texts(dm.id)[0].contains("pairing code is"), "{:?}", dc.texts(dm.id));

    let general = Channel::text(GUILD, 8003);
    let moderator = User::new(3004, "mod").with_roles(&[4242]);
    dc.post(&general, &moderator, &format!("{} status report", mention(&dc)));
    assert!(eventually(WAIT, || dc.sent_to(general.id).len() == 1).await, "{:?}", dc.sent());
    assert_eq!(dc.texts(general.id)[0], "echo: status report");
    let friend = Channel::dm(7012);
    dc.post(&friend, &User::new(3005, "friend"), "allowed everywhere");
    assert!(eventually(WAIT, || dc.texts(friend.id) == ["echo: allowed everywhere"]).await, "{:?}", dc.sent());
    assert_eq!(llm.count(), 2, "the pairing request never reached the model");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_socket_resumes_and_nothing_is_lost_or_answered_twice() {
    let llm = FakeLlm::echo().await;
    // Discord may replay more than was missed: this fake replays the whole session on RESUME.
    let dc = FakeDiscord::builder().token(TOKEN).replay_everything_on_resume().start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &discord_config(&llm, &dc, "", ""), &[("DISCORD_ALLOWED_USERS", "1001")]).await;
    let dm = Channel::dm(7003);
    dc.post(&dm, &ann(), "first");
    assert!(eventually(WAIT, || dc.texts(dm.id).contains(&"echo: first".to_owned())).await, "{:?}", dc.sent());

    dc.drop_socket();
    // Sent while the bot is away: only the replay after RESUME can deliver it.
    dc.post(&dm, &ann(), "during the gap");
    assert!(eventually(WAIT, || !dc.resumes().is_empty()).await, "the adapter resumed");
    assert!(eventually(WAIT, || dc.texts(dm.id).contains(&"echo: during the gap".to_owned())).await, "{:?}", dc.sent());
    dc.post(&dm, &ann(), "after");
    assert!(eventually(WAIT, || dc.texts(dm.id).contains(&"echo: after".to_owned())).await, "{:?}", dc.sent());

    tokio::time::sleep(Duration::from_millis(500)).await;
    let texts = dc.texts(dm.id);
    for text in ["echo: first", "echo: during the gap", "echo: after"] {
        assert_eq!(count(&texts, text), 1, "{text} once: {texts:?}");
    }
    assert_eq!(llm.count(), 3);
    assert_eq!(dc.identifies().len(), 1, "resumed, not re-identified");
    let resume = &dc.resumes()[0];
    assert_eq!(resume["session_id"], "session-1");
    assert!(resume["seq"].as_u64().unwrap_or_default() >= 2, "{resume}");
    assert_eq!(dc.max_open_sockets(), 1, "the dropped socket was gone before the next opened");
    assert_eq!(dc.max_live_sessions(), 1, "never two live sessions for one token");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalidated_session_identifies_again_and_catches_up_on_the_gap() {
    let llm = FakeLlm::echo().await;
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    // Batching off: the caught-up message and the next one would otherwise share a turn, and
    // this test is about their order.
    let config = discord_config(&llm, &dc, "", "[agent]\nbatch_window = \"0s\"\n");
    let d = start(home.path(), &config, &[("DISCORD_ALLOWED_USERS", "1001")]).await;
    let dm = Channel::dm(7004);
    dc.post(&dm, &ann(), "one");
    assert!(eventually(WAIT, || dc.texts(dm.id).len() == 1).await, "{:?}", dc.sent());
    dc.invalidate_next_resume();
    dc.drop_socket();
    // Discord does not replay into a new session: only catching up over REST can deliver it.
    dc.post(&dm, &ann(), "in between");
    assert!(eventually(Duration::from_secs(20), || dc.identifies().len() == 2 && dc.connected()).await);
    dc.post(&dm, &ann(), "two");
    // "two" may arrive while the caught-up turn still runs; the host then also says "queued (1)".
    let echoes = || dc.texts(dm.id).into_iter().filter(|t| t.starts_with("echo: ")).collect::<Vec<_>>();
    assert!(eventually(WAIT, || echoes().len() == 3).await, "{:?}", dc.sent());
    assert_eq!(echoes(), vec!["echo: one", "echo: in between", "echo: two"], "caught up before what came after");
    assert_eq!(dc.resumes().len(), 1);
    assert_eq!(dc.max_live_sessions(), 1, "never two live sessions for one token");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_message_dispatched_twice_runs_one_turn() {
    let llm = FakeLlm::echo().await;
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &discord_config(&llm, &dc, "", ""), &[("DISCORD_ALLOWED_USERS", "1001")]).await;
    let dm = Channel::dm(7005);
    let once = dc.post(&dm, &ann(), "only once please");
    dc.redispatch(once);
    assert!(eventually(WAIT, || dc.texts(dm.id).len() == 1).await, "{:?}", dc.sent());
    dc.redispatch(once);
    dc.post(&dm, &ann(), "marker");
    assert!(eventually(WAIT, || dc.texts(dm.id).len() == 2).await, "{:?}", dc.sent());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(dc.texts(dm.id), vec!["echo: only once please".to_owned(), "echo: marker".to_owned()]);
    assert_eq!(llm.count(), 2);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_reply_is_chunked_under_2000_characters_with_balanced_fences() {
    let code: String = (0..120).map(|i| format!("let value_{i} = compute({i}); // step {i}\n")).collect();
    let long = format!("Here is the code:\n\n```rust\n{code}```\n\nDone.");
    assert!(long.chars().count() > 4000);
    let llm = FakeLlm::builder().reply(&long).start().await;
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &discord_config(&llm, &dc, "", ""), &[("DISCORD_ALLOWED_USERS", "1001")]).await;
    let dm = Channel::dm(7006);
    let asked = dc.post(&dm, &ann(), "show me the code");
    let done = || dc.texts(dm.id).last().is_some_and(|t| t.ends_with("Done."));
    assert!(eventually(WAIT, done).await, "{:?}", dc.texts(dm.id));
    let sent = dc.sent_to(dm.id);
    assert!(sent.len() >= 3, "{} chunks", sent.len());
    for chunk in &sent {
        assert!(chunk.content.chars().count() <= 2000, "{} characters", chunk.content.chars().count());
        assert_eq!(chunk.content.matches("```").count() % 2, 0, "fences balanced in {:?}", chunk.content);
    }
    assert_eq!(sent[0].reference, Some(asked));
    let joined: String = sent.iter().map(|s| s.content.as_str()).collect();
    for i in [0, 60, 119] {
        assert!(joined.contains(&format!("let value_{i} = compute({i});")), "line {i} kept");
    }
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_on_message_create_is_delivered_after_retry_after() {
    let llm = FakeLlm::echo().await;
    let dc = fake_discord().await;
    let limited = json!({ "message": "You are being rate limited.", "retry_after": 1.2, "global": false });
    dc.fail_next("create_message", 1, 429, limited);
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &discord_config(&llm, &dc, "", ""), &[("DISCORD_ALLOWED_USERS", "1001")]).await;
    let dm = Channel::dm(7007);
    let started = tokio::time::Instant::now();
    dc.post(&dm, &ann(), "are you there?");
    assert!(eventually(WAIT, || dc.texts(dm.id).len() == 1).await, "{:?}", dc.calls());
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(1200), "the pacer waited retry_after, only {waited:?}");
    let creates = dc.calls().iter().filter(|c| c.starts_with("POST /channels/7007/messages")).count();
    assert_eq!(creates, 2, "one refused, one delivered");
    assert_eq!(dc.texts(dm.id), vec!["echo: are you there?".to_owned()]);
    let ready = support::client().get(format!("{}/readyz", d.base)).send().await.unwrap();
    assert_eq!(ready.status().as_u16(), 200, "a 429 is not fatal: {:?}", ready.text().await);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_button_click_resolves_the_approval() {
    let llm = FakeLlm::builder()
        .tool_calls(&[("terminal", r#"{"command":"git push --force origin x"}"#)])
        .reply("pushed (or tried)")
        .start()
        .await;
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    let config = discord_config(&llm, &dc, "", "[tools]\napproval_timeout = \"20s\"\n");
    let d = start(home.path(), &config, &[("DISCORD_ALLOWED_USERS", "1001")]).await;
    let dm = Channel::dm(7008);
    dc.post(&dm, &ann(), "force push please");
    let asked = || dc.sent_to(dm.id).into_iter().find(|s| !s.button_data().is_empty());
    assert!(eventually(WAIT, || asked().is_some()).await, "{:?}", dc.texts(dm.id));
    let approval = asked().unwrap();
    let data = approval.button_data();
    assert!(data.contains(&hermesd::turn::approvals::APPROVE.to_owned()), "{data:?}");
    assert!(data.contains(&hermesd::turn::approvals::DENY.to_owned()), "{data:?}");

    let press = dc.press(&dm, &ann(), approval.id, hermesd::turn::approvals::APPROVE);
    let finished = || dc.texts(dm.id).iter().any(|t| t.contains("pushed (or tried)"));
    assert!(eventually(Duration::from_secs(20), finished).await, "{:?}", dc.texts(dm.id));
    let requests = llm.requests();
    let result = requests[1]["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "tool").cloned();
    let result = result.and_then(|m| m["content"].as_str().map(str::to_owned)).unwrap_or_default();
    assert!(result.contains("exit code"), "the command ran: {result}");
    let acked = || dc.callbacks().iter().any(|(id, body)| *id == press && body["type"] == 6);
    assert!(eventually(WAIT, acked).await, "{:?}", dc.callbacks());
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_thread_creation_falls_back_to_a_reply_in_the_channel() {
    let llm = FakeLlm::echo().await;
    let dc = fake_discord().await;
    dc.fail_next("start_thread", 1, 403, json!({ "code": 50013, "message": "Missing Permissions" }));
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &discord_config(&llm, &dc, "", ""), &[("DISCORD_ALLOWED_USERS", "1001")]).await;
    let general = Channel::text(GUILD, 8004);
    let asked = dc.post(&general, &ann(), &format!("{} no threads here", mention(&dc)));
    assert!(eventually(WAIT, || dc.sent_to(general.id).len() == 1).await, "{:?}", dc.sent());
    let answer = dc.sent_to(general.id).remove(0);
    assert_eq!((answer.content.as_str(), answer.reference), ("echo: no threads here", Some(asked)));
    assert!(dc.threads().is_empty());
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forum_posts_are_threads_and_channel_filters_hold() {
    let llm = FakeLlm::echo().await;
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    let forum = Channel::forum(GUILD, 8100);
    let ignored = Channel::text(GUILD, 8200);
    let env = [("DISCORD_ALLOWED_USERS", "1001"), ("DISCORD_IGNORED_CHANNELS", "8200")];
    let d = start(home.path(), &discord_config(&llm, &dc, "", ""), &env).await;
    dc.add_channel(&forum);
    // A post someone else opened in a forum: a thread of the forum, answered in place.
    let post = Channel::thread(&forum, 8101, ANN);
    dc.post(&post, &ann(), "unaddressed chatter in the post");
    let asked = dc.post(&post, &ann(), &format!("{} summarise this post", mention(&dc)));
    dc.post(&ignored, &ann(), &format!("{} are you here?", mention(&dc)));
    assert!(eventually(WAIT, || dc.sent_to(post.id).len() == 1).await, "{:?}", dc.sent());
    let answer = dc.sent_to(post.id).remove(0);
    assert_eq!((answer.content.as_str(), answer.reference), ("echo: [ann] summarise this post", Some(asked)));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(dc.threads().is_empty(), "no thread opened inside a forum post");
    assert!(dc.sent_to(ignored.id).is_empty(), "an ignored channel is never answered");
    assert_eq!(llm.count(), 1);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_connection_is_replaced_and_the_gap_is_not_lost() {
    let llm = FakeLlm::echo().await;
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &discord_config(&llm, &dc, "", ""), &[("DISCORD_ALLOWED_USERS", "1001")]).await;
    let dm = Channel::dm(7009);
    dc.post(&dm, &ann(), "before");
    assert!(eventually(WAIT, || dc.texts(dm.id).len() == 1).await, "{:?}", dc.sent());
    // The socket stays open but heartbeats go unanswered and dispatches stop: serenity replaces
    // it with a new session (IDENTIFY), so Discord never replays what was posted meanwhile.
    dc.go_silent();
    dc.post(&dm, &ann(), "into the void");
    let reconnected = || dc.identifies().len() == 2 && dc.connected();
    assert!(eventually(Duration::from_secs(30), reconnected).await, "{} {:?}", dc.identifies().len(), dc.resumes());
    let caught_up = || dc.texts(dm.id).contains(&"echo: into the void".to_owned());
    assert!(eventually(WAIT, caught_up).await, "read back over REST: {:?}", dc.texts(dm.id));
    dc.post(&dm, &ann(), "after");
    assert!(eventually(WAIT, || dc.texts(dm.id).contains(&"echo: after".to_owned())).await, "{:?}", dc.sent());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(dc.texts(dm.id), vec!["echo: before", "echo: into the void", "echo: after"]);
    assert!(dc.calls().iter().any(|c| c.starts_with("GET /channels/7009/messages")), "{:?}", dc.calls());
    assert_eq!(dc.max_open_sockets(), 1, "the zombie socket was closed before the next opened");
    assert_eq!(dc.max_live_sessions(), 1);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clarify_choice_is_answered_with_a_button() {
    let llm = FakeLlm::builder()
        .tool_calls(&[("clarify", r#"{"question":"Which colour?","choices":["red","blue"]}"#)])
        .reply("blue it is")
        .start()
        .await;
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &discord_config(&llm, &dc, "", ""), &[("DISCORD_ALLOWED_USERS", "1001")]).await;
    let general = Channel::text(GUILD, 8005);
    let asked = dc.post(&general, &ann(), &format!("{} paint it", mention(&dc)));
    let question = || dc.sent_to(asked).into_iter().find(|s| s.content == "Which colour?");
    assert!(eventually(WAIT, || question().is_some()).await, "{:?}", dc.sent());
    let question = question().unwrap();
    let rows = question.components.as_array().cloned().unwrap_or_default();
    let labels: Vec<String> = rows[0]["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.get("label").and_then(Value::as_str).unwrap_or_default().to_owned())
        .collect();
    assert_eq!(labels, ["red", "blue"]);
    let blue = question.button_data()[1].clone();
    let thread = Channel::thread(&general, asked, dc.bot().id);
    let press = dc.press(&thread, &ann(), question.id, &blue);
    assert!(eventually(WAIT, || dc.texts(asked).contains(&"blue it is".to_owned())).await, "{:?}", dc.texts(asked));
    let result = support::prompt(&llm.requests()[1]);
    assert!(result.iter().any(|(role, text)| role == "tool" && text.contains("blue")), "{result:?}");
    assert!(eventually(WAIT, || dc.callbacks().iter().any(|(id, _)| *id == press)).await, "acknowledged");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_one_message_edited_at_a_paced_rate() {
    // Step n keeps n + 1 tasks, so every tool result (and so every progress text) differs.
    let todo = |n: u32| {
        let tasks: Vec<Value> = (0..=n).map(|i| json!({"id": i.to_string(), "content": format!("step {i}")})).collect();
        Step::ToolCalls(vec![("todo".to_owned(), json!({ "todos": tasks }).to_string())])
    };
    let mut builder = FakeLlm::builder().step(Duration::ZERO, todo(0));
    for n in 1..8 {
        builder = builder.step(Duration::from_millis(600), todo(n));
    }
    let llm = builder.step(Duration::from_millis(600), Step::Reply("all done".into())).start().await;
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &discord_config(&llm, &dc, "", ""), &[("DISCORD_ALLOWED_USERS", "1001")]).await;
    let dm = Channel::dm(7010);
    dc.post(&dm, &ann(), "work through the list");
    let done = || dc.texts(dm.id).iter().any(|t| t == "all done");
    assert!(eventually(Duration::from_secs(20), done).await, "{:?}", dc.texts(dm.id));
    let edits = dc.edits();
    assert!(edits.len() >= 2, "the progress message was edited several times: {edits:?}");
    let progress_id = edits[0].message;
    assert!(edits.iter().all(|e| e.message == progress_id && e.channel == dm.id), "one progress message: {edits:?}");
    let progress = dc.sent_to(dm.id).into_iter().find(|s| s.id == progress_id).expect("the progress message");
    let mut times = vec![progress.at];
    times.extend(edits.iter().map(|e| e.at));
    for pair in times.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(gap >= Duration::from_millis(1400), "progress updated after only {gap:?}");
    }
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_the_messages_of_the_downtime_are_answered_once() {
    let llm = FakeLlm::echo().await;
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    let config = discord_config(&llm, &dc, "", "");
    let env = [("DISCORD_ALLOWED_USERS", "1001")];
    let dm = Channel::dm(7011);
    let d = start(home.path(), &config, &env).await;
    dc.post(&dm, &ann(), "before the restart");
    assert!(eventually(WAIT, || dc.texts(dm.id).len() == 1).await, "{:?}", dc.sent());
    d.daemon.stop().await;
    assert!(eventually(WAIT, || !dc.connected()).await);

    dc.post(&dm, &ann(), "while you were down");
    let d = start(home.path(), &config, &env).await;
    let caught_up = || dc.texts(dm.id).contains(&"echo: while you were down".to_owned());
    assert!(eventually(WAIT, caught_up).await, "{:?}", dc.texts(dm.id));
    dc.post(&dm, &ann(), "welcome back");
    assert!(eventually(WAIT, || dc.texts(dm.id).len() == 3).await, "{:?}", dc.texts(dm.id));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(dc.texts(dm.id), ["echo: before the restart", "echo: while you were down", "echo: welcome back"]);
    assert_eq!(dc.identifies().len(), 2, "a new process, a new session");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_is_refreshed_about_every_eight_seconds_during_a_long_turn() {
    // The host refreshes typing every 4 s (at 0, 4, 8 and 12 s here); Discord's indicator lasts
    // about 10 s, so the adapter lets every other refresh through.
    let llm = FakeLlm::builder().latency(Duration::from_millis(12_500)).start().await;
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &discord_config(&llm, &dc, "", ""), &[("DISCORD_ALLOWED_USERS", "1001")]).await;
    let dm = Channel::dm(7013);
    dc.post(&dm, &ann(), "take your time");
    assert!(eventually(Duration::from_secs(30), || dc.texts(dm.id).len() == 1).await, "{:?}", dc.sent());
    let typing = dc.typing().iter().filter(|&&channel| channel == dm.id).count();
    assert_eq!(typing, 2, "one indicator at the start and one refresh: {:?}", dc.typing());
    d.daemon.stop().await;
}

/// The send→receipt window, closed: the real binary dies (a failpoint's abort) after Discord
/// took a reply and before its receipt was stored; the restarted daemon sends that chunk again
/// with the same `nonce` and `enforce_nonce`, so Discord returns the message it already created
/// and the chat sees each reply once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_send_and_receipt_resends_with_the_same_nonce_and_doubles_nothing() {
    use std::os::unix::process::ExitStatusExt;

    let llm = FakeLlm::echo().await;
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[agent]\ndrain_timeout = \"2s\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"fake\"\n\n[platforms.discord]\nenabled = true\napi_url = \"{}\"\n",
        llm.base_url(),
        dc.base_url()
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let env = |failpoints| {
        [("DISCORD_BOT_TOKEN", TOKEN), ("DISCORD_ALLOWED_USERS", "1001"), ("HERMESD_FAILPOINTS", failpoints)]
    };
    let dm = Channel::dm(7021);
    let mut child = support::spawn_gateway_with_env(home.path(), &env("outbox.sent=abort@1"));
    support::wait_ready(port, home.path()).await;
    dc.post(&dm, &ann(), "are you there");
    let died = eventually(WAIT, || child.try_wait().unwrap().is_some()).await;
    let log = support::daemon_log(home.path());
    assert!(died && child.wait().unwrap().signal() == Some(6), "died at the failpoint; log:\n{log}");
    assert_eq!(dc.texts(dm.id), ["echo: are you there"], "Discord took the reply before the crash");

    let mut child = support::spawn_gateway_with_env(home.path(), &env(""));
    support::wait_ready(port, home.path()).await;
    // The unreceipted chunk goes out again at the start, with the nonce it had.
    assert!(eventually(WAIT, || dc.nonces().len() == 2).await, "{:?}", dc.nonces());
    dc.post(&dm, &ann(), "and now");
    assert!(eventually(WAIT, || dc.texts(dm.id).len() == 2).await, "{:?}", dc.texts(dm.id));
    tokio::time::sleep(Duration::from_millis(300)).await;
    child.kill().unwrap();
    child.wait().unwrap();
    let nonces = dc.nonces();
    assert_eq!(nonces.len(), 3, "the resend and the next reply: {nonces:?}");
    assert_eq!(nonces[0], nonces[1], "the resend carried the first attempt's nonce");
    assert_ne!(nonces[1], nonces[2], "another chunk, another nonce");
    assert_eq!(dc.texts(dm.id), ["echo: are you there", "echo: and now"], "nothing doubled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bots_are_two_accounts_each_answering_its_own_dms_on_its_own_profile() {
    let (home_llm, work_llm) = (FakeLlm::echo().await, FakeLlm::echo().await);
    let home_bot = fake_discord().await;
    let work_bot = FakeDiscord::builder().token("work-bot-token").bot(User::new(9102, "workbot")).start().await;
    let home = tempfile::tempdir().unwrap();
    // The account takes the table's keys and sets its own token variable, API and profile.
    let work = format!(
        "[platforms.discord.accounts.work]\ntoken_env = \"DISCORD_WORK_TOKEN\"\napi_url = \"{}\"\nprofile = \"work\"\n\n\
         [profiles.work.model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"work-model\"\n",
        work_bot.base_url(),
        work_llm.base_url()
    );
    let config = discord_config(&home_llm, &home_bot, &work, "");
    let env = [("DISCORD_WORK_TOKEN", "work-bot-token"), ("DISCORD_ALLOWED_USERS", "1001")];
    let d = start(home.path(), &config, &env).await;
    let dm = Channel::dm(7301);
    home_bot.post(&dm, &ann(), "hello home");
    work_bot.post(&dm, &ann(), "hello work");
    let answered = || home_bot.texts(dm.id).len() == 1 && work_bot.texts(dm.id).len() == 1;
    assert!(eventually(WAIT, answered).await, "{:?} {:?}", home_bot.texts(dm.id), work_bot.texts(dm.id));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(home_bot.texts(dm.id), ["echo: hello home"], "answered once, by its own bot");
    assert_eq!(work_bot.texts(dm.id), ["echo: hello work"]);
    let asked = |llm: &FakeLlm| llm.requests().iter().map(last_user).collect::<Vec<_>>();
    assert_eq!((asked(&home_llm), asked(&work_llm)), (vec!["hello home".to_owned()], vec!["hello work".to_owned()]));
    let ready: Value = client().get(format!("{}/readyz", d.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(ready["platforms"], json!({"discord": "ok", "discord@work": "ok"}), "{ready}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_bind_a_guild_to_a_profile_and_one_channel_to_another_model() {
    let (home_llm, work_llm, alt_llm) = (FakeLlm::echo().await, FakeLlm::echo().await, FakeLlm::echo().await);
    let dc = fake_discord().await;
    let home = tempfile::tempdir().unwrap();
    let extra = format!(
        "[[model.fallback]]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"alt-model\"\n\n\
         [profiles.work]\nsoul = \"You are the WORK agent.\"\n\n[profiles.work.model]\nprovider = \"chat_completions\"\n\
         base_url = \"{}\"\nname = \"work-model\"\n\n\
         [[routes]]\nplatform = \"discord\"\nchat = \"8403\"\nrequire_mention = true\n\n\
         [[routes]]\nplatform = \"discord\"\nchat = \"8402\"\nmodel = \"alt-model\"\nsystem_prompt = \"ROUTE-8402 rules.\"\n\n\
         [[routes]]\nplatform = \"discord\"\nguild = \"{GUILD}\"\nprofile = \"work\"\n",
        alt_llm.base_url(),
        work_llm.base_url()
    );
    let config = discord_config(&home_llm, &dc, "require_mention = false\nauto_thread = false", &extra);
    let d = start(home.path(), &config, &[("DISCORD_ALLOWED_USERS", "1001")]).await;
    let (team, special, dm) = (Channel::text(GUILD, 8401), Channel::text(GUILD, 8402), Channel::dm(7401));
    for (channel, text) in [(&team, "in the guild"), (&special, "in the special channel"), (&dm, "in a dm")] {
        dc.post(channel, &ann(), text);
        assert!(eventually(WAIT, || !dc.texts(channel.id).is_empty()).await, "{text}: {:?}", dc.calls());
    }
    let asked = |llm: &FakeLlm| llm.requests().iter().map(last_user).collect::<Vec<_>>();
    assert_eq!(asked(&work_llm), ["in the guild"], "the guild is the work profile's");
    assert_eq!(asked(&alt_llm), ["in the special channel"], "one channel starts on another model");
    assert_eq!(asked(&home_llm), ["in a dm"], "a DM to the same bot is the default's");
    let work_system = support::prompt(&work_llm.requests()[0]).remove(0).1;
    assert!(work_system.starts_with("You are the WORK agent."), "{work_system}");
    let alt_system = support::prompt(&alt_llm.requests()[0]).remove(0).1;
    assert!(alt_system.contains("ROUTE-8402 rules.") && !alt_system.contains("WORK agent"), "{alt_system}");

    // /whoami says what answers here.
    dc.post(&team, &ann(), "/whoami");
    assert!(eventually(WAIT, || dc.texts(team.id).len() == 2).await, "{:?}", dc.texts(team.id));
    let whoami = dc.texts(team.id).remove(1);
    for line in ["profile: work", "route: routes[2] (profile work)", "model: work-model"] {
        assert!(whoami.contains(line), "{line} missing in {whoami}");
    }

    // A channel whose route requires a mention: an unaddressed message gets nothing, a mention
    // an answer.
    let strict = Channel::text(GUILD, 8403);
    dc.post(&strict, &ann(), "talking among ourselves");
    dc.post(&strict, &ann(), &format!("{} are you there?", mention(&dc)));
    assert!(eventually(WAIT, || !dc.texts(strict.id).is_empty()).await, "{:?}", dc.calls());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(dc.texts(strict.id).len(), 1, "{:?}", dc.texts(strict.id));
    assert!(!asked(&home_llm).iter().any(|t| t.contains("among ourselves")), "{:?}", asked(&home_llm));
    d.daemon.stop().await;
}
