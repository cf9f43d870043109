//! Streaming answers in chats, end to end: the real daemon (in-process) with `streaming = true`
//! against the fake Bot API and a fake model that writes slowly — paced preview edits, silence
//! during a 429 wait, drafts in private chats, exactly one final answer that replaces the
//! preview, and a preview left by a stop or a `kill -9` (the real binary) mid-stream noted at
//! the next start while the answer comes once. Discord and Slack
//! stream by edits (PATCH message, `chat.update`) the same way.

mod support;

use std::path::Path;
use std::process::Child;
use std::time::Duration;

use serde_json::json;
use support::fake_llm::Step;
use support::fake_telegram::{Chat, FakeTelegram, User};
use support::{FakeLlm, TestDaemon, config_for, eventually, start_daemon};

const TOKEN: &str = "123:ABC";
const WAIT: Duration = Duration::from_secs(20);

async fn fake_telegram() -> FakeTelegram {
    FakeTelegram::builder().token(TOKEN).bot("hermes_bot", 42).start().await
}

fn config(llm: &FakeLlm, tg: &FakeTelegram, extra: &str) -> String {
    let table = format!(
        "{extra}\n[platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\nstreaming = true\n",
        tg.base_url()
    );
    config_for(llm, &table)
}

async fn start(home: &Path, config: &str) -> TestDaemon {
    start_daemon(home, config, &[("TELEGRAM_BOT_TOKEN", TOKEN), ("TELEGRAM_ALLOWED_USERS", "1001")]).await
}

/// A model writing `words` words, one every `pause`.
fn slow_answer(words: usize, pause: Duration) -> (Step, String) {
    let pieces: Vec<String> = (0..words).map(|i| format!("word{i} ")).collect();
    let text = pieces.concat().trim_end().to_owned();
    (Step::SlowStream(pieces, pause), text)
}

/// What each message in `chat` shows now: its sent text, or its last accepted edit.
fn shown(tg: &FakeTelegram, chat: i64) -> Vec<String> {
    let edits = tg.edits();
    tg.sent_to(chat)
        .iter()
        .map(|sent| {
            let last = edits.iter().rfind(|e| e.message_id == sent.message_id && e.chat_id == chat && !e.unchanged);
            last.map_or_else(|| sent.visible(), |e| e.text.clone())
        })
        .collect()
}

