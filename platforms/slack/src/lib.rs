//! hermesd-slack: the Slack adapter (Socket Mode or the signed Events API in, Web API calls out).
//!
//! A thin translator over slack-morphism's Web API client: it normalises events, hands them to the
//! host's ingress and sends what the host gives it. Allowlists, pairing, dedup, pacing and
//! chunking are the host's; no token or signing secret ever appears in a log line or an error.
//!
//! After admission, a mention inside a thread the bot is not in yet gets the thread's first message
//! as its reply context (`conversations.replies`), and a sender without a profile gets a display
//! name from `users.info` (`names.rs`).

mod api;
mod config;
mod events;
mod format;
/// Fuzz target entry points (tests/fuzz); cargo-afl builds with `--cfg fuzzing`.
#[cfg(any(fuzzing, test))]
pub mod fuzzing;
mod health;
mod inbound;
mod media;
mod names;
mod outbound;
mod section;
mod socket;
mod upload;

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use hermesd_platform::{
    Capabilities, ChatRef, ChatType, InboundEvent, IngressError, LengthUnit, MarkdownDialect, MessageRef,
    OutboundMessage, Platform, PlatformContext, PlatformError, PlatformHealth, WebhookRequest, WebhookResponse,
};
use slack_morphism::prelude::SlackApiToken;
use tokio_util::sync::CancellationToken;

pub use config::{EVENTS_PATH, SlackMode, SlackSettings};
pub use section::{Receive, SlackConfig};

use api::Client;
use health::HealthTracker;
use hermesd_platform::Redactor;
use inbound::{BotIdentity, Callback, Rules};
use media::MediaStore;
use outbound::OutboundState;

/// The platform name in chat refs and session keys.
pub const NAME: &str = "slack";

/// Slack's message limit is 40,000 characters; a margin keeps mrkdwn escaping within it.
pub const MAX_MESSAGE_CHARS: usize = 39_000;

/// The Slack platform adapter.
pub struct SlackPlatform {
    /// `slack`, or `slack@<account>`.
    name: String,
    settings: SlackSettings,
    /// `Err` when no TLS client could be built; `run` and every call report it.
    client: Result<Client, String>,
    bot_token: SlackApiToken,
    redactor: Redactor,
    rules: Rules,
    /// `None` when no TLS client could be built (the same failure `client` reports).
    media: Option<MediaStore>,
    /// Learnt from `auth.test` when `run` starts.
    identity: Mutex<Option<BotIdentity>>,
    health: HealthTracker,
    outbound: OutboundState,
    /// Display names learnt from `users.info`.
    names: names::UserNames,
}

impl SlackPlatform {
    /// Builds the adapter; no network until `run`. Run [`SlackSettings::validate`] first.
    pub fn new(settings: SlackSettings) -> Self {
        let connector = api::connector();
        let client = connector.clone().map(|c| api::client(c, settings.api_base()));
        let media = connector.ok().map(|c| MediaStore::new(settings.media_dir.clone(), settings.max_file_bytes, c));
        let (socket, secret) = match &settings.mode {
            SlackMode::Socket { app_token } => (true, app_token.as_str()),
            SlackMode::Events { signing_secret } => (false, signing_secret.as_str()),
        };
        let stale_after = settings.socket_idle_reconnect + settings.socket_ping_interval * 3 + Duration::from_secs(30);
        Self {
            name: hermesd_platform::section::instance_name(NAME, settings.account.as_deref()),
            bot_token: api::token(&settings.bot_token),
            redactor: Redactor::new("<secret>", &[settings.bot_token.as_str(), secret]),
            rules: Rules::from_settings(&settings),
            media,
            identity: Mutex::new(None),
            health: HealthTracker::new(socket, stale_after),
            outbound: OutboundState::default(),
            names: names::UserNames::default(),
            client,
            settings,
        }
    }

    fn client(&self) -> Result<&Client, PlatformError> {
        self.client.as_ref().map_err(|error| PlatformError::Permanent(format!("slack client: {error}")))
    }

    /// `call` bounded by `api_timeout` (a hung Web API fails as transient).
    async fn within<T>(
        &self,
        what: &str,
        call: impl std::future::Future<Output = Result<T, PlatformError>>,
    ) -> Result<T, PlatformError> {
        api::within(self.settings.api_timeout, what, call).await
    }

    /// `call`, whose failures are already handled, bounded by `api_timeout`; `fallback` when it
    /// took too long (reply context, names and thread membership are helpful, never essential).
    async fn within_or<T>(&self, fallback: T, call: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(self.settings.api_timeout, call).await.unwrap_or(fallback)
    }

