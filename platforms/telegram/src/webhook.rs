//! Webhook mode: register the URL with `setWebhook`, then answer Telegram's POSTs.
//!
//! A request is answered 200 only after its event was accepted; anything else makes Telegram
//! deliver it again. Requests without the right secret header are refused before any parsing.

use hermesd_platform::{Backoff, PlatformContext, PlatformError, WebhookRequest, WebhookResponse};
use teloxide::prelude::*;
use teloxide::types::Update;
use teloxide::{ApiError, RequestError};
use tokio_util::sync::CancellationToken;

use crate::polling::ALLOWED_UPDATES;
use crate::{NAME, TelegramPlatform};

/// The header Telegram sends the `secret_token` in (lowercase, as the host passes headers).
pub(crate) const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// Registers `url` (unless empty), marks the adapter ready, then waits for cancel.
pub(crate) async fn run(
    platform: &TelegramPlatform,
    bot: &Bot,
    url: &str,
    secret: &str,
    cancel: &CancellationToken,
) -> Result<(), PlatformError> {
    if !url.is_empty() && !register(platform, bot, url, secret, cancel).await? {
        return Ok(());
    }
    platform.health.ready();
    tracing::info!(platform = NAME, registered = !url.is_empty(), "webhook mode ready");
    cancel.cancelled().await;
    Ok(())
}

/// Calls `setWebhook` until it works; `Ok(false)` when cancelled first.
async fn register(
    platform: &TelegramPlatform,
    bot: &Bot,
    url: &str,
    secret: &str,
    cancel: &CancellationToken,
) -> Result<bool, PlatformError> {
    let mut backoff = Backoff::new();
    loop {
        // Parsed here so the URL type is teloxide's own, which this crate cannot name.
        let request = match url.parse() {
            Ok(parsed) => bot.set_webhook(parsed),
            Err(error) => return Err(PlatformError::Permanent(format!("webhook url `{url}`: {error}"))),
        };
        let request = request.secret_token(secret).allowed_updates(ALLOWED_UPDATES);
        let outcome = tokio::select! {
            () = cancel.cancelled() => return Ok(false),
            outcome = request.send() => outcome,
        };
        match outcome {
            Ok(_) => return Ok(true),
            Err(RequestError::Api(ApiError::InvalidToken)) => {
                return Err(PlatformError::Unauthorized("setWebhook: the bot token was refused".into()));
            }
            Err(error) => {
                let error = platform.redactor.redact(&error.to_string());
                tracing::warn!(platform = NAME, %error, "setWebhook failed; retrying");
                platform.health.failing(format!("setWebhook failing: {error}"));
                if !backoff.wait(cancel).await {
                    return Ok(false);
                }
            }
        }
    }
}

/// Verifies, parses, normalises and accepts one webhook request.
pub(crate) async fn handle(
    platform: &TelegramPlatform,
    ctx: &PlatformContext,
    request: &WebhookRequest,
    secret: &str,
) -> WebhookResponse {
    let given = request.header(SECRET_HEADER).unwrap_or_default();
    // An empty configured secret would accept anyone: refuse everything instead.
    if secret.is_empty() || !constant_time_eq(given.as_bytes(), secret.as_bytes()) {
        return respond(401, "unauthorized");
    }
    let update: Update = match serde_json::from_slice(&request.body) {
        Ok(update) => update,
        Err(error) => {
            tracing::debug!(platform = NAME, %error, "webhook body is not an update");
            return respond(400, "bad update");
        }
    };
    platform.health.progressed();
    let (Ok(bot), Some(identity)) = (platform.bot(), platform.identity()) else {
        // getMe has not finished: without the bot's name mentions cannot be judged yet.
        return respond(503, "starting");
    };
    match platform.deliver(bot, &identity, ctx, &update).await {
        Ok(()) => respond(200, ""),
        Err(error) => {
            tracing::warn!(platform = NAME, update = update.id.0, %error, "ingress refused a webhook update");
            respond(503, "not stored")
        }
    }
}

fn respond(status: u16, body: &str) -> WebhookResponse {
    WebhookResponse { status, body: body.to_owned() }
}

/// Compares without an early exit, so the time taken does not reveal how much of a guess matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_exactly() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(!constant_time_eq(b"s3cret", b"s3creT"));
        assert!(!constant_time_eq(b"s3cret", b"s3cre"));
        assert!(constant_time_eq(b"", b""));
    }
}
