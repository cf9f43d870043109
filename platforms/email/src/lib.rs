//! hermesd-email: the e-mail adapter (IMAP IDLE or polling in, SMTP submission out).
//!
//! A sender address is a user and a mail thread is a session (chat = the sender's address,
//! thread = the thread's root Message-ID). Mail that could start a loop (auto-replies, bounces,
//! bulk and list mail, no-reply senders, our own) and mail whose sender our own server did not
//! authenticate never reaches the host. Allowlists, pairing, dedup and pacing are the host's;
//! the password never appears in a log line or an error.
//!
//! An unknown sender gets no pairing reply by mail unless `platforms.email.pairing` is set (a
//! pairing reply to a forged address would be backscatter).

mod config;
mod cursor;
mod format;
mod headers;
mod health;
mod imap;
mod inbound;
mod outbound;
mod receive;
mod section;
mod text;
mod threads;

use async_trait::async_trait;
use hermesd_platform::media::{self, Fetched, MediaDir};
use hermesd_platform::{
    AccessRules, Attachment, AttachmentKind, Capabilities, ChatRef, FileLimits, InboundEvent, IngressError, LengthUnit,
    MarkdownDialect, MessageRef, OutboundFile, OutboundMessage, Platform, PlatformContext, PlatformError,
    PlatformHealth, Redactor,
};
use tokio_util::sync::CancellationToken;

pub use config::{EmailSettings, Endpoint, MAX_IDLE_TIMEOUT, Protocol, Security, is_loopback, valid_address};
pub use inbound::NAME;
pub use section::EmailConfig;

use health::HealthTracker;
use inbound::{InPart, Rules, ThreadInfo};
use outbound::{Envelope, Mailer};
use threads::Threads;

/// The e-mail platform adapter.
pub struct EmailPlatform {
    /// `email`, or `email@<account>`.
    name: String,
    settings: EmailSettings,
    rules: Rules,
    media: MediaDir,
    mailer: Mailer,
    threads: Threads,
    health: HealthTracker,
    redactor: Redactor,
}

impl EmailPlatform {
    /// Builds the adapter; no network until `run` or a send. Check
    /// [`EmailSettings::problems`] first.
    pub fn new(settings: EmailSettings) -> Self {
        let rules = Rules {
            own: settings.address.to_ascii_lowercase(),
            authserv_id: settings.authserv_id.clone(),
            require_auth: settings.require_auth,
            max_file_bytes: settings.max_file_bytes,
        };
        let cycle = settings.idle_timeout.max(settings.poll_interval);
        Self {
            name: hermesd_platform::section::instance_name(NAME, settings.account.as_deref()),
            rules,
            media: MediaDir::new(settings.media_dir.clone(), settings.max_file_bytes),
            mailer: Mailer::new(&settings),
            threads: Threads::default(),
            health: HealthTracker::new(cycle),
            redactor: Redactor::new("<password>", &[settings.password.as_str()]),
            settings,
        }
    }

    /// Normalises one raw message, asks the host to admit its sender, saves its attachments and
    /// hands it over. `Ok(true)`: accepted (new or duplicate), so it may be marked `\Seen`;
    /// `Ok(false)`: skipped (loop, unauthenticated, unknown sender); `Err`: not stored, take it
    /// again later. `too_large` is the size of a message read as headers only.
    pub(crate) async fn deliver(
        &self,
        ctx: &PlatformContext,
        raw: &[u8],
        arrived_ms: i64,
        too_large: Option<u64>,
    ) -> Result<bool, IngressError> {
        let normalised = match inbound::normalise(raw, &self.rules, arrived_ms) {
            Ok(normalised) => normalised,
            Err(skip) => {
                tracing::info!(platform = NAME, reason = skip.label(), detail = ?skip, "mail not answered");
                return Ok(false);
            }
        };
        let mut event = normalised.event;
        // Chats are the adapter's: each mailbox's thread with one person is a chat of its own.
        event.chat_mut().platform.clone_from(&self.name);
        let admission = ctx.ingress.admit(&event).await?;
        if !admission.admitted() {
            tracing::debug!(platform = NAME, ?admission, "mail from a sender without access");
            return Ok(false);
        }
        if let InboundEvent::Message { message, .. } = &mut event {
            if let Some(size) = too_large {
                media::add_note(message, &format!("[message too large to read: {}]", media::megabytes(size)));
            }
            let chat = message.chat.chat_id.clone();
            for (index, part) in normalised.parts.into_iter().enumerate() {
                let name = part.name.clone();
                let outcome = self.save(&chat, &message.message_id, index, part).await;
                media::record(message, &name, outcome, NAME);
            }
            self.threads.remember(&message.message_id, normalised.thread);
        }
        ctx.ingress.accept(event).await?;
        Ok(true)
    }

    async fn save(&self, chat: &str, message_id: &str, index: usize, part: InPart) -> Result<Fetched, String> {
        let Some(bytes) = part.bytes else { return Ok(Fetched::TooLarge(part.size)) };
        let file_id = format!("{}-{index}", short_hash(message_id));
        let dest = self.media.destination(chat, &file_id, &part.name).await?;
        if MediaDir::existing(&dest).await.is_none() {
            let partial = MediaDir::partial(&dest);
            if let Err(e) = tokio::fs::write(&partial, &bytes).await {
                MediaDir::abandon(&partial).await;
                return Err(format!("write {}: {e}", partial.display()));
            }
            MediaDir::complete(&partial, &dest).await?;
        }
        Ok(Fetched::Saved(Attachment {
            kind: kind_of(&part.mime),
            path: self.media.relative(&dest),
            mime: Some(part.mime),
            name: Some(part.name),
            size: part.size,
        }))
    }