/// Telegram refuses drafts (an older Bot API server), so the private chat streams by edits.
fn refuse_drafts(tg: &FakeTelegram) {
    tg.fail_next(
        "sendMessageDraft",
        json!({"ok": false, "error_code": 404, "description": "Not Found: method not found"}),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_is_edited_in_at_a_paced_rate_and_delivered_once() {
    let (step, answer) = slow_answer(40, Duration::from_millis(100));
    let llm = FakeLlm::builder().step(Duration::ZERO, step).start().await;
    let tg = fake_telegram().await;
    refuse_drafts(&tg);
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &config(&llm, &tg, "")).await;
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    let asked = tg.push_message(&chat, &ann, "write slowly");

    let done = || tg.sent_to(chat.id).iter().any(|s| s.visible().trim_end() == answer);
    let edited_to_answer = || tg.edits().iter().any(|e| e.chat_id == chat.id && e.text.trim_end() == answer);
    assert!(eventually(WAIT, || done() || edited_to_answer()).await, "{:?} {:?}", tg.sent(), tg.edits());
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let sent = tg.sent_to(chat.id);
    assert_eq!(sent.len(), 1, "one message: the preview, which became the answer: {sent:?}");
    let preview = &sent[0];
    assert!(preview.visible().ends_with(" …") && preview.visible().starts_with("word0"), "{preview:?}");
    assert_eq!(preview.reply_to, Some(asked.message_id), "the preview answers the user's message");
    let edits: Vec<_> = tg.edits().into_iter().filter(|e| e.chat_id == chat.id).collect();
    assert!(edits.len() >= 2, "the preview grew by edits: {edits:?}");
    assert!(edits.iter().all(|e| e.message_id == preview.message_id), "{edits:?}");
    let last = edits.last().unwrap();
    assert_eq!(last.text.trim_end(), answer, "the final answer replaced the preview");
    let finals = edits.iter().filter(|e| e.text.trim_end() == answer).count();
    assert_eq!(finals, 1, "the final text arrived once: {edits:?}");
    // Paced: Telegram's ~1 edit per second in a chat (the final edit may follow sooner, through
    // the same pacer's burst).
    let mut times = vec![preview.at];
    times.extend(edits[..edits.len() - 1].iter().map(|e| e.at));
    for pair in times.windows(2) {
        assert!(pair[1] - pair[0] >= Duration::from_millis(950), "preview updated after {:?}", pair[1] - pair[0]);
    }
    // Growing text, never repeated.
    for pair in edits.windows(2) {
        assert_ne!(pair[0].text, pair[1].text);
    }
    assert_eq!(llm.requests()[0]["stream"], json!(true), "the model was asked to stream");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_preview_call_reaches_a_chat_during_its_429_wait() {
    let (step, answer) = slow_answer(50, Duration::from_millis(100));
    let llm = FakeLlm::builder().step(Duration::ZERO, step).start().await;
    let tg = fake_telegram().await;
    refuse_drafts(&tg);
    tg.fail_next(
        "editMessageText",
        json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 3",
            "parameters": {"retry_after": 3}}),
    );
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &config(&llm, &tg, "")).await;
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    tg.push_message(&chat, &ann, "write slowly");

    let final_edit = || tg.edits().iter().any(|e| e.chat_id == chat.id && e.text.trim_end() == answer);
    assert!(eventually(WAIT, final_edit).await, "{:?}", tg.edits());
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let edit_calls = tg.calls("editMessageText");
    let limited_at = edit_calls[0].at;
    // Every call to the chat (previews, typing, the final answer) after the refused edit came
    // after the full wait.
    let to_chat: Vec<_> = ["sendMessage", "editMessageText", "sendChatAction", "sendMessageDraft"]
        .iter()
        .flat_map(|m| tg.calls(m))
        .filter(|c| c.body["chat_id"] == json!(chat.id) && c.at > limited_at)
        .collect();
    assert!(!to_chat.is_empty());
    for call in &to_chat {
        assert!(
            call.at - limited_at >= Duration::from_secs(3),
            "{} {:?} after the 429",
            call.method,
            call.at - limited_at
        );
    }
    assert_eq!(tg.sent_to(chat.id).len(), 1, "one message, edited: {:?}", tg.sent());
    assert_eq!(tg.edits().iter().filter(|e| e.text.trim_end() == answer).count(), 1);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_chat_streams_into_a_draft_and_gets_the_answer_as_one_message() {
    let (step, answer) = slow_answer(30, Duration::from_millis(100));
    let llm = FakeLlm::builder().step(Duration::ZERO, step).start().await;
    let tg = fake_telegram().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &config(&llm, &tg, "")).await;
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    tg.push_message(&chat, &ann, "write slowly");

    let trimmed = || tg.texts(chat.id).iter().map(|t| t.trim_end().to_owned()).collect::<Vec<_>>();
    assert!(eventually(WAIT, || trimmed().contains(&answer)).await, "{:?}", tg.sent());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let drafts = tg.drafts();
    assert!(drafts.len() >= 2, "the answer streamed into a draft: {drafts:?}");
    assert!(drafts.iter().all(|d| d.chat_id == chat.id && d.draft_id == drafts[0].draft_id && d.draft_id != 0));
    for pair in drafts.windows(2) {
        assert!(pair[1].at - pair[0].at >= Duration::from_millis(950), "drafts are paced: {drafts:?}");
    }
    assert!(drafts.last().unwrap().at < tg.sent_to(chat.id)[0].at, "no draft after the final message");
    assert_eq!(trimmed(), vec![answer], "the answer arrived once, as a message");
    assert!(tg.edits().is_empty(), "{:?}", tg.edits());
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_left_by_a_stop_mid_stream_is_noted_and_the_answer_comes_once() {
    let (step, _) = slow_answer(200, Duration::from_millis(100));
    let llm = FakeLlm::builder()
        .step(Duration::ZERO, step)
        .step(Duration::ZERO, Step::Reply("the answer".into()))
        .start()
        .await;
    let tg = fake_telegram().await;
    refuse_drafts(&tg);
    let home = tempfile::tempdir().unwrap();
    let config = config(&llm, &tg, "[agent]\ndrain_timeout = \"1s\"\n");
    let d = start(home.path(), &config).await;
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    tg.push_message(&chat, &ann, "write slowly");
    assert!(eventually(WAIT, || !tg.edits().is_empty()).await, "the preview is streaming: {:?}", tg.sent());
    let preview = tg.sent_to(chat.id)[0].clone();
    d.daemon.stop().await;

    let d = start(home.path(), &config).await;
    assert!(eventually(WAIT, || shown(&tg, chat.id).contains(&"the answer".to_owned())).await, "{:?}", tg.sent());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let noted = tg.edits().into_iter().rfind(|e| e.message_id == preview.message_id).expect("edits");
    assert!(noted.text.starts_with("(interrupted"), "the old preview was noted: {noted:?}");
    let texts = shown(&tg, chat.id);
    assert_eq!(texts.iter().filter(|t| *t == "the answer").count(), 1, "{texts:?}");
    assert!(texts[0].starts_with("(interrupted"), "{texts:?}");
    assert_eq!(llm.count(), 2, "the turn ran once more, and only once");
    d.daemon.stop().await;
}

