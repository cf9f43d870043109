//! Streaming previews: while the model writes a chat answer, one message (or a native draft)
//! shows it growing. Every preview call goes through the chat's pacer and the bot-wide bucket,
//! at most one per preview interval, the latest text winning (nothing queues up); a 429 pauses
//! the chat's pacer and the preview waits with everything else.
//!
//! Previews are ephemeral: the stored final reply replaces one (its first chunk is delivered by
//! editing the preview, whose id becomes the chunk's receipt). A sent preview's id is stored at
//! once, so after a crash mid-stream recovery edits it to a short note. Nothing here is retried
//! and nothing decides the final answer; a failed update is simply superseded by the next.
//!
//! `Preview` is one streamed turn's task, for platforms with `streaming = true`: at most one update
//! per second or 1.5 / the chat's rate, the latest masked text (`StreamMask`) winning; the text
//! stops growing at the platform's limit and restarts with each model call. Telegram private chats
//! get a native draft (`Platform::send_draft`), others a message sent then edited, its id stored at
//! once (`PreviewStore`, migration 0009). The reply's first stored chunk is delivered into the
//! preview (`Platform::fill_preview`, its id the receipt, the preview forgotten in the same
//! transaction), the rest as new messages; a preview no longer editable gives way to a new message.
//! At start, `note_interrupted_previews` edits a preview whose turn has no reply pending to a short
//! note.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hermesd_platform::chunk::{chunk, measure};
use hermesd_platform::{Capabilities, ChatRef, MessageRef, OutboundKind, OutboundMessage, Platform, PlatformError};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{ChatPacer, Outbox, chat_rate};
use crate::clock::now_ms;
use crate::redact::{Redaction, StreamMask};
use crate::store::PendingOutbound;

/// Fewest seconds between two updates of one preview (Telegram tolerates about one edit per
/// second in a chat; Slack's `chat.update` and Discord's edits are no more generous).
const PREVIEW_EVERY: Duration = Duration::from_secs(1);

/// What the preview shows after the text, while the answer is still being written.
const WRITING: &str = " …";

/// The most text one preview keeps: far past every platform's message limit (where the preview
/// stops growing anyway), so a runaway answer cannot grow the preview's memory without bound.
const MAX_PREVIEW_BYTES: usize = 256 * 1024;

/// What a preview left behind by a crash mid-stream is edited to.
pub const INTERRUPTED_NOTE: &str = "(interrupted by a restart — the answer follows in a new message)";

/// How long recovery waits for one preview's note before moving on.
const NOTE_TIMEOUT: Duration = Duration::from_secs(10);

/// The preview of one streamed answer. Feed it with `push`; end it with `finish` before the
/// final reply is handed to the outbox, so no preview update can land after it.
pub struct Preview {
    shared: Arc<Shared>,
    closed: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    wake: Notify,
    redaction: Redaction,
}

