//! hermesd-signal: the Signal adapter, a client of a local signal-cli daemon (`signal-cli -a
//! +NUMBER daemon --http 127.0.0.1:8080`): its server-sent event stream in, JSON-RPC out.
//!
//! A thin translator: it normalises envelopes, asks the host to admit the sender, fetches
//! attachments with `getAttachment`, hands the event to the ingress and sends what the host
//! gives it. Allowlists, pairing, dedup, pacing and chunking are the host's.

mod config;
/// Fuzz target entry points (tests/fuzz); cargo-afl builds with `--cfg fuzzing`.
#[cfg(any(fuzzing, test))]
pub mod fuzzing;
mod health;
mod inbound;
mod media;
mod outbound;
mod rpc;
mod section;
mod stream;

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use hermesd_platform::media::MediaDir;
use hermesd_platform::{
    Backoff, Capabilities, ChatRef, FileLimits, IngressError, LengthUnit, MarkdownDialect, MessageRef, OutboundFile,
    OutboundMessage, Platform, PlatformContext, PlatformError, PlatformHealth,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use config::{DEFAULT_HTTP_URL, KEEPALIVE, SignalSettings, host_of, is_account, is_loopback, is_uuid};
pub use section::SignalConfig;

use health::HealthTracker;
use inbound::Rules;
use media::MediaStore;
use rpc::Rpc;

/// The platform name in chat refs and session keys.
pub const NAME: &str = "signal";

/// Signal clients show up to 2,000 characters as one message (longer text goes as an
/// attachment), so replies are split there.
pub const MAX_MESSAGE_CHARS: usize = 2000;

/// The Signal platform adapter.
pub struct SignalPlatform {
    /// `signal`, or `signal@<account>`.
    name: String,
    settings: SignalSettings,
    http: reqwest::Client,
    rpc: Rpc,
    rules: Rules,
    media: MediaStore,
    health: HealthTracker,
    streams_opened: AtomicU64,
}

impl SignalPlatform {
    /// Builds the adapter; no network until `run`. Run [`SignalSettings::validate`] first.
    pub fn new(settings: SignalSettings) -> Result<Self, String> {
        // signal-cli is local: environment proxies must not see its traffic.
        let http = reqwest::Client::builder()
            .connect_timeout(settings.api_timeout)
            .pool_idle_timeout(hermesd_platform::HTTP_POOL_IDLE_TIMEOUT)
            .pool_max_idle_per_host(hermesd_platform::HTTP_POOL_MAX_IDLE_PER_HOST)
            .no_proxy()
            .build()
            .map_err(|e| format!("signal: http client: {e}"))?;
        let rules = Rules {
            account: settings.account.clone(),
            account_uuid: settings.account_uuid.clone(),
            require_mention: settings.require_mention,
            patterns: settings.mention_patterns.iter().map(|p| p.trim().to_lowercase()).collect(),
        };
        Ok(Self {
            name: hermesd_platform::section::instance_name(NAME, settings.account_name.as_deref()),
            rpc: Rpc::new(http.clone(), settings.base(), &settings.account, settings.api_timeout),
            media: MediaStore::new(MediaDir::new(settings.media_dir.clone(), settings.max_file_bytes)),
            health: HealthTracker::new(settings.stream_deadline),
            streams_opened: AtomicU64::new(0),
            rules,
            http,
            settings,
        })
    }

    /// How many event streams `run` opened so far (a replaced stream counts again).
    pub fn streams_opened(&self) -> u64 {
        self.streams_opened.load(Ordering::Relaxed)
    }

    /// How many streams were replaced because they went silent past the deadline.
    pub fn streams_replaced_for_silence(&self) -> u64 {
        self.health.wedged_count()
    }

    fn stream_opened(&self) {
        self.streams_opened.fetch_add(1, Ordering::Relaxed);
    }

    /// Reacts with `emoji` to the message `message_id` (`<author>:<timestamp>`, an inbound
    /// message's id) in `chat`, through JSON-RPC `sendReaction`.
    pub async fn react(&self, chat: &ChatRef, message_id: &str, emoji: &str) -> Result<(), PlatformError> {
        outbound::react(&self.rpc, chat, message_id, emoji).await
    }

    /// One `receive` payload from the stream: normalise, admit, fetch files, accept. signal-cli
    /// has already acknowledged it to Signal, so a refused accept is retried (the store rides
    /// out its own faults) for `ACCEPT_PATIENCE` before the message is reported lost.
    async fn handle(&self, ctx: &PlatformContext, payload: &Value, cancel: &CancellationToken) {
        if let Some(account) = payload.get("account").and_then(Value::as_str)
            && account != self.settings.account
        {
            return;
        }
        let Some(mut normalised) = inbound::normalise(payload, &self.rules) else { return };
        // Chats are the adapter's: each number's chat with one person is a chat of its own.
        normalised.event.chat_mut().platform.clone_from(&self.name);
        let event_id = normalised.event.event_id().to_owned();
        let admission = match patiently(cancel, || ctx.ingress.admit(&normalised.event)).await {
            Some(admission) => admission,
            None => return lost(&event_id),
        };
        if !admission.admitted() {
            tracing::debug!(platform = NAME, ?admission, "message from an unknown sender");
            return;
        }
        self.media.fetch_all(&self.rpc, self.settings.api_timeout, &mut normalised).await;
        let event = normalised.event;
        match patiently(cancel, || ctx.ingress.accept(event.clone())).await {
            Some(accepted) => tracing::debug!(platform = NAME, ?accepted, "message accepted"),
            None => lost(&event_id),
        }
    }
}

fn lost(event_id: &str) {
    // signal-cli acknowledged the message to Signal already; nothing can fetch it again.
    tracing::error!(
        platform = NAME,
        event = event_id,
        "signal message lost: the store refused it and signal-cli cannot redeliver it"
    );
}

/// `call` retried with backoff until it works, `stream::ACCEPT_PATIENCE` passes or `cancel`.
async fn patiently<T, F, Fut>(cancel: &CancellationToken, mut call: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, IngressError>>,
{
    let deadline = tokio::time::Instant::now() + stream::ACCEPT_PATIENCE;
    let mut backoff = Backoff::new();
    loop {
        match call().await {
            Ok(value) => return Some(value),
            Err(error) => {
                tracing::warn!(platform = NAME, %error, "the host refused a signal message; retrying");
                if tokio::time::Instant::now() + backoff.peek() > deadline || !backoff.wait(cancel).await {
                    return None;
                }
            }
        }
    }
}

#[async_trait]
impl Platform for SignalPlatform {
    fn name(&self) -> &str {
        &self.name
    }

    async fn probe(&self) -> Option<Result<String, String>> {
        let url = format!("{}/api/v1/check", self.settings.base());
        let call = self.http.get(&url).timeout(hermesd_platform::PROBE_TIMEOUT).send();
        Some(match call.await {
            Ok(answer) if answer.status().is_success() => {
                Ok(format!("signal-cli answers at {} for {}", self.settings.http_url, self.settings.account))
            }
            Ok(answer) => Err(format!("{url}: HTTP {}", answer.status().as_u16())),
            Err(error) => {
                Err(format!("{url}: {error} (is `signal-cli -a {} daemon --http` running?)", self.settings.account))
            }
        })
    }

    fn chat_type_of(&self, chat_id: &str) -> hermesd_platform::ChatType {
        chat_type(chat_id)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_len: MAX_MESSAGE_CHARS,
            length_unit: LengthUnit::Chars,
            // signal-cli can edit (`editTimestamp`), but Signal allows few edits per message:
            // progress goes out as messages of its own instead.
            edits: false,
            threads: false,
            buttons: false,
            typing: true,
            interactive: true,
            request_response: false,
            markdown: MarkdownDialect::Plain,
            // Signal publishes no limits; these stay well below what triggers its rate limits.
            per_chat_rate: 1.0,
            per_chat_burst: 5,
            group_rate: 0.5,
            global_rate: 5.0,
        }
    }

    async fn run(&self, ctx: PlatformContext, cancel: CancellationToken) -> Result<(), PlatformError> {
        self.health.started();
        stream::run(self, &ctx, &cancel).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
        outbound::send(&self.rpc, message).await
    }

    fn file_limits(&self) -> Option<FileLimits> {
        Some(outbound::LIMITS)
    }

    async fn send_file(
        &self,
        message: &OutboundMessage,
        file: &OutboundFile,
        bytes: &[u8],
    ) -> Result<MessageRef, PlatformError> {
        // signal-cli uploads the file to Signal before it answers: a longer bound than one call.
        let timeout = self.settings.api_timeout * 4;
        outbound::send_file(&self.rpc, message, file, bytes, timeout).await
    }

    async fn edit(&self, _message: &MessageRef, _text: &str) -> Result<(), PlatformError> {
        Err(PlatformError::Permanent("signal: edits are not used".into()))
    }

    async fn typing(&self, chat: &ChatRef) -> Result<(), PlatformError> {
        outbound::typing(&self.rpc, chat).await
    }

    fn health(&self) -> Option<PlatformHealth> {
        self.health.report()
    }
}

/// The chat a bare id names: `group:<base64 id>` is a group, a number or UUID a person.
fn chat_type(chat_id: &str) -> hermesd_platform::ChatType {
    if chat_id.starts_with("group:") { hermesd_platform::ChatType::Group } else { hermesd_platform::ChatType::Dm }
}

#[cfg(test)]
mod chat_type_tests {
    use super::*;

    #[test]
    fn a_bare_chat_id_tells_its_chat_type() {
        use hermesd_platform::ChatType;
        assert_eq!(chat_type("group:R3JvdXA="), ChatType::Group);
        assert_eq!(chat_type("a11ce000-0000-4000-8000-00000000000a"), ChatType::Dm);
    }
}