#[cfg(feature = "discord")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_streams_by_paced_edits_and_the_final_text_replaces_the_preview() {
    use support::fake_discord::{Channel, FakeDiscord, User};
    let (step, answer) = slow_answer(30, Duration::from_millis(100));
    let llm = FakeLlm::builder().step(Duration::ZERO, step).start().await;
    let dc = FakeDiscord::builder().token("discord-test-token").start().await;
    let table = format!(
        "[platforms.discord]\nenabled = true\napi_url = \"{}\"\nstreaming = true\nreaction_done = \"✅\"\n",
        dc.base_url()
    );
    let home = tempfile::tempdir().unwrap();
    let env = [("DISCORD_BOT_TOKEN", "discord-test-token"), ("DISCORD_ALLOWED_USERS", "1001")];
    let d = start_daemon(home.path(), &config_for(&llm, &table), &env).await;
    let dm = Channel::dm(7101);
    let asked = dc.post(&dm, &User::new(1001, "ann"), "write slowly");
    let done = || dc.edits().iter().any(|e| e.channel == dm.id && e.content.trim_end() == answer);
    assert!(eventually(WAIT, done).await, "{:?} {:?}", dc.sent(), dc.edits());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let sent = dc.sent_to(dm.id);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].reference, Some(asked));
    let edits: Vec<_> = dc.edits().into_iter().filter(|e| e.channel == dm.id).collect();
    assert!(edits.len() >= 2 && edits.iter().all(|e| e.message == sent[0].id), "{edits:?}");
    assert_eq!(edits.iter().filter(|e| e.content.trim_end() == answer).count(), 1);
    assert_eq!(edits.last().unwrap().content.trim_end(), answer);
    let mut times = vec![sent[0].at];
    times.extend(edits[..edits.len() - 1].iter().map(|e| e.at));
    for pair in times.windows(2) {
        assert!(pair[1] - pair[0] >= Duration::from_millis(950), "{:?}", pair[1] - pair[0]);
    }
    assert_eq!(edits[0].allowed_mentions["parse"], json!(["users"]), "edits never ping roles or everyone");
    let done = vec![(dm.id, asked, "✅".to_owned())];
    assert_eq!(dc.reactions(), done, "the answer put into the preview marks the message answered, once");
    d.daemon.stop().await;
}