struct State {
    /// Masks the raw deltas; only what it releases is ever shown.
    mask: StreamMask,
    /// The masked text of the current model call.
    text: String,
    /// Bumped on every change of `text`.
    version: u64,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Preview {
    /// Add a piece of the answer (called inline by the turn; never waits).
    pub fn push(&self, delta: &str) {
        let mut state = self.shared.lock();
        if state.text.len() >= MAX_PREVIEW_BYTES {
            return;
        }
        let safe = state.mask.push(delta);
        if safe.is_empty() {
            return;
        }
        state.text.push_str(&safe);
        state.version += 1;
        drop(state);
        self.shared.wake.notify_one();
    }

    /// A new model call begins: its text replaces what the preview showed (the final reply is the
    /// last call's text). The old text stays visible until new text arrives.
    pub fn restart(&self) {
        let mut state = self.shared.lock();
        state.mask = self.shared.redaction.stream();
        state.text.clear();
    }

    /// Stop updating; waits for an update already under way (so its message id is known and
    /// stored before the final reply looks for it). A wait on the pacer is abandoned.
    pub async fn finish(mut self) {
        self.closed.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Preview {
    fn drop(&mut self) {
        self.closed.cancel();
    }
}

/// Where a preview shows.
enum Surface {
    /// A native draft (Telegram private chats); nothing to replace or clean up later.
    Draft(i64),
    /// A message sent by the bot, then edited; `None` until the first send succeeded.
    Message(Option<MessageRef>),
}

/// One preview's update loop.
struct Lane {
    outbox: Outbox,
    platform: Arc<dyn Platform>,
    chat: ChatRef,
    reply_to: Option<String>,
    turn_id: String,
    pacer: Arc<ChatPacer>,
    global: Arc<ChatPacer>,
    every: Duration,
    surface: Surface,
}

impl Outbox {
    /// Stream previews of platforms named here (`streaming = true` in their config).
    pub fn with_streaming<I: IntoIterator<Item = String>>(mut self, platforms: I) -> Self {
        self.streaming = Arc::new(platforms.into_iter().collect());
        self
    }

    /// Whether answers in `chat` are streamed as previews.
    pub fn streams_to(&self, chat: &ChatRef) -> bool {
        self.streaming.contains(&chat.platform)
            && self.platforms.get(&chat.platform).is_some_and(|p| p.capabilities().edits || p.supports_drafts(chat))
    }

    /// Begin the preview of turn `turn_id`'s answer in `chat`, when streaming is on there.
    pub fn preview(&self, chat: &ChatRef, reply_to: Option<&str>, turn_id: &str) -> Option<Preview> {
        if !self.streams_to(chat) {
            return None;
        }
        let (platform, pacer) = self.platform_and_pacer(chat)?;
        let caps = platform.capabilities();
        let surface =
            if platform.supports_drafts(chat) { Surface::Draft(draft_id(turn_id)) } else { Surface::Message(None) };
        let shared = Arc::new(Shared {
            state: Mutex::new(State { mask: self.redaction.stream(), text: String::new(), version: 0 }),
            wake: Notify::new(),
            redaction: self.redaction.clone(),
        });
        let lane = Lane {
            outbox: self.clone(),
            global: self.global_pacer(&platform),
            every: preview_every(&caps, chat),
            platform,
            chat: chat.clone(),
            reply_to: reply_to.map(str::to_owned),
            turn_id: turn_id.to_owned(),
            pacer,
            surface,
        };
        let closed = self.cancel.child_token();
        let task = self.tracker.spawn(lane.run(shared.clone(), closed.clone()));
        Some(Preview { shared, closed, task: Some(task) })
    }

    /// The bot-wide bucket of `platform`, which every send and preview update also takes from.
    pub(super) fn global_pacer(&self, platform: &Arc<dyn Platform>) -> Arc<ChatPacer> {
        let caps = platform.capabilities();
        self.pacers.get(&format!("global:{}", platform.name()), caps.global_rate, caps.global_rate.ceil() as u32)
    }

    /// The preview the first chunk of `row`'s turn should be delivered into, if it has one.
    pub(super) async fn preview_for(&self, row: &PendingOutbound, platform: &Arc<dyn Platform>) -> Option<MessageRef> {
        let eligible = row.message.chunk.0 == 0
            && row.message.buttons.is_empty()
            && platform.capabilities().edits
            && self.streaming.contains(&row.message.chat.platform);
        if !eligible {
            return None;
        }
        match self.store.preview(&row.turn_id).await {
            Ok(preview) => preview.filter(|p| p.chat == row.message.chat),
            Err(e) => {
                tracing::warn!(error = %e, turn = row.turn_id, "load stream preview; sending the reply anew");
                None
            }
        }
    }

    /// Deliver `row` (a token of both buckets already taken): into `preview` by an edit when
    /// there is one, else as a new message. Returns the receipt and whether the preview was used.
    /// A preview the platform no longer lets us edit (deleted, too old) is forgotten and the
    /// chunk sent anew, after taking fresh tokens.
    pub(super) async fn send_or_fill(
        &self,
        platform: &Arc<dyn Platform>,
        pacer: &ChatPacer,
        row: &PendingOutbound,
        preview: &mut Option<MessageRef>,
    ) -> Result<(MessageRef, bool), PlatformError> {
        // A file never goes into a text preview.
        if row.message.file.is_none()
            && let Some(target) = preview.clone()
        {
            match platform.fill_preview(&target, &row.message).await {
                Ok(sent) => return Ok((sent, true)),
                Err(PlatformError::Permanent(reason)) => {
                    tracing::info!(turn = row.turn_id, %reason, "stream preview not editable; sending the reply anew");
                    *preview = None;
                    if let Err(e) = self.store.drop_preview(&row.turn_id, &target.message_id).await {
                        tracing::warn!(error = %e, turn = row.turn_id, "forget stream preview");
                    }
                    pacer.acquire().await;
                    self.global_pacer(platform).acquire().await;
                }
                Err(other) => return Err(other),
            }
        }
        self.send_row(platform.as_ref(), row).await.map(|sent| (sent, false))
    }

    /// Record the receipt of a delivered chunk (settling the preview it went into).
    pub(super) async fn record_receipt(&self, row: &PendingOutbound, sent: &MessageRef, filled: bool) {
        let (now, outlive) = (now_ms(), self.outlive(&row.message.chat));
        let result = if filled {
            self.store.settle_preview(row.id, &row.turn_id, &sent.message_id, now, outlive).await
        } else {
            self.store.mark_sent(row.id, &sent.message_id, now, outlive).await
        };
        if let Err(e) = result {
            tracing::error!(error = %e, turn = row.turn_id, "record delivery receipt");
        }
    }

    /// At start: previews left by turns that crashed mid-stream (no reply waiting to replace
    /// them) are edited to a short note, through the chat's pacer, and forgotten; the answer
    /// itself comes once, from the rerun (or its apology). Previews whose reply is pending are
    /// left for the outbox to fill. Returns how many were noted.
    pub async fn note_interrupted_previews(&self) -> usize {
        let previews = match self.store.previews().await {
            Ok(previews) => previews,
            Err(e) => {
                tracing::error!(error = %e, "load stream previews");
                return 0;
            }
        };
        let mut noted = 0;
        for stored in previews.into_iter().filter(|p| !p.reply_pending) {
            let edit = async {
                let (platform, pacer) = self.platform_and_pacer(&stored.message.chat)?;
                pacer.acquire().await;
                self.global_pacer(&platform).acquire().await;
                Some(platform.edit(&stored.message, INTERRUPTED_NOTE).await)
            };
            match tokio::time::timeout(NOTE_TIMEOUT, edit).await {
                Ok(Some(Ok(()))) => noted += 1,
                Ok(Some(Err(e))) => {
                    if let PlatformError::RateLimited { retry_after } = e
                        && let Some((_, pacer)) = self.platform_and_pacer(&stored.message.chat)
                    {
                        pacer.pause(retry_after);
                    }
                    tracing::warn!(error = %e, turn = stored.turn_id, "note on an interrupted stream preview");
                }
                Ok(None) => tracing::warn!(turn = stored.turn_id, "stream preview of a platform that is not running"),
                Err(_) => tracing::warn!(turn = stored.turn_id, "note on an interrupted stream preview timed out"),
            }
            if let Err(e) = self.store.drop_preview(&stored.turn_id, &stored.message.message_id).await {
                tracing::warn!(error = %e, turn = stored.turn_id, "forget stream preview");
            }
        }
        noted
    }
}

impl Lane {
    async fn run(mut self, shared: Arc<Shared>, closed: CancellationToken) {
        let mut shown_version = 0;
        let mut shown = String::new();
        let mut last_call: Option<Instant> = None;
        loop {
            // Wait for text newer than what was shown.
            loop {
                let notified = shared.wake.notified();
                if shared.lock().version != shown_version {
                    break;
                }
                tokio::select! {
                    _ = closed.cancelled() => return,
                    _ = notified => {}
                }
            }
            if let Some(at) = last_call {
                tokio::select! {
                    _ = closed.cancelled() => return,
                    _ = tokio::time::sleep_until(at + self.every) => {}
                }
            }
            // The chat's pacer: while a 429 pause lasts, this waits and nothing is called.
            tokio::select! {
                _ = closed.cancelled() => return,
                _ = async {
                    self.pacer.acquire().await;
                    self.global.acquire().await;
                } => {}
            }
            // The latest text wins: everything pushed while waiting goes out in this one call.
            let (version, text) = {
                let state = shared.lock();
                (state.version, state.text.clone())
            };
            shown_version = version;
            let Some(body) = render(&text, &self.platform.capabilities()) else { continue };
            if body == shown {
                continue;
            }
            last_call = Some(Instant::now());
            // An update under way is finished even when the turn ends meanwhile: a first send
            // must get its id stored, or the final reply could not replace it.
            match self.show(&body).await {
                Ok(()) => shown = body,
                Err(PlatformError::RateLimited { retry_after }) => {
                    tracing::debug!(?retry_after, "stream preview rate limited; the chat waits");
                    self.pacer.pause(retry_after);
                    shown_version = 0;
                }
                Err(PlatformError::Permanent(reason)) if matches!(self.surface, Surface::Draft(_)) => {
                    tracing::info!(%reason, "drafts refused; streaming by edits instead");
                    self.surface = Surface::Message(None);
                    shown_version = 0;
                    // The refused call showed nothing: the message may follow at once.
                    last_call = None;
                }
                Err(e @ (PlatformError::Permanent(_) | PlatformError::Unauthorized(_))) => {
                    tracing::debug!(error = %e, "stream preview stopped");
                    return;
                }
                Err(e) => tracing::debug!(error = %e, "stream preview update dropped"),
            }
        }
    }

    /// One update of the preview.
    async fn show(&mut self, body: &str) -> Result<(), PlatformError> {
        match &mut self.surface {
            Surface::Draft(id) => self.platform.send_draft(&self.chat, *id, body).await,
            Surface::Message(Some(message)) => self.platform.edit(message, body).await,
            Surface::Message(None) => {
                let message = OutboundMessage {
                    chat: self.chat.clone(),
                    text: body.to_owned(),
                    reply_to: self.reply_to.clone(),
                    kind: OutboundKind::Progress,
                    buttons: Vec::new(),
                    chunk: (0, 1),
                    file: None,
                };
                let sent = self.platform.send(&message).await?;
                if let Err(e) = self.outbox.store.save_preview(&self.turn_id, &sent, now_ms()).await {
                    // Without the record a crash would leave the partial text; the turn goes on.
                    tracing::warn!(error = %e, turn = self.turn_id, "store stream preview");
                }
                self.surface = Surface::Message(Some(sent));
                Ok(())
            }
        }
    }
}

/// What the preview shows for `text`: the part that fits one message (it stops growing at the
/// platform's limit; the final reply brings the rest), marked as still being written. `None`
/// while there is nothing to show.
fn render(text: &str, caps: &Capabilities) -> Option<String> {
    let text = text.trim_end();
    if text.trim().is_empty() {
        return None;
    }
    let room = caps.max_message_len.saturating_sub(measure(WRITING, caps.length_unit)).max(1);
    let first = if measure(text, caps.length_unit) <= room {
        text.to_owned()
    } else {
        chunk(text, room, caps.length_unit).into_iter().next().unwrap_or_default()
    };
    Some(format!("{}{WRITING}", first.trim_end()))
}

/// Seconds between preview updates in `chat`: at least `PREVIEW_EVERY`, and slow enough to
/// leave the chat's pacer room for typing, progress and other replies.
fn preview_every(caps: &Capabilities, chat: &ChatRef) -> Duration {
    let rate = chat_rate(caps, chat).max(0.001);
    let paced = Duration::from_secs_f64((1.5 / rate).min(60.0));
    PREVIEW_EVERY.max(paced)
}

/// A non-zero draft id for a turn, stable across updates of its answer.
fn draft_id(turn_id: &str) -> i64 {
    // FNV-1a: small and stable; Telegram only needs it non-zero and the same for one answer.
    let hash = turn_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    i64::try_from(hash % 2_000_000_000).unwrap_or(1).max(1)
}

#[cfg(test)]
mod tests;
