//! Telegram end to end: the real daemon (in-process, and the real binary for `kill -9`) against the
//! fake Bot API and the fake LLM — DMs, mention gating in groups, pairing, offsets across restarts,
//! 429s, chunking, throttled progress edits, webhook mode, approval buttons, topics and files.

mod support;

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{Value, json};
use support::fake_llm::Step;
use support::fake_telegram::{Chat, FakeTelegram, Incoming, Injected, User};
use support::{FakeLlm, TestDaemon, client, config_for, eventually, start_daemon};

const TOKEN: &str = "123:ABC";
const WAIT: Duration = Duration::from_secs(10);

async fn fake_telegram() -> FakeTelegram {
    FakeTelegram::builder().token(TOKEN).bot("hermes_bot", 42).start().await
}

/// `[platforms.telegram]` pointing at `tg` with `settings` lines added, after `extra` TOML.
fn telegram_config(llm: &FakeLlm, tg: &FakeTelegram, settings: &str, extra: &str) -> String {
    let table = format!(
        "{extra}\n[platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\n{settings}\n",
        tg.base_url()
    );
    config_for(llm, &table)
}

/// Each quick message a turn of its own, for tests about offsets and files rather than batching.
const NO_BATCHING: &str = "[agent]\nbatch_window = \"0s\"\n";

/// A daemon with the Telegram adapter; `env` is added to the bot token.
async fn start(home: &Path, config: &str, env: &[(&str, &str)]) -> TestDaemon {
    let mut all = vec![("TELEGRAM_BOT_TOKEN", TOKEN)];
    all.extend_from_slice(env);
    start_daemon(home, config, &all).await
}

/// Waits until getUpdates confirmed `update` (the daemon accepted or ignored it).
async fn confirmed(tg: &FakeTelegram, update: &Injected) -> bool {
    eventually(WAIT, || tg.confirmed_offset() > update.update_id).await
}

fn count(texts: &[String], text: &str) -> usize {
    texts.iter().filter(|t| *t == text).count()
}

/// The last user message of a recorded LLM request.
fn last_user(request: &Value) -> String {
    let messages = request["messages"].as_array().expect("messages");
    let user = messages.iter().rev().find(|m| m["role"] == "user");
    user.and_then(|m| m["content"].as_str()).unwrap_or_default().to_owned()
}

