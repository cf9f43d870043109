//! A session actor: takes its mailbox's jobs one at a time, each under a worker-pool permit, and
//! exits when idle. Turns run in their own task so a panic becomes an error reply, not a dead
//! session.
//!
//! An idle actor costs its task (under 512 bytes while it waits) and its `ActorState` with an empty
//! mailbox (under 256 bytes).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Inner;
use super::Router;
use super::batch::{self, Queued, Work};
use super::mailbox::Mailbox;
use crate::metrics::ERRORS_TOTAL;
use crate::turn::{StopReason, StopSignal, TurnJob};

/// What the router can see of an actor, and its mailbox.
#[derive(Debug)]
pub(super) struct ActorState {
    /// Jobs for the actor, in order (the router sends under its actor-map lock).
    pub(super) mailbox: Mailbox,
    running: Mutex<Option<(Arc<StopSignal>, Instant)>>,
    /// Jobs in the mailbox.
    pub(super) waiting: AtomicUsize,
    /// Jobs the actor took from the mailbox and has not finished: the running turn, one that
    /// waits for a worker, a batch being gathered, leftovers. Zero while it waits for mail. With
    /// `waiting` it tells the router how many jobs are ahead of a new one.
    pub(super) in_hand: AtomicUsize,
}

impl ActorState {
    /// An idle actor's state, with a mailbox of `capacity` jobs.
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            mailbox: Mailbox::new(capacity),
            running: Mutex::default(),
            waiting: AtomicUsize::default(),
            in_hand: AtomicUsize::default(),
        }
    }

    /// Whether a turn runs and has not stored its reply yet.
    pub(super) fn is_running(&self) -> bool {
        self.running.lock().expect("actor lock poisoned").as_ref().is_some_and(|(stop, _)| !stop.is_answered())
    }

    /// Whether the running turn waits for a person without a worker permit.
    pub(super) fn parked(&self) -> bool {
        let running = self.running.lock().expect("actor lock poisoned");
        running.as_ref().and_then(|(stop, _)| stop.worker.as_ref()).is_some_and(|worker| !worker.holding())
    }

    pub(super) fn running_for(&self) -> Option<Duration> {
        self.running.lock().expect("actor lock poisoned").as_ref().map(|(_, since)| since.elapsed())
    }

    pub(super) fn stop_running(&self, reason: StopReason) {
        if let Some((stop, _)) = self.running.lock().expect("actor lock poisoned").as_ref() {
            stop.stop(reason);
        }
    }

    /// Hand `job` to the running turn to steer it; false when no turn runs.
    pub(super) fn steer(&self, job: &TurnJob) -> bool {
        match self.running.lock().expect("actor lock poisoned").as_ref() {
            Some((stop, _)) if !stop.is_answered() => {
                stop.steer.push(job.clone());
                true
            }
            _ => false,
        }
    }
}

pub(super) async fn actor_loop(inner: Arc<Inner>, key: String, state: Arc<ActorState>) {
    // Steering messages the last turn did not take, and a message that ended a batch without
    // joining it, run next, before the mailbox.
    let mut leftovers: VecDeque<Queued> = VecDeque::new();
    let taken = || {
        state.in_hand.fetch_add(1, Ordering::SeqCst);
        state.waiting.fetch_sub(1, Ordering::SeqCst);
        inner.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
    };
    loop {
        let queued = if let Some(queued) = leftovers.pop_front() {
            if inner.draining.is_cancelled() {
                break;
            }
            queued
        } else {
            state.in_hand.store(0, Ordering::SeqCst);
            let queued = tokio::select! {
                biased;
                _ = inner.draining.cancelled() => break,
                queued = state.mailbox.recv() => queued,
                _ = tokio::time::sleep(inner.settings.session_idle) => {
                    // Exit only if nothing arrived meanwhile; the router sends under the same lock.
                    let mut actors = inner.actors.lock().expect("router lock poisoned");
                    if state.mailbox.is_empty() {
                        state.mailbox.close();
                        actors.remove(&key);
                        super::shrink_actors(&mut actors);
                        inner.metrics.active_sessions.fetch_sub(1, Ordering::Relaxed);
                        return;
                    }
                    continue;
                }
            };
            let Some(queued) = queued else { break };
            taken();
            *queued
        };
        let Queued { job, batchable, work } = queued;
        if work != Work::Turn {
            if !Box::pin(run_command(&inner, &state, job, work)).await {
                break;
            }
            continue;
        }
        let job = if batchable {
            // Boxed, like the turn below: an idle actor's task then holds only what waiting needs.
            match Box::pin(batch::gather(job, inner.settings.batch_window, &state.mailbox, &inner.draining, &taken))
                .await
            {
                Some((job, later)) => {
                    leftovers.extend(later);
                    if !job.batched.is_empty() {
                        crate::failpoint!("router.batched");
                    }
                    job
                }
                None => break,
            }
        } else {
            job
        };
        if !Box::pin(run_turn(&inner, &state, job, &mut leftovers)).await {
            break;
        }
    }
    // Leaving on drain: jobs still in the mailbox (and untaken steers) stay accepted in the store
    // and run next start. Closed under the router's lock, so no sender finds this actor in the
    // map with its mailbox closed (that would read as a full mailbox).
    let mut actors = inner.actors.lock().expect("router lock poisoned");
    let left = state.mailbox.close();
    if left > 0 {
        inner.metrics.queue_depth.fetch_sub(i64::try_from(left).unwrap_or(0), Ordering::Relaxed);
    }
    // Remove only this actor's entry, never a successor spawned under the same key.
    if actors.get(&key).is_some_and(|a| Arc::ptr_eq(&a.state, &state)) {
        actors.remove(&key);
        super::shrink_actors(&mut actors);
    }
    drop(actors);
    inner.metrics.active_sessions.fetch_sub(1, Ordering::Relaxed);
}

