//! A running turn's controls: its stop switch and the box messages steering it wait in.
//!
//! `StopSignal` carries the stop reason (stop, interrupt, inactivity) and the turn's worker permit
//! (`StopSignal::worker`); `SteerBox` holds the steering messages, which are closed with the turn
//! that took them.

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::{StopReason, TurnJob, WorkerSlot};
use crate::agent::context::{framed_text, is_shared};
use crate::vocab::message::{Message, Role};

/// Messages sent to steer a running turn. The loop folds them in after its next tool call; the
/// ones it took are closed with the turn, the rest run as turns of their own afterwards.
#[derive(Debug, Default)]
pub struct SteerBox {
    waiting: Mutex<Vec<TurnJob>>,
    taken: Mutex<Vec<i64>>,
}

impl SteerBox {
    /// Queue a message for the running turn.
    pub fn push(&self, job: TurnJob) {
        self.waiting.lock().expect("steer lock poisoned").push(job);
    }

    /// Everything waiting, as one user message; remembers which events it took.
    pub fn take(&self) -> Option<Message> {
        let jobs = std::mem::take(&mut *self.waiting.lock().expect("steer lock poisoned"));
        if jobs.is_empty() {
            return None;
        }
        self.taken.lock().expect("steer lock poisoned").extend(jobs.iter().map(|j| j.seq));
        let text = jobs.iter().map(|j| framed_text(&j.message, is_shared(&j.key))).collect::<Vec<_>>().join("\n");
        Some(Message::text(Role::User, format!("[The user adds while you work] {text}")))
    }

    /// Events folded into the turn so far.
    pub fn taken(&self) -> Vec<i64> {
        self.taken.lock().expect("steer lock poisoned").clone()
    }

    /// Messages the turn never took; they run as turns of their own.
    pub fn leftovers(&self) -> Vec<TurnJob> {
        std::mem::take(&mut *self.waiting.lock().expect("steer lock poisoned"))
    }
}

/// A running turn's stop switch, plus the box steering messages wait in.
#[derive(Debug, Default)]
pub struct StopSignal {
    pub(super) token: CancellationToken,
    reason: Mutex<Option<StopReason>>,
    /// Set once the turn's reply is stored: from then on the session counts as idle, even while
    /// the turn's task winds down (so a message sent right after the reply is not "queued").
    pub(super) answered: std::sync::atomic::AtomicBool,
    /// Messages sent to steer this turn.
    pub steer: SteerBox,
    /// The turn's worker permit, given back while it waits for a person (`None`: the turn runs
    /// outside the pool).
    pub worker: Option<Arc<WorkerSlot>>,
}

impl StopSignal {
    /// The controls of a turn running under `worker`.
    pub fn for_worker(worker: Arc<WorkerSlot>) -> Self {
        Self { worker: Some(worker), ..Self::default() }
    }

    /// Ask the turn to stop at its next safe point.
    pub fn stop(&self, reason: StopReason) {
        self.reason.lock().expect("stop lock poisoned").get_or_insert(reason);
        self.token.cancel();
    }

    /// Whether the turn's reply is stored.
    pub fn is_answered(&self) -> bool {
        self.answered.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(super) fn reason(&self) -> Option<StopReason> {
        *self.reason.lock().expect("stop lock poisoned")
    }
}