fn llm_saw(llm: &FakeLlm, needle: &str) -> bool {
    llm.requests().iter().any(|r| r.to_string().contains(needle))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_is_answered_in_its_chat_as_a_reply() {
    // A model that takes a moment, as real ones do: typing shows while it thinks (an instant
    // answer may rightly arrive before any typing indicator).
    let llm = FakeLlm::builder().latency(Duration::from_millis(400)).start().await;
    let tg = fake_telegram().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &telegram_config(&llm, &tg, "", ""), &[("TELEGRAM_ALLOWED_USERS", "1001")]).await;
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    let hello = tg.push_message(&chat, &ann, "hello there");
    assert!(eventually(WAIT, || !tg.sent_to(chat.id).is_empty()).await, "{:?}", tg.calls("sendMessage"));
    let reply = tg.sent_to(chat.id).remove(0);
    assert_eq!(reply.visible(), "echo: hello there");
    assert_eq!(reply.reply_to, Some(hello.message_id), "answered as a reply to the user's message");
    assert!(reply.is_html(), "{reply:?}");
    assert_eq!(last_user(&llm.requests()[0]), "hello there");
    let typing = || tg.actions().iter().any(|a| a.chat_id == chat.id && a.action == "typing");
    assert!(eventually(WAIT, typing).await, "{:?}", tg.actions());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(tg.sent().len(), 1, "{:?}", tg.sent());
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_answer_only_what_addresses_the_bot_when_mentions_are_required() {
    let llm = FakeLlm::echo().await;
    let tg = fake_telegram().await;
    let home = tempfile::tempdir().unwrap();
    let config = telegram_config(&llm, &tg, "require_mention = true", "");
    let d = start(home.path(), &config, &[("TELEGRAM_ALLOWED_USERS", "1001,1002")]).await;
    let (ann, bob) = (User::new(1001, "Ann"), User::new(1002, "Bob"));
    let group = Chat::supergroup(-100_123, "Team");

    let chatter = tg.push_message(&group, &ann, "just chatting among ourselves");
    let mention = tg.push_message(&group, &bob, "@hermes_bot hi");
    assert!(eventually(WAIT, || tg.sent_to(group.id).len() == 1).await, "{:?}", tg.texts(group.id));
    let answer = tg.sent_to(group.id).remove(0);
    assert!(answer.visible().starts_with("echo:") && answer.visible().contains("hi"), "{answer:?}");
    assert_eq!(answer.reply_to, Some(mention.message_id));

    let reply = tg.push_reply(&group, &ann, "and what about this?", answer.message_id);
    assert!(eventually(WAIT, || tg.sent_to(group.id).len() == 2).await, "{:?}", tg.texts(group.id));
    let second = tg.sent_to(group.id).remove(1);
    assert!(second.visible().contains("and what about this?"), "{second:?}");
    assert_eq!(second.reply_to, Some(reply.message_id));

    let status = tg.push_message(&group, &bob, "/status@hermes_bot");
    assert!(eventually(WAIT, || tg.sent_to(group.id).len() == 3).await, "{:?}", tg.texts(group.id));
    let third = tg.sent_to(group.id).remove(2);
    assert!(third.visible().contains("model: fake-model"), "the host answered /status: {third:?}");
    assert_eq!(third.reply_to, Some(status.message_id));

    assert!(confirmed(&tg, &status).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(llm.count(), 2, "only the mention and the reply reached the model");
    assert!(!llm_saw(&llm, "just chatting"), "an unaddressed message reached the model");
    assert!(tg.sent().iter().all(|s| s.reply_to != Some(chatter.message_id)), "{:?}", tg.sent());
    assert_eq!(tg.sent().len(), 3, "{:?}", tg.sent());
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_dm_users_pair_and_unknown_group_users_are_ignored() {
    let llm = FakeLlm::echo().await;
    let tg = fake_telegram().await;
    let home = tempfile::tempdir().unwrap();
    // No allowlist: default deny.
    let d = start(home.path(), &telegram_config(&llm, &tg, "", ""), &[]).await;
    let zed = User::new(2001, "Zed");
    let dm = Chat::private(&zed);
    tg.push_message(&dm, &zed, "hello?");
    assert!(eventually(WAIT, || tg.sent_to(dm.id).len() == 1).await, "{:?}", tg.calls("sendMessage"));
    let greeting = tg.texts(dm.id).remove(0);
    assert!(greeting.contains("pairing code is"), "{greeting}");
    let code = greeting.split_whitespace().last().unwrap().to_owned();
    assert_eq!(code.len(), 8, "{greeting}");
    assert_eq!(llm.count(), 0, "nothing reached the model");

    let store =
        hermesd::store::SqliteStore::open(&home.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
    let key = hermesd::access::PairingKey::load_or_create(home.path()).unwrap();
    let approved = hermesd::access::approve(&store, &key, "telegram", &code).await.unwrap();
    assert!(matches!(approved, hermesd::store::PairingApproval::Approved { ref user_id, .. } if user_id == "2001"));
    store.close().await;
    tg.push_message(&dm, &zed, "now?");
    assert!(eventually(WAIT, || tg.texts(dm.id).contains(&"echo: now?".to_owned())).await, "{:?}", tg.texts(dm.id));

    // A stranger in a group gets nothing, not even a pairing code; the approved user is answered.
    let group = Chat::group(-555, "Lobby");
    let stranger = User::new(2002, "Mallory");
    let intrusion = tg.push_message(&group, &stranger, "@hermes_bot let me in");
    assert!(confirmed(&tg, &intrusion).await);
    tg.push_message(&group, &zed, "@hermes_bot ping");
    assert!(eventually(WAIT, || !tg.sent_to(group.id).is_empty()).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let texts = tg.texts(group.id);
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert!(texts[0].contains("ping"), "{texts:?}");
    assert!(tg.sent_to(stranger.id).is_empty());
    assert!(!llm_saw(&llm, "let me in"));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_sent_while_stopped_are_answered_once_after_restart() {
    let llm = FakeLlm::echo().await;
    let tg = fake_telegram().await;
    let home = tempfile::tempdir().unwrap();
    let config = telegram_config(&llm, &tg, "", "");
    let env = [("TELEGRAM_ALLOWED_USERS", "1001")];
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);

    let d = start(home.path(), &config, &env).await;
    let first = tg.push_message(&chat, &ann, "first");
    assert!(eventually(WAIT, || tg.texts(chat.id).contains(&"echo: first".to_owned())).await);
    assert!(eventually(WAIT, || tg.confirmed_offset() == first.update_id + 1).await, "{}", tg.confirmed_offset());
    d.daemon.stop().await;

    let polls_before = tg.polls().len();
    let later: Vec<Injected> = (0..5).map(|i| tg.push_message(&chat, &ann, &format!("later {i}"))).collect();
    let d = start(home.path(), &config, &env).await;
    // The backlog arrives at once, so the five quick messages are batched into one turn.
    let batched = (0..5).map(|i| format!("later {i}")).collect::<Vec<_>>().join("\n");
    let answer = format!("echo: {batched}");
    let answered = || tg.texts(chat.id).contains(&answer);
    assert!(eventually(Duration::from_secs(20), answered).await, "{:?}", tg.texts(chat.id));
    // Time for a duplicate to show up.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let texts = tg.texts(chat.id);
    assert_eq!(count(&texts, "echo: first"), 1, "{texts:?}");
    assert_eq!(count(&texts, &answer), 1, "{texts:?}");
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert_eq!(llm.count(), 2, "the backlog ran exactly one turn");
    let resumed = tg.polls()[polls_before].offset;
    assert_eq!(resumed, Some(first.update_id + 1), "the restarted daemon resumed from its stored offset");
    let last = later.last().unwrap();
    assert!(eventually(WAIT, || tg.confirmed_offset() == last.update_id + 1).await, "{}", tg.confirmed_offset());
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_send_waits_for_retry_after_and_delivers_once() {
    let llm = FakeLlm::echo().await;
    let tg = fake_telegram().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &telegram_config(&llm, &tg, "", ""), &[("TELEGRAM_ALLOWED_USERS", "1001")]).await;
    let limited = json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 2",
        "parameters": {"retry_after": 2}});
    tg.fail_next("sendMessage", limited);
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    tg.push_message(&chat, &ann, "hurry");
    assert!(
        eventually(Duration::from_secs(15), || tg.sent_to(chat.id).len() == 1).await,
        "{:?}",
        tg.calls("sendMessage")
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let attempts = tg.calls("sendMessage");
    assert_eq!(attempts.len(), 2, "one refused attempt, one delivery: {attempts:?}");
    let sent = tg.sent_to(chat.id);
    assert_eq!(sent.len(), 1, "delivered exactly once: {sent:?}");
    assert_eq!(sent[0].visible(), "echo: hurry");
    let waited = sent[0].at - attempts[0].at;
    assert!(waited >= Duration::from_secs(2), "retried {waited:?} after the 429, before retry_after");
    d.daemon.stop().await;
}

/// About 10,000 characters: prose with emoji, a fenced code block longer than one message across
/// the middle (so it must be split), more prose.
fn long_reply() -> String {
    let mut text = String::new();
    let mut sentence = 0;
    let mut prose = |text: &mut String, until: usize| {
        while text.chars().count() < until {
            text.push_str(&format!("Sentence {sentence} is cheerful 😀 and long enough to wrap. "));
            sentence += 1;
            if sentence % 8 == 0 {
                text.push_str("\n\n");
            }
        }
    };
    prose(&mut text, 2000);
    text.push_str("\n\n```rust\n");
    let mut line = 0;
    while text.chars().count() < 7500 {
        text.push_str(&format!("let line_{line} = a < b && c > d; // 🦀\n"));
        line += 1;
    }
    text.push_str("```\n\n");
    prose(&mut text, 9990);
    text.push_str("THE END");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_reply_is_chunked_to_4096_utf16_units_with_balanced_code_blocks() {
    let long = long_reply();
    let llm = FakeLlm::builder().reply(&long).start().await;
    let tg = fake_telegram().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &telegram_config(&llm, &tg, "", ""), &[("TELEGRAM_ALLOWED_USERS", "1001")]).await;
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    let ask = tg.push_message(&chat, &ann, "write a lot");
    let finished = || tg.texts(chat.id).iter().any(|t| t.contains("THE END"));
    assert!(eventually(Duration::from_secs(20), finished).await, "{:?}", tg.calls("sendMessage").len());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = tg.sent_to(chat.id);
    assert!(sent.len() >= 3, "{} messages", sent.len());
    assert_eq!(sent[0].reply_to, Some(ask.message_id));
    for (i, message) in sent.iter().enumerate() {
        // Telegram counts the text after entity parsing: tags and escapes (`&lt;`) are not part of
        // the 4096 units, so the visible text is what must fit.
        let units = message.visible().encode_utf16().count();
        assert!(units <= 4096, "message {i} shows {units} UTF-16 units");
        assert!(!message.visible().trim().is_empty(), "message {i} is empty");
        assert!(message.is_html(), "message {i} was not sent as HTML: {:?}", message.parse_mode);
        let opened = message.text.matches("<pre>").count() + message.text.matches("<pre ").count();
        assert_eq!(opened, message.text.matches("</pre>").count(), "message {i}: unbalanced <pre>");
    }
    let with_code = sent.iter().filter(|s| s.text.contains("<pre")).count();
    assert!(with_code >= 2, "the code block was split and reopened, in {with_code} messages");
    assert_eq!(tg.calls("sendMessage").len(), sent.len(), "telegram refused some sendMessage calls");
    // Nothing lost or repeated at the seams.
    let visible: String = sent.iter().map(|s| s.visible()).collect();
    assert_eq!(visible.matches('😀').count(), long.matches('😀').count());
    assert_eq!(visible.matches('🦀').count(), long.matches('🦀').count());
    for line in 0.. {
        let needle = format!("let line_{line} = ");
        if !long.contains(&needle) {
            break;
        }
        assert_eq!(visible.matches(&needle).count(), 1, "{needle}");
    }
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_edits_respect_the_floor_and_never_repeat_a_text() {
    // Step n keeps n + 1 tasks, so every tool result (and so every progress text) differs.
    let todo = |n: u32| {
        let tasks: Vec<Value> = (0..=n).map(|i| json!({"id": i.to_string(), "content": format!("step {i}")})).collect();
        let args = json!({ "todos": tasks }).to_string();
        Step::ToolCalls(vec![("todo".to_owned(), args)])
    };
    let mut builder = FakeLlm::builder().step(Duration::ZERO, todo(0));
    // Edits come at most every 1.5 s; about 8 s of tool calls leave room for several.
    for n in 1..12 {
        builder = builder.step(Duration::from_millis(700), todo(n));
    }
    let llm = builder.step(Duration::from_millis(700), Step::Reply("all done".into())).start().await;
    let tg = fake_telegram().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &telegram_config(&llm, &tg, "", ""), &[("TELEGRAM_ALLOWED_USERS", "1001")]).await;
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    tg.push_message(&chat, &ann, "work through the list");
    let done = || tg.texts(chat.id).iter().any(|t| t == "all done");
    assert!(eventually(Duration::from_secs(20), done).await, "{:?}", tg.texts(chat.id));
    let edits = tg.edits();
    assert!(edits.len() >= 2, "the progress message was edited several times: {edits:?}");
    let progress_id = edits[0].message_id;
    assert!(
        edits.iter().all(|e| e.message_id == progress_id && e.chat_id == chat.id),
        "one progress message: {edits:?}"
    );
    let progress = tg.sent_to(chat.id).into_iter().find(|s| s.message_id == progress_id).expect("the progress message");
    let mut times = vec![progress.at];
    times.extend(edits.iter().map(|e| e.at));
    for pair in times.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(gap >= Duration::from_millis(1400), "progress updated after only {gap:?}");
    }
    assert!(edits.iter().all(|e| !e.unchanged), "an edit repeated the shown text: {edits:?}");
    let mut texts = vec![progress.text.clone()];
    texts.extend(edits.iter().map(|e| e.text.clone()));
    for pair in texts.windows(2) {
        assert_ne!(pair[0], pair[1], "an edit repeated the previous text");
    }
    d.daemon.stop().await;
}

async fn post_update(base: &str, secret: Option<&str>, update: &Value) -> u16 {
    let mut request = client().post(format!("{base}/telegram/webhook")).json(update);
    if let Some(secret) = secret {
        request = request.header("X-Telegram-Bot-Api-Secret-Token", secret);
    }
    request.send().await.expect("webhook request").status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_mode_registers_the_hook_and_checks_the_secret() {
    let llm = FakeLlm::echo().await;
    let tg = fake_telegram().await;
    let home = tempfile::tempdir().unwrap();
    let url = "https://bot.example.com/telegram/webhook";
    let config = telegram_config(&llm, &tg, &format!("mode = \"webhook\"\nwebhook_url = \"{url}\""), "");
    let env = [("TELEGRAM_ALLOWED_USERS", "1001"), ("TELEGRAM_WEBHOOK_SECRET", "s3cret_token")];
    let d = start(home.path(), &config, &env).await;
    assert!(
        eventually(WAIT, || tg.webhook().is_some()).await,
        "setWebhook was not called: {:?}",
        tg.calls("setWebhook")
    );
    let hook = tg.webhook().unwrap();
    assert_eq!(hook.url, url);
    assert_eq!(hook.secret.as_deref(), Some("s3cret_token"));

    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    let (_, forged) = tg.build(Incoming::text(&chat, &ann, "forged request"));
    assert_eq!(post_update(&d.base, Some("wrong"), &forged).await, 401);
    assert_eq!(post_update(&d.base, None, &forged).await, 401);
    let (_, real) = tg.build(Incoming::text(&chat, &ann, "via webhook"));
    assert_eq!(post_update(&d.base, Some("s3cret_token"), &real).await, 200);
    assert!(eventually(WAIT, || !tg.sent_to(chat.id).is_empty()).await);
    // Telegram redelivers when unsure: the same update is not answered twice.
    assert_eq!(post_update(&d.base, Some("s3cret_token"), &real).await, 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(tg.texts(chat.id), ["echo: via webhook"]);
    assert_eq!(llm.count(), 1);
    assert!(!llm_saw(&llm, "forged request"));
    assert!(tg.calls("getUpdates").is_empty(), "webhook mode does not poll");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_button_press_lets_the_command_run() {
    let llm = FakeLlm::builder()
        .tool_calls(&[("terminal", r#"{"command":"git push --force origin x"}"#)])
        .reply("pushed (or tried)")
        .start()
        .await;
    let tg = fake_telegram().await;
    let home = tempfile::tempdir().unwrap();
    let config = telegram_config(&llm, &tg, "", "[tools]\napproval_timeout = \"20s\"\n");
    let d = start(home.path(), &config, &[("TELEGRAM_ALLOWED_USERS", "1001")]).await;
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    tg.push_message(&chat, &ann, "force push please");
    let asked = || tg.sent_to(chat.id).into_iter().find(|s| !s.button_data().is_empty());
    assert!(eventually(WAIT, || asked().is_some()).await, "{:?}", tg.texts(chat.id));
    let approval = asked().unwrap();
    let data = approval.button_data();
    assert!(data.contains(&hermesd::turn::approvals::APPROVE.to_owned()), "{data:?}");
    assert!(data.contains(&hermesd::turn::approvals::DENY.to_owned()), "{data:?}");

    let press = tg.push_callback(&ann, chat.id, approval.message_id, hermesd::turn::approvals::APPROVE);
    let finished = || tg.texts(chat.id).iter().any(|t| t.contains("pushed (or tried)"));
    assert!(eventually(Duration::from_secs(20), finished).await, "{:?}", tg.texts(chat.id));
    let requests = llm.requests();
    let result = requests[1]["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "tool").cloned();
    let result = result.and_then(|m| m["content"].as_str().map(str::to_owned)).unwrap_or_default();
    assert!(result.contains("exit code"), "the command ran: {result}");
    let answered = || tg.callback_answers().iter().any(|a| a["callback_query_id"] == "cbq-1");
    assert!(eventually(WAIT, answered).await, "{:?}", tg.callback_answers());
    assert!(confirmed(&tg, &press).await);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offset_confirms_only_updates_the_daemon_received() {
    let llm = FakeLlm::echo().await;
    let tg = fake_telegram().await;
    let home = tempfile::tempdir().unwrap();
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    // Queued before the daemon starts: they arrive in one batch.
    let batch: Vec<Injected> = (0..3).map(|i| tg.push_message(&chat, &ann, &format!("batch {i}"))).collect();
    let d =
        start(home.path(), &telegram_config(&llm, &tg, "", NO_BATCHING), &[("TELEGRAM_ALLOWED_USERS", "1001")]).await;
    let tg_ref = &tg;
    let answered = |n: usize| move || (0..n).all(|i| tg_ref.texts(chat.id).contains(&format!("echo: batch {i}")));
    assert!(eventually(WAIT, answered(3)).await, "{:?}", tg.texts(chat.id));
    assert!(eventually(WAIT, || tg.confirmed_offset() == batch[2].update_id + 1).await, "{}", tg.confirmed_offset());
    let more = tg.push_message(&chat, &ann, "batch 3");
    assert!(eventually(WAIT, answered(4)).await, "{:?}", tg.texts(chat.id));
    assert!(eventually(WAIT, || tg.confirmed_offset() == more.update_id + 1).await, "{}", tg.confirmed_offset());
    assert_eq!(tg.pending(), 0);

    let polls = tg.polls();
    let mut received = 0;
    let mut last_offset = 0;
    for poll in &polls {
        if let Some(offset) = poll.offset {
            assert!(offset <= received + 1, "offset {offset} confirms updates never received (last {received})");
            assert!(offset <= poll.issued + 1, "offset {offset} beyond every issued update ({})", poll.issued);
            assert!(offset >= last_offset, "the offset went back from {last_offset} to {offset}");
            last_offset = offset;
        }
        received = received.max(poll.returned.iter().copied().max().unwrap_or(0));
    }
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forum_topics_are_threads_and_files_are_downloaded() {
    // The model takes a moment, as real ones do, so the turn lives long enough to show typing.
    let llm = FakeLlm::builder().latency(Duration::from_millis(300)).start().await;
    let tg = fake_telegram().await;
    let home = tempfile::tempdir().unwrap();
    let d =
        start(home.path(), &telegram_config(&llm, &tg, "", NO_BATCHING), &[("TELEGRAM_ALLOWED_USERS", "1001")]).await;
    let ann = User::new(1001, "Ann");
    let forum = Chat::forum(-100_777, "Dev");
    let topic = tg.create_topic(&forum, &ann, "Builds");
    let asked = tg.push(Incoming::text(&forum, &ann, "is the build green?").topic(topic));
    assert!(eventually(WAIT, || !tg.sent_to(forum.id).is_empty()).await, "{:?}", tg.calls("sendMessage"));
    let reply = tg.sent_to(forum.id).remove(0);
    assert_eq!(reply.thread_id, Some(topic), "answered in the topic: {reply:?}");
    assert_eq!(reply.reply_to, Some(asked.message_id));
    let typing = || tg.actions().iter().any(|a| a.chat_id == forum.id && a.thread_id == Some(topic));
    assert!(eventually(WAIT, typing).await, "{:?}", tg.actions());

    let dm = Chat::private(&ann);
    let photo = b"\xff\xd8\xff\xe0 not really a jpeg".to_vec();
    tg.add_file("ph1", "photo.jpg", &photo);
    tg.add_file("doc1", "notes.txt", b"remember the milk");
    tg.push(Incoming::text(&dm, &ann, "look at this").photo("ph1"));
    tg.push(Incoming::text(&dm, &ann, "and read this").document("doc1", "notes.txt", "text/plain"));
    let answered = |caption: &str| tg.texts(dm.id).iter().any(|t| t.starts_with(&format!("echo: {caption}")));
    let both = || answered("look at this") && answered("and read this");
    assert!(eventually(WAIT, both).await, "{:?}", tg.texts(dm.id));
    // Each file is named by the path the file tools open (`media/<file>`, the chat's folder).
    for (caption, label, bytes) in
        [("look at this", "[image ", photo.as_slice()), ("and read this", "[file ", b"remember the milk".as_slice())]
    {
        let requests = llm.requests();
        let prompt = requests.iter().map(last_user).find(|u| u.starts_with(caption)).expect("the prompt");
        let path =
            prompt.split(label).nth(1).and_then(|rest| rest.split(' ').next()).unwrap_or_else(|| panic!("{prompt}"));
        let file = path.strip_prefix("media/").unwrap_or_else(|| panic!("{prompt}"));
        let saved = home.path().join("media/telegram").join(dm.id.to_string()).join(file);
        assert_eq!(std::fs::read(saved).unwrap(), bytes, "{path}");
        if caption == "and read this" {
            assert!(prompt.contains("its text follows]\nremember the milk\n"), "a text file is inlined: {prompt}");
        } else {
            assert!(prompt.contains("cannot see images"), "{prompt}");
        }
    }
    assert_eq!(tg.downloads().len(), 2);
    d.daemon.stop().await;
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn spawn(home: &Path) -> Child {
    support::spawn_telegram_gateway(home, TOKEN, "3001,3002,3003")
}

fn log(home: &Path) -> String {
    support::daemon_log(home)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_turn_answers_each_telegram_chat_exactly_once() {
    let llm = FakeLlm::builder().latency(Duration::from_millis(1500)).start().await;
    let tg = fake_telegram().await;
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[agent]\ndrain_timeout = \"2s\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"fake\"\n\n[platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\n",
        llm.base_url(),
        tg.base_url()
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let mut child = spawn(home.path());
    support::wait_ready(port, home.path()).await;
    let users: Vec<User> = (3001..=3003).map(|id| User::new(id, &format!("user{id}"))).collect();
    for user in &users {
        tg.push_message(&Chat::private(user), user, &format!("crash test {}", user.id));
    }
    assert!(
        eventually(Duration::from_secs(15), || llm.count() == 3).await,
        "turns started; log:\n{}",
        log(home.path())
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(tg.sent().is_empty(), "nothing was answered before the kill: {:?}", tg.sent());

    let mut child = spawn(home.path());
    support::wait_ready(port, home.path()).await;
    let all = || users.iter().all(|u| !tg.sent_to(u.id).is_empty());
    assert!(eventually(Duration::from_secs(20), all).await, "{:?}\nlog:\n{}", tg.sent(), log(home.path()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    for user in &users {
        assert_eq!(tg.texts(user.id), [format!("echo: crash test {}", user.id)], "chat {}", user.id);
    }
    assert_eq!(llm.count(), 6, "each interrupted turn ran once more, and only once");
    let term = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(term.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "hermesd did not exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_album_is_one_message_with_all_its_photos() {
    let llm = FakeLlm::echo().await;
    let tg = fake_telegram().await;
    let home = tempfile::tempdir().unwrap();
    // Batching off: the adapter itself makes the album one message.
    let d =
        start(home.path(), &telegram_config(&llm, &tg, "", NO_BATCHING), &[("TELEGRAM_ALLOWED_USERS", "1001")]).await;
    let ann = User::new(1001, "Ann");
    let dm = Chat::private(&ann);
    let mut last = 0;
    for (i, caption) in [(1, "which is best?"), (2, ""), (3, "")] {
        let file = format!("al{i}");
        tg.add_file(&file, &format!("p{i}.jpg"), format!("photo {i}").as_bytes());
        let (_, mut update) = tg.build(Incoming::text(&dm, &ann, caption).photo(&file));
        update["message"]["media_group_id"] = serde_json::json!("13579");
        last = tg.push_raw(update);
    }
    assert!(eventually(WAIT, || !tg.texts(dm.id).is_empty()).await);
    assert!(eventually(WAIT, || tg.confirmed_offset() == last + 1).await, "{}", tg.confirmed_offset());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(llm.count(), 1, "one turn for the album");
    let prompt = last_user(&llm.requests()[0]);
    assert!(prompt.starts_with("which is best?"), "{prompt}");
    assert_eq!(prompt.matches("[image media/").count(), 3, "{prompt}");
    assert_eq!(tg.texts(dm.id).len(), 1, "{:?}", tg.texts(dm.id));
    assert_eq!(tg.downloads().len(), 3);
    d.daemon.stop().await;
}
