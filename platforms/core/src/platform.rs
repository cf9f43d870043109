//! The `Platform` trait every adapter implements, and the `Ingress` it hands events to.
//!
//! Adapters are thin translators: allowlists, pairing, deduplication, retries, pacing and
//! chunking belong to the host, never here.
//!
//! `Platform`: `run`, `send`, `edit`, `typing` and `capabilities` (`Capabilities`); `send_keyed`,
//! the outbox's send of a stored chunk with a key that is the same on every attempt (by default
//! `send`); for streamed answers `fill_preview`, `supports_drafts` and `send_draft`; for platforms
//! that send files `file_limits` (`FileLimits`) and `send_file`; all but the first five have
//! defaults. `PlatformError` is `RateLimited { retry_after }`, `Unauthorized`, `Transient` or
//! `Permanent` (`kind()` names the variant), and `clamp_retry_after` is every adapter's and the
//! pacer's bound on a wait (`MAX_RETRY_AFTER`, one hour).
//!
//! `Ingress`: `admit` (the host's access decision, `Admission`: `Admit`, `Pairing`, `Ignored`)
//! comes before any download, thread or accept; then `accept`, and the durable platform cursors
//! (`load_cursor`, `save_cursor`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::model::{ChatRef, ChatType, InboundEvent, MessageRef, OutboundFile, OutboundMessage};

/// The longest one call of [`Platform::probe`] may take.
pub const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// How a platform counts message length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthUnit {
    /// Unicode scalar values (Discord, Slack).
    Chars,
    /// UTF-16 code units (Telegram).
    Utf16,
}

/// The markup a platform renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkdownDialect {
    /// Plain text; markdown is passed through as typed.
    Plain,
    /// CommonMark-ish markdown (the API, Discord).
    Markdown,
    /// Telegram's HTML subset.
    TelegramHtml,
    /// Slack's mrkdwn.
    SlackMrkdwn,
}

/// What a platform can do; the host adapts chunking, progress and pacing to it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capabilities {
    /// Longest message, counted in `length_unit`.
    pub max_message_len: usize,
    /// How `max_message_len` is counted.
    pub length_unit: LengthUnit,
    /// Whether sent messages can be edited (progress messages).
    pub edits: bool,
    /// Whether chats have threads.
    pub threads: bool,
    /// Whether messages can carry buttons.
    pub buttons: bool,
    /// Whether a typing indicator exists.
    pub typing: bool,
    /// Whether a person can answer approvals and questions here (not the HTTP API).
    pub interactive: bool,
    /// Whether each inbound message is a request answered by exactly one response that names it
    /// (the API, Home Assistant's `hermesd_request`): the host then never sends it a busy notice,
    /// a progress message or a "still working" note in reply, since the caller would take the
    /// first one as the answer, and never folds it into another request's turn.
    pub request_response: bool,
    /// The markup the platform renders.
    pub markdown: MarkdownDialect,
    /// Sustained sends per second to one private chat that the platform tolerates.
    pub per_chat_rate: f64,
    /// Burst of sends to one chat allowed above the sustained rate.
    pub per_chat_burst: u32,
    /// Sustained sends per second to one group or channel (often lower than to a DM).
    pub group_rate: f64,
    /// Sustained sends per second across all chats of this bot.
    pub global_rate: f64,
}

/// How the host's access lists name people on a platform, declared by the adapter so the host
/// needs no list of platforms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessRules {
    /// Prefix of the access variables (`<PREFIX>_ALLOWED_USERS`, `_ADMIN_USERS`, …); `None`:
    /// the platform's name in capitals.
    pub env_prefix: Option<&'static str>,
    /// User ids are phone numbers without their `+` (WhatsApp's `wa_id`): a list may write them
    /// either way.
    pub phone_number_ids: bool,
    /// An unknown sender in a direct conversation is offered a pairing code.
    pub pairs_strangers: bool,
}

impl AccessRules {
    /// The rules of most platforms: variables named after the platform, ids as they come,
    /// strangers paired.
    pub const DEFAULT: AccessRules = AccessRules { env_prefix: None, phone_number_ids: false, pairs_strangers: true };
}

