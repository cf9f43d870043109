//! Signed webhooks end to end: GitHub and generic signatures accepted (202) with the rendered
//! prompt reaching the model and the reply reaching the route's target; tampered bodies, stale
//! timestamps and wrong secrets refused (401); repeats answered `duplicate` across a restart;
//! 404, 413 and 429; event filters; deliver-only routes that never call the model.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hermesd::daemon::DaemonOptions;
use hermesd::webhooks::signature::{sign_generic, sign_github};
use serde_json::{Value, json};
use support::recording_platform::RecordingPlatform;
use support::{FakeLlm, TestDaemon, client, config_for, eventually, start_daemon_with};

const SECRET: &str = "gh-secret-123";
const WAIT: Duration = Duration::from_secs(10);

const ROUTES: &str = r#"
[[webhooks]]
route = "github"
secret_env = "GITHUB_WEBHOOK_SECRET"
prompt = "GitHub {event_type} on {repository.full_name}: {head_commit.message}"
deliver = "rec:ops"
events = ["push"]
rate_limit_per_minute = 3

[[webhooks]]
route = "alerts"
secret_env = "GITHUB_WEBHOOK_SECRET"
prompt = "ALERT {alert.name} is {alert.state}"
deliver = "rec:oncall"
deliver_only = true
max_body_bytes = 2048
"#;

async fn daemon(home: &Path, llm: &FakeLlm, platform: &Arc<RecordingPlatform>) -> TestDaemon {
    let options = DaemonOptions { extra_platforms: vec![platform.clone() as Arc<_>], ..Default::default() };
    let env = [("GITHUB_WEBHOOK_SECRET", SECRET), ("REC_ALLOW_ALL_USERS", "true")];
    let d = start_daemon_with(home, &config_for(llm, ROUTES), &env, options).await;
    assert!(eventually(Duration::from_secs(2), || platform.started()).await);
    d
}

fn push(message: &str) -> Vec<u8> {
    json!({ "repository": { "full_name": "acme/rocket" }, "head_commit": { "message": message } })
        .to_string()
        .into_bytes()
}

