//! Outbound files end to end against the fake Bot API: the `send_file` tool and `MEDIA:` lines
//! deliver documents and photos once, with the bytes of the workdir file; paths outside the
//! workdir are refused; a refused photo goes as a document; and a `kill -9` between storing a
//! file message and its upload still delivers exactly one document with the same bytes.

mod support;

#[path = "send_file/api.rs"]
mod api;
#[cfg(feature = "discord")]
#[path = "send_file/discord.rs"]
mod discord;
#[cfg(feature = "slack")]
#[path = "send_file/slack.rs"]
mod slack;

use std::path::Path;
use std::process::Child;
use std::time::Duration;

use serde_json::json;
use support::fake_telegram::{Chat, FakeTelegram, User};
use support::{FakeLlm, TestDaemon, config_for, eventually, start_daemon};

const TOKEN: &str = "123:ABC";
const WAIT: Duration = Duration::from_secs(15);

async fn fake_telegram() -> FakeTelegram {
    FakeTelegram::builder().token(TOKEN).bot("hermes_bot", 42).start().await
}

async fn start(home: &Path, llm: &FakeLlm, tg: &FakeTelegram) -> TestDaemon {
    let table =
        format!("[platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\n", tg.base_url());
    let env = [("TELEGRAM_BOT_TOKEN", TOKEN), ("TELEGRAM_ALLOWED_USERS", "1001")];
    start_daemon(home, &config_for(llm, &table), &env).await
}

