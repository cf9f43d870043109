//! hermesd-discord: the Discord adapter (gateway websocket in, REST calls out) on serenity.
//!
//! A thin translator: it normalises dispatches, hands them to the host's ingress and sends what
//! the host gives it. Allowlists, pairing, dedup, pacing and chunking are the host's; serenity
//! stays behind `rest.rs` and `gateway.rs`; the bot token never appears in a log line or an error.
//!
//! An interaction (a button press) is acknowledged only after its action was accepted; a stranger's
//! is left unacknowledged. The Discord cursor advances only past accepted or ignored messages
//! (`backfill.rs`).

mod backfill;
mod config;
/// Fuzz target entry points (tests/fuzz); cargo-afl builds with `--cfg fuzzing`.
#[cfg(any(fuzzing, test))]
pub mod fuzzing;
mod gateway;
mod health;
mod inbound;
mod media;
mod memo;
mod outbound;
mod rest;
mod section;
mod upload;

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use hermesd_platform::{
    Accepted, Admission, Capabilities, ChatRef, FileLimits, InboundEvent, LengthUnit, MarkdownDialect, MessageRef,
    OutboundFile, OutboundKind, OutboundMessage, Platform, PlatformContext, PlatformError, PlatformHealth,
};
use serenity::all::{ComponentInteraction, Event, Interaction, Message};
use tokio_util::sync::CancellationToken;

pub use config::{DiscordSettings, Reactions, is_snowflake};
pub use section::DiscordConfig;

use health::HealthTracker;
use hermesd_platform::media::MediaDir;
use inbound::{BotIdentity, Place, Rules};
use media::MediaStore;
use memo::Memo;
use outbound::{TypingThrottle, edit_body, id, message_body, nonce};
use rest::{BotUser, ChannelInfo, ChannelKind, Rest};

/// The platform name in chat refs and session keys.
pub const NAME: &str = "discord";

/// How many channels, threads, messages and guilds the adapter remembers.
const MEMORY: usize = 4096;

/// The Discord platform adapter.
pub struct DiscordPlatform {
    /// `discord`, or `discord@<account>`.
    name: String,
    settings: DiscordSettings,
    /// `Err` when the HTTP client cannot be built; `run` and every call report it.
    rest: Result<Rest, String>,
    rules: Rules,
    media: MediaStore,
    /// Learnt from `users/@me` when `run` starts.
    me: Mutex<Option<BotUser>>,
    health: HealthTracker,
    typing: TypingThrottle,
    channels: Memo<u64, ChannelInfo>,
    /// Message id → the thread the adapter opened on it.
    threads: Memo<u64, u64>,
    /// Message id → the channel it was posted in (replies and reactions need it).
    origins: Memo<u64, u64>,
    /// Guild id → the bot's roles there.
    roles: Memo<u64, Vec<u64>>,
    /// Channels seen recently and their newest message, for catching up after a new session.
    recent: backfill::Recent,
    /// When the cursor (`recent`) was last saved.
    cursor_saved: Mutex<Option<std::time::Instant>>,
}

impl DiscordPlatform {
    /// Builds the adapter; no network until `run`. Run [`DiscordSettings::validate`] first.
    pub fn new(settings: DiscordSettings) -> Self {
        Self {
            name: hermesd_platform::section::instance_name(NAME, settings.account.as_deref()),
            rest: Rest::new(&settings.token, &settings.api_url),
            rules: Rules::from_settings(&settings),
            media: MediaStore { media: MediaDir::new(settings.media_dir.clone(), settings.max_file_bytes) },
            me: Mutex::new(None),
            // Discord heartbeats every ~41 s; three missed in a row is a dead connection.
            health: HealthTracker::new(Duration::from_secs(150)),
            typing: TypingThrottle::new(settings.typing_interval),
            channels: Memo::new(MEMORY),
            threads: Memo::new(MEMORY),
            origins: Memo::new(MEMORY),
            roles: Memo::new(MEMORY),
            // Catching up reads each of these channels: keep it to the recently active ones.
            recent: Memo::new(64),
            cursor_saved: Mutex::new(None),
            settings,
        }
    }

    pub(crate) fn rest(&self) -> Result<&Rest, PlatformError> {
        self.rest.as_ref().map_err(|error| PlatformError::Permanent(error.clone()))
    }

