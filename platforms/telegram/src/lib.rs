//! hermesd-telegram: the Telegram adapter (long polling or webhook in, Bot API calls out).
//!
//! A thin translator over teloxide's Bot API client: it normalises updates, hands them to the
//! host's ingress and sends what the host gives it. Allowlists, pairing, dedup, pacing and
//! chunking are the host's; the bot token never appears in a log line or an error.
//!
//! Calls use teloxide's own client settings (5 s to connect, 17 s per request) with the shared
//! idle-connection policy.

mod config;
mod draft;
mod format;
/// Fuzz target entry points (tests/fuzz); cargo-afl builds with `--cfg fuzzing`.
#[cfg(any(fuzzing, test))]
pub mod fuzzing;
mod health;
mod inbound;
mod media;
mod outbound;
mod polling;
mod section;
mod upload;
mod webhook;

use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use hermesd_platform::{
    Capabilities, ChatRef, FileLimits, IngressError, LengthUnit, MarkdownDialect, MessageRef, OutboundFile,
    OutboundMessage, Platform, PlatformContext, PlatformError, PlatformHealth, Redactor, WebhookRequest,
    WebhookResponse,
};
use teloxide::prelude::*;
use teloxide::types::{CallbackQueryId, Update};
use teloxide::{ApiError, RequestError};
use tokio_util::sync::CancellationToken;

pub use config::{MAX_POLL_TIMEOUT, TelegramMode, TelegramSettings, WEBHOOK_PATH};
pub use section::{Receive, TelegramConfig};

use health::HealthTracker;
use hermesd_platform::media::MediaDir;
use inbound::{BotIdentity, Rules};
use media::MediaStore;

/// The platform name in chat refs, cursors and session keys.
pub const NAME: &str = "telegram";

/// The Telegram platform adapter.
pub struct TelegramPlatform {
    /// `telegram`, or `telegram@<account>`.
    name: String,
    settings: TelegramSettings,
    /// `Err` when `api_url` is unusable; `run` and every call report it.
    bot: Result<Bot, String>,
    redactor: Redactor,
    rules: Rules,
    media: MediaStore,
    /// Learnt from `getMe` when `run` starts.
    identity: Mutex<Option<BotIdentity>>,
    health: HealthTracker,
    /// Whether `sendMessageDraft` is still worth trying.
    drafts: draft::Drafts,
}

impl TelegramPlatform {
    /// Builds the adapter; no network until `run`. Run [`TelegramSettings::validate`] first: an
    /// unusable `api_url` only shows up as errors from `run` and `send`.
    pub fn new(settings: TelegramSettings) -> Self {
        let bot = settings
            .api_url
            .parse()
            .map_err(|error| format!("telegram api_url `{}`: {error}", settings.api_url))
            .and_then(|url| {
                // teloxide's own settings (connect and call timeouts, no Nagle), with the shared
                // idle-connection policy instead of reqwest's 90 s and unbounded idle pool.
                let client = teloxide::net::default_reqwest_settings()
                    .pool_idle_timeout(hermesd_platform::HTTP_POOL_IDLE_TIMEOUT)
                    .pool_max_idle_per_host(hermesd_platform::HTTP_POOL_MAX_IDLE_PER_HOST)
                    .build()
                    .map_err(|error| format!("telegram http client: {error}"))?;
                Ok(Bot::with_client(settings.token.clone(), client).set_api_url(url))
            });
        if settings.poll_timeout > MAX_POLL_TIMEOUT {
            tracing::warn!(platform = NAME, requested = ?settings.poll_timeout, used = ?MAX_POLL_TIMEOUT, "poll_timeout clamped");
        }
        let webhook = matches!(settings.mode, TelegramMode::Webhook { .. });
        Self {
            name: hermesd_platform::section::instance_name(NAME, settings.account.as_deref()),
            redactor: Redactor::new("<token>", &[settings.token.as_str()]),
            rules: Rules::from_settings(&settings),
            media: MediaStore { media: MediaDir::new(settings.media_dir.clone(), settings.max_file_bytes) },
            identity: Mutex::new(None),
            drafts: draft::Drafts::default(),
            health: HealthTracker::new(webhook, settings.effective_poll_timeout()),
            bot,
            settings,
        }
    }

    fn bot(&self) -> Result<&Bot, PlatformError> {
        self.bot.as_ref().map_err(|error| PlatformError::Permanent(error.clone()))
    }