/// Run one turn under a worker-pool permit (given back while the turn waits for a person); false
/// when draining stopped it from starting.
async fn run_turn(inner: &Arc<Inner>, state: &ActorState, job: TurnJob, leftovers: &mut VecDeque<Queued>) -> bool {
    let worker = tokio::select! {
        _ = inner.draining.cancelled() => return false,
        worker = inner.pool.slot() => worker,
    };
    let stop = Arc::new(StopSignal::for_worker(worker.clone()));
    *state.running.lock().expect("actor lock poisoned") = Some((stop.clone(), Instant::now()));
    let (runner, abort, turn_stop) = (inner.runner.clone(), inner.abort_turns.clone(), stop.clone());
    let turn_job = job.clone();
    let result = tokio::spawn(async move { runner.run(&turn_job, &turn_stop, &abort).await }).await;
    if let Err(e) = result {
        inner.metrics.inc(ERRORS_TOTAL, &[("kind", "panic")]);
        tracing::error!(error = %e, seq = job.seq, "turn panicked");
        inner
            .runner
            .fail(&job, "Sorry, hermesd hit an internal error in this turn. It was logged; please try again.")
            .await;
    }
    *state.running.lock().expect("actor lock poisoned") = None;
    // After `running` is cleared no steer can land in this turn's box: whatever is left runs next.
    leftovers.extend(stop.steer.leftovers().into_iter().map(|job| Queued::turn(job, false)));
    // Tasks the turn left behind may still hold the slot; the permit goes back now.
    worker.release();
    true
}

/// Run `/compress` for `job` in the session's order, under a worker permit, and answer its event;
/// false when draining stopped it from starting (the event stays accepted for the next start).
/// While it runs the session counts as busy: `/stop` cancels it, messages queue behind it.
/// Run a command job (`/compress`, or a session command that had to wait for its session)
/// under a worker permit and answer it; false when the daemon drains first.
async fn run_command(inner: &Arc<Inner>, state: &ActorState, job: TurnJob, work: Work) -> bool {
    let worker = tokio::select! {
        _ = inner.draining.cancelled() => return false,
        worker = inner.pool.slot() => worker,
    };
    let stop = Arc::new(StopSignal::for_worker(worker.clone()));
    *state.running.lock().expect("actor lock poisoned") = Some((stop.clone(), Instant::now()));
    let (runner, abort, task_stop) = (inner.runner.clone(), inner.abort_turns.clone(), stop.clone());
    let (key, message) = (job.key.clone(), job.message.clone());
    let router = Router { inner: inner.clone() };
    let done = tokio::spawn(async move {
        let answer = async {
            match work {
                Work::Command(command) => router.session_command(&key, command).await,
                _ => runner.compress_now(&key, &message, &task_stop).await,
            }
        };
        tokio::select! {
            text = answer => Some(text),
            // Shutdown past its deadline: unanswered, the command runs again at the next start.
            _ = abort.cancelled() => None,
        }
    })
    .await;
    let text = match done {
        Ok(text) => text,
        Err(e) => {
            inner.metrics.inc(ERRORS_TOTAL, &[("kind", "panic")]);
            tracing::error!(error = %e, seq = job.seq, "a command job panicked");
            Some("This command hit an internal error. It was logged; please try again.".to_owned())
        }
    };
    if let Some(text) = text {
        Router { inner: inner.clone() }.answer(job.seq, &job.message, &text).await;
    }
    *state.running.lock().expect("actor lock poisoned") = None;
    worker.release();
    true
}

#[cfg(test)]
mod tests {
    use super::super::batch::Mail;
    use super::*;

    /// The size of the future `f` returns, without calling it.
    fn output_size<A, B, C, F>(_f: impl Fn(A, B, C) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    #[test]
    fn an_idle_actor_is_small() {
        let size = output_size(actor_loop);
        let state = std::mem::size_of::<ActorState>();
        eprintln!(
            "actor task future: {size} bytes; state with its mailbox: {state} bytes; mailbox item: {} bytes",
            std::mem::size_of::<Mail>()
        );
        assert!(size <= 512, "an actor's task holds {size} bytes while it waits (box what only a turn needs)");
        assert!(state <= 256, "an actor's state and empty mailbox take {state} bytes");
        assert_eq!(std::mem::size_of::<Mail>(), std::mem::size_of::<usize>(), "the mailbox holds pointers");
    }
}
