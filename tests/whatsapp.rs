//! WhatsApp end to end: the real daemon (in-process, and the real binary for the crash test)
//! against the fake Graph API and the fake LLM — DMs answered, Meta's redeliveries answered once,
//! bad signatures refused with nothing stored, the verification handshake, pairing for unknown
//! numbers, approval buttons, the attachment cap, 429s waited out, the 24-hour window, statuses
//! that fail a sent reply later, a refused token on /readyz, and kill -9 mid-turn.
#![cfg(feature = "whatsapp")]

mod support;

#[path = "whatsapp/delivery.rs"]
mod delivery;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use support::fake_whatsapp::{FakeWhatsApp, PHONE_NUMBER_ID, webhook};
use support::{FakeLlm, TestDaemon, config_for, eventually, start_daemon};

const TOKEN: &str = "EAAtest-access-token";
const SECRET: &str = "test-app-secret";
const VERIFY: &str = "test-verify-token";
/// Allowed, written with the `+` in the allowlist (a `wa_id` has none).
const ANN: &str = "15551230001";
const WAIT: Duration = Duration::from_secs(15);

/// `[platforms.whatsapp]` pointing at `fake` with `settings` lines added.
fn wa_config(llm: &FakeLlm, fake: &FakeWhatsApp, settings: &str) -> String {
    let table = format!(
        "[platforms.whatsapp]\nenabled = true\napi_url = \"{}\"\nphone_number_id = \"{PHONE_NUMBER_ID}\"\n{settings}\n",
        fake.api_url()
    );
    config_for(llm, &table)
}

fn secrets() -> Vec<(&'static str, &'static str)> {
    vec![
        ("WHATSAPP_ACCESS_TOKEN", TOKEN),
        ("WHATSAPP_APP_SECRET", SECRET),
        ("WHATSAPP_VERIFY_TOKEN", VERIFY),
        ("WHATSAPP_ALLOWED_USERS", "+15551230001,15551230002"),
    ]
}

async fn start(home: &Path, config: &str) -> TestDaemon {
    start_daemon(home, config, &secrets()).await
}

/// Waits until `/readyz` answers 200 (the token check passed).
async fn ready(base: &str) -> bool {
    eventually_async(|| async {
        let response = support::client().get(format!("{base}/readyz")).send().await;
        response.is_ok_and(|r| r.status().as_u16() == 200)
    })
    .await
}

async fn eventually_async<F, Fut>(check: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..300 {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Lets a duplicate or a late turn show up before asserting there was none.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(700)).await;
}