/// Bytes that are not text, so a lossy copy would show.
fn binary(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Ann's (Telegram user 1001) own folder beneath the workdir, where her turns' tools work.
fn workdir(home: &Path) -> std::path::PathBuf {
    workdir_of(home, "1001")
}

fn workdir_of(home: &Path, user: &str) -> std::path::PathBuf {
    let dir = home.join("workspace/users/telegram").join(user);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn send_file(args: serde_json::Value) -> (&'static str, String) {
    ("send_file", args.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_file_delivers_a_document_and_a_photo_once_with_their_bytes() {
    let home = tempfile::tempdir().unwrap();
    let pdf = binary(70_000, 7);
    let png = [b"\x89PNG\r\n\x1a\n".as_slice(), &binary(3_000, 3)].concat();
    std::fs::write(workdir(home.path()).join("report.pdf"), &pdf).unwrap();
    std::fs::create_dir_all(workdir(home.path()).join("out")).unwrap();
    std::fs::write(workdir(home.path()).join("out/chart.png"), &png).unwrap();
    let (doc, photo) = (
        send_file(json!({"path": "report.pdf", "caption": "The **report**"})),
        send_file(json!({"path": "out/chart.png"})),
    );
    let llm = FakeLlm::builder()
        .tool_calls(&[(doc.0, &doc.1), (photo.0, &photo.1)])
        .reply("Both are on their way.")
        .start()
        .await;
    let tg = fake_telegram().await;
    let d = start(home.path(), &llm, &tg).await;
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    tg.push_message(&chat, &ann, "send me the report and the chart");
    // The answer comes after both files (a tool progress line may come first).
    let answered = || tg.texts(chat.id).iter().any(|t| t.contains("on their way"));
    assert!(eventually(WAIT, answered).await, "{:?}", tg.calls("sendDocument"));
    let uploads = tg.uploads();
    assert_eq!(uploads.len(), 2, "texts {:?}; {} uploads", tg.texts(chat.id), uploads.len());
    assert_eq!((uploads[0].method.as_str(), uploads[0].file_name.as_str()), ("senddocument", "report.pdf"));
    assert_eq!(uploads[0].bytes, pdf, "the document arrived byte for byte");
    assert_eq!(uploads[0].caption.as_deref(), Some("The <b>report</b>"), "captions go as Telegram HTML");
    assert_eq!((uploads[1].method.as_str(), uploads[1].file_name.as_str()), ("sendphoto", "chart.png"));
    assert_eq!(uploads[1].bytes, png);
    assert!(uploads.iter().all(|u| u.chat_id == chat.id));
    // A tool progress line ("⚙ send_file, …") may have been sent too, depending on timing.
    let answers: Vec<String> = tg.texts(chat.id).into_iter().filter(|t| !t.starts_with('⚙')).collect();
    assert_eq!(answers, ["Both are on their way."], "the answer comes after the files");
    // The tool reported the receipts to the model.
    let results = llm.requests()[1].to_string();
    assert!(results.contains("sent report.pdf (message id") && results.contains("sent chart.png"), "{results}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(tg.upload_requests(), 2, "each file was uploaded once");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_lines_send_workdir_files_and_refuse_everything_outside_it() {
    let home = tempfile::tempdir().unwrap();
    let csv = b"a,b\n1,2\n".to_vec();
    std::fs::write(workdir(home.path()).join("data.csv"), &csv).unwrap();
    // Secrets next to the workdir, in the data dir, and a symlink leading to one.
    std::fs::write(home.path().join(".env"), "TELEGRAM_BOT_TOKEN=123:ABC").unwrap();
    std::fs::write(workdir(home.path()).join(".env"), "KEY=inside-but-secret").unwrap();
    std::os::unix::fs::symlink("../../../../.env", workdir(home.path()).join("notes.txt")).unwrap();
    let env = home.path().join(".env").display().to_string();
    let answer = format!(
        "Here is the data.\nMEDIA:data.csv\nMEDIA:~/.hermesd/.env\nMEDIA:../.env\nMEDIA:{env}\nMEDIA:.env\nMEDIA:notes.txt"
    );
    let llm = FakeLlm::builder().reply(&answer).start().await;
    let tg = fake_telegram().await;
    let d = start(home.path(), &llm, &tg).await;
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    tg.push_message(&chat, &ann, "the data please");
    assert!(eventually(WAIT, || tg.texts(chat.id).len() == 2).await, "{:?}", tg.texts(chat.id));
    let uploads = tg.uploads();
    assert_eq!(uploads.len(), 1, "{uploads:?}");
    assert_eq!((uploads[0].file_name.as_str(), &uploads[0].bytes), ("data.csv", &csv));
    let texts = tg.texts(chat.id);
    assert_eq!(texts[0], "Here is the data.", "MEDIA lines are not shown as text");
    let notes = &texts[1];
    for refused in ["MEDIA:~/.hermesd/.env", "MEDIA:../.env", "MEDIA:.env", "MEDIA:notes.txt"] {
        assert!(notes.contains(&format!("{refused} was not sent")), "{refused}: {notes}");
    }
    assert!(notes.contains("outside the workdir"), "{notes}");
    assert!(!notes.contains("123:ABC") && !notes.contains("inside-but-secret"), "{notes}");
    // Order: text, file, notes — and nothing of a secret reached the platform.
    let sent = tg.sent_to(chat.id);
    assert!(sent[0].at <= uploads[0].at && uploads[0].at <= sent[1].at, "{sent:?} {uploads:?}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_telegram_refuses_goes_as_a_document() {
    let home = tempfile::tempdir().unwrap();
    let jpeg = [b"\xff\xd8\xff\xe0".as_slice(), &binary(5_000, 9)].concat();
    std::fs::write(workdir(home.path()).join("wide.jpg"), &jpeg).unwrap();
    let llm = FakeLlm::builder().reply("MEDIA:wide.jpg").start().await;
    let tg = fake_telegram().await;
    tg.fail_next(
        "sendPhoto",
        json!({"ok": false, "error_code": 400, "description": "Bad Request: PHOTO_INVALID_DIMENSIONS"}),
    );
    let d = start(home.path(), &llm, &tg).await;
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    tg.push_message(&chat, &ann, "the picture");
    assert!(eventually(WAIT, || !tg.uploads().is_empty()).await, "{:?}", tg.calls("sendPhoto"));
    let uploads = tg.uploads();
    assert_eq!(uploads.len(), 1);
    assert_eq!((uploads[0].method.as_str(), &uploads[0].bytes), ("senddocument", &jpeg));
    assert_eq!(tg.calls("sendPhoto").len(), 1, "the photo was tried first");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(tg.sent_to(chat.id).is_empty(), "an answer of only MEDIA lines sends no text: {:?}", tg.texts(chat.id));
    d.daemon.stop().await;
}

fn spawn(home: &Path) -> Child {
    support::spawn_telegram_gateway(home, TOKEN, "3001")
}

fn log(home: &Path) -> String {
    support::daemon_log(home)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_between_storing_a_file_and_its_upload_delivers_one_document_with_the_same_bytes() {
    let home = tempfile::tempdir().unwrap();
    let original = binary(200_000, 42);
    let source = workdir_of(home.path(), "3001").join("backup.tar");
    std::fs::write(&source, &original).unwrap();
    let call = send_file(json!({"path": "backup.tar"}));
    let llm = FakeLlm::builder().tool_calls(&[(call.0, &call.1)]).reply("Sent the backup.").start().await;
    let tg = fake_telegram().await;
    // The upload reaches the fake and waits: the file message is stored, the platform has not
    // answered.
    tg.hold_uploads();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"fake\"\n\n[platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\n",
        llm.base_url(),
        tg.base_url()
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let mut child = spawn(home.path());
    support::wait_ready(port, home.path()).await;
    let user = User::new(3001, "Cy");
    let chat = Chat::private(&user);
    tg.push_message(&chat, &user, "send me the backup");
    // The tool stored the file and returned "queued" after its wait; the turn then finished.
    let turn_done = || tg.upload_requests() == 1 && llm.count() == 2;
    assert!(eventually(Duration::from_secs(30), turn_done).await, "log:\n{}", log(home.path()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    child.kill().unwrap();
    child.wait().unwrap();
    let answered = |tg: &FakeTelegram| tg.texts(chat.id).iter().filter(|t| *t == "Sent the backup.").count();
    // Progress lines may have shown while the tool waited; the stored answer waits behind the file.
    assert!(tg.uploads().is_empty() && answered(&tg) == 0, "nothing was delivered before the kill");
    let result = llm.requests()[1].to_string();
    assert!(result.contains("stored and queued"), "{result}");

    // The resend must read the copy in the data dir: the workdir file is gone and replaced.
    std::fs::write(&source, b"changed after the message was stored").unwrap();
    tg.drop_held_uploads();
    let mut child = spawn(home.path());
    support::wait_ready(port, home.path()).await;
    assert!(eventually(WAIT, || answered(&tg) > 0).await, "log:\n{}", log(home.path()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let uploads = tg.uploads();
    assert_eq!(uploads.len(), 1, "exactly one document: {uploads:?}");
    assert_eq!(uploads[0].method, "senddocument");
    assert_eq!(uploads[0].bytes, original, "the bytes stored before the crash were sent");
    assert_eq!(answered(&tg), 1, "the answer followed the file, once: {:?}", tg.texts(chat.id));
    let answer = tg.sent_to(chat.id).into_iter().find(|s| s.visible() == "Sent the backup.").unwrap();
    assert!(uploads[0].at <= answer.at, "the file went first, as it was stored first");
    assert_eq!(llm.count(), 2, "the finished turn did not run again");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// An HTTP server on 127.0.0.1 serving `bytes` at `/files/{name}`, redirected to from `/go`
/// (downloads from a public address are covered by the unit tests, through a stand-in address).
async fn file_server(bytes: Vec<u8>) -> String {
    use axum::routing::get;
    let served = bytes.clone();
    let app = axum::Router::new()
        .route("/files/{name}", get(move || async move { served.clone() }))
        .route("/go", get(|| async { axum::response::Redirect::temporary("/files/plot.png") }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_file_refuses_a_url_web_fetch_would_refuse() {
    let png = binary(9_000, 11);
    let server = file_server(png.clone()).await;
    let call = send_file(json!({"path": format!("{server}/go")}));
    let tg = fake_telegram().await;
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);
    let env = [("TELEGRAM_BOT_TOKEN", TOKEN), ("TELEGRAM_ALLOWED_USERS", "1001")];
    let table =
        format!("[platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\n", tg.base_url());

    // A loopback address is refused, like web_fetch refuses it (whatever `web_allow_private` says).
    let home = tempfile::tempdir().unwrap();
    let llm = FakeLlm::builder().tool_calls(&[(call.0, &call.1)]).reply("tried").start().await;
    let d = start_daemon(home.path(), &config_for(&llm, &table), &env).await;
    tg.push_message(&chat, &ann, "fetch it");
    // The answer comes after the tool's result (a tool progress line may come first).
    assert!(eventually(WAIT, || tg.texts(chat.id).iter().any(|t| t.contains("tried"))).await);
    let result = llm.requests()[1].to_string();
    assert!(result.contains("only fetches public internet addresses"), "{result}");
    assert!(tg.uploads().is_empty());
    d.daemon.stop().await;
}