    /// The headers of a mail to `chat` answering `reply_to`.
    fn envelope(&self, chat: &ChatRef, reply_to: Option<&str>) -> Envelope {
        let parent = reply_to.map(str::to_owned).or_else(|| chat.thread_id.clone());
        let known = parent.as_deref().and_then(|id| self.threads.get(id));
        let root = chat.thread_id.clone();
        let (subject, references) = match (known, &parent) {
            (Some(ThreadInfo { subject, references }), _) => (Some(subject), references),
            (None, Some(parent)) => {
                let subject = root.as_deref().and_then(|r| self.threads.get(r)).map(|t| t.subject);
                let mut references: Vec<String> = root.into_iter().filter(|r| r != parent).collect();
                references.push(parent.clone());
                (subject, references)
            }
            (None, None) => (None, Vec::new()),
        };
        Envelope { to: chat.chat_id.clone(), subject, in_reply_to: parent, references }
    }

    async fn send_mail(
        &self,
        message: &OutboundMessage,
        file: Option<(&OutboundFile, &[u8])>,
    ) -> Result<MessageRef, PlatformError> {
        let envelope = self.envelope(&message.chat, message.reply_to.as_deref());
        let (mail, id) = self.mailer.build(&envelope, &message.text, file)?;
        self.mailer.submit(mail).await.map_err(|e| redact_error(&self.redactor, e))?;
        let mut references = envelope.references.clone();
        references.push(id.clone());
        let subject = envelope.subject.map(|s| text::reply_subject(&s)).unwrap_or_default();
        self.threads.remember(&id, ThreadInfo { subject, references });
        Ok(MessageRef { chat: message.chat.clone(), message_id: id })
    }
}

fn redact_error(redactor: &Redactor, error: PlatformError) -> PlatformError {
    match error {
        PlatformError::Transient(e) => PlatformError::Transient(redactor.redact(&e)),
        PlatformError::Permanent(e) => PlatformError::Permanent(redactor.redact(&e)),
        PlatformError::Unauthorized(e) => PlatformError::Unauthorized(redactor.redact(&e)),
        other => other,
    }
}

fn kind_of(mime: &str) -> AttachmentKind {
    match mime.split('/').next().unwrap_or_default() {
        "image" => AttachmentKind::Image,
        "audio" => AttachmentKind::Audio,
        "video" => AttachmentKind::Video,
        _ => AttachmentKind::Document,
    }
}

/// A short, stable, file-name-safe token for a Message-ID.
fn short_hash(text: &str) -> String {
    // FNV-1a: stable across builds (unlike the std hasher), which file names must be.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

#[async_trait]
impl Platform for EmailPlatform {
    fn name(&self) -> &str {
        &self.name
    }

    async fn probe(&self) -> Option<Result<String, String>> {
        let login = async {
            let (mut session, idle) =
                imap::connect(&self.settings).await.map_err(|e| self.redactor.redact(&e.to_string()))?;
            let folder = &self.settings.folder;
            let selected = session.select(folder).await.map_err(|e| format!("select {folder}: {e}"));
            let _ = session.logout().await;
            let mailbox = selected?;
            let idle = if idle { "IDLE" } else { "no IDLE: polled" };
            Ok(format!("{} logged in; {folder} has {} messages ({idle})", self.settings.username, mailbox.exists))
        };
        Some(match tokio::time::timeout(hermesd_platform::PROBE_TIMEOUT, login).await {
            Err(_) => Err(format!("{}: no answer in 15 s", self.settings.imap_url)),
            Ok(outcome) => outcome,
        })
    }

    fn access_rules(&self) -> AccessRules {
        AccessRules { pairs_strangers: self.settings.pairing, ..AccessRules::DEFAULT }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // One mail per answer: chunking a reply into several mails helps nobody.
            max_message_len: 100_000,
            length_unit: LengthUnit::Chars,
            edits: false,
            threads: true,
            buttons: false,
            typing: false,
            interactive: true,
            request_response: false,
            markdown: MarkdownDialect::Markdown,
            // Submission servers throttle bursts; a person reads mail slowly anyway.
            per_chat_rate: 0.5,
            per_chat_burst: 3,
            group_rate: 0.5,
            global_rate: 2.0,
        }
    }

    async fn run(&self, ctx: PlatformContext, cancel: CancellationToken) -> Result<(), PlatformError> {
        self.health.started();
        self.receive(&ctx, &cancel).await;
        Ok(())
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
        self.send_mail(message, None).await
    }

    fn file_limits(&self) -> Option<FileLimits> {
        Some(FileLimits {
            max_document_bytes: self.settings.max_file_bytes,
            max_photo_bytes: self.settings.max_file_bytes,
        })
    }

    async fn send_file(
        &self,
        message: &OutboundMessage,
        file: &OutboundFile,
        bytes: &[u8],
    ) -> Result<MessageRef, PlatformError> {
        if bytes.len() as u64 > self.settings.max_file_bytes {
            return Err(PlatformError::Permanent(format!(
                "{} is {}, over the e-mail attachment cap of {}",
                file.name,
                media::megabytes(bytes.len() as u64),
                media::megabytes(self.settings.max_file_bytes)
            )));
        }
        self.send_mail(message, Some((file, bytes))).await
    }

    async fn edit(&self, _message: &MessageRef, _text: &str) -> Result<(), PlatformError> {
        Err(PlatformError::Permanent("a sent e-mail cannot be edited".into()))
    }

    async fn typing(&self, _chat: &ChatRef) -> Result<(), PlatformError> {
        Ok(())
    }

    fn shows_progress(&self, _chat: &ChatRef) -> bool {
        // Each progress line would be a mail of its own.
        false
    }

    fn health(&self) -> Option<PlatformHealth> {
        self.health.report()
    }
}