impl Default for AccessRules {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The largest files a platform takes from a bot, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLimits {
    /// Any file sent as a document.
    pub max_document_bytes: u64,
    /// A picture sent as a photo; a larger one goes as a document.
    pub max_photo_bytes: u64,
}

/// An HTTP request for an adapter's webhook route, as the host's server received it.
#[derive(Debug, Clone)]
pub struct WebhookRequest {
    /// Header names (lowercase) and values.
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: Vec<u8>,
}

impl WebhookRequest {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// What the host's server answers to a webhook request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookResponse {
    /// HTTP status.
    pub status: u16,
    /// Body text (JSON or empty).
    pub body: String,
}

/// How an adapter judges its own health: by inbound progress, not socket state.
#[derive(Debug, Clone, PartialEq)]
pub struct PlatformHealth {
    /// Whether the adapter is receiving normally.
    pub healthy: bool,
    /// Seconds since the last completed receive cycle (a poll, an envelope, a dispatch).
    pub seconds_since_progress: Option<f64>,
    /// One line for operators (`/readyz`): what is wrong, or what is fine.
    pub detail: String,
}

/// Errors an adapter reports; the host acts on the variant.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// The platform asked us to wait; the host pauses the chat's pacer for this long.
    #[error("rate limited, retry after {retry_after:?}")]
    RateLimited {
        /// How long to wait before the next call to this chat.
        retry_after: Duration,
    },
    /// The token was refused; retrying will not help.
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    /// A failure that may pass (network, 5xx); the host retries with backoff.
    #[error("transient: {0}")]
    Transient(String),
    /// A failure that will not pass for this call (chat gone, message too long).
    #[error("permanent: {0}")]
    Permanent(String),
}

impl PlatformError {
    /// A short name of the variant, for metric labels and test tables: `rate`, `unauthorized`,
    /// `transient` or `permanent`.
    pub fn kind(&self) -> &'static str {
        match self {
            PlatformError::RateLimited { .. } => "rate",
            PlatformError::Unauthorized(_) => "unauthorized",
            PlatformError::Transient(_) => "transient",
            PlatformError::Permanent(_) => "permanent",
        }
    }
}

/// The longest wait a platform's "retry after" may impose. A longer one (a bad header, a
/// misread unit) is clamped: it must neither stall a chat for days nor overflow a deadline.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// `retry_after` clamped to `MAX_RETRY_AFTER`.
pub fn clamp_retry_after(retry_after: Duration) -> Duration {
    retry_after.min(MAX_RETRY_AFTER)
}

/// The result of handing an event to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// Stored for the first time; it will be handled.
    New,
    /// Seen before; the adapter acknowledges it and does nothing else.
    Duplicate,
}

/// The host's access decision about an event's sender, made before anything of it is stored or
/// downloaded (`Ingress::admit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// A known sender: download attachments, then `accept`.
    Admit,
    /// An unknown sender in a DM: the host answered with a pairing reply (at most one per
    /// window). Download nothing, accept nothing; acknowledge the platform and move the cursor.
    Pairing,
    /// An unknown sender in a group (or one already answered): nothing is downloaded, stored or
    /// answered; acknowledge the platform and move the cursor.
    Ignored,
}

impl Admission {
    /// Whether the adapter goes on to download and accept.
    pub fn admitted(self) -> bool {
        self == Admission::Admit
    }
}

/// The host could not store an event; the adapter must not acknowledge it to the platform.
#[derive(Debug, thiserror::Error)]
#[error("ingress refused event: {0}")]
pub struct IngressError(pub String);

/// Where adapters hand normalised events. `admit` comes first: a stranger costs one access check
/// and nothing else. `accept` returns only after the event is durably stored and deduplicated;
/// only then may the adapter acknowledge it or advance its cursor.
#[async_trait]
pub trait Ingress: Send + Sync {
    /// Decide on `event`'s sender before downloading its attachments, opening threads or
    /// accepting it. `event` is normalised but carries no downloaded files yet. An error means
    /// the decision could not be made: treat it like a refused `accept` (do not acknowledge).
    async fn admit(&self, event: &InboundEvent) -> Result<Admission, IngressError>;

    /// Store and deduplicate `event`, then schedule it.
    async fn accept(&self, event: InboundEvent) -> Result<Accepted, IngressError>;

