//! Webhook mode: registration, the secret header, and answering only after accept.

use std::sync::Arc;
use std::time::Duration;

use hermesd_platform::{Platform, PlatformContext, WebhookRequest};
use hermesd_telegram::{TelegramMode, TelegramPlatform};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{FakeBotApi, FlakyIngress, dm_update, settings};

const SECRET: &str = "s3cret-token_X";
const URL: &str = "https://bot.example.com/telegram/webhook";

fn request(secret: Option<&str>, body: &str) -> WebhookRequest {
    let headers = secret.map(|s| ("x-telegram-bot-api-secret-token".to_owned(), s.to_owned())).into_iter().collect();
    WebhookRequest { headers, body: body.as_bytes().to_vec() }
}

#[tokio::test]
async fn webhook_requests_are_verified_and_answered_after_accept() {
    let fake = FakeBotApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mode = TelegramMode::Webhook { url: URL.into(), secret: SECRET.into() };
    let platform =
        Arc::new(TelegramPlatform::new(hermesd_telegram::TelegramSettings { mode, ..settings(&fake, dir.path()) }));
    assert_eq!(platform.webhook_path().as_deref(), Some("/telegram/webhook"));
    let ingress = FlakyIngress::new(0);
    let ctx = PlatformContext { ingress: ingress.clone() };
    let update = dm_update(5, 77, "hello").to_string();

    let early = platform.handle_webhook(&ctx, request(Some(SECRET), &update)).await;
    assert_eq!(early.status, 503, "before getMe the bot cannot judge mentions");

    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (platform, ctx, cancel) = (platform.clone(), ctx.clone(), cancel.clone());
        async move { platform.run(ctx, cancel).await }
    });
    let registered = fake.wait_calls("setWebhook", 1, Duration::from_secs(5)).await;
    assert_eq!(registered.len(), 1);
    assert_eq!(registered[0]["url"], URL);
    assert_eq!(registered[0]["secret_token"], SECRET);
    assert_eq!(
        registered[0]["allowed_updates"],
        json!(["message", "edited_message", "channel_post", "callback_query"])
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !platform.health().is_some_and(|h| h.healthy) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(platform.health().is_some_and(|h| h.healthy), "{:?}", platform.health());

    let table = [
        ("no secret", request(None, &update), 401),
        ("wrong secret", request(Some("s3cret-token_Y"), &update), 401),
        ("bad json", request(Some(SECRET), "{not json"), 400),
        ("new update", request(Some(SECRET), &update), 200),
        ("redelivered update", request(Some(SECRET), &update), 200),
        ("ignored update", request(Some(SECRET), &json!({"update_id": 6, "poll": {}}).to_string()), 200),
    ];
    for (name, request, want) in table {
        let response = platform.handle_webhook(&ctx, request).await;
        assert_eq!(response.status, want, "{name}");
    }
    assert_eq!(ingress.inner.events().len(), 1);
    assert_eq!(ingress.inner.duplicates(), 1);
    assert!(fake.calls("getUpdates").is_empty(), "webhook mode never polls");

    cancel.cancel();
    let stopped = tokio::time::timeout(Duration::from_secs(2), run).await;
    assert!(matches!(stopped, Ok(Ok(Ok(())))), "{stopped:?}");
}

#[tokio::test]
async fn a_refused_accept_answers_503_so_telegram_retries() {
    let fake = FakeBotApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mode = TelegramMode::Webhook { url: String::new(), secret: SECRET.into() };
    let platform =
        Arc::new(TelegramPlatform::new(hermesd_telegram::TelegramSettings { mode, ..settings(&fake, dir.path()) }));
    let ingress = FlakyIngress::new(1);
    let ctx = PlatformContext { ingress: ingress.clone() };
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (platform, ctx, cancel) = (platform.clone(), ctx.clone(), cancel.clone());
        async move { platform.run(ctx, cancel).await }
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !platform.health().is_some_and(|h| h.healthy) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(fake.calls("setWebhook").is_empty(), "an empty url is registered by the operator");

    let update = dm_update(5, 77, "hello").to_string();
    let refused = platform.handle_webhook(&ctx, request(Some(SECRET), &update)).await;
    assert_eq!(refused.status, 503);
    let retried = platform.handle_webhook(&ctx, request(Some(SECRET), &update)).await;
    assert_eq!(retried.status, 200);
    assert_eq!(ingress.log(), ["refuse 42:77", "accept 42:77"]);
    cancel.cancel();
    assert!(tokio::time::timeout(Duration::from_secs(2), run).await.is_ok());
}
