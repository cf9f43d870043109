//! The durable outbox: replies are stored (chunked to the platform's limit) before anything is
//! sent, then delivered per chat in order through that chat's pacer, with receipts recorded.
//!
//! Invariant: every outbound call to a chat goes through its pacer, and a stored chunk is sent
//! until the platform returns a message id (or it fails permanently). Nothing here builds
//! platform JSON.
//!
//! `Outbox` composes chunks by the platform's capabilities after masking secrets (`compose`),
//! delivers them in ordered per-chat lanes — chunks of one turn in order, turns of one chat in the
//! order they finished — retries by error kind, and records receipts. A row with a file is sent
//! with `Platform::send_file` and the bytes of its stored copy, read from the data dir at each
//! attempt (never into a preview), after the answer's text, through the same lane and pacer.
//!
//! `Outbox::outlive` is the one place that decides which accepted events and send receipts must
//! outlive a power cut (`store::Outlive`): a platform that answers per request
//! (`Capabilities::request_response`: the API, Home Assistant requests) asks only `Outlive::Crash`,
//! because its caller holds the request open until the answer and, after a power cut, retries a
//! failed request whatever the disk kept; every other platform, webhooks and any name not
//! registered included, asks `PowerCut`, because it was told "taken" before the turn ran.
//! `answers_per_request` tells the router and the turn which chats those are.

mod pacer;
mod stream;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hermesd_platform::chunk::chunk;
use hermesd_platform::{ChatRef, MessageRef, OutboundKind, OutboundMessage, Platform, PlatformError};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::now_ms;
use crate::metrics::{ERRORS_TOTAL, Metrics, OUTBOUND_TOTAL};
use crate::redact::Redaction;
use crate::store::{Outlive, PendingOutbound, Store};

pub use pacer::{ChatPacer, Pacers};
pub use stream::{INTERRUPTED_NOTE, Preview};

/// Transient failures tolerated per chunk before it is given up.
const MAX_TRANSIENT_ATTEMPTS: u32 = 6;

/// The platforms the host can deliver to, by name. Shared: the outbox is cloned into every
/// delivery task, and the adapters are registered once at start.
#[derive(Default, Clone)]
pub struct PlatformRegistry {
    platforms: Arc<HashMap<String, Arc<dyn Platform>>>,
}

impl PlatformRegistry {
    /// Register an adapter under its name.
    pub fn insert(&mut self, platform: Arc<dyn Platform>) {
        Arc::make_mut(&mut self.platforms).insert(platform.name().to_owned(), platform);
    }

    /// The adapter named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Platform>> {
        self.platforms.get(name)
    }

    /// All adapters.
    pub fn all(&self) -> impl Iterator<Item = &Arc<dyn Platform>> {
        self.platforms.values()
    }

    /// The character commands on `platform` start with (`/` for one not running).
    pub fn command_prefix(&self, platform: &str) -> char {
        self.get(platform).map_or('/', |p| p.command_prefix())
    }
}

/// The outbox service.
#[derive(Clone)]
pub struct Outbox {
    store: Arc<dyn Store>,
    platforms: PlatformRegistry,
    pacers: Arc<Pacers>,
    metrics: Arc<Metrics>,
    tracker: TaskTracker,
    cancel: CancellationToken,
    redaction: Redaction,
    /// Platforms whose chats get streamed previews (`streaming = true`).
    streaming: Arc<std::collections::HashSet<String>>,
    /// `HERMESD_HOME`: the stored paths of outbound files are relative to it.
    data_dir: Option<std::path::PathBuf>,
}

impl Outbox {
    /// An outbox delivering through `platforms`; delivery tasks are tracked by `tracker` and
    /// stop (leaving their rows pending for the next start) when `cancel` fires.
    pub fn new(
        store: Arc<dyn Store>,
        platforms: PlatformRegistry,
        metrics: Arc<Metrics>,
        tracker: TaskTracker,
        cancel: CancellationToken,
    ) -> Self {
        let redaction = Redaction::default();
        let pacers = Arc::new(Pacers::default());
        // Weak: the registry must not keep an outbox's pacers alive.
        let probed = Arc::downgrade(&pacers);
        metrics.gauge_probe(crate::metrics::PACERS, move || {
            probed.upgrade().map_or(0, |pacers| i64::try_from(pacers.len()).unwrap_or(i64::MAX))
        });
        let streaming = Arc::default();
        Self { store, platforms, pacers, metrics, tracker, cancel, redaction, streaming, data_dir: None }
    }