    /// A durable cursor the adapter keeps across restarts (e.g. Telegram's update offset).
    async fn load_cursor(&self, platform: &str) -> Result<Option<String>, IngressError>;

    /// Persist a cursor; call it only after every event before it was accepted.
    async fn save_cursor(&self, platform: &str, cursor: &str) -> Result<(), IngressError>;

    /// What the platform later reported about a message the bot sent (`platform_message_id`, the
    /// id `send` returned): delivered, read, or failed after it was accepted. A failure marks the
    /// outbound receipt failed. Returns whether a sent message with that id was found. Hosts
    /// without receipts keep the default, which records nothing.
    async fn delivery_status(
        &self,
        _platform: &str,
        _platform_message_id: &str,
        _status: &DeliveryStatus,
    ) -> Result<bool, IngressError> {
        Ok(false)
    }

    /// When the newest stored event from `chat_id` on `platform` was received (Unix ms), from the
    /// host's durable record; `None` when none is known. Platforms whose free-form replies are
    /// limited to a window after the user's last message (WhatsApp's 24 hours) ask this.
    async fn last_inbound_at(&self, _platform: &str, _chat_id: &str) -> Result<Option<i64>, IngressError> {
        Ok(None)
    }
}

/// A platform's later report on a message the bot sent (`Ingress::delivery_status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// The platform sent it on.
    Sent,
    /// It reached the recipient's device.
    Delivered,
    /// The recipient read it.
    Read,
    /// It failed after the platform had accepted it; the text says why (free of secrets).
    Failed(String),
}

impl DeliveryStatus {
    /// The name stored with the receipt: `sent`, `delivered`, `read` or `failed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            DeliveryStatus::Sent => "sent",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Read => "read",
            DeliveryStatus::Failed(_) => "failed",
        }
    }
}

/// What an adapter receives when it starts.
#[derive(Clone)]
pub struct PlatformContext {
    /// Where to hand events.
    pub ingress: Arc<dyn Ingress>,
}

/// A platform adapter. `Any`, so a host feature built over one adapter (Home Assistant's tools
/// over its connection) can find it in the registry.
#[async_trait]
pub trait Platform: std::any::Any + Send + Sync {
    /// The short name used in chat refs, config and session keys.
    fn name(&self) -> &str;

    /// What the platform can do.
    fn capabilities(&self) -> Capabilities;

    /// Receive and normalise until `cancel` fires; reconnect by itself on failure. Returns only on
    /// cancel or an error that retrying cannot fix.
    async fn run(&self, ctx: PlatformContext, cancel: CancellationToken) -> Result<(), PlatformError>;

    /// Send one message (already chunked) and return its id.
    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, PlatformError>;

    /// `send` for a stored chunk of the outbox, which is sent again after a crash that fell
    /// between the platform taking it and its receipt being recorded. `key` is the same on every
    /// attempt at this chunk, in every process, and differs between chunks. An adapter whose
    /// platform deduplicates sends by a client key (Discord's `nonce` with `enforce_nonce`)
    /// passes it on, so such a resend creates no second message; the default ignores it.
    async fn send_keyed(&self, message: &OutboundMessage, key: &str) -> Result<MessageRef, PlatformError> {
        let _ = key;
        self.send(message).await
    }

    /// What files this platform can send; `None` when it sends none (the default).
    fn file_limits(&self) -> Option<FileLimits> {
        None
    }

    /// Send `message` with its file (`message.file`, whose bytes are `bytes`) and `message.text`
    /// as the caption; return the id of the message that carries the file. Pictures go as
    /// photos where the platform distinguishes them, falling back to a document when refused.
    async fn send_file(
        &self,
        _message: &OutboundMessage,
        file: &OutboundFile,
        _bytes: &[u8],
    ) -> Result<MessageRef, PlatformError> {
        Err(PlatformError::Permanent(format!("{} cannot send files ({})", self.name(), file.name)))
    }

    /// Replace the text of a message the bot sent. "Not modified" counts as success.
    async fn edit(&self, message: &MessageRef, text: &str) -> Result<(), PlatformError>;

    /// Show a typing indicator in `chat`.
    async fn typing(&self, chat: &ChatRef) -> Result<(), PlatformError>;

