//! hermesd-whatsapp: the WhatsApp adapter on the Business Cloud API (Graph API).
//!
//! Meta posts signed webhooks to `/whatsapp/webhook` on the host's server; replies go out
//! through `/{phone-number-id}/messages`. A thin translator: allowlists, pairing, dedup (by
//! wamid), pacing and chunking are the host's. No token or secret ever appears in a log line or
//! an error.
//!
//! Statuses go to the host (`Ingress::delivery_status`): a send Meta accepted and later reported
//! `failed` is recorded failed on its receipt, never left as delivered.

mod api;
mod config;
/// Fuzz target entry points (tests/fuzz); cargo-afl builds with `--cfg fuzzing`.
#[cfg(any(fuzzing, test))]
pub mod fuzzing;
mod health;
mod inbound;
mod media;
mod outbound;
mod section;
mod upload;
mod webhook;
mod window;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use hermesd_platform::{
    Capabilities, ChatRef, DeliveryStatus, FileLimits, Ingress, IngressError, LengthUnit, MarkdownDialect, MessageRef,
    OutboundFile, OutboundMessage, Platform, PlatformContext, PlatformError, PlatformHealth, Redactor, WebhookRequest,
    WebhookResponse,
};
use tokio_util::sync::CancellationToken;

pub use config::{DEFAULT_API_VERSION, WEBHOOK_PATH, WhatsAppSettings, check_fields};
pub use section::WhatsAppConfig;
pub use webhook::sign;

use api::Graph;
use health::HealthTracker;
use inbound::Parsed;
use media::MediaStore;
use window::{RecentSends, Standing, Windows};

/// The platform name in chat refs and session keys.
pub const NAME: &str = "whatsapp";

/// After a failed token check, the next comes at most this much later.
const RECHECK_AFTER_FAILURE: Duration = Duration::from_secs(60);

/// The WhatsApp platform adapter.
pub struct WhatsAppPlatform {
    /// `whatsapp`, or `whatsapp@<account>`.
    name: String,
    settings: WhatsAppSettings,
    /// `Err` when no HTTP client could be built; `run` and every call report it.
    graph: Result<Graph, String>,
    media: MediaStore,
    health: HealthTracker,
    windows: Windows,
    /// Wamids sent lately (a failure status may outrun the host's receipt).
    recent: RecentSends,
    /// The host's ingress, learnt from `run` or the first webhook (durable window lookups).
    ingress: Mutex<Option<Arc<dyn Ingress>>>,
}

impl WhatsAppPlatform {
    /// Builds the adapter; no network until `run`. Run [`WhatsAppSettings::validate`] first.
    pub fn new(settings: WhatsAppSettings) -> Self {
        let secrets = [settings.access_token.as_str(), settings.app_secret.as_str(), settings.verify_token.as_str()];
        let redactor = Redactor::new("<secret>", &secrets);
        let graph = Graph::new(settings.graph_base(), &settings.access_token, settings.api_timeout, redactor);
        Self {
            name: hermesd_platform::section::instance_name(NAME, settings.account.as_deref()),
            media: MediaStore::new(settings.media_dir.clone(), settings.max_file_bytes),
            health: HealthTracker::new(settings.token_check_interval),
            windows: Windows::default(),
            recent: RecentSends::default(),
            ingress: Mutex::new(None),
            graph,
            settings,
        }
    }

    fn graph(&self) -> Result<&Graph, PlatformError> {
        self.graph.as_ref().map_err(|error| PlatformError::Permanent(format!("whatsapp client: {error}")))
    }

    fn messages_path(&self) -> String {
        format!("{}/messages", self.settings.phone_number_id)
    }

    fn remember_ingress(&self, ctx: &PlatformContext) {
        let mut ingress = self.ingress.lock().unwrap_or_else(PoisonError::into_inner);
        if ingress.is_none() {
            *ingress = Some(ctx.ingress.clone());
        }
    }

