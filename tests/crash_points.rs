//! Crash at every durable boundary: for each failpoint from accept to receipt, the real binary
//! (built with failpoints, as every test build is) runs a multi-chat Telegram load with that
//! failpoint armed to abort at its N-th hit, dies there, is restarted without it, and must then
//! answer every message exactly once and in order per chat. The one window allowed to double a
//! reply — the platform took the send, the receipt was not committed — is reported apart.

mod support;
#[path = "support/checker.rs"]
mod checker;

use std::collections::{BTreeMap, HashSet};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use checker::{Delivered, Report};
use support::FakeLlm;
use support::fake_telegram::{Chat, FakeTelegram, User};
use support::{daemon_log, eventually, wait_ready};

const BIN: &str = env!("CARGO_BIN_EXE_hermesd");
const TOKEN: &str = "123:ABC";
const CHATS: i64 = 3;
const PER_CHAT: usize = 3;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn spawn(home: &Path, failpoints: &str) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(home.join("hermesd.log")).unwrap();
    Command::new(BIN)
        .args(["--home", home.to_str().unwrap(), "run"])
        .env("HERMESD_LOG", "info")
        .env("HERMESD_FAILPOINTS", failpoints)
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_ALLOWED_USERS", "5001,5002,5003")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn hermesd")
}

fn write_config(home: &Path, port: u16, llm: &FakeLlm, tg: &FakeTelegram) {
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[agent]\ndrain_timeout = \"2s\"\nbatch_window = \"0s\"\n\n\
         [model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"fake\"\n\n\
         [platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\n",
        llm.base_url(),
        tg.base_url()
    );
    std::fs::write(home.join("config.toml"), config).unwrap();
}

/// The receipts the store recorded, as `chat:message id` (Telegram's ids count per chat).
async fn receipts(home: &Path) -> HashSet<String> {
    use sqlx::sqlite::SqliteConnectOptions;
    let options = SqliteConnectOptions::new().filename(home.join("state.db")).read_only(true);
    let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
    let rows: Vec<(String,)> =
        sqlx::query_as(
            "SELECT json_extract(payload, '$.chat.chat_id') || ':' || platform_message_id FROM outbound_messages \
             WHERE platform_message_id IS NOT NULL",
        )
            .fetch_all(&pool)
            .await
            .unwrap();
    pool.close().await;
    rows.into_iter().map(|r| r.0).collect()
}

/// What each chat was sent, by the fake Telegram, in order: the echoed token and the message id.
/// "queued (n)" acknowledgements of the busy policy are notices, not answers.
fn delivered(tg: &FakeTelegram, users: &[User]) -> BTreeMap<String, Vec<Delivered>> {
    users
        .iter()
        .map(|u| {
            let answers = tg
                .sent_to(u.id)
                .into_iter()
                .filter(|s| !s.visible().starts_with("queued ("))
                .map(|s| {
                    let text = s.visible();
                    let token = text.strip_prefix("echo: ").unwrap_or(&text).to_owned();
                    Delivered { token, message_id: format!("{}:{}", u.id, s.message_id) }
                })
                .collect();
            (u.id.to_string(), answers)
        })
        .collect()
}

/// Run the load with `failpoint` armed (`name=abort@N`), let it die there, restart without it,
/// and return the checker's report once every message is answered.
async fn crash_at(failpoint: &str) -> Report {
    crash_with(failpoint, PER_CHAT).await
}

/// `crash_at` with `per_chat` messages queued for each chat.
async fn crash_with(failpoint: &str, per_chat: usize) -> Report {
    let llm = FakeLlm::builder().latency(Duration::from_millis(150)).start().await;
    let tg = FakeTelegram::builder().token(TOKEN).bot("hermes_bot", 42).start().await;
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    write_config(home.path(), port, &llm, &tg);
    let users: Vec<User> = (0..CHATS).map(|i| User::new(5001 + i, &format!("user{i}"))).collect();
    let mut sent: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // Queued before the start: the first polls take them in order, several per chat.
    for round in 0..per_chat {
        for user in &users {
            let token = format!("m{}-{round}", user.id);
            tg.push_message(&Chat::private(user), user, &token);
            sent.entry(user.id.to_string()).or_default().push(token);
        }
    }
    let mut child = spawn(home.path(), failpoint);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{failpoint} never fired; log:\n{}",
            daemon_log(home.path())
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status.signal(), Some(6), "{failpoint}: died by abort; log:\n{}", daemon_log(home.path()));
    assert!(daemon_log(home.path()).contains("abort"), "the failpoint itself aborted");

    let mut child = spawn(home.path(), "");
    wait_ready(port, home.path()).await;
    let tokens: HashSet<String> = sent.values().flatten().cloned().collect();
    let all_answered = || {
        let got: HashSet<String> = delivered(&tg, &users).into_values().flatten().map(|d| d.token).collect();
        tokens.is_subset(&got)
    };
    let answered = eventually(Duration::from_secs(30), all_answered).await;
    // A would-be duplicate or late resend has time to show up before the verdict.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let term = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(term.success());
    let _ = tokio::task::spawn_blocking(move || child.wait()).await;
    let report = checker::check(&sent, &delivered(&tg, &users), &receipts(home.path()).await);
    assert!(
        answered && report.is_exactly_once(),
        "{failpoint}: {report:#?}\nsent out: {:#?}\nlog:\n{}",
        delivered(&tg, &users),
        daemon_log(home.path())
    );
    report
}

#[test]
fn the_test_build_of_the_binary_has_failpoints_compiled_in() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(version.contains("(failpoints)"), "{version}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_accept_before_the_platform_ack() {
    let report = crash_at("ingress.accepted=abort@4").await;
    assert!(report.window_duplicates().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_dispatch_before_the_turn_starts() {
    let report = crash_at("turn.start=abort@3").await;
    assert!(report.window_duplicates().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_turn_began() {
    let report = crash_at("turn.begun=abort@3").await;
    assert!(report.window_duplicates().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_model_replied_before_it_is_stored() {
    let report = crash_at("turn.answered=abort@3").await;
    assert!(report.window_duplicates().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_reply_and_its_outbox_rows_are_stored() {
    let report = crash_at("turn.stored=abort@3").await;
    assert!(report.window_duplicates().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_outbox_row_is_taken_before_the_send() {
    let report = crash_at("outbox.send=abort@3").await;
    assert!(report.window_duplicates().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_send_before_the_receipt_is_the_one_reported_window() {
    // One message per chat: no "queued" notices, so the second send is an answer.
    let report = crash_with("outbox.sent=abort@2", 1).await;
    // The aborted send, and any other chat's send whose receipt was not committed yet.
    let window = report.window_duplicates().len();
    assert!((1..=CHATS as usize).contains(&window), "a send whose receipt was missed went out again: {report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_receipt() {
    let report = crash_at("outbox.receipt=abort@3").await;
    assert!(report.window_duplicates().is_empty());
}
