//! Long polling: `getUpdates` in a loop, the offset kept as the platform's durable cursor.
//!
//! Invariant: the cursor moves past an update only after the ingress accepted its event (or the
//! update was ignored), so a crash or a refused accept never loses a message.
//!
//! An album (updates sharing a `media_group_id`) becomes one event. When an album ends a batch,
//! its later parts may come with the next poll, so it is held — the cursor stays before it and
//! the same updates are polled again — for up to `ALBUM_HOLD` (1 s) before it is delivered as it
//! is. The album's event carries every part's files; the caption's part decides text and
//! addressing, and the first part's id is the event id, so a re-polled album is a duplicate. In
//! webhook mode each part arrives alone and the router's batching joins them.

use std::time::Duration;

use hermesd_platform::{Backoff, PlatformContext, PlatformError};
use teloxide::prelude::*;
use teloxide::types::{AllowedUpdate, Update};
use teloxide::{ApiError, RequestError};
use tokio_util::sync::CancellationToken;

use crate::inbound::{self, BotIdentity};
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

/// How long an album at the end of a batch waits for parts still to come.
const ALBUM_HOLD: Duration = Duration::from_secs(1);
/// The pause before polling a held album again.
const ALBUM_REPOLL: Duration = Duration::from_millis(250);

/// What ended the handling of a batch before its last update.
enum Stop {
    Cancelled,
    Retry,
    /// The batch ends with an album that may go on; poll its updates again shortly.
    AlbumOpen,
}

/// The album held back at the end of the last batch, and since when.
struct Held {
    key: String,
    since: tokio::time::Instant,
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
        match ctx.ingress.load_cursor(&platform.name).await {
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
    let mut held = None;
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
        match handle_batch(platform, bot, identity, ctx, &updates, (&mut offset, &mut held), cancel).await {
            Ok(()) => {}
            Err(Stop::Cancelled) => return Ok(()),
            Err(Stop::AlbumOpen) => {
                if !sleep_or_cancel(ALBUM_REPOLL, cancel).await {
                    return Ok(());
                }
            }
            Err(Stop::Retry) => {
                if !backoff.wait(cancel).await {
                    return Ok(());
                }
            }
        }
    }
}

/// Delivers a batch in order (an album as one event), saving the cursor after each update or
/// album.
async fn handle_batch(
    platform: &TelegramPlatform,
    bot: &Bot,
    identity: &BotIdentity,
    ctx: &PlatformContext,
    updates: &[Update],
    (offset, held): (&mut Option<i32>, &mut Option<Held>),
    cancel: &CancellationToken,
) -> Result<(), Stop> {
    let fresh: Vec<(i32, &Update)> = updates
        .iter()
        .filter_map(|update| i32::try_from(update.id.0).ok().map(|id| (id, update)))
        .filter(|(id, _)| offset.is_none_or(|offset| *id >= offset))
        .collect();
    let mut at = 0;
    while at < fresh.len() {
        let album = inbound::album_key(fresh[at].1);
        let mut end = at + 1;
        if let Some(key) = &album {
            while end < fresh.len() && inbound::album_key(fresh[end].1).as_ref() == Some(key) {
                end += 1;
            }
            if end == fresh.len() {
                let since = match held {
                    Some(h) if &h.key == key => h.since,
                    _ => held.insert(Held { key: key.clone(), since: tokio::time::Instant::now() }).since,
                };
                if since.elapsed() < ALBUM_HOLD {
                    return Err(Stop::AlbumOpen);
                }
            }
        }
        let group: Vec<&Update> = fresh[at..end].iter().map(|(_, update)| *update).collect();
        let delivered = tokio::select! {
            () = cancel.cancelled() => return Err(Stop::Cancelled),
            delivered = async {
                match album {
                    Some(_) => platform.deliver_album(bot, identity, ctx, &group).await,
                    None => platform.deliver(bot, identity, ctx, group[0]).await,
                }
            } => delivered,
        };
        let (first, last) = (fresh[at].0, fresh[end - 1].0);
        if let Err(error) = delivered {
            tracing::warn!(platform = NAME, update = first, %error, "ingress refused an update; retrying it");
            return Err(Stop::Retry);
        }
        let next = last.saturating_add(1);
        if let Err(error) = ctx.ingress.save_cursor(&platform.name, &next.to_string()).await {
            tracing::warn!(platform = NAME, update = last, %error, "cannot save the update offset; retrying");
            return Err(Stop::Retry);
        }
        *offset = Some(next);
        if album.is_some() {
            *held = None;
        }
        at = end;
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