    fn ingress(&self) -> Option<Arc<dyn Ingress>> {
        self.ingress.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Hands one webhook's messages to the ingress (admit, media, accept) and its statuses to
    /// the host's receipts. `Ok` means the webhook may be acknowledged.
    pub(crate) async fn deliver_all(&self, ctx: &PlatformContext, parsed: Parsed) -> Result<(), IngressError> {
        self.remember_ingress(ctx);
        for mut normalised in parsed.events {
            let chat = normalised.event.chat().chat_id.clone();
            let wamid = normalised.event.event_id().to_owned();
            // Chats are the adapter's: each number's chat with one person is a chat of its own.
            normalised.event.chat_mut().platform.clone_from(&self.name);
            // The user wrote, so the window is open, even for a stranger's pairing reply.
            self.windows.inbound(&chat, normalised.at_ms, &wamid);
            // A stranger costs one access check: no download, nothing stored.
            let admission = ctx.ingress.admit(&normalised.event).await?;
            if !admission.admitted() {
                tracing::debug!(platform = NAME, ?admission, "message from an unknown sender");
                continue;
            }
            if let (Some(request), Ok(graph)) = (&normalised.media, self.graph()) {
                self.media.fetch_into(graph, request, &mut normalised.event).await;
            }
            let accepted = ctx.ingress.accept(normalised.event).await?;
            tracing::debug!(platform = NAME, ?accepted, "message accepted");
        }
        for report in parsed.statuses {
            let found = ctx.ingress.delivery_status(&self.name, &report.id, &report.status).await?;
            tracing::debug!(platform = NAME, status = report.status.as_str(), found, "delivery status");
            if !found && matches!(report.status, DeliveryStatus::Failed(_)) && self.recent.contains(&report.id) {
                // Meta was faster than the host's receipt: have it deliver the failure again.
                return Err(IngressError("a failure status arrived before the send's receipt was stored".into()));
            }
        }
        Ok(())
    }

    /// Checks the 24-hour window before a free-form send. Outside it, sends the re-engagement
    /// template once (when configured) and fails the message with a clear permanent error: Meta
    /// would accept a free-form send and fail it later (131047).
    async fn check_window(&self, graph: &Graph, chat: &ChatRef) -> Result<(), PlatformError> {
        let now = unix_ms();
        let chat_id = chat.chat_id.as_str();
        let mut last = self.windows.last_inbound(chat_id);
        if self.windows.standing(chat_id, last, now) != Standing::Open {
            // Before `run` the durable record cannot be asked; a resend after a restart waits.
            let ingress =
                self.ingress().ok_or_else(|| PlatformError::Transient("whatsapp adapter not started yet".into()))?;
            match ingress.last_inbound_at(&self.name, chat_id).await {
                Ok(Some(at)) => {
                    self.windows.learn(chat_id, at);
                    last = self.windows.last_inbound(chat_id);
                }
                Ok(None) => {}
                Err(error) => return Err(PlatformError::Transient(format!("last inbound time: {error}"))),
            }
        }
        let template = self.settings.reengage_template.as_str();
        match self.windows.standing(chat_id, last, now) {
            Standing::Open => Ok(()),
            Standing::Closed if !template.is_empty() => {
                let payload = outbound::template(chat_id, template, &self.settings.reengage_language);
                graph.post(&self.messages_path(), &payload).await?;
                self.windows.template_sent(chat_id, now);
                tracing::warn!(
                    platform = NAME,
                    template,
                    "outside the 24-hour window: sent the re-engagement template"
                );
                Err(PlatformError::Permanent(format!(
                    "outside WhatsApp's 24-hour customer service window: sent the re-engagement template {template:?} \
                     instead; this message was not delivered"
                )))
            }
            Standing::ClosedTemplateSent => Err(PlatformError::Permanent(
                "outside WhatsApp's 24-hour customer service window: the re-engagement template was sent, waiting \
                 for the user to answer; this message was not delivered"
                    .into(),
            )),
            Standing::Closed => {
                tracing::warn!(platform = NAME, "outside the 24-hour window and no reengage_template: not sent");
                Err(PlatformError::Permanent(
                    "outside WhatsApp's 24-hour customer service window and no platforms.whatsapp.reengage_template \
                     is configured: not sent"
                        .into(),
                ))
            }
        }
    }

    /// Checks the token against the Graph API (`GET /{phone-number-id}`) and records the outcome.
    async fn check_token(&self, graph: &Graph) -> bool {
        match graph.get(&self.settings.phone_number_id).await {
            Ok(_) => {
                self.health.token_valid();
                true
            }
            Err(PlatformError::Unauthorized(why)) => {
                if !self.health.refused() {
                    tracing::error!(platform = NAME, error = %why, "the graph api refused WHATSAPP_ACCESS_TOKEN");
                }
                self.health.token_refused(why);
                false
            }
            Err(error) => {
                tracing::warn!(platform = NAME, %error, "access token check failed");
                self.health.token_unreachable(error.to_string());
                false
            }
        }
    }
}

/// WhatsApp ids are E.164 numbers without the `+` (`wa_id`); operators write them either way.
pub const ACCESS_RULES: hermesd_platform::AccessRules =
    hermesd_platform::AccessRules { phone_number_ids: true, ..hermesd_platform::AccessRules::DEFAULT };

#[async_trait]
impl Platform for WhatsAppPlatform {
    fn name(&self) -> &str {
        &self.name
    }