    /// Expire idle pacers every `pacer::EXPIRE_EVERY` until `cancel` fires. Calls expire a few
    /// too, but after a burst of chats no call may come for hours.
    pub async fn expire_pacers(self, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(pacer::EXPIRE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => self.pacers.expire_idle(),
            }
        }
    }

    /// Send files stored under `data_dir` (`HERMESD_HOME`); without it, a file message fails.
    pub fn with_data_dir(mut self, data_dir: std::path::PathBuf) -> Self {
        self.data_dir = Some(data_dir);
        self
    }

    /// Mask the daemon's secrets (and token shapes, which are masked without it too) in all text
    /// bound for a chat.
    pub fn with_redaction(mut self, redaction: Redaction) -> Self {
        self.redaction = redaction;
        self
    }

    /// `HERMESD_HOME`, where stored outbound files live (when set).
    pub fn data_dir(&self) -> Option<&std::path::Path> {
        self.data_dir.as_deref()
    }

    /// The redaction applied to text bound for a chat (streamed answers use it too).
    pub fn redaction(&self) -> &Redaction {
        &self.redaction
    }

    /// The platforms.
    pub fn platforms(&self) -> &PlatformRegistry {
        &self.platforms
    }

    /// Split `text` into messages sized for `chat`'s platform, secrets masked first (on the whole
    /// text, so no chunk boundary hides one). An unknown platform gets one chunk; its delivery
    /// then fails with a clear error.
    pub fn compose(
        &self,
        chat: &ChatRef,
        text: &str,
        kind: OutboundKind,
        reply_to: Option<&str>,
    ) -> Vec<OutboundMessage> {
        let text = if text.trim().is_empty() { "(empty reply)".to_owned() } else { self.redaction.redact(text) };
        let text = text.as_str();
        let parts = match self.platforms.get(&chat.platform) {
            Some(p) => {
                let caps = p.capabilities();
                chunk(text, caps.max_message_len, caps.length_unit)
            }
            None => vec![text.to_owned()],
        };
        let count = u32::try_from(parts.len()).unwrap_or(u32::MAX);
        parts
            .into_iter()
            .enumerate()
            .map(|(i, part)| OutboundMessage {
                chat: chat.clone(),
                text: part,
                reply_to: reply_to.map(str::to_owned),
                kind,
                buttons: Vec::new(),
                chunk: (u32::try_from(i).unwrap_or(u32::MAX), count),
                file: None,
            })
            .collect()
    }

    /// Store a notice (outside any turn) and deliver it.
    pub async fn notify(&self, chat: &ChatRef, text: &str, reply_to: Option<&str>, turn_id: &str) {
        let messages = self.compose(chat, text, OutboundKind::Notice, reply_to);
        self.send_notice(chat, turn_id, &messages).await;
    }

    /// Store composed messages (a question with buttons, say) under `turn_id` and deliver them.
    pub async fn send_notice(&self, chat: &ChatRef, turn_id: &str, messages: &[OutboundMessage]) {
        match self.store.enqueue_outbound(turn_id, messages, now_ms()).await {
            Ok(_) => self.deliver(chat, turn_id),
            Err(e) => {
                self.metrics.inc(ERRORS_TOTAL, &[("kind", "store")]);
                tracing::error!(error = %e, turn = turn_id, "store notice");
            }
        }
    }

    /// Show a typing indicator, if the chat's pacer has room now (typing is never worth a wait).
    pub async fn typing(&self, chat: &ChatRef) {
        let Some((platform, pacer)) = self.platform_and_pacer(chat) else { return };
        if platform.capabilities().typing
            && pacer.try_acquire()
            && let Err(e) = platform.typing(chat).await
        {
            self.note_droppable_failure(&pacer, &e);
        }
    }

    /// Send or update the turn's progress message, if the pacer has room now. Progress is
    /// ephemeral: it is not stored, and a skipped update is simply superseded by the next.
    pub async fn progress(
        &self,
        chat: &ChatRef,
        current: Option<&MessageRef>,
        text: &str,
        reply_to: Option<&str>,
    ) -> Option<MessageRef> {
        let (platform, pacer) = self.platform_and_pacer(chat)?;
        if !platform.capabilities().edits || !platform.shows_progress(chat) || !pacer.try_acquire() {
            return None;
        }
        let text = &self.redaction.redact(text);
        let result = match current {
            Some(existing) => platform.edit(existing, text).await.map(|()| existing.clone()),
            None => {
                let message = OutboundMessage {
                    chat: chat.clone(),
                    text: text.to_owned(),
                    reply_to: reply_to.map(str::to_owned),
                    kind: OutboundKind::Progress,
                    buttons: Vec::new(),
                    chunk: (0, 1),
                    file: None,
                };
                platform.send(&message).await
            }
        };
        match result {
            Ok(sent) => Some(sent),
            Err(e) => {
                self.note_droppable_failure(&pacer, &e);
                None
            }
        }
    }

    /// Whether `chat`'s platform answers each message with one response naming it
    /// (`Capabilities::request_response`): nothing but the answer may be sent in reply there.
    pub fn answers_per_request(&self, chat: &ChatRef) -> bool {
        self.platforms.get(&chat.platform).is_some_and(|p| p.capabilities().request_response)
    }

    /// What an accepted event or a send receipt of `chat` must outlive before it is reported
    /// done: a crash where the platform answers per request (its caller holds the request open
    /// until the answer, so after a power cut it sees a failed request and retries), a power cut
    /// everywhere else (the platform was told "taken" before the turn ran).
    pub fn outlive(&self, chat: &ChatRef) -> Outlive {
        if self.answers_per_request(chat) { Outlive::Crash } else { Outlive::PowerCut }
    }

    fn platform_and_pacer(&self, chat: &ChatRef) -> Option<(Arc<dyn Platform>, Arc<ChatPacer>)> {
        let platform = self.platforms.get(&chat.platform)?.clone();
        let caps = platform.capabilities();
        let pacer = self.pacers.get(&chat.key(), chat_rate(&caps, chat), caps.per_chat_burst);
        Some((platform, pacer))
    }

    fn note_droppable_failure(&self, pacer: &ChatPacer, error: &PlatformError) {
        if let PlatformError::RateLimited { retry_after } = error {
            pacer.pause(*retry_after);
        }
        tracing::debug!(error = %error, "typing or progress update dropped");
    }

    /// Deliver the pending chunks of `turn_id` to `chat`, after any turn queued before it for
    /// the same chat.
    pub fn deliver(&self, chat: &ChatRef, turn_id: &str) {
        self.enqueue_delivery(chat, turn_id, None);
    }

    /// Like `deliver`, with the chunks the caller just stored (saves reading them back).
    pub fn deliver_rows(&self, chat: &ChatRef, turn_id: &str, rows: Vec<PendingOutbound>) {
        self.enqueue_delivery(chat, turn_id, Some(rows));
    }

    fn enqueue_delivery(&self, chat: &ChatRef, turn_id: &str, rows: Option<Vec<PendingOutbound>>) {
        let platform = self.platforms.get(&chat.platform).map(|p| p.capabilities());
        let (rate, burst) = platform.map_or((1.0, 1), |c| (chat_rate(&c, chat), c.per_chat_burst));
        let pacer = self.pacers.get(&chat.key(), rate, burst);
        let start_drainer = {
            let mut lane = pacer.lane.lock().expect("lane lock poisoned");
            lane.0.push_back((turn_id.to_owned(), rows));
            !std::mem::replace(&mut lane.1, true)
        };
        if start_drainer {
            let this = self.clone();
            self.tracker.spawn(async move { this.drain(pacer).await });
        }
    }

    /// Deliver everything left pending by an earlier run, per chat in the original order.
    pub async fn resume_pending(&self) -> usize {
        let pending = match self.store.pending_outbound().await {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %e, "load pending outbound messages");
                return 0;
            }
        };
        let mut seen = std::collections::HashSet::new();
        for row in &pending {
            if seen.insert(row.turn_id.clone()) {
                self.deliver(&row.message.chat, &row.turn_id);
            }
        }
        if !pending.is_empty() {
            tracing::info!(chunks = pending.len(), turns = seen.len(), "resuming undelivered replies");
        }
        pending.len()
    }

    async fn drain(&self, pacer: Arc<ChatPacer>) {
        loop {
            let next = {
                let mut lane = pacer.lane.lock().expect("lane lock poisoned");
                match lane.0.pop_front() {
                    Some(turn) => turn,
                    None => {
                        lane.1 = false;
                        return;
                    }
                }
            };
            let (turn, preloaded) = next;
            let rows = match preloaded {
                Some(rows) => rows,
                None => match self.store.pending_for_turn(&turn).await {
                    Ok(rows) => rows,
                    Err(e) => {
                        tracing::error!(error = %e, turn, "load reply chunks");
                        continue;
                    }
                },
            };
            for row in rows {
                if !self.deliver_chunk(&pacer, row).await {
                    // Cancelled: the rest stays pending for the next start.
                    let mut lane = pacer.lane.lock().expect("lane lock poisoned");
                    lane.0.clear();
                    lane.1 = false;
                    return;
                }
            }
        }
    }

    /// Send one chunk until it is delivered or given up. Returns false when cancelled.
    async fn deliver_chunk(&self, pacer: &ChatPacer, row: PendingOutbound) -> bool {
        let platform_name = row.message.chat.platform.clone();
        let Some(platform) = self.platforms.get(&platform_name).cloned() else {
            let error = format!("no {platform_name} adapter is running");
            tracing::error!(turn = row.turn_id, "{error}; reply not delivered");
            let _ = self.store.mark_attempt_failed(row.id, &error, true).await;
            self.metrics.inc(OUTBOUND_TOTAL, &[("platform", "unknown"), ("outcome", "failed")]);
            return true;
        };
        let platform_label = platform.name().to_owned();
        // Every send to any chat of this platform also takes a token from its bot-wide bucket.
        let global = self.global_pacer(&platform);
        // A streamed answer's first chunk replaces its preview.
        let mut preview = self.preview_for(&row, &platform).await;
        let mut attempts = row.attempts;
        loop {
            tokio::select! {
                _ = self.cancel.cancelled() => return false,
                _ = async {
                    pacer.acquire().await;
                    global.acquire().await;
                } => {}
            }
            crate::failpoint!("outbox.send");
            let result = tokio::select! {
                _ = self.cancel.cancelled() => return false,
                r = self.send_or_fill(&platform, pacer, &row, &mut preview) => r,
            };
            attempts += 1;
            let error = match result {
                Ok((sent, filled)) => {
                    crate::failpoint!("outbox.sent");
                    self.record_receipt(&row, &sent, filled).await;
                    crate::failpoint!("outbox.receipt");
                    self.metrics.inc(OUTBOUND_TOTAL, &[("platform", &platform_label), ("outcome", "sent")]);
                    return true;
                }
                Err(PlatformError::RateLimited { retry_after }) => {
                    tracing::warn!(platform = %platform_label, ?retry_after, "rate limited; pausing chat");
                    pacer.pause(retry_after);
                    self.metrics.inc(OUTBOUND_TOTAL, &[("platform", &platform_label), ("outcome", "retried")]);
                    continue;
                }
                Err(e) => e,
            };
            let give_up = match &error {
                PlatformError::Transient(_) => attempts >= MAX_TRANSIENT_ATTEMPTS,
                _ => true,
            };
            let text = error.to_string();
            let _ = self.store.mark_attempt_failed(row.id, &text, give_up).await;
            if give_up {
                self.metrics.inc(OUTBOUND_TOTAL, &[("platform", &platform_label), ("outcome", "failed")]);
                self.metrics.inc(ERRORS_TOTAL, &[("kind", "delivery")]);
                tracing::error!(platform = %platform_label, turn = row.turn_id, error = %text, "reply not delivered");
                return true;
            }
            self.metrics.inc(OUTBOUND_TOTAL, &[("platform", &platform_label), ("outcome", "retried")]);
            let backoff = Duration::from_millis(500 * 2u64.pow(attempts.min(6)));
            tokio::select! {
                _ = self.cancel.cancelled() => return false,
                _ = tokio::time::sleep(backoff) => {}
            }
        }
    }
}