    /// Deliver `message` (a reply's first chunk) by replacing the text of `preview`, the message
    /// that showed the answer while it streamed; the preview's id becomes the chunk's receipt.
    /// Adapters that mark a finished reply (a reaction on the user's message) override this.
    async fn fill_preview(&self, preview: &MessageRef, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
        self.edit(preview, &message.text).await.map(|()| preview.clone())
    }

    /// A piece of the answer to message `reply_to`, as the model streams it. Only platforms that
    /// can stream in-process (the HTTP API) use it; chat platforms get paced previews from the
    /// host's outbox instead (`send`/`edit`, or `send_draft`).
    fn stream_delta(&self, _reply_to: &str, _text: &str) {}

    /// A piece of the model's reasoning before its answer to `reply_to`, as it streams (the HTTP
    /// API sends it as `reasoning_content`); platforms that do not stream ignore it.
    fn stream_reasoning(&self, _reply_to: &str, _text: &str) {}

    /// Whether someone consumes `stream_delta` for message `reply_to` right now; the host asks the
    /// model to stream only then.
    fn wants_stream(&self, _reply_to: &str) -> bool {
        false
    }

    /// How the host's access lists name people here.
    fn access_rules(&self) -> AccessRules {
        AccessRules::DEFAULT
    }

    /// The character commands start with: `/`, or another where the platform keeps `/` for
    /// commands of its own (Slack's slash commands never reach the bot as messages).
    fn command_prefix(&self) -> char {
        '/'
    }

    /// The kind of chat a chat id names when a delivery target gives only the id
    /// (`telegram:-100…` is a group): read from the id's shape where the platform's ids show
    /// it; a direct conversation otherwise. It only tunes pacing (groups get the group rate).
    fn chat_type_of(&self, _chat_id: &str) -> ChatType {
        ChatType::Dm
    }

    /// Whether `chat` can show a native draft of a message still being written (Telegram's
    /// `sendMessageDraft` in private chats). The host then streams an answer into a draft
    /// instead of editing a sent message; the final answer is still sent as a message.
    fn supports_drafts(&self, _chat: &ChatRef) -> bool {
        false
    }

    /// Show or update draft `draft_id` (non-zero; one per streamed answer) in `chat`. A draft is
    /// ephemeral and has no message id. `Permanent` means drafts do not work here: the host
    /// falls back to edits.
    async fn send_draft(&self, _chat: &ChatRef, _draft_id: i64, _text: &str) -> Result<(), PlatformError> {
        Err(PlatformError::Permanent("drafts are not supported".into()))
    }

    /// The path (e.g. `/telegram/webhook`) the host's HTTP server should route to
    /// `handle_webhook`, when the adapter receives over HTTP.
    fn webhook_path(&self) -> Option<String> {
        None
    }

    /// Handle one webhook request: verify it, normalise, `ctx.ingress.accept`, and answer 2xx only
    /// after the event was accepted.
    async fn handle_webhook(&self, _ctx: &PlatformContext, _request: WebhookRequest) -> WebhookResponse {
        WebhookResponse { status: 404, body: String::new() }
    }

    /// Answer a GET on the webhook route: a subscription handshake such as WhatsApp's
    /// `hub.challenge` echo. `query` is the raw query string; the body is sent as plain text.
    /// Adapters without a handshake keep the default, 405.
    fn webhook_get(&self, _query: &str) -> WebhookResponse {
        WebhookResponse { status: 405, body: String::new() }
    }

    /// Whether tool progress messages should be shown in `chat` (some platforms keep busy
    /// channels free of them). The final reply is always sent.
    fn shows_progress(&self, _chat: &ChatRef) -> bool {
        true
    }

    /// The adapter's health, judged by inbound progress. `None`: nothing to report.
    fn health(&self) -> Option<PlatformHealth> {
        None
    }

    /// A live check of the account (`hermesd doctor`), each call bounded by [`PROBE_TIMEOUT`], without `run`: who the platform says it
    /// is (`Ok`, e.g. `@my_bot`), or why it refuses or cannot be reached (`Err`, with the fix
    /// where one is known). One call or a few, each bounded; never retried. `None`: the adapter
    /// has no such check.
    async fn probe(&self) -> Option<Result<String, String>> {
        None
    }
}