#[cfg(feature = "slack")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_streams_by_spaced_chat_updates_and_the_final_text_replaces_the_preview() {
    use support::fake_slack::FakeSlack;
    let (step, answer) = slow_answer(30, Duration::from_millis(100));
    let llm = FakeLlm::builder().step(Duration::ZERO, step).start().await;
    let slack = FakeSlack::start("xoxb-test-bot-token", "xapp-test-app-token").await;
    let table = format!("[platforms.slack]\nenabled = true\napi_url = \"{}\"\nstreaming = true\n", slack.api_url());
    let home = tempfile::tempdir().unwrap();
    let env = [
        ("SLACK_BOT_TOKEN", "xoxb-test-bot-token"),
        ("SLACK_APP_TOKEN", "xapp-test-app-token"),
        ("SLACK_ALLOWED_USERS", "U1"),
    ];
    let d = start_daemon(home.path(), &config_for(&llm, &table), &env).await;
    slack.push_event(slack.user_message("D1", "U1", "write slowly", None));
    let done = || slack.updates().iter().any(|u| u.channel == "D1" && u.text.trim_end() == answer);
    assert!(eventually(WAIT, done).await, "{:?} {:?}", slack.posted(), slack.updates());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let posted = slack.posted_to("D1");
    assert_eq!(posted.len(), 1, "{posted:?}");
    let updates: Vec<_> = slack.updates().into_iter().filter(|u| u.channel == "D1").collect();
    assert!(updates.len() >= 2 && updates.iter().all(|u| u.ts == posted[0].ts), "{updates:?}");
    assert_eq!(updates.iter().filter(|u| u.text.trim_end() == answer).count(), 1);
    assert_eq!(updates.last().unwrap().text.trim_end(), answer);
    for pair in updates.windows(2) {
        assert!(pair[1].at - pair[0].at >= Duration::from_millis(950), "{:?}", pair[1].at - pair[0].at);
    }
    d.daemon.stop().await;
}

/// The real binary in `home` (its config already written), logging to `hermesd.log` there.
fn spawn(home: &Path) -> Child {
    support::spawn_telegram_gateway(home, TOKEN, "1001")
}

fn log(home: &Path) -> String {
    support::daemon_log(home)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_stream_notes_the_preview_and_answers_once() {
    let (step, _) = slow_answer(300, Duration::from_millis(100));
    let llm = FakeLlm::builder()
        .step(Duration::ZERO, step)
        .step(Duration::ZERO, Step::Reply("the answer".into()))
        .start()
        .await;
    let tg = fake_telegram().await;
    refuse_drafts(&tg);
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"fake\"\n\n[platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\nstreaming = true\n",
        llm.base_url(),
        tg.base_url()
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let mut child = spawn(home.path());
    support::wait_ready(port, home.path()).await;
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    tg.push_message(&chat, &ann, "write slowly");
    let streaming = || tg.edits().iter().any(|e| e.chat_id == chat.id && !e.unchanged);
    assert!(eventually(WAIT, streaming).await, "the preview grows; log:\n{}", log(home.path()));
    child.kill().unwrap();
    child.wait().unwrap();
    let preview = tg.sent_to(chat.id)[0].clone();
    assert!(shown(&tg, chat.id)[0].ends_with(" …"), "killed mid-stream: {:?}", shown(&tg, chat.id));

    let mut child = spawn(home.path());
    support::wait_ready(port, home.path()).await;
    let answered = || shown(&tg, chat.id).iter().any(|t| t == "the answer");
    assert!(eventually(WAIT, answered).await, "{:?}\nlog:\n{}", shown(&tg, chat.id), log(home.path()));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let texts = shown(&tg, chat.id);
    assert_eq!(texts.iter().filter(|t| *t == "the answer").count(), 1, "{texts:?}");
    assert!(texts[0].starts_with("(interrupted"), "the preview the crash left was noted: {texts:?}");
    assert_eq!(tg.sent_to(chat.id)[0].message_id, preview.message_id);
    assert_eq!(llm.count(), 2, "the interrupted turn ran once more, and only once");
    child.kill().unwrap();
    child.wait().unwrap();
}
