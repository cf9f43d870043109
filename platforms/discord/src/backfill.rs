//! Catching up after a new gateway session: Discord replays missed dispatches only on RESUME, so
//! when serenity has to IDENTIFY again (an invalidated session, a zombie connection it replaced)
//! the adapter reads what it missed in recently active channels over REST.
//!
//! Everything read goes through the same normalise → accept path as a dispatch; the ingress
//! deduplicates by message id, so a message seen twice is still one event. Bounded: only channels
//! seen recently, a few pages each. It must never read channels the bot was not already in.

use hermesd_platform::{InboundEvent, PlatformContext};
use serenity::all::Message;
use tokio_util::sync::CancellationToken;

use crate::memo::Memo;
use crate::{DiscordPlatform, NAME};

/// Pages of 100 messages read per channel at most.
const MAX_PAGES: usize = 5;

/// Per channel: its guild (`None` for a DM) and the newest message id seen there.
pub(crate) type Recent = Memo<u64, (Option<u64>, u64)>;

/// Notes a message seen on the gateway, so a later catch-up starts after it.
pub(crate) fn seen(recent: &Recent, message: &Message) {
    let channel = message.channel_id.get();
    let newest = recent.get(&channel).map_or(0, |(_, id)| id);
    if message.id.get() > newest {
        recent.insert(channel, (message.guild_id.map(|g| g.get()), message.id.get()));
    }
}

/// Reads and handles every message newer than the last one seen, channel by channel.
pub(crate) async fn catch_up(platform: &DiscordPlatform, ctx: &PlatformContext, cancel: &CancellationToken) {
    let Ok(rest) = platform.rest() else { return };
    let channels = platform.recent.entries();
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
}

/// Gives a normalised event the sender's roles when the payload had no member.
pub(crate) fn set_roles(event: &mut InboundEvent, roles: Vec<u64>) {
    if let InboundEvent::Message { message, .. } = event
        && message.sender.roles.is_empty()
    {
        message.sender.roles = roles.iter().map(u64::to_string).collect();
    }
}
