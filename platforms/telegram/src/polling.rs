//! Long polling: `getUpdates` in a loop, the offset kept as the platform's durable cursor.
//!
//! Invariant: the cursor moves past an update only after the ingress accepted its event (or the
//! update was ignored), so a crash or a refused accept never loses a message.

use std::time::Duration;

use hermesd_platform::{Backoff, PlatformContext, PlatformError};
use teloxide::prelude::*;
use teloxide::types::{AllowedUpdate, Update};
use teloxide::{ApiError, RequestError};
use tokio_util::sync::CancellationToken;

use crate::inbound::BotIdentity;
use crate::outbound::is_conflict;
use crate::{NAME, TelegramPlatform};

/// The update kinds the adapter asks for; everything else Telegram keeps to itself.
pub(crate) const ALLOWED_UPDATES: [AllowedUpdate; 4] =
    [AllowedUpdate::Message, AllowedUpdate::EditedMessage, AllowedUpdate::ChannelPost, AllowedUpdate::CallbackQuery];

/// Sleeps `delay`; `false` when cancelled first.
pub(crate) async fn sleep_or_cancel(delay: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        () = cancel.cancelled() => false,
        () = tokio::time::sleep(delay) => true,
    }
}

/// What ended the handling of a batch before its last update.
enum Stop {
    Cancelled,
    Retry,
}

/// Polls until cancelled. Returns an error only for a refused token.
pub(crate) async fn run(
    platform: &TelegramPlatform,
    bot: &Bot,
    identity: &BotIdentity,
    ctx: &PlatformContext,
    cancel: &CancellationToken,
) -> Result<(), PlatformError> {
    let mut backoff = Backoff::new();
    delete_webhook(platform, bot, cancel).await;
    let mut offset = loop {
        match ctx.ingress.load_cursor(NAME).await {
            Ok(cursor) => break cursor.and_then(|c| parse_cursor(&c)),
            Err(error) => {
                tracing::warn!(platform = NAME, %error, "cannot load the update offset; retrying");
                if !backoff.wait(cancel).await {
                    return Ok(());
                }
            }
        }
    };
    let timeout = u32::try_from(platform.settings.effective_poll_timeout().as_secs()).unwrap_or(u32::MAX);
    tracing::info!(platform = NAME, ?offset, "long polling started");
    loop {
        let mut request = bot.get_updates().timeout(timeout).allowed_updates(ALLOWED_UPDATES);
        if let Some(offset) = offset {
            request = request.offset(offset);
        }
        let polled = tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            polled = request.send() => polled,
        };
        let updates = match polled {
            Ok(updates) => updates,
            Err(error) => {
                if !poll_failed(platform, bot, &error, &mut backoff, cancel).await? {
                    return Ok(());
                }
                continue;
            }
        };
        platform.health.progressed();
        backoff.reset();
        match handle_batch(platform, bot, identity, ctx, &updates, &mut offset, cancel).await {
            Ok(()) => {}
            Err(Stop::Cancelled) => return Ok(()),
            Err(Stop::Retry) => {
                if !backoff.wait(cancel).await {
                    return Ok(());
                }
            }
        }
    }
}

/// Delivers a batch in order, saving the cursor after each update.
async fn handle_batch(
    platform: &TelegramPlatform,
    bot: &Bot,
    identity: &BotIdentity,
    ctx: &PlatformContext,
    updates: &[Update],
    offset: &mut Option<i32>,
    cancel: &CancellationToken,
) -> Result<(), Stop> {
    for update in updates {
        let Ok(id) = i32::try_from(update.id.0) else { continue };
        if offset.is_some_and(|offset| id < offset) {
            continue;
        }
        let next = id.saturating_add(1);
        let delivered = tokio::select! {
            () = cancel.cancelled() => return Err(Stop::Cancelled),
            delivered = platform.deliver(bot, identity, ctx, update) => delivered,
        };
        if let Err(error) = delivered {
            tracing::warn!(platform = NAME, update = id, %error, "ingress refused an update; retrying it");
            return Err(Stop::Retry);
        }
        if let Err(error) = ctx.ingress.save_cursor(NAME, &next.to_string()).await {
            tracing::warn!(platform = NAME, update = id, %error, "cannot save the update offset; retrying");
            return Err(Stop::Retry);
        }
        *offset = Some(next);
    }
    Ok(())
}

/// Records a failed poll and waits before the next; `Ok(false)` when cancelled meanwhile.
async fn poll_failed(
    platform: &TelegramPlatform,
    bot: &Bot,
    error: &RequestError,
    backoff: &mut Backoff,
    cancel: &CancellationToken,
) -> Result<bool, PlatformError> {
    let detail = platform.redactor.redact(&error.to_string());
    platform.health.failing(format!("getUpdates failing: {detail}"));
    match error {
        RequestError::Api(ApiError::InvalidToken) => {
            tracing::error!(platform = NAME, "telegram refused the bot token");
            return Err(PlatformError::Unauthorized("getUpdates: the bot token was refused".into()));
        }
        RequestError::RetryAfter(wait) => {
            let wait = hermesd_platform::clamp_retry_after(wait.duration());
            tracing::warn!(platform = NAME, retry_after = ?wait, "getUpdates rate limited");
            return Ok(sleep_or_cancel(wait, cancel).await);
        }
        RequestError::Api(ApiError::TerminatedByOtherGetUpdates) => {
            tracing::warn!(platform = NAME, "another process is polling this bot token; retrying");
        }
        error if is_conflict(error) => {
            tracing::warn!(platform = NAME, error = %detail, "a webhook is set for this bot; deleting it to poll");
            delete_webhook(platform, bot, cancel).await;
        }
        _ => tracing::warn!(platform = NAME, error = %detail, "getUpdates failed; retrying"),
    }
    Ok(backoff.wait(cancel).await)
}

/// Removes a webhook so `getUpdates` works; a failure shows up as a conflict on the next poll.
async fn delete_webhook(platform: &TelegramPlatform, bot: &Bot, cancel: &CancellationToken) {
    let deleted = tokio::select! {
        () = cancel.cancelled() => return,
        deleted = bot.delete_webhook().send() => deleted,
    };
    if let Err(error) = deleted {
        let error = platform.redactor.redact(&error.to_string());
        tracing::warn!(platform = NAME, %error, "deleteWebhook failed");
    }
}

/// The stored cursor is the next offset as a decimal string.
fn parse_cursor(cursor: &str) -> Option<i32> {
    let parsed = cursor.trim().parse().ok();
    if parsed.is_none() {
        tracing::warn!(platform = NAME, cursor, "ignoring an unreadable update offset");
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_parse_as_decimal_offsets() {
        assert_eq!(parse_cursor("1001"), Some(1001));
        assert_eq!(parse_cursor(" 7\n"), Some(7));
        assert_eq!(parse_cursor("u12"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_doubles_to_thirty_seconds_and_resets() {
        let cancel = CancellationToken::new();
        let mut backoff = Backoff::new();
        let mut waits = Vec::new();
        for _ in 0..7 {
            let started = tokio::time::Instant::now();
            assert!(backoff.wait(&cancel).await);
            waits.push(started.elapsed().as_secs());
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        backoff.reset();
        cancel.cancel();
        assert!(!backoff.wait(&cancel).await, "a cancelled wait says so");
    }
}