    fn me(&self) -> Option<BotUser> {
        self.me.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Asks who the bot is until Discord answers; `Ok(None)` when cancelled first.
    async fn identify(&self, rest: &Rest, cancel: &CancellationToken) -> Result<Option<BotUser>, PlatformError> {
        let mut backoff = hermesd_platform::Backoff::new();
        loop {
            let outcome = tokio::select! {
                () = cancel.cancelled() => return Ok(None),
                outcome = rest.current_user() => outcome,
            };
            match outcome {
                Ok(user) => {
                    tracing::info!(platform = NAME, bot = %user.name, "connected to discord");
                    *self.me.lock().unwrap_or_else(PoisonError::into_inner) = Some(user.clone());
                    return Ok(Some(user));
                }
                Err(PlatformError::Unauthorized(_)) => {
                    tracing::error!(platform = NAME, "discord refused the bot token");
                    return Err(PlatformError::Unauthorized("users/@me: the bot token was refused".into()));
                }
                Err(error) => {
                    tracing::warn!(platform = NAME, %error, "users/@me failed; retrying");
                    self.health.failing(format!("users/@me failing: {error}"));
                    if !backoff.wait(cancel).await {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Handles one dispatch from the gateway.
    async fn handle(&self, ctx: &PlatformContext, event: Event, cancel: &CancellationToken) {
        match event {
            Event::Ready(_) => {
                tracing::info!(platform = NAME, "gateway session ready");
                backfill::catch_up(self, ctx, cancel).await;
            }
            Event::Resumed(_) => tracing::info!(platform = NAME, "gateway session resumed"),
            Event::MessageCreate(created) => self.on_message(ctx, &created.message, cancel).await,
            Event::InteractionCreate(created) => {
                if let Interaction::Component(press) = created.interaction {
                    self.on_press(ctx, &press, cancel).await;
                }
            }
            _ => {}
        }
    }

    async fn on_message(&self, ctx: &PlatformContext, message: &Message, cancel: &CancellationToken) {
        self.on_message_with_roles(ctx, message, None, cancel).await;
    }

    /// Handles a message; `sender_roles` are the sender's when the payload came without a member (a
    /// message read over REST).
    pub(crate) async fn on_message_with_roles(
        &self,
        ctx: &PlatformContext,
        message: &Message,
        sender_roles: Option<Vec<u64>>,
        cancel: &CancellationToken,
    ) {
        // The cursor moves past a message only once it was accepted or ignored.
        if self.handle_message(ctx, message, sender_roles, cancel).await && backfill::seen(&self.recent, message) {
            backfill::persist(self, ctx, false).await;
        }
    }

    /// `false` when the message could not be handed over (cancelled while the ingress refused).
    async fn handle_message(
        &self,
        ctx: &PlatformContext,
        message: &Message,
        sender_roles: Option<Vec<u64>>,
        cancel: &CancellationToken,
    ) -> bool {
        let (Ok(rest), Some(me)) = (self.rest(), self.me()) else { return false };
        let place = self.place(rest, message.guild_id.map(|g| g.get()), message.channel_id.get(), me.id).await;
        let roles = match message.guild_id {
            Some(guild) => self.bot_roles(rest, guild.get(), me.id).await,
            None => Vec::new(),
        };
        let bot = BotIdentity { id: me.id, name: me.name.clone(), roles };
        let Some(mut normalised) = inbound::normalise_message(message, place, &bot, &self.rules) else {
            tracing::debug!(platform = NAME, message = message.id.get(), "message ignored");
            return true;
        };
        if let Some(sender_roles) = sender_roles {
            backfill::set_roles(&mut normalised.event, sender_roles);
        }
        // Chats are the adapter's: each bot's DM with one person is a chat of its own.
        normalised.event.chat_mut().platform.clone_from(&self.name);
        let channel = message.channel_id.get();
        let message_id = message.id.get();
        // A stranger costs one access check: no thread opened, no download, nothing stored.
        match admit(ctx, &normalised.event, cancel).await {
            Some(Admission::Admit) => {}
            Some(admission) => {
                tracing::debug!(platform = NAME, message = message_id, ?admission, "message from an unknown sender");
                return true;
            }
            None => return false,
        }
        if normalised.open_thread
            && let Some(thread) = self.open_thread(rest, channel, message_id, &message.content, me.id).await
        {
            inbound::move_into_thread(&mut normalised.event, thread);
        }
        self.media.fetch_all(rest, &mut normalised).await;
        self.origins.insert(message_id, channel);
        let accepted = accept(ctx, normalised.event, cancel).await;
        tracing::debug!(platform = NAME, message = message_id, ?accepted, "message accepted");
        if accepted == Some(Accepted::New)
            && let Some(emoji) = &self.settings.reactions.received
        {
            self.react(rest, channel, message_id, emoji).await;
        }
        accepted.is_some()
    }

    async fn on_press(&self, ctx: &PlatformContext, press: &ComponentInteraction, cancel: &CancellationToken) {
        let (Ok(rest), Some(me)) = (self.rest(), self.me()) else { return };
        let place = self.place(rest, press.guild_id.map(|g| g.get()), press.channel_id.get(), me.id).await;
        let Some(mut event) = inbound::normalise_press(press, place) else { return };
        event.chat_mut().platform.clone_from(&self.name);
        match admit(ctx, &event, cancel).await {
            Some(Admission::Admit) => {}
            // A stranger's press is left unacknowledged: Discord shows them it failed.
            _ => return,
        }
        // Acknowledged only once stored: an unacknowledged press shows the user it failed.
        if accept(ctx, event, cancel).await.is_none() {
            return;
        }
        if let Err(error) = rest.ack_interaction(press.id.get(), &press.token).await {
            tracing::debug!(platform = NAME, %error, "interaction acknowledgement failed");
        }
    }

    /// Where a message was: a DM, a text channel or a thread. A channel that cannot be looked up
    /// is treated as a text channel, the strictest guild case.
    async fn place(&self, rest: &Rest, guild: Option<u64>, channel: u64, bot: u64) -> Place {
        if guild.is_none() {
            return Place::Dm;
        }
        let info = match self.channels.get(&channel) {
            Some(info) => Some(info),
            None => match rest.channel(channel).await {
                Ok(info) => {
                    self.channels.insert(channel, info.clone());
                    Some(info)
                }
                Err(error) => {
                    tracing::warn!(platform = NAME, %error, "channel lookup failed; treating it as a text channel");
                    None
                }
            },
        };
        match info {
            Some(ChannelInfo { kind: ChannelKind::Thread, parent_id, owner_id }) => {
                Place::Thread { parent: parent_id, bot_owned: owner_id == Some(bot) }
            }
            Some(ChannelInfo { kind: ChannelKind::Dm, .. }) => Place::Dm,
            _ => Place::Channel,
        }
    }

    async fn bot_roles(&self, rest: &Rest, guild: u64, bot: u64) -> Vec<u64> {
        if let Some(roles) = self.roles.get(&guild) {
            return roles;
        }
        match rest.member_roles(guild, bot).await {
            Ok(roles) => {
                self.roles.insert(guild, roles.clone());
                roles
            }
            Err(error) => {
                tracing::debug!(platform = NAME, %error, "cannot read the bot's roles; role mentions ignored");
                Vec::new()
            }
        }
    }

    /// A member's roles in a guild, or none when Discord cannot say.
    pub(crate) async fn member_roles(&self, guild: u64, user: u64) -> Vec<u64> {
        let Ok(rest) = self.rest() else { return Vec::new() };
        rest.member_roles(guild, user).await.unwrap_or_else(|error| {
            tracing::debug!(platform = NAME, %error, "cannot read a member's roles");
            Vec::new()
        })
    }

    /// Opens (or finds, for a replayed dispatch) the thread for a mention; `None` keeps the
    /// conversation in the channel.
    async fn open_thread(&self, rest: &Rest, channel: u64, message: u64, text: &str, bot: u64) -> Option<u64> {
        if let Some(thread) = self.threads.get(&message) {
            return Some(thread);
        }
        match rest.start_thread(channel, message, &thread_name(text)).await {
            Ok(thread) => {
                self.threads.insert(message, thread);
                let info = ChannelInfo { kind: ChannelKind::Thread, parent_id: Some(channel), owner_id: Some(bot) };
                self.channels.insert(thread, info);
                Some(thread)
            }
            Err(error) => {
                tracing::warn!(platform = NAME, %error, "cannot open a thread; answering in the channel");
                None
            }
        }
    }

    /// `POST /channels/{id}/messages` for `message`, carrying `nonce` (enforced) when given.
    async fn create(&self, message: &OutboundMessage, nonce: Option<&str>) -> Result<MessageRef, PlatformError> {
        let rest = self.rest()?;
        let channel = id(&message.chat.chat_id, "chat id")?;
        let original = message.reply_to.as_deref().and_then(|reply| reply.parse::<u64>().ok());
        // A reply reference must point into the same channel; the message a thread was opened on
        // lives in the parent channel.
        let reference =
            original.filter(|&reply| self.origins.get(&reply).map_or(reply != channel, |origin| origin == channel));
        let mut body = message_body(message, reference)?;
        if let Some(nonce) = nonce {
            body["nonce"] = nonce.into();
            body["enforce_nonce"] = true.into();
        }
        let sent = rest.create_message(channel, &body).await?;
        self.mark_finished(rest, message, channel).await;
        Ok(MessageRef { chat: message.chat.clone(), message_id: sent.to_string() })
    }

    /// After the last chunk of a reply (or an error) reached `channel`: the configured reaction
    /// on the user's message.
    async fn mark_finished(&self, rest: &Rest, message: &OutboundMessage, channel: u64) {
        let last = message.chunk.0 + 1 >= message.chunk.1;
        let original = message.reply_to.as_deref().and_then(|reply| reply.parse::<u64>().ok());
        let emoji = match message.kind {
            OutboundKind::Reply => self.settings.reactions.done.as_ref(),
            OutboundKind::Error => self.settings.reactions.failed.as_ref(),
            OutboundKind::Notice | OutboundKind::Progress => None,
        };
        if last && let (Some(emoji), Some(reply)) = (emoji, original) {
            let origin = self.origins.get(&reply).unwrap_or(channel);
            self.react(rest, origin, reply, emoji).await;
        }
    }

    async fn react(&self, rest: &Rest, channel: u64, message: u64, emoji: &str) {
        if let Err(error) = rest.react(channel, message, emoji).await {
            tracing::debug!(platform = NAME, %error, "reaction failed");
        }
    }
}

/// Asks the ingress to admit an event's sender, retrying while it cannot decide: Discord will not
/// deliver the event again. `None` when cancelled first.
async fn admit(ctx: &PlatformContext, event: &InboundEvent, cancel: &CancellationToken) -> Option<Admission> {
    let mut backoff = hermesd_platform::Backoff::new();
    loop {
        match ctx.ingress.admit(event).await {
            Ok(admission) => return Some(admission),
            Err(error) => {
                tracing::warn!(platform = NAME, %error, "ingress could not check a discord sender; retrying");
                if !backoff.wait(cancel).await {
                    return None;
                }
            }
        }
    }
}

/// Hands an event to the ingress, retrying while it refuses: Discord will not deliver it again.
/// `None` when cancelled first.
async fn accept(ctx: &PlatformContext, event: InboundEvent, cancel: &CancellationToken) -> Option<Accepted> {
    let mut backoff = hermesd_platform::Backoff::new();
    loop {
        match ctx.ingress.accept(event.clone()).await {
            Ok(accepted) => return Some(accepted),
            Err(error) => {
                tracing::warn!(platform = NAME, %error, "ingress refused a discord event; retrying");
                if !backoff.wait(cancel).await {
                    return None;
                }
            }
        }
    }
}

/// A thread name from the message: its first line without mentions, at most 80 characters.
fn thread_name(text: &str) -> String {
    let words: Vec<&str> =
        text.split_whitespace().filter(|word| !(word.starts_with("<@") && word.ends_with('>'))).collect();
    let name: String = words.join(" ").chars().take(80).collect();
    if name.trim().is_empty() { "hermes".to_owned() } else { name }
}

#[async_trait]
impl Platform for DiscordPlatform {
    fn name(&self) -> &str {
        &self.name
    }

    async fn probe(&self) -> Option<Result<String, String>> {
        let rest = match self.rest() {
            Ok(rest) => rest,
            Err(error) => return Some(Err(error.to_string())),
        };
        Some(match tokio::time::timeout(hermesd_platform::PROBE_TIMEOUT, rest.current_user()).await {
            Err(_) => Err("users/@me: no answer in 15 s (is discord.com reachable?)".into()),
            Ok(Ok(me)) => Ok(format!("{} ({})", me.name, me.id)),
            Ok(Err(PlatformError::Unauthorized(_))) => {
                Err("users/@me: the bot token was refused (Developer Portal → Bot → Reset Token)".into())
            }
            Ok(Err(error)) => Err(format!("users/@me: {error}")),
        })
    }

    fn chat_type_of(&self, _chat_id: &str) -> hermesd_platform::ChatType {
        // A bare id cannot tell a DM channel from a guild channel; channels are the common
        // target, and their pacing is the stricter one.
        hermesd_platform::ChatType::Channel
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_len: 2000,
            length_unit: LengthUnit::Chars,
            edits: true,
            threads: true,
            buttons: true,
            typing: true,
            interactive: true,
            request_response: false,
            markdown: MarkdownDialect::Markdown,
            // Discord allows about five messages per five seconds in one channel.
            per_chat_rate: 1.0,
            per_chat_burst: 5,
            group_rate: 1.0,
            global_rate: 50.0,
        }
    }

    async fn run(&self, ctx: PlatformContext, cancel: CancellationToken) -> Result<(), PlatformError> {
        let rest = self.rest()?;
        self.health.started();
        if self.identify(rest, &cancel).await?.is_none() {
            return Ok(());
        }
        backfill::restore(self, &ctx).await;
        gateway::run(self, &ctx, &cancel).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
        self.create(message, None).await
    }

    /// With `nonce` and `enforce_nonce`: Discord answers a resend of the same chunk within a few
    /// minutes with the message it already created, instead of creating a second one.
    async fn send_keyed(&self, message: &OutboundMessage, key: &str) -> Result<MessageRef, PlatformError> {
        self.create(message, Some(&nonce(key))).await
    }

    async fn fill_preview(&self, preview: &MessageRef, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
        self.edit(preview, &message.text).await?;
        self.mark_finished(self.rest()?, message, id(&message.chat.chat_id, "chat id")?).await;
        Ok(preview.clone())
    }

    fn file_limits(&self) -> Option<FileLimits> {
        Some(upload::LIMITS)
    }

    async fn send_file(
        &self,
        message: &OutboundMessage,
        file: &OutboundFile,
        bytes: &[u8],
    ) -> Result<MessageRef, PlatformError> {
        let rest = self.rest()?;
        let channel = id(&message.chat.chat_id, "chat id")?;
        let original = message.reply_to.as_deref().and_then(|reply| reply.parse::<u64>().ok());
        let reference =
            original.filter(|&reply| self.origins.get(&reply).map_or(reply != channel, |origin| origin == channel));
        let payload = upload::payload(message, reference, file)?;
        let sent = rest.create_message_with_file(channel, &payload, &file.name, bytes).await?;
        Ok(MessageRef { chat: message.chat.clone(), message_id: sent.to_string() })
    }

    async fn edit(&self, message: &MessageRef, text: &str) -> Result<(), PlatformError> {
        let channel = id(&message.chat.chat_id, "chat id")?;
        let target = id(&message.message_id, "message id")?;
        self.rest()?.edit_message(channel, target, &edit_body(text)).await
    }

    async fn typing(&self, chat: &ChatRef) -> Result<(), PlatformError> {
        let rest = self.rest()?;
        let channel = id(&chat.chat_id, "chat id")?;
        if !self.typing.due(channel, std::time::Instant::now()) {
            return Ok(());
        }
        let outcome = rest.typing(channel).await;
        if outcome.is_err() {
            self.typing.failed(channel);
        }
        outcome
    }

    fn health(&self) -> Option<PlatformHealth> {
        self.health.report()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_bare_chat_id_tells_its_chat_type() {
        use hermesd_platform::{ChatType, Platform};
        let platform = DiscordPlatform::new(DiscordSettings::default());
        assert_eq!(platform.chat_type_of("123"), ChatType::Channel);
    }

    use super::*;

    #[test]
    fn thread_names_drop_mentions_and_stay_short() {
        assert_eq!(thread_name("<@42> what is   the plan?"), "what is the plan?");
        assert_eq!(thread_name("<@42>"), "hermes");
        assert_eq!(thread_name(&"x".repeat(200)).chars().count(), 80);
    }
}