/// One value from the daemon's store (read-only).
async fn query(home: &Path, sql: &'static str) -> Vec<(String, Option<String>, Option<String>)> {
    use sqlx::sqlite::SqliteConnectOptions;
    let options = SqliteConnectOptions::new().filename(home.join("state.db")).read_only(true);
    let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
    let rows = sqlx::query_as(sql).fetch_all(&pool).await.unwrap();
    pool.close().await;
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_is_answered_and_meta_s_redeliveries_run_nothing_twice() {
    let llm = FakeLlm::echo().await;
    let fake = FakeWhatsApp::start(TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &wa_config(&llm, &fake, "")).await;
    assert!(ready(&d.base).await, "the token check passed");
    let (wamid, notification) = webhook::text(ANN, "hello there");
    for _ in 0..3 {
        let (status, body) = webhook::post(&d.base, SECRET, &notification).await;
        assert_eq!(status, 200, "{body}");
    }
    assert!(eventually(WAIT, || !fake.texts(ANN).is_empty()).await, "{:?}", fake.calls());
    settle().await;
    assert_eq!(fake.texts(ANN), ["echo: hello there"]);
    assert_eq!(llm.count(), 1, "three deliveries of one wamid, one turn");
    let reply = &fake.sent_to(ANN)[0];
    assert_eq!((reply["messaging_product"].as_str(), reply["type"].as_str()), (Some("whatsapp"), Some("text")));
    let rows = query(home.path(), "SELECT event_id, state, NULL FROM inbound_events").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, wamid);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_signature_is_refused_and_nothing_is_stored() {
    let llm = FakeLlm::echo().await;
    let fake = FakeWhatsApp::start(TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &wa_config(&llm, &fake, "")).await;
    let (_, notification) = webhook::text(ANN, "forged");
    let body = notification.to_string().into_bytes();
    let forged = hermesd_whatsapp::sign("not-the-app-secret", &body);
    let tampered = hermesd_whatsapp::sign(SECRET, b"{\"other\":1}");
    for signature in [Some(forged.as_str()), Some(tampered.as_str()), None, Some("sha256=00")] {
        let (status, _) = webhook::post_with(&d.base, &body, signature).await;
        assert_eq!(status, 401, "{signature:?}");
    }
    settle().await;
    assert_eq!(llm.count(), 0);
    assert!(fake.sent().is_empty());
    assert!(query(home.path(), "SELECT event_id, NULL, NULL FROM inbound_events").await.is_empty());
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verification_handshake_echoes_the_challenge_for_the_right_token_only() {
    let llm = FakeLlm::echo().await;
    let fake = FakeWhatsApp::start(TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &wa_config(&llm, &fake, "")).await;
    assert_eq!(webhook::handshake(&d.base, VERIFY, "1158201444").await, (200, "1158201444".to_owned()));
    let (status, body) = webhook::handshake(&d.base, "guessed", "1158201444").await;
    assert_eq!(status, 403);
    assert!(!body.contains("1158201444"));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_number_gets_a_pairing_code_and_no_turn() {
    let llm = FakeLlm::echo().await;
    let fake = FakeWhatsApp::start(TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &wa_config(&llm, &fake, "")).await;
    let stranger = "15559990000";
    fake.add_media("MEDIA-EVE", "image/jpeg", &[1; 64]);
    let (_, image) =
        webhook::message(stranger, "image", serde_json::json!({ "id": "MEDIA-EVE", "mime_type": "image/jpeg" }));
    let (status, _) = webhook::post(&d.base, SECRET, &webhook::notification(stranger, "Eve", vec![image])).await;
    assert_eq!(status, 200);
    assert!(eventually(WAIT, || !fake.texts(stranger).is_empty()).await, "{:?}", fake.calls());
    let texts = fake.texts(stranger);
    assert!(texts[0].contains("pairing code"), "{texts:?}");
    assert!(texts[0].contains("hermesd pairing approve whatsapp"), "{texts:?}");
    settle().await;
    assert_eq!(llm.count(), 0);
    assert!(fake.calls_to("media_lookup").is_empty() && fake.calls_to("download").is_empty(), "nothing downloaded");
    assert!(query(home.path(), "SELECT event_id, NULL, NULL FROM inbound_events").await.is_empty());
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_button_pressed_lets_the_command_run() {
    let llm = FakeLlm::builder()
        .tool_calls(&[("terminal", r#"{"command":"git push --force origin x"}"#)])
        .reply("pushed (or tried)")
        .start()
        .await;
    let fake = FakeWhatsApp::start(TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &wa_config(&llm, &fake, "\n[tools]\napproval_timeout = \"20s\"")).await;
    webhook::post(&d.base, SECRET, &webhook::text(ANN, "force push please").1).await;
    let asked = || fake.calls_to("messages").into_iter().find(|c| c.body["payload"]["type"] == "interactive");
    assert!(eventually(WAIT, || asked().is_some()).await, "{:?}", fake.calls());
    let call = asked().unwrap();
    // Four choices are more than WhatsApp's three reply buttons: they come as a list.
    let interactive = &call.body["payload"]["interactive"];
    assert_eq!(interactive["type"], "list", "{interactive}");
    let rows = interactive["action"]["sections"][0]["rows"].as_array().unwrap();
    let ids: Vec<&str> = rows.iter().filter_map(|r| r["id"].as_str()).collect();
    use hermesd::turn::approvals::{APPROVE, APPROVE_ALWAYS, APPROVE_SESSION, DENY};
    assert_eq!(ids, [APPROVE, APPROVE_SESSION, APPROVE_ALWAYS, DENY]);
    let asked_id = call.body["id"].as_str().unwrap().to_owned();
    let (_, press) = webhook::button_reply(ANN, &asked_id, hermesd::turn::approvals::APPROVE, "Approve");
    assert_eq!(webhook::post(&d.base, SECRET, &press).await.0, 200);
    let finished = || fake.texts(ANN).iter().any(|t| t.contains("pushed (or tried)"));
    assert!(eventually(Duration::from_secs(20), finished).await, "{:?}", fake.texts(ANN));
    let requests = llm.requests();
    let result = requests[1]["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "tool").cloned();
    let result = result.and_then(|m| m["content"].as_str().map(str::to_owned)).unwrap_or_default();
    assert!(result.contains("exit code"), "the command ran: {result}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_are_downloaded_under_the_cap_and_a_larger_one_becomes_a_note() {
    let llm = FakeLlm::echo().await;
    let fake = FakeWhatsApp::start(TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &wa_config(&llm, &fake, "max_file_mb = 1")).await;
    fake.add_media("MEDIA-NOTE", "text/plain", b"the meeting moved to 3pm");
    fake.add_media("MEDIA-HUGE", "video/mp4", &vec![0; 1024 * 1024 + 1]);
    let (_, note) = webhook::message(
        ANN,
        "document",
        serde_json::json!({ "id": "MEDIA-NOTE", "mime_type": "text/plain", "filename": "note.txt", "caption": "read this" }),
    );
    webhook::post(&d.base, SECRET, &webhook::notification(ANN, "Ann", vec![note])).await;
    assert!(eventually(WAIT, || fake.texts(ANN).len() == 1).await, "{:?}", fake.calls());
    let (_, huge) = webhook::message(ANN, "video", serde_json::json!({ "id": "MEDIA-HUGE", "mime_type": "video/mp4" }));
    webhook::post(&d.base, SECRET, &webhook::notification(ANN, "Ann", vec![huge])).await;
    assert!(eventually(WAIT, || fake.texts(ANN).len() == 2).await, "{:?}", fake.calls());
    let saw = |needle: &str| llm.requests().iter().any(|r| r.to_string().contains(needle));
    assert!(saw("the meeting moved to 3pm"), "the document's text reached the model");
    assert!(saw("[file too large: video.mp4"), "the oversized video became a note");
    assert_eq!(fake.calls_to("download").len(), 1, "only the small file was downloaded");
    let saved = std::fs::read_dir(home.path().join("media/whatsapp").join(ANN)).unwrap().count();
    assert_eq!(saved, 1);
    d.daemon.stop().await;
}

fn payload_text(call: &Value) -> String {
    call["payload"]["text"]["body"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_waited_out_before_the_next_send() {
    let llm = FakeLlm::echo().await;
    let fake = FakeWhatsApp::start(TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &wa_config(&llm, &fake, "")).await;
    fake.fail_next("messages", 1, 429, 130_429, Some(2));
    webhook::post(&d.base, SECRET, &webhook::text(ANN, "slow down").1).await;
    assert!(eventually(WAIT, || !fake.texts(ANN).is_empty()).await, "{:?}", fake.calls());
    let calls = fake.calls_to("messages");
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        (payload_text(&calls[0].body), payload_text(&calls[1].body)),
        ("echo: slow down".into(), "echo: slow down".into())
    );
    let waited = calls[1].at.duration_since(calls[0].at);
    assert!(waited >= Duration::from_millis(1950), "the retry came {waited:?} after the 429 (Retry-After: 2)");
    settle().await;
    assert_eq!(fake.texts(ANN).len(), 1, "delivered once");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_fails_readiness_and_says_so() {
    let llm = FakeLlm::echo().await;
    let fake = FakeWhatsApp::start("EAAsome-other-token").await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &wa_config(&llm, &fake, "")).await;
    let refused = || async {
        let response = support::client().get(format!("{}/readyz", d.base)).send().await.unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        status == 503 && body.contains("whatsapp: the graph api refused the access token")
    };
    assert!(eventually_async(refused).await);
    let body = support::client().get(format!("{}/readyz", d.base)).send().await.unwrap().text().await.unwrap();
    assert!(!body.contains(TOKEN), "{body}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_numbers_are_two_accounts_each_verified_with_its_own_app_secret() {
    use support::fake_whatsapp::webhook::{for_number, post_signed_at};
    const WORK_NUMBER: &str = "208800112233";
    let (home_llm, work_llm) = (FakeLlm::echo().await, FakeLlm::echo().await);
    let home_fake = FakeWhatsApp::start(TOKEN).await;
    let work_fake = FakeWhatsApp::start_number("EAAwork-token", WORK_NUMBER).await;
    let home = tempfile::tempdir().unwrap();
    // The work number is an account of another app: its own token, app secret, Graph API and
    // profile; its webhooks come to /whatsapp/work/webhook.
    let work = format!(
        "[platforms.whatsapp.accounts.work]\nphone_number_id = \"{WORK_NUMBER}\"\napi_url = \"{}\"\n\
         access_token_env = \"WA_WORK_TOKEN\"\napp_secret_env = \"WA_WORK_SECRET\"\nprofile = \"work\"\n\n\
         [profiles.work.model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"work-model\"\n",
        work_fake.api_url(),
        work_llm.base_url()
    );
    let config = format!("{}\n{work}", wa_config(&home_llm, &home_fake, ""));
    let mut env = secrets();
    env.extend([("WA_WORK_TOKEN", "EAAwork-token"), ("WA_WORK_SECRET", "work-secret")]);
    let d = start_daemon(home.path(), &config, &env).await;
    assert!(ready(&d.base).await, "both numbers' tokens were checked");

    let (_, to_home) = webhook::text(ANN, "hello home");
    let (_, to_work) = webhook::text(ANN, "hello work");
    let to_work = for_number(to_work, WORK_NUMBER);
    let (status, _) = post_signed_at(&d.base, "/whatsapp/work/webhook", SECRET, &to_work).await;
    assert_eq!(status, 401, "the work number's path takes only the work app's signature");
    let (status, body) = webhook::post(&d.base, SECRET, &to_work).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = webhook::post(&d.base, SECRET, &to_home).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = post_signed_at(&d.base, "/whatsapp/work/webhook", "work-secret", &to_work).await;
    assert_eq!(status, 200, "{body}");

    let answered = || home_fake.texts(ANN).len() == 1 && work_fake.texts(ANN).len() == 1;
    assert!(eventually(WAIT, answered).await, "{:?} {:?}", home_fake.calls(), work_fake.calls());
    settle().await;
    assert_eq!(home_fake.texts(ANN), ["echo: hello home"], "the work number's message never reached the table's");
    assert_eq!(work_fake.texts(ANN), ["echo: hello work"], "answered once, from its own number");
    assert_eq!((home_llm.count(), work_llm.count()), (1, 1), "each on its own profile's model");
    let ready: Value = support::client().get(format!("{}/readyz", d.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(ready["platforms"], serde_json::json!({"whatsapp": "ok", "whatsapp@work": "ok"}), "{ready}");
    d.daemon.stop().await;
}