async fn post(base: &str, route: &str, headers: &[(&str, String)], body: Vec<u8>) -> (u16, Value) {
    let mut request = client().post(format!("{base}/webhooks/{route}")).body(body);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn github(body: &[u8], delivery: &str, event: &str) -> Vec<(&'static str, String)> {
    vec![
        ("x-hub-signature-256", sign_github(SECRET.as_bytes(), body)),
        ("x-github-delivery", delivery.to_owned()),
        ("x-github-event", event.to_owned()),
    ]
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_github_push_runs_the_agent_and_the_reply_reaches_the_target() {
    let llm = FakeLlm::echo().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = daemon(home.path(), &llm, &platform).await;
    let body = push("fix the fins");
    let (status, answer) = post(&d.base, "github", &github(&body, "d-1", "push"), body).await;
    assert_eq!((status, answer["status"].as_str()), (202, Some("accepted")));
    assert!(eventually(WAIT, || !platform.sent().is_empty()).await);
    let (_, sent) = &platform.sent()[0];
    assert_eq!(sent.chat.chat_id, "ops");
    assert!(sent.text.starts_with("🔔 Webhook github"), "{}", sent.text);
    assert!(sent.text.ends_with("echo: GitHub push on acme/rocket: fix the fins"), "{}", sent.text);

    // A redelivery is a duplicate, now and after a restart, and never runs again.
    let body = push("fix the fins");
    let (status, answer) = post(&d.base, "github", &github(&body, "d-1", "push"), body.clone()).await;
    assert_eq!((status, answer["status"].as_str()), (200, Some("duplicate")));
    d.daemon.stop().await;
    let d = daemon(home.path(), &llm, &platform).await;
    let (status, _) = post(&d.base, "github", &github(&body, "d-1", "push"), body).await;
    assert_eq!(status, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(llm.count(), 1);
    assert_eq!(platform.sent().len(), 1);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_signatures_are_checked_over_timestamp_and_body() {
    let llm = FakeLlm::echo().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = daemon(home.path(), &llm, &platform).await;
    let body = json!({ "alert": { "name": "disk", "state": "firing" } }).to_string().into_bytes();
    let signed = |ts: i64, secret: &str, body: &[u8]| {
        vec![
            ("x-webhook-timestamp", ts.to_string()),
            ("x-webhook-signature", sign_generic(secret.as_bytes(), ts, body)),
            ("x-request-id", format!("r-{ts}")),
        ]
    };
    // Tampered body, stale timestamp, wrong secret, no signature at all: 401.
    let mut tampered = body.clone();
    tampered[5] ^= 1;
    assert_eq!(post(&d.base, "alerts", &signed(now(), SECRET, &body), tampered).await.0, 401);
    assert_eq!(post(&d.base, "alerts", &signed(now() - 600, SECRET, &body), body.clone()).await.0, 401);
    assert_eq!(post(&d.base, "alerts", &signed(now(), "not-the-secret", &body), body.clone()).await.0, 401);
    assert_eq!(post(&d.base, "alerts", &[], body.clone()).await.0, 401);
    assert_eq!(post(&d.base, "nope", &signed(now(), SECRET, &body), body.clone()).await.0, 404);

    // Valid: a deliver-only route sends the rendered template without asking the model.
    let (status, _) = post(&d.base, "alerts", &signed(now(), SECRET, &body), body.clone()).await;
    assert_eq!(status, 202);
    assert!(eventually(WAIT, || !platform.sent().is_empty()).await);
    let (_, sent) = &platform.sent()[0];
    assert_eq!(sent.chat.chat_id, "oncall");
    assert!(sent.text.ends_with("ALERT disk is firing"), "{}", sent.text);
    assert_eq!(llm.count(), 0);

    // Over the route's body cap: 413, whatever the signature.
    let big = vec![b' '; 4096];
    assert_eq!(post(&d.base, "alerts", &signed(now(), SECRET, &big), big).await.0, 413);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_delivery_replayed_under_another_delivery_id_is_a_duplicate() {
    let llm = FakeLlm::echo().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = daemon(home.path(), &llm, &platform).await;
    // GitHub signs only the body: the delivery id header is anyone's to change.
    let body = push("ship it");
    let (status, _) = post(&d.base, "github", &github(&body, "d-10", "push"), body.clone()).await;
    assert_eq!(status, 202);
    let (status, answer) = post(&d.base, "github", &github(&body, "d-11", "push"), body).await;
    assert_eq!((status, answer["status"].as_str()), (200, Some("duplicate")), "{answer}");
    // The generic scheme signs timestamp and body; within the window, a new id changes nothing.
    let body = json!({ "alert": { "name": "cpu", "state": "firing" } }).to_string().into_bytes();
    let ts = now();
    let signed = |id: &str| {
        vec![
            ("x-webhook-timestamp", ts.to_string()),
            ("x-webhook-signature", sign_generic(SECRET.as_bytes(), ts, &body)),
            ("x-webhook-id", id.to_owned()),
        ]
    };
    assert_eq!(post(&d.base, "alerts", &signed("w-1"), body.clone()).await.0, 202);
    let (status, answer) = post(&d.base, "alerts", &signed("w-2"), body.clone()).await;
    assert_eq!((status, answer["status"].as_str()), (200, Some("duplicate")), "{answer}");
    assert!(eventually(WAIT, || platform.sent().len() >= 2).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(llm.count(), 1, "the push ran once");
    assert_eq!(platform.sent().len(), 2, "one reply for the push, one alert");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_bad_json_and_the_rate_limit() {
    let llm = FakeLlm::echo().await;
    let platform = RecordingPlatform::new(4096);
    let home = tempfile::tempdir().unwrap();
    let d = daemon(home.path(), &llm, &platform).await;
    let body = push("x");
    let (status, answer) = post(&d.base, "github", &github(&body, "d-i", "issues"), body).await;
    assert_eq!((status, answer["status"].as_str()), (200, Some("ignored")));
    let garbage = b"{not json".to_vec();
    assert_eq!(post(&d.base, "github", &github(&garbage, "d-g", "push"), garbage).await.0, 400);
    // The route runs three a minute (the ignored and the malformed ones did not count); the
    // fourth answers 429 with Retry-After.
    let mut statuses = Vec::new();
    for i in 0..3 {
        let body = push(&format!("commit {i}"));
        statuses.push(post(&d.base, "github", &github(&body, &format!("d-r{i}"), "push"), body).await.0);
    }
    assert_eq!(statuses, [202, 202, 202]);
    let body = push("late");
    let response = client()
        .post(format!("{}/webhooks/github", d.base))
        .header("x-hub-signature-256", sign_github(SECRET.as_bytes(), &body))
        .header("x-github-event", "push")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 429);
    let retry_after: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after));
    assert!(eventually(WAIT, || platform.sent().len() == 3).await);
    d.daemon.stop().await;
}