    fn identity(&self) -> Option<BotIdentity> {
        self.identity.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Calls `getMe` until it works; `Ok(None)` when cancelled first.
    async fn identify(&self, bot: &Bot, cancel: &CancellationToken) -> Result<Option<BotIdentity>, PlatformError> {
        let mut backoff = hermesd_platform::Backoff::new();
        loop {
            let outcome = tokio::select! {
                () = cancel.cancelled() => return Ok(None),
                outcome = bot.get_me().send() => outcome,
            };
            match outcome {
                Ok(me) => {
                    let identity = BotIdentity { id: me.user.id.0, username: me.user.username.unwrap_or_default() };
                    tracing::info!(platform = NAME, username = %identity.username, "connected to telegram");
                    *self.identity.lock().unwrap_or_else(PoisonError::into_inner) = Some(identity.clone());
                    return Ok(Some(identity));
                }
                Err(RequestError::Api(ApiError::InvalidToken)) => {
                    tracing::error!(platform = NAME, "telegram refused the bot token");
                    return Err(PlatformError::Unauthorized("getMe: the bot token was refused".into()));
                }
                Err(error) => {
                    let error = self.redactor.redact(&error.to_string());
                    tracing::warn!(platform = NAME, %error, "getMe failed; retrying");
                    self.health.failing(format!("getMe failing: {error}"));
                    if !backoff.wait(cancel).await {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Normalises one update, asks the ingress to admit its sender, downloads its files, and
    /// hands the event to the ingress. `Ok` means the update may be acknowledged: its event was
    /// accepted (new or duplicate), its sender refused, or it was ignored.
    async fn deliver(
        &self,
        bot: &Bot,
        identity: &BotIdentity,
        ctx: &PlatformContext,
        update: &Update,
    ) -> Result<(), IngressError> {
        let normalised = inbound::normalise(update, identity, &self.rules);
        self.deliver_normalised(bot, ctx, normalised, update.id.0).await
    }

    /// Like `deliver`, for the updates of one album (`media_group_id`): one event with every
    /// part's files.
    async fn deliver_album(
        &self,
        bot: &Bot,
        identity: &BotIdentity,
        ctx: &PlatformContext,
        updates: &[&Update],
    ) -> Result<(), IngressError> {
        let normalised = inbound::normalise_album(updates, identity, &self.rules);
        self.deliver_normalised(bot, ctx, normalised, updates.first().map_or(0, |u| u.id.0)).await
    }

    async fn deliver_normalised(
        &self,
        bot: &Bot,
        ctx: &PlatformContext,
        normalised: Option<inbound::Normalised>,
        update: u32,
    ) -> Result<(), IngressError> {
        let Some(mut normalised) = normalised else {
            tracing::debug!(platform = NAME, update, "update ignored");
            return Ok(());
        };
        // Chats are the adapter's: each bot's DM with one person is a chat of its own.
        normalised.event.chat_mut().platform.clone_from(&self.name);
        // A stranger costs one access check: no download, nothing stored.
        let admission = ctx.ingress.admit(&normalised.event).await?;
        if !admission.admitted() {
            tracing::debug!(platform = NAME, update, ?admission, "update from an unknown sender");
            return Ok(());
        }
        self.media.fetch_all(bot, &self.redactor, &mut normalised).await;
        let accepted = ctx.ingress.accept(normalised.event).await?;
        tracing::debug!(platform = NAME, update, ?accepted, "update accepted");
        if let Some(id) = normalised.callback_id {
            // Only stops the button's spinner; the press itself is already stored.
            if let Err(error) = bot.answer_callback_query(CallbackQueryId(id)).send().await {
                let error = self.redactor.redact(&error.to_string());
                tracing::debug!(platform = NAME, %error, "answerCallbackQuery failed");
            }
        }
        Ok(())
    }
}

impl TelegramPlatform {
    /// `hermesd doctor`'s check: `getMe`, then `getWebhookInfo` for what Telegram last failed
    /// to deliver (webhook mode) or a webhook that polling would delete.
    async fn probe_account(&self) -> Result<String, String> {
        let bot = self.bot().map_err(|e| e.to_string())?;
        let redact = |e: RequestError| self.redactor.redact(&e.to_string());
        let bounded = |call| tokio::time::timeout(hermesd_platform::PROBE_TIMEOUT, call);
        let me = match bounded(bot.get_me().send()).await {
            Err(_) => return Err("getMe: no answer in 15 s (is api.telegram.org reachable?)".into()),
            Ok(Err(RequestError::Api(ApiError::InvalidToken))) => {
                return Err("getMe: the bot token was refused (check the token variable; @BotFather /token)".into());
            }
            Ok(Err(error)) => return Err(format!("getMe: {}", redact(error))),
            Ok(Ok(me)) => me,
        };
        let mut said = format!("@{}", me.user.username.unwrap_or_default());
        let info = match tokio::time::timeout(hermesd_platform::PROBE_TIMEOUT, bot.get_webhook_info().send()).await {
            Ok(Ok(info)) => info,
            Ok(Err(error)) => return Err(format!("{said}; getWebhookInfo: {}", redact(error))),
            Err(_) => return Err(format!("{said}; getWebhookInfo: no answer in 15 s")),
        };
        match &self.settings.mode {
            TelegramMode::Webhook { .. } => {
                if let Some(error) = info.last_error_message {
                    let when = info.last_error_date.map(|d| format!(" at Unix time {}", d.timestamp()));
                    return Err(format!(
                        "{said}; Telegram's last webhook delivery failed{}: {error} (is the webhook URL reachable \
                         from the internet, with a valid certificate?)",
                        when.unwrap_or_default()
                    ));
                }
                let pending = info.pending_update_count;
                said.push_str(&format!("; webhook set, {pending} updates waiting"));
            }
            TelegramMode::Polling if info.url.is_some() => {
                said.push_str("; a webhook is set: polling deletes it when hermesd starts");
            }
            TelegramMode::Polling => {}
        }
        Ok(said)
    }
}

#[async_trait]
impl Platform for TelegramPlatform {
    fn name(&self) -> &str {
        &self.name
    }

    async fn probe(&self) -> Option<Result<String, String>> {
        Some(self.probe_account().await)
    }

    fn chat_type_of(&self, chat_id: &str) -> hermesd_platform::ChatType {
        // Groups and channels have negative ids.
        if chat_id.starts_with('-') { hermesd_platform::ChatType::Group } else { hermesd_platform::ChatType::Dm }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_len: 4096,
            length_unit: LengthUnit::Utf16,
            edits: true,
            threads: true,
            buttons: true,
            typing: true,
            interactive: true,
            request_response: false,
            markdown: MarkdownDialect::TelegramHtml,
            per_chat_rate: 1.0,
            per_chat_burst: 3,
            group_rate: 20.0 / 60.0,
            global_rate: 30.0,
        }
    }

    async fn run(&self, ctx: PlatformContext, cancel: CancellationToken) -> Result<(), PlatformError> {
        let bot = self.bot()?;
        self.health.started();
        let Some(identity) = self.identify(bot, &cancel).await? else { return Ok(()) };
        match &self.settings.mode {
            TelegramMode::Polling => polling::run(self, bot, &identity, &ctx, &cancel).await,
            TelegramMode::Webhook { url, secret } => webhook::run(self, bot, url, secret, &cancel).await,
        }
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
        outbound::send(self.bot()?, &self.redactor, message).await
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
        upload::send_file(self.bot()?, &self.redactor, message, file, bytes).await
    }

    async fn edit(&self, message: &MessageRef, text: &str) -> Result<(), PlatformError> {
        outbound::edit(self.bot()?, &self.redactor, message, text).await
    }

    async fn typing(&self, chat: &ChatRef) -> Result<(), PlatformError> {
        outbound::typing(self.bot()?, &self.redactor, chat).await
    }

    fn supports_drafts(&self, chat: &ChatRef) -> bool {
        self.drafts.usable(chat)
    }

    async fn send_draft(&self, chat: &ChatRef, draft_id: i64, text: &str) -> Result<(), PlatformError> {
        self.drafts.send(self.bot()?, &self.redactor, chat, draft_id, text).await
    }

    fn webhook_path(&self) -> Option<String> {
        let webhook = matches!(self.settings.mode, TelegramMode::Webhook { .. });
        webhook.then(|| match &self.settings.account {
            Some(account) => format!("/{NAME}/{account}/webhook"),
            None => WEBHOOK_PATH.to_owned(),
        })
    }

    async fn handle_webhook(&self, ctx: &PlatformContext, request: WebhookRequest) -> WebhookResponse {
        match &self.settings.mode {
            TelegramMode::Webhook { secret, .. } => webhook::handle(self, ctx, &request, secret).await,
            TelegramMode::Polling => WebhookResponse { status: 404, body: String::new() },
        }
    }

    fn health(&self) -> Option<PlatformHealth> {
        self.health.report()
    }
}

#[cfg(test)]
mod chat_type_tests {
    use super::*;

    #[test]
    fn a_bare_chat_id_tells_its_chat_type() {
        use hermesd_platform::{ChatType, Platform};
        let platform = TelegramPlatform::new(TelegramSettings::default());
        assert_eq!(platform.chat_type_of("-100123"), ChatType::Group);
        assert_eq!(platform.chat_type_of("42"), ChatType::Dm);
    }
}