    async fn probe(&self) -> Option<Result<String, String>> {
        let graph = match self.graph() {
            Ok(graph) => graph,
            Err(error) => return Some(Err(error.to_string())),
        };
        let number = &self.settings.phone_number_id;
        let call = graph.get(number);
        Some(match tokio::time::timeout(hermesd_platform::PROBE_TIMEOUT, call).await {
            Err(_) => Err("the graph api gave no answer in 15 s".into()),
            Ok(Ok(answer)) => {
                let shown = answer["display_phone_number"].as_str().unwrap_or("?");
                let quality = answer["quality_rating"].as_str().unwrap_or("unknown");
                Ok(format!("number {shown} (id {number}), quality {quality}"))
            }
            Ok(Err(PlatformError::Unauthorized(why))) => Err(format!(
                "the graph api refused the access token ({why}): make a system user token with whatsapp_business_messaging"
            )),
            Ok(Err(error)) => Err(format!("GET /{number}: {error} (is phone_number_id the number's id?)")),
        })
    }

    fn access_rules(&self) -> hermesd_platform::AccessRules {
        ACCESS_RULES
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_len: outbound::MAX_TEXT_CHARS,
            length_unit: LengthUnit::Chars,
            // The Cloud API cannot edit a sent message.
            edits: false,
            threads: false,
            buttons: true,
            typing: true,
            interactive: true,
            request_response: false,
            // Markdown in, converted to WhatsApp's formatting here.
            markdown: MarkdownDialect::Markdown,
            // Meta's pair rate: bursts are tolerated, then about one message per 6 s to one user.
            per_chat_rate: 1.0,
            per_chat_burst: 10,
            group_rate: 1.0,
            // A business number's default throughput is 80 messages per second.
            global_rate: 80.0,
        }
    }

    async fn run(&self, ctx: PlatformContext, cancel: CancellationToken) -> Result<(), PlatformError> {
        self.remember_ingress(&ctx);
        self.health.started();
        let graph = match self.graph() {
            Ok(graph) => graph,
            Err(error) => {
                self.health.token_unreachable(error.to_string());
                return Err(error);
            }
        };
        tracing::info!(platform = NAME, path = %self.settings.webhook_path(), "whatsapp webhook ready");
        loop {
            let valid = tokio::select! {
                () = cancel.cancelled() => return Ok(()),
                valid = self.check_token(graph) => valid,
            };
            let wait = if valid {
                self.settings.token_check_interval
            } else {
                self.settings.token_check_interval.min(RECHECK_AFTER_FAILURE)
            };
            tokio::select! {
                () = cancel.cancelled() => return Ok(()),
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
        let graph = self.graph()?;
        self.check_window(graph, &message.chat).await?;
        let mut sent = None;
        for payload in outbound::payloads(message) {
            let answer = graph.post(&self.messages_path(), &payload).await?;
            sent = outbound::sent_id(&answer);
        }
        let id = sent.ok_or_else(|| PlatformError::Permanent("graph accepted the message without an id".into()))?;
        self.recent.sent(&id);
        Ok(MessageRef { chat: message.chat.clone(), message_id: id })
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
        let graph = self.graph()?;
        self.check_window(graph, &message.chat).await?;
        let media_id = upload::upload(graph, &self.settings.phone_number_id, file, bytes).await?;
        let answer = graph.post(&self.messages_path(), &upload::payload(message, file, &media_id)).await?;
        let id = outbound::sent_id(&answer)
            .ok_or_else(|| PlatformError::Permanent("graph accepted the file without a message id".into()))?;
        self.recent.sent(&id);
        Ok(MessageRef { chat: message.chat.clone(), message_id: id })
    }

    async fn edit(&self, _message: &MessageRef, _text: &str) -> Result<(), PlatformError> {
        Err(PlatformError::Permanent("whatsapp cannot edit sent messages".into()))
    }

    async fn typing(&self, chat: &ChatRef) -> Result<(), PlatformError> {
        // The indicator hangs on the user's last message (and marks it read); none known, none shown.
        let Some(message_id) = self.windows.last_message_id(&chat.chat_id) else { return Ok(()) };
        let now = unix_ms();
        if self.windows.standing(&chat.chat_id, self.windows.last_inbound(&chat.chat_id), now) != Standing::Open {
            return Ok(());
        }
        self.graph()?.post(&self.messages_path(), &outbound::typing(&message_id)).await.map(drop)
    }

    fn webhook_path(&self) -> Option<String> {
        Some(self.settings.webhook_path())
    }

    fn webhook_get(&self, query: &str) -> WebhookResponse {
        webhook::handshake(&self.settings.verify_token, query)
    }

    async fn handle_webhook(&self, ctx: &PlatformContext, request: WebhookRequest) -> WebhookResponse {
        webhook::handle(self, ctx, &request).await
    }

    fn health(&self) -> Option<PlatformHealth> {
        self.health.report()
    }
}

/// Now, in Unix milliseconds.
pub(crate) fn unix_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}
