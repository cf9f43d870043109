//! Long polling: order, cursor discipline, refused accepts and conflicts.

use std::sync::Arc;
use std::time::Duration;

use hermesd_platform::{Ingress, Platform, PlatformContext, PlatformError};
use hermesd_telegram::TelegramPlatform;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::support::{FakeBotApi, FlakyIngress, dm_update, settings};

const WAIT: Duration = Duration::from_secs(10);

struct Running {
    fake: FakeBotApi,
    ingress: Arc<FlakyIngress>,
    platform: Arc<TelegramPlatform>,
    cancel: CancellationToken,
    run: JoinHandle<Result<(), PlatformError>>,
    _dir: tempfile::TempDir,
}

async fn start(fake: FakeBotApi, ingress: Arc<FlakyIngress>) -> Running {
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = Arc::new(TelegramPlatform::new(settings(&fake, dir.path())));
    let cancel = CancellationToken::new();
    let ctx = PlatformContext { ingress: ingress.clone() };
    let run = tokio::spawn({
        let (platform, cancel) = (platform.clone(), cancel.clone());
        async move { platform.run(ctx, cancel).await }
    });
    Running { fake, ingress, platform, cancel, run, _dir: dir }
}

impl Running {
    async fn stop(self) {
        assert!(!self.run.is_finished(), "run ended before cancel");
        self.cancel.cancel();
        let outcome = tokio::time::timeout(Duration::from_secs(2), self.run).await;
        assert!(matches!(outcome, Ok(Ok(Ok(())))), "run did not stop cleanly: {outcome:?}");
    }
}

#[tokio::test]
async fn updates_are_accepted_in_order_and_the_cursor_follows_each() {
    let fake = FakeBotApi::start().await;
    let ingress = FlakyIngress::new(0);
    ingress.save_cursor("telegram", "100").await.expect("seed the cursor");
    let from_bot = json!({"update_id": 101, "message": {"message_id": 2, "date": 1_700_000_000,
        "chat": {"id": 42, "type": "private", "first_name": "Ann"},
        "from": {"id": 5, "is_bot": true, "first_name": "Other"}, "text": "ignored"}});
    let stale = dm_update(99, 9, "already handled");
    fake.push_updates([stale, dm_update(100, 1, "one"), from_bot, dm_update(102, 3, "three")]);
    let running = start(fake, ingress).await;

    let events = running.ingress.inner.wait_for(2, WAIT).await;
    let ids: Vec<_> = events.iter().map(|e| e.event_id().to_owned()).collect();
    assert_eq!(ids, ["42:1", "42:3"]);
    let polls = running.fake.wait_calls("getUpdates", 2, WAIT).await;
    assert_eq!(polls[0]["offset"], 100, "the first poll starts at the stored cursor");
    assert_eq!(polls[1]["offset"], 103, "the next poll confirms the whole batch");
    let log = running.ingress.log();
    let want = ["cursor 100", "accept 42:1", "cursor 101", "cursor 102", "accept 42:3", "cursor 103"];
    assert_eq!(log, want, "each update's cursor is saved only after it was handled");
    assert_eq!(running.ingress.inner.cursor("telegram").as_deref(), Some("103"));
    let health = running.platform.health().expect("running");
    assert!(health.healthy && health.detail.starts_with("last poll"), "{health:?}");
    running.stop().await;
}

#[tokio::test]
async fn a_refused_accept_keeps_the_cursor_and_retries_the_same_update() {
    let fake = FakeBotApi::start().await;
    fake.push_updates([dm_update(7, 1, "one"), dm_update(8, 2, "two")]);
    let running = start(fake, FlakyIngress::new(1)).await;

    let events = running.ingress.inner.wait_for(2, WAIT).await;
    let ids: Vec<_> = events.iter().map(|e| e.event_id().to_owned()).collect();
    assert_eq!(ids, ["42:1", "42:2"], "nothing lost, order kept");
    let log = running.ingress.log();
    assert_eq!(log, ["refuse 42:1", "accept 42:1", "cursor 8", "accept 42:2", "cursor 9"]);
    let polls = running.fake.calls("getUpdates");
    assert!(polls.len() >= 2);
    assert_eq!(polls[0].get("offset"), None, "no cursor stored yet");
    assert_eq!(polls[1].get("offset"), None, "the refused update was not confirmed");
    running.stop().await;
}

#[tokio::test]
async fn a_409_conflict_is_retried_not_fatal() {
    let fake = FakeBotApi::start().await;
    let conflict = json!({"ok": false, "error_code": 409, "description":
        "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"});
    fake.answer_next("getUpdates", 1, 409, conflict);
    fake.push_updates([dm_update(1, 1, "after the conflict")]);
    let running = start(fake, FlakyIngress::new(0)).await;

    let events = running.ingress.inner.wait_for(1, WAIT).await;
    assert_eq!(events.len(), 1, "the update arrives once the conflict passes");
    assert!(running.fake.calls("getUpdates").len() >= 2);
    running.stop().await;
}

#[tokio::test]
async fn an_unknown_getme_failure_is_retried_until_it_works() {
    let fake = FakeBotApi::start().await;
    let limited = json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 1",
        "parameters": {"retry_after": 1}});
    fake.answer_next("getMe", 1, 429, limited);
    fake.push_updates([dm_update(1, 1, "hi")]);
    let running = start(fake, FlakyIngress::new(0)).await;
    assert_eq!(running.ingress.inner.wait_for(1, WAIT).await.len(), 1);
    assert_eq!(running.fake.calls("getMe").len(), 2);
    running.stop().await;
}

#[tokio::test]
async fn a_refused_token_ends_run_as_unauthorized() {
    let fake = FakeBotApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = hermesd_telegram::TelegramSettings { token: "999:wrong".into(), ..settings(&fake, dir.path()) };
    let platform = TelegramPlatform::new(settings);
    let ctx = PlatformContext { ingress: FlakyIngress::new(0) };
    let outcome = tokio::time::timeout(WAIT, platform.run(ctx, CancellationToken::new())).await;
    match outcome {
        Ok(Err(PlatformError::Unauthorized(detail))) => assert!(!detail.contains("999:wrong"), "{detail}"),
        other => panic!("expected Unauthorized, got {other:?}"),
    }
}
