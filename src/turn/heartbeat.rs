//! Heartbeats: while a turn runs, its events become what the user sees — a typing indicator
//! refreshed before it lapses, one throttled progress message (edited, never spammed), a
//! "still working" notice every `heartbeat_interval`, and an inactivity timeout that stops a
//! turn that has made no step for too long. No silent stalls.

use std::sync::Arc;
use std::time::Duration;

use hermesd_platform::{ChatRef, MessageRef};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{StopReason, StopSignal};
use crate::agent::runtime::agent_loop::TurnEvent;
use crate::clock::now_ms;
use crate::outbox::Outbox;

/// Timings of a turn's heartbeats.
#[derive(Debug, Clone, Copy)]
pub struct HeartbeatSettings {
    /// Typing refresh (platform indicators lapse after ~5 s).
    pub typing_every: Duration,
    /// Fewest seconds between progress edits.
    pub progress_every: Duration,
    /// "Still working" notices.
    pub notice_every: Duration,
    /// A turn with no step for this long is stopped.
    pub inactivity: Duration,
    /// Whether to show a progress message at all.
    pub progress: bool,
}

/// Events buffered between the loop and the watcher; the loop never waits on a full buffer.
const EVENT_BUFFER: usize = 256;

/// Start watching a turn. Drop the returned sender (or let the turn end) to stop the watcher.
pub fn watch(
    outbox: Outbox,
    chat: ChatRef,
    reply_to: String,
    settings: HeartbeatSettings,
    stop: Arc<StopSignal>,
) -> (mpsc::Sender<TurnEvent>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(EVENT_BUFFER);
    let handle = tokio::spawn(run(outbox, chat, reply_to, settings, stop, rx));
    (tx, handle)
}

struct Progress {
    message: Option<MessageRef>,
    shown: String,
    lines: Vec<String>,
    last_edit: Option<Instant>,
}

async fn run(
    outbox: Outbox,
    chat: ChatRef,
    reply_to: String,
    settings: HeartbeatSettings,
    stop: Arc<StopSignal>,
    mut events: mpsc::Receiver<TurnEvent>,
) {
    let started = Instant::now();
    // A request/response platform takes the first reply to a request as its answer: no notes.
    let notes = !outbox.answers_per_request(&chat);
    let mut last_step = Instant::now();
    let mut step = (0, 0);
    let mut running: Vec<String> = Vec::new();
    let mut progress = Progress { message: None, shown: String::new(), lines: Vec::new(), last_edit: None };
    let mut typing = tokio::time::interval(settings.typing_every);
    let mut notice = tokio::time::interval_at(Instant::now() + settings.notice_every, settings.notice_every);
    let mut flush = tokio::time::interval(settings.progress_every);
    // A late tick must not be followed by a burst of catch-up ticks (edits would come too fast).
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { break };
                match event {
                    TurnEvent::Step { iteration, max } => {
                        last_step = Instant::now();
                        step = (iteration, max);
                    }
                    TurnEvent::ToolsStarted { names } => {
                        progress.lines.push(format!("⚙ {}", names.join(", ")));
                        running = names;
                    }
                    TurnEvent::ToolFinished { name, preview, error } => {
                        running.retain(|n| n != &name);
                        let mark = if error { "✗" } else { "✓" };
                        let preview: String = preview.lines().next().unwrap_or("").chars().take(60).collect();
                        progress.lines.push(format!("{mark} {name}: {preview}"));
                    }
                    TurnEvent::Compressed { archived } if notes => {
                        let text = format!("History was summarised to stay within the model's context ({archived} earlier messages archived, still searchable).");
                        outbox.notify(&chat, &text, Some(&reply_to), &format!("note:{reply_to}:compressed:{}", now_ms())).await;
                    }
                    TurnEvent::Compressed { .. } | TurnEvent::Delta(_) | TurnEvent::Reasoning(_) => {}
                }
            }
            _ = typing.tick() => outbox.typing(&chat).await,
            _ = flush.tick(), if settings.progress && notes => update_progress(&outbox, &chat, &reply_to, &mut progress, settings).await,
            _ = notice.tick(), if notes => {
                let minutes = started.elapsed().as_secs() / 60;
                let doing = if running.is_empty() { "thinking".to_owned() } else { format!("running {}", running.join(", ")) };
                let text = format!("Still working — {minutes} min, step {}/{}, {doing}.", step.0, step.1);
                outbox.notify(&chat, &text, Some(&reply_to), &format!("note:{reply_to}:working:{}", now_ms())).await;
            }
            _ = tokio::time::sleep_until(last_step + settings.inactivity) => {
                tracing::warn!(chat = %chat.key(), "turn inactive; stopping it");
                stop.stop(StopReason::Inactive);
                last_step = Instant::now();
            }
        }
    }
}

async fn update_progress(
    outbox: &Outbox,
    chat: &ChatRef,
    reply_to: &str,
    progress: &mut Progress,
    settings: HeartbeatSettings,
) {
    if progress.lines.is_empty() {
        return;
    }
    // Keep the message short: the latest lines only.
    let start = progress.lines.len().saturating_sub(8);
    let text = progress.lines[start..].join("\n");
    // The timer paces edits; this check only guards against ticks arriving early. Edits are timed
    // from when they start, and a little slack keeps a tick that lands a hair early from being
    // skipped (which would halve the edit rate).
    let floor = settings.progress_every.saturating_sub(Duration::from_millis(50));
    if text == progress.shown || progress.last_edit.is_some_and(|t| t.elapsed() < floor) {
        return;
    }
    let started = Instant::now();
    if let Some(sent) = outbox.progress(chat, progress.message.as_ref(), &text, Some(reply_to)).await {
        progress.message = Some(sent);
        progress.shown = text;
        progress.last_edit = Some(started);
    }
}
