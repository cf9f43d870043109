//! WhatsApp end to end, the delivery side: the 24-hour window (template sent, or a clear
//! failure on the receipt), a status that fails a sent reply later, and kill -9 of the real
//! binary mid-turn answered exactly once after the restart.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use super::support::fake_whatsapp::{FakeWhatsApp, PHONE_NUMBER_ID, webhook};
use super::support::{FakeLlm, eventually};
use super::{ANN, SECRET, TOKEN, VERIFY, WAIT, query, ready, settle, start, wa_config};

/// `hermesd send` as the running daemon of `home` gets it.
async fn admin_send(home: &std::path::Path, base: &str, target: &str, text: &str) -> (u16, serde_json::Value) {
    let response = super::support::client()
        .post(format!("{base}/admin/send"))
        .bearer_auth(super::support::local_key(home))
        .json(&json!({ "target": target, "text": text }))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_the_window_the_template_is_sent_and_the_receipt_says_why() {
    let llm = FakeLlm::echo().await;
    let fake = FakeWhatsApp::start(TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let config = wa_config(&llm, &fake, "reengage_template = \"hermes_reengage\"\nreengage_language = \"de\"");
    let d = start(home.path(), &config).await;
    assert!(ready(&d.base).await);
    let quiet = "15551230002";
    let (status, body) = admin_send(home.path(), &d.base, &format!("whatsapp:{quiet}"), "your report is ready").await;
    assert_ne!(status, 200, "{body}");
    assert!(body.to_string().contains("24-hour"), "{body}");
    let sent = fake.sent_to(quiet);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["type"], "template");
    assert_eq!(sent[0]["template"], json!({ "name": "hermes_reengage", "language": { "code": "de" } }));
    let rows = query(home.path(), "SELECT state, error, NULL FROM outbound_messages").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, "failed");
    assert!(rows[0].1.as_deref().is_some_and(|e| e.contains("hermes_reengage")), "{rows:?}");

    // The user answers the template: the window is open and replies flow.
    webhook::post(&d.base, SECRET, &webhook::text(quiet, "what report?").1).await;
    assert!(eventually(WAIT, || fake.texts(quiet) == ["echo: what report?"]).await, "{:?}", fake.sent_to(quiet));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_the_window_without_a_template_the_send_fails_clearly() {
    let llm = FakeLlm::echo().await;
    let fake = FakeWhatsApp::start(TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &wa_config(&llm, &fake, "")).await;
    assert!(ready(&d.base).await);
    let (status, body) = admin_send(home.path(), &d.base, "whatsapp:15551230002", "hello?").await;
    assert_ne!(status, 200, "{body}");
    assert!(body.to_string().contains("reengage_template"), "{body}");
    assert!(fake.sent().is_empty(), "nothing Meta would accept and fail later");
    let rows = query(home.path(), "SELECT state, error, NULL FROM outbound_messages").await;
    assert_eq!((rows[0].0.as_str(), rows.len()), ("failed", 1));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_meta_accepted_and_later_failed_is_recorded_as_failed() {
    let llm = FakeLlm::echo().await;
    let fake = FakeWhatsApp::start(TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &wa_config(&llm, &fake, "")).await;
    webhook::post(&d.base, SECRET, &webhook::text(ANN, "first").1).await;
    assert!(eventually(WAIT, || fake.texts(ANN).len() == 1).await);
    webhook::post(&d.base, SECRET, &webhook::text(ANN, "second").1).await;
    assert!(eventually(WAIT, || fake.texts(ANN).len() == 2).await);
    let ids: Vec<String> =
        fake.calls_to("messages").iter().map(|c| c.body["id"].as_str().unwrap().to_owned()).collect();
    for (id, status, code) in [
        (&ids[0], "delivered", None),
        (&ids[0], "read", None),
        (&ids[1], "sent", None),
        (&ids[1], "failed", Some(131_026)),
    ] {
        let (answer, body) = webhook::post(&d.base, SECRET, &webhook::status(ANN, id, status, code)).await;
        assert_eq!(answer, 200, "{body}");
    }
    let sql = "SELECT platform_message_id, state, delivery_status FROM outbound_messages ORDER BY id";
    let rows = query(home.path(), sql).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!((rows[0].1.as_deref(), rows[0].2.as_deref()), (Some("sent"), Some("read")));
    assert_eq!((rows[1].1.as_deref(), rows[1].2.as_deref()), (Some("failed"), Some("failed")), "{rows:?}");
    let errors = query(home.path(), "SELECT error, NULL, NULL FROM outbound_messages WHERE state = 'failed'").await;
    assert!(errors[0].0.contains("131026"), "{errors:?}");
    settle().await;
    assert_eq!(llm.count(), 2, "statuses start no turns");
    d.daemon.stop().await;
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn spawn(home: &std::path::Path) -> std::process::Child {
    let env = [
        ("WHATSAPP_ACCESS_TOKEN", TOKEN),
        ("WHATSAPP_APP_SECRET", SECRET),
        ("WHATSAPP_VERIFY_TOKEN", VERIFY),
        ("WHATSAPP_ALLOWED_USERS", "15552000001,15552000002,15552000003"),
    ];
    super::support::spawn_gateway_with_env(home, &env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_turn_answers_each_whatsapp_chat_exactly_once() {
    let llm = FakeLlm::builder().latency(Duration::from_millis(1500)).start().await;
    let fake = FakeWhatsApp::start(TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[agent]\ndrain_timeout = \"2s\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"fake\"\n\n[platforms.whatsapp]\nenabled = true\napi_url = \"{}\"\nphone_number_id = \"{PHONE_NUMBER_ID}\"\n",
        llm.base_url(),
        fake.api_url()
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let mut child = spawn(home.path());
    super::support::wait_ready(port, home.path()).await;
    let users = ["15552000001", "15552000002", "15552000003"];
    let mut notifications = Vec::new();
    for user in users {
        let notification = webhook::text(user, &format!("crash test {user}")).1;
        assert_eq!(webhook::post(&base, SECRET, &notification).await.0, 200);
        notifications.push(notification);
    }
    let log = || super::support::daemon_log(home.path());
    assert!(eventually(Duration::from_secs(15), || llm.count() == 3).await, "turns started; log:\n{}", log());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(fake.sent().is_empty(), "nothing was answered before the kill: {:?}", fake.sent());

    let mut child = spawn(home.path());
    super::support::wait_ready(port, home.path()).await;
    // Meta redelivers what it thinks unanswered; the store has it already.
    for notification in &notifications {
        assert_eq!(webhook::post(&base, SECRET, notification).await.0, 200);
    }
    let all = || users.iter().all(|u| !fake.texts(u).is_empty());
    assert!(eventually(Duration::from_secs(20), all).await, "{:?}\nlog:\n{}", fake.sent(), log());
    tokio::time::sleep(Duration::from_secs(2)).await;
    for user in users {
        assert_eq!(fake.texts(user), [format!("echo: crash test {user}")], "chat {user}");
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
