//! Catching up after a new gateway session: Discord replays missed dispatches only on RESUME, so
//! when serenity has to IDENTIFY again (an invalidated session, a zombie connection it replaced, a
//! restart of the daemon) the adapter reads what it missed in recently active channels over REST.
//! The newest message seen per channel is kept as the platform's durable cursor, saved only after
//! the message was accepted (or ignored), so a restart catches up on the downtime too.
//!
//! Everything read goes through the same normalise → accept path as a dispatch; the ingress
//! deduplicates by message id, so a message seen twice is still one event. Bounded: only channels
//! seen recently, a few pages each. It must never read channels the bot was not already in.

use std::time::{Duration, Instant};

use hermesd_platform::{InboundEvent, PlatformContext};
use serenity::all::Message;
use tokio_util::sync::CancellationToken;

use crate::memo::Memo;
use crate::{DiscordPlatform, NAME};

/// Pages of 100 messages read per channel at most.
const MAX_PAGES: usize = 5;

/// A busy guild moves the cursor with every message; one write per this long is enough.
const SAVE_EVERY: Duration = Duration::from_secs(2);

/// Per channel: its guild (`None` for a DM) and the newest message id seen there.
pub(crate) type Recent = Memo<u64, (Option<u64>, u64)>;

/// Notes a message seen on the gateway, so a later catch-up starts after it. `true` when it is
/// the newest of its channel.
pub(crate) fn seen(recent: &Recent, message: &Message) -> bool {
    let channel = message.channel_id.get();
    let newest = recent.get(&channel).map_or(0, |(_, id)| id);
    let newer = message.id.get() > newest;
    if newer {
        recent.refresh(channel, (message.guild_id.map(|g| g.get()), message.id.get()));
    }
    newer
}

/// The cursor text: `[[channel, guild or 0, newest message], ...]`, oldest channel first.
pub(crate) fn encode(recent: &Recent) -> String {
    let rows: Vec<[u64; 3]> =
        recent.entries().into_iter().map(|(channel, (guild, newest))| [channel, guild.unwrap_or(0), newest]).collect();
    serde_json::to_string(&rows).unwrap_or_default()
}

/// Reads a cursor written by `encode`; anything unreadable is skipped.
pub(crate) fn decode(cursor: &str, recent: &Recent) {
    let rows: Vec<[u64; 3]> = serde_json::from_str(cursor).unwrap_or_default();
    for [channel, guild, newest] in rows {
        if channel > 0 && newest > 0 {
            recent.refresh(channel, (Some(guild).filter(|&g| g > 0), newest));
        }
    }
}

/// Loads the cursor saved by an earlier run.
pub(crate) async fn restore(platform: &DiscordPlatform, ctx: &PlatformContext) {
    match ctx.ingress.load_cursor(&platform.name).await {
        Ok(Some(cursor)) => decode(&cursor, &platform.recent),
        Ok(None) => {}
        Err(error) => tracing::warn!(platform = NAME, %error, "cannot load the discord cursor; no catch-up at start"),
    }
}

/// Saves the cursor, at most every `SAVE_EVERY` unless `force`. A cursor left a little behind
/// is safe: catching up re-reads those messages and the ingress refuses them as duplicates. A
/// failure only means a restart may miss what it would have caught up on.
pub(crate) async fn persist(platform: &DiscordPlatform, ctx: &PlatformContext, force: bool) {
    {
        let mut saved = platform.cursor_saved.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !force && saved.is_some_and(|at| at.elapsed() < SAVE_EVERY) {
            return;
        }
        *saved = Some(Instant::now());
    }
    if let Err(error) = ctx.ingress.save_cursor(&platform.name, &encode(&platform.recent)).await {
        tracing::warn!(platform = NAME, %error, "cannot save the discord cursor");
    }
}

/// Reads and handles every message newer than the last one seen, channel by channel.
pub(crate) async fn catch_up(platform: &DiscordPlatform, ctx: &PlatformContext, cancel: &CancellationToken) {
    let Ok(rest) = platform.rest() else { return };
    let channels = platform.recent.entries();
    if channels.is_empty() {
        return;
    }
    tracing::info!(platform = NAME, channels = channels.len(), "new gateway session; catching up on missed messages");
    for (channel, (guild, mut after)) in channels {
        for _ in 0..MAX_PAGES {
            if cancel.is_cancelled() {
                return;
            }
            let page = match rest.messages_after(channel, after).await {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!(platform = NAME, %error, "catching up failed for a channel");
                    break;
                }
            };
            let full = page.len() >= 100;
            for mut message in page {
                after = after.max(message.id.get());
                // REST messages carry neither guild nor member; the guild is known from the
                // channel, the roles are asked for.
                message.guild_id = guild.map(serenity::all::GuildId::new);
                let roles = match guild {
                    Some(guild) if !message.author.bot => platform.member_roles(guild, message.author.id.get()).await,
                    _ => Vec::new(),
                };
                platform.on_message_with_roles(ctx, &message, Some(roles), cancel).await;
            }
            if !full {
                break;
            }
        }
    }
    persist(platform, ctx, true).await;
}

/// Gives a normalised event the sender's roles when the payload had no member.
pub(crate) fn set_roles(event: &mut InboundEvent, roles: Vec<u64>) {
    if let InboundEvent::Message { message, .. } = event
        && message.sender.roles.is_empty()
    {
        message.sender.roles = roles.iter().map(u64::to_string).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_round_trips_and_skips_garbage() {
        let recent: Recent = Memo::new(8);
        recent.insert(10, (Some(5), 100));
        recent.insert(11, (None, 200));
        let cursor = encode(&recent);
        assert_eq!(cursor, "[[10,5,100],[11,0,200]]");
        let restored: Recent = Memo::new(8);
        decode(&cursor, &restored);
        assert_eq!(restored.entries(), recent.entries());
        let untouched: Recent = Memo::new(8);
        decode("not json", &untouched);
        decode("[[0,0,5],[7,0,0]]", &untouched);
        assert!(untouched.entries().is_empty());
    }
}