    fn identity(&self) -> Option<BotIdentity> {
        self.identity.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Calls `auth.test` until it works; `Ok(None)` when cancelled first.
    async fn identify(&self, cancel: &CancellationToken) -> Result<Option<BotIdentity>, PlatformError> {
        let client = self.client()?;
        let mut backoff = hermesd_platform::Backoff::new();
        loop {
            let outcome = tokio::select! {
                () = cancel.cancelled() => return Ok(None),
                outcome = self.within("auth.test", api::identify(client, &self.bot_token, &self.redactor)) => outcome,
            };
            match outcome {
                Ok(identity) => {
                    tracing::info!(platform = NAME, bot_user = %identity.user_id, "connected to slack");
                    *self.identity.lock().unwrap_or_else(PoisonError::into_inner) = Some(identity.clone());
                    return Ok(Some(identity));
                }
                Err(error @ PlatformError::Unauthorized(_)) => {
                    tracing::error!(platform = NAME, %error, "slack refused the bot token");
                    self.health.failing(error.to_string());
                    return Err(error);
                }
                Err(error) => {
                    tracing::warn!(platform = NAME, %error, "auth.test failed; retrying");
                    self.health.failing(format!("auth.test failing: {error}"));
                    if !backoff.wait(cancel).await {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Normalises one event callback, asks the ingress to admit its sender, downloads its files,
    /// and hands the event to the ingress. `Ok` means the event may be acknowledged: it was
    /// accepted (new or duplicate), its sender refused, or it was ignored.
    async fn deliver(
        &self,
        identity: &BotIdentity,
        ctx: &PlatformContext,
        callback: &Callback,
    ) -> Result<(), IngressError> {
        let bot_in_thread = match inbound::thread_to_check(callback, identity) {
            Some((channel, thread)) if self.rules.require_mention => {
                self.bot_in_thread(identity, &channel, &thread).await
            }
            _ => false,
        };
        let Some(mut normalised) = inbound::normalise(callback, identity, &self.rules, bot_in_thread) else {
            tracing::debug!(platform = NAME, event = ?callback.event_id, "event ignored");
            return Ok(());
        };
        // Chats are the adapter's: each app's DM with one person is a chat of its own.
        normalised.event.chat_mut().platform.clone_from(&self.name);
        // A stranger costs one access check: no download, nothing stored.
        let admission = ctx.ingress.admit(&normalised.event).await?;
        if !admission.admitted() {
            tracing::debug!(platform = NAME, event = ?callback.event_id, ?admission, "event from an unknown sender");
            return Ok(());
        }
        if let Some(media) = &self.media {
            media.fetch_all(&self.settings.bot_token, &self.redactor, self.settings.api_timeout, &mut normalised).await;
        }
        self.add_thread_parent(identity, &mut normalised.event).await;
        self.add_sender_name(&mut normalised.event).await;
        if let InboundEvent::Message { message, .. } = &normalised.event
            && message.addressed
            && let Some(thread) = &message.chat.thread_id
        {
            // The bot answers in this thread, so later replies there need no mention.
            self.outbound.joined_thread(&message.chat.chat_id, thread);
        }
        let accepted = ctx.ingress.accept(normalised.event).await?;
        tracing::debug!(platform = NAME, event = ?callback.event_id, ?accepted, "event accepted");
        Ok(())
    }

    /// Admits, then accepts, a button press; `Ok` means it may be acknowledged.
    pub(crate) async fn deliver_press(
        &self,
        ctx: &PlatformContext,
        mut event: InboundEvent,
    ) -> Result<(), IngressError> {
        event.chat_mut().platform.clone_from(&self.name);
        if ctx.ingress.admit(&event).await?.admitted() {
            ctx.ingress.accept(event).await?;
        }
        Ok(())
    }

    /// A reply in a thread the bot has not taken part in yet (it was just mentioned there) gets
    /// the thread's first message as its reply context, so the model knows what is discussed.
    /// Where the bot already answers, the thread is its session and that message is known.
    async fn add_thread_parent(&self, identity: &BotIdentity, event: &mut InboundEvent) {
        let InboundEvent::Message { message, .. } = event else { return };
        let Some(thread) = message.chat.thread_id.clone() else { return };
        if !message.addressed
            || message.reply_to.is_some()
            || thread == message.message_id
            || self.outbound.in_thread(&message.chat.chat_id, &thread)
        {
            return;
        }
        let Ok(client) = self.client() else { return };
        let chat = message.chat.chat_id.clone();
        let parent =
            outbound::thread_parent(client, &self.bot_token, &self.redactor, &chat, &thread, &identity.user_id);
        message.reply_to = self.within_or(None, parent).await;
    }

    /// The sender's display name, when the event did not carry one.
    async fn add_sender_name(&self, event: &mut InboundEvent) {
        let InboundEvent::Message { message, .. } = event else { return };
        if message.sender.name.is_some() {
            return;
        }
        let Ok(client) = self.client() else { return };
        let name = self.names.name(client, &self.bot_token, &self.redactor, &message.sender.id);
        message.sender.name = self.within_or(None, name).await;
    }

    async fn bot_in_thread(&self, identity: &BotIdentity, channel: &str, thread: &str) -> bool {
        if self.outbound.in_thread(channel, thread) {
            return true;
        }
        let Ok(client) = self.client() else { return false };
        let found =
            outbound::bot_in_thread(client, &self.bot_token, &self.redactor, channel, thread, &identity.user_id);
        let found = self.within_or(false, found).await;
        if found {
            self.outbound.joined_thread(channel, thread);
        }
        found
    }
}

#[async_trait]
impl Platform for SlackPlatform {
    fn name(&self) -> &str {
        &self.name
    }

    async fn probe(&self) -> Option<Result<String, String>> {
        let client = match self.client() {
            Ok(client) => client,
            Err(error) => return Some(Err(error.to_string())),
        };
        let call = api::identify(client, &self.bot_token, &self.redactor);
        Some(match tokio::time::timeout(hermesd_platform::PROBE_TIMEOUT, call).await {
            Err(_) => Err("auth.test: no answer in 15 s (is slack.com reachable?)".into()),
            Ok(Ok(me)) => Ok(format!("bot user {}", me.user_id)),
            Ok(Err(PlatformError::Unauthorized(why))) => {
                Err(format!("auth.test: the bot token was refused ({why}); reinstall the app to get a new xoxb- token"))
            }
            Ok(Err(error)) => Err(format!("auth.test: {error}")),
        })
    }

    fn command_prefix(&self) -> char {
        // `/` is Slack's own: a `/status` never reaches the bot as a message.
        '!'
    }

    fn chat_type_of(&self, chat_id: &str) -> ChatType {
        // Conversation ids of DMs start with `D`; the rest are channels.
        if chat_id.starts_with('D') { ChatType::Dm } else { ChatType::Channel }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_len: MAX_MESSAGE_CHARS,
            length_unit: LengthUnit::Chars,
            edits: true,
            threads: true,
            buttons: true,
            typing: true,
            interactive: true,
            request_response: false,
            markdown: MarkdownDialect::SlackMrkdwn,
            // chat.postMessage allows about one message per second per channel.
            per_chat_rate: 1.0,
            per_chat_burst: 3,
            group_rate: 1.0,
            global_rate: 20.0,
        }
    }

    async fn run(&self, ctx: PlatformContext, cancel: CancellationToken) -> Result<(), PlatformError> {
        self.client()?;
        self.health.started();
        let Some(identity) = self.identify(&cancel).await? else { return Ok(()) };
        match &self.settings.mode {
            SlackMode::Socket { app_token } => {
                socket::run(self, &identity, &api::token(app_token), &ctx, &cancel).await
            }
            SlackMode::Events { .. } => {
                self.health.ready();
                tracing::info!(platform = NAME, path = %self.settings.events_path(), "events api ready");
                cancel.cancelled().await;
                Ok(())
            }
        }
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
        let send = outbound::send(self.client()?, &self.bot_token, &self.outbound, &self.redactor, message);
        self.within("chat.postMessage", send).await
    }

    fn file_limits(&self) -> Option<hermesd_platform::FileLimits> {
        Some(upload::LIMITS)
    }

    async fn send_file(
        &self,
        message: &OutboundMessage,
        file: &hermesd_platform::OutboundFile,
        bytes: &[u8],
    ) -> Result<MessageRef, PlatformError> {
        // Three calls and the bytes themselves: a file gets a longer bound than one call.
        let upload = upload::send_file(self.client()?, &self.bot_token, &self.redactor, message, file, bytes);
        api::within(self.settings.api_timeout * upload::CALLS_PER_FILE, "file upload", upload).await
    }

    async fn edit(&self, message: &MessageRef, text: &str) -> Result<(), PlatformError> {
        let edit = outbound::edit(self.client()?, &self.bot_token, &self.outbound, &self.redactor, message, text);
        self.within("chat.update", edit).await
    }

    async fn typing(&self, chat: &ChatRef) -> Result<(), PlatformError> {
        let typing = outbound::typing(self.client()?, &self.bot_token, &self.outbound, &self.redactor, chat);
        self.within("assistant.threads.setStatus", typing).await
    }

    fn webhook_path(&self) -> Option<String> {
        matches!(self.settings.mode, SlackMode::Events { .. }).then(|| self.settings.events_path())
    }

    async fn handle_webhook(&self, ctx: &PlatformContext, request: WebhookRequest) -> WebhookResponse {
        match &self.settings.mode {
            SlackMode::Events { signing_secret } => {
                events::handle(self, ctx, &request, signing_secret, unix_now()).await
            }
            SlackMode::Socket { .. } => WebhookResponse { status: 404, body: String::new() },
        }
    }

    fn shows_progress(&self, chat: &ChatRef) -> bool {
        chat.chat_type == ChatType::Dm || self.settings.progress_in_channels
    }

    fn health(&self) -> Option<PlatformHealth> {
        self.health.report()
    }
}

fn unix_now() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod chat_type_tests {
    use super::*;

    #[test]
    fn a_bare_chat_id_tells_its_chat_type() {
        use hermesd_platform::{ChatType, Platform};
        let platform = SlackPlatform::new(SlackSettings::default());
        assert_eq!(platform.chat_type_of("D01"), ChatType::Dm);
        assert_eq!(platform.chat_type_of("C01"), ChatType::Channel);
        assert_eq!(platform.command_prefix(), '!');
    }
}