impl Outbox {
    /// One platform call for a stored row: `send_keyed` (keyed by the row, so a platform that
    /// deduplicates drops a resend after a crash), or `send_file` with the bytes of the copy made
    /// when the row was stored (a copy that is gone fails the row for good).
    async fn send_row(&self, platform: &dyn Platform, row: &PendingOutbound) -> Result<MessageRef, PlatformError> {
        let message = &row.message;
        let Some(file) = &message.file else {
            return platform.send_keyed(message, &send_key(row)).await;
        };
        let Some(data_dir) = &self.data_dir else {
            return Err(PlatformError::Permanent("this outbox has no data dir to read files from".into()));
        };
        // Stored rows name copies under `media/outbound/`; anything else is not ours to read.
        let rel = std::path::Path::new(&file.path);
        let ours =
            rel.starts_with("media/outbound") && rel.components().all(|c| matches!(c, std::path::Component::Normal(_)));
        if !ours {
            return Err(PlatformError::Permanent(format!("{} is not a stored outbound file", file.path)));
        }
        let bytes = tokio::fs::read(data_dir.join(rel))
            .await
            .map_err(|e| PlatformError::Permanent(format!("read the stored copy of {}: {e}", file.name)))?;
        platform.send_file(message, file, &bytes).await
    }
}

/// The key of every attempt at `row`: its turn (unique for ever) and its row id (unique within
/// the turn), so it never collides with another chunk, even after retention reuses row ids.
fn send_key(row: &PendingOutbound) -> String {
    format!("{}/{}", row.turn_id, row.id)
}

/// Sends per second a chat tolerates: groups and channels are paced slower than DMs.
fn chat_rate(caps: &hermesd_platform::Capabilities, chat: &ChatRef) -> f64 {
    if chat.chat_type == hermesd_platform::ChatType::Dm { caps.per_chat_rate } else { caps.group_rate }
}
