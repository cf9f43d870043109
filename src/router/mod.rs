//! The router: maps each accepted event to its session's actor, answers control commands on
//! their own lane, and applies the busy policy.
//!
//! Invariant: one turn at a time per session (one actor per session key, FIFO mailbox);
//! sessions run in parallel, bounded by the worker pool; idle actors exit so memory stays flat.
//!
//! `Router` maps a session key to its actor (`actor.rs`) and shrinks the actors map once it is
//! under a quarter full. A message that finds its session busy follows the busy policy (queue,
//! steer or interrupt); a full mailbox gets an explicit reply, never a silent drop. The files:
//! `mailbox.rs` and `batch.rs` (what waits, and quick messages merged), `control.rs` and
//! `commands.rs` (the control lane), `lifecycle.rs` and `sweep.rs` (sessions ending and resuming),
//! `usage.rs` and `skills.rs` (their chat commands).
//!
//! A request answered by one response (`Capabilities::request_response`: the API, Home Assistant's
//! `hermesd_request`) is never folded into another request's turn: under `steer` it queues instead,
//! without a "queued" notice; under `interrupt` the interrupted request's answer says it was
//! interrupted.

mod actor;
mod batch;
pub mod commands;
mod control;
mod grants;
mod lifecycle;
mod mailbox;
mod skills;
mod sweep;
mod usage;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermesd_platform::{Admission, ChatRef, InboundEvent, InboundMessage, OutboundKind};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::access::{Access, Decision};
use crate::clock::now_ms;
use crate::config::{BusyPolicy, DEFAULT_PROFILE};
use crate::metrics::Metrics;
use crate::store::{EventState, Outlive, SessionKey, StoreError};
use crate::turn::approvals::{Answered, CHOICE_PREFIX, Decision as Approve};
use crate::turn::session_key::session_key;
use crate::turn::{StopReason, TurnJob, TurnRunner, WorkerPool};
use actor::{ActorState, actor_loop};
use batch::Queued;
use commands::Parsed;

/// Router settings from `[agent]` and `[sessions]`.
#[derive(Debug, Clone)]
pub struct RouterSettings {
    /// Mailbox capacity per session.
    pub max_queued: usize,
    /// Idle time after which an actor exits.
    pub session_idle: Duration,
    /// Per-user sessions in groups.
    pub group_per_user: bool,
    /// The profile each adapter's chats belong to (an account's `profile`); the rest are the
    /// default profile's.
    pub profiles: HashMap<String, String>,
    /// Turns at once.
    pub max_concurrent_turns: usize,
    /// Turns that may wait for a person without a worker permit.
    pub max_parked_turns: usize,
    /// Quick messages of one sender within this window become one turn (chat platforms only;
    /// zero turns it off).
    pub batch_window: Duration,
}

struct Actor {
    state: Arc<ActorState>,
}

pub(crate) struct Inner {
    actors: Mutex<HashMap<String, Actor>>,
    access: Arc<Access>,
    runner: Arc<TurnRunner>,
    settings: RouterSettings,
    pool: Arc<WorkerPool>,
    metrics: Arc<Metrics>,
    tracker: TaskTracker,
    /// Actors stop taking new jobs (queued events stay in the store for the next start).
    draining: CancellationToken,
    /// Running turns persist themselves and end.
    abort_turns: CancellationToken,
}

/// The router handle; cheap to clone.
#[derive(Clone)]
pub struct Router {
    inner: Arc<Inner>,
}

/// What a busy-policy decision needs to tell the user, done after the actor map is unlocked.
enum Followup {
    None,
    Queued(usize),
    Rejected,
}

impl Router {
    /// A router running turns with `runner`.
    pub fn new(runner: Arc<TurnRunner>, access: Arc<Access>, settings: RouterSettings, metrics: Arc<Metrics>) -> Self {
        let pool = WorkerPool::new(settings.max_concurrent_turns, settings.max_parked_turns, metrics.clone());
        Self {
            inner: Arc::new(Inner {
                actors: Mutex::new(HashMap::new()),
                access,
                runner,
                settings,
                pool,
                metrics,
                tracker: TaskTracker::new(),
                draining: CancellationToken::new(),
                abort_turns: CancellationToken::new(),
            }),
        }
    }

    /// The access decision before anything of the sender's is stored or downloaded: admitted,
    /// answered with a pairing reply (at most one per window; the reply is the only thing
    /// stored), or ignored.
    pub async fn admit(&self, event: &InboundEvent) -> Result<Admission, StoreError> {
        let chat = event.chat();
        match self.inner.access.check(&chat.platform, &chat.chat_id, chat.chat_type, event.sender()).await? {
            Decision::Allow => Ok(Admission::Admit),
            Decision::Pair(text) => {
                let turn_id = format!("pair:{}", uuid::Uuid::now_v7());
                self.inner.runner.outbox().notify(chat, &text, Some(reply_to(event)), &turn_id).await;
                Ok(Admission::Pairing)
            }
            Decision::Ignore => Ok(Admission::Ignored),
        }
    }

    /// The profile answering `user` in `chat`: the one the message asked for by name (the
    /// API's `model`), else the first matching route's, else its adapter's account's, else the
    /// default.
    fn profile_of(&self, chat: &ChatRef, user: &str, asked: Option<&str>) -> String {
        let agents = self.inner.runner.agents();
        if let Some(asked) = asked.filter(|p| agents.has(p)) {
            return asked.to_owned();
        }
        let routed = self.inner.runner.route(chat, user).and_then(|(_, route)| route.profile);
        if let Some(profile) = routed.filter(|p| agents.has(p)) {
            return profile;
        }
        match self.inner.settings.profiles.get(&chat.platform) {
            Some(profile) if agents.has(profile) => profile.clone(),
            _ => DEFAULT_PROFILE.to_owned(),
        }
    }

    /// Whether the sender of `message` is an admin of its platform.
    pub(crate) fn is_admin(&self, message: &InboundMessage) -> bool {
        self.inner.access.is_admin(&message.chat.platform, &message.sender.id)
    }

    /// Route an accepted event. The access check here is the second line behind `admit`: it
    /// holds for events that entered without it (in-process platforms, events stored before an
    /// upgrade), and a stranger answered by `admit` this window is not answered again.
    pub async fn dispatch(&self, seq: i64, event: InboundEvent) {
        let chat = event.chat().clone();
        match self.inner.access.check(&chat.platform, &chat.chat_id, chat.chat_type, event.sender()).await {
            Ok(Decision::Allow) => {}
            Ok(Decision::Pair(text)) => {
                let reply =
                    self.inner.runner.outbox().compose(&chat, &text, OutboundKind::Notice, Some(reply_to(&event)));
                self.close(seq, &chat, &reply).await;
                return;
            }
            Ok(Decision::Ignore) => {
                tracing::debug!(platform = %chat.platform, "message from an unknown user in a group ignored");
                self.close(seq, &chat, &[]).await;
                return;
            }
            Err(e) => {
                // Fail closed, but say so: the sender is not left wondering.
                tracing::error!(error = %e, "access check failed");
                let text = "hermesd could not check your access right now; please try again shortly.";
                let reply = self.inner.runner.outbox().compose(&chat, text, OutboundKind::Error, None);
                self.close_as(seq, &chat, &reply, EventState::Failed).await;
                return;
            }
        }
        match event {
            InboundEvent::Message { message, .. } => {
                // A route may ask more of a chat than its platform: only messages to the bot.
                let route = self.inner.runner.route(&message.chat, &message.sender.id);
                if route.is_some_and(|(_, r)| r.require_mention == Some(true)) && !message.addressed {
                    tracing::debug!(platform = %chat.platform, "unaddressed message in a route that requires a mention");
                    self.close(seq, &chat, &[]).await;
                    return;
                }
                let profile = self.profile_of(&message.chat, &message.sender.id, message.profile.as_deref());
                let key = session_key(&profile, &message.chat, &message.sender, self.inner.settings.group_per_user);
                let prefix = self.inner.runner.outbox().platforms().command_prefix(&message.chat.platform);
                match commands::parse(&message.text, prefix) {
                    Parsed::Command(command) => self.control(seq, &key, &message, command, prefix).await,
                    Parsed::Invalid(error) => self.answer(seq, &message, &error).await,
                    Parsed::NotACommand => {
                        let message = self.expand_skill(&key, message, prefix);
                        let policy = self.inner.runner.agent(&key).busy_policy;
                        self.enqueue(seq, key, message, policy).await
                    }
                }
            }
            InboundEvent::Action { action, .. } => {
                let profile = self.profile_of(&action.chat, &action.sender.id, None);
                let key = session_key(&profile, &action.chat, &action.sender, self.inner.settings.group_per_user);
                let approvals = self.inner.runner.approvals();
                let decision = Approve::of_button(&action.data);
                let answered = match decision {
                    Some(decision) => approvals.decide(&key.key, decision),
                    None if action.data.starts_with(CHOICE_PREFIX) => approvals.answer(&key.key, &action.data),
                    None => Answered::NothingPending,
                };
                let text = match (answered, decision) {
                    (Answered::NothingPending, _) => "That button is no longer active.",
                    (Answered::Yes, Some(decision)) => decision.said(),
                    (Answered::Yes, None) => "Got it.",
                };
                let reply = self.inner.runner.outbox().compose(
                    &action.chat,
                    text,
                    OutboundKind::Notice,
                    Some(&action.message_id),
                );
                self.close(seq, &action.chat, &reply).await;
            }
        }
    }

    async fn enqueue(&self, seq: i64, key: SessionKey, message: InboundMessage, policy: BusyPolicy) {
        // A question a tool asked is answered by the next message, on the control lane.
        if self.inner.runner.approvals().answer(&key.key, &message.text) == Answered::Yes {
            self.close(seq, &message.chat, &[]).await;
            return;
        }
        let admin = self.is_admin(&message);
        // A request answered by one response is never folded into another request's turn (its
        // own would never come) and hears nothing but its answer (no "queued" notice); under
        // `interrupt` the interrupted request's answer says so.
        let per_request = self.inner.runner.outbox().answers_per_request(&message.chat);
        let policy = if per_request && policy == BusyPolicy::Steer { BusyPolicy::Queue } else { policy };
        let job = TurnJob { seq, message, key, accepted_at: Instant::now(), admin, batched: Vec::new() };
        if policy == BusyPolicy::Steer {
            let state =
                self.inner.actors.lock().expect("router lock poisoned").get(&job.key.key).map(|a| a.state.clone());
            if let Some(state) = state {
                let (chat, reply_to) = (job.message.chat.clone(), job.message.message_id.clone());
                if state.steer(&job) {
                    let text = "Noted — I'll take that into account after the current step.";
                    self.inner.runner.outbox().notify(&chat, text, Some(&reply_to), &format!("evt:{seq}:steer")).await;
                    return;
                }
            }
        }
        let followup = {
            let mut actors = self.inner.actors.lock().expect("router lock poisoned");
            let actor = actors.entry(job.key.key.clone()).or_insert_with(|| self.spawn_actor(&job.key.key));
            // Count before sending: the actor may take the job (and count it down) before
            // `try_send` even returns.
            let before = actor.state.waiting.fetch_add(1, Ordering::SeqCst);
            let ahead = before + actor.state.in_hand.load(Ordering::SeqCst);
            self.inner.metrics.queue_depth.fetch_add(1, Ordering::Relaxed);
            let chat = &job.message.chat;
            let per_request = self.inner.runner.outbox().answers_per_request(chat);
            let batches = batch::batches(&chat.platform, per_request, self.inner.settings.batch_window);
            // Busy: a turn runs, or, without batching, earlier jobs are ahead of this one (in the
            // mailbox or taken and not started yet): it runs after them just the same, so it is
            // queued and acknowledged as such. With batching, such a message joins the batch.
            let busy = actor.state.is_running() || (!batches && ahead > 0);
            // Only a message that finds its session idle may wait for the next one; one that
            // arrives while a turn runs follows the busy policy.
            let batchable = !busy && batches;
            match actor.state.mailbox.try_send(Box::new(Queued::turn(job.clone(), batchable))) {
                Ok(()) => match (busy, policy) {
                    (false, _) => Followup::None,
                    (true, BusyPolicy::Interrupt) => {
                        actor.state.stop_running(StopReason::Interrupted);
                        Followup::None
                    }
                    (true, _) => Followup::Queued(ahead.max(1)),
                },
                Err(_) => {
                    actor.state.waiting.fetch_sub(1, Ordering::SeqCst);
                    self.inner.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
                    Followup::Rejected
                }
            }
        };
        match followup {
            Followup::None => {}
            Followup::Queued(_) if per_request => {}
            Followup::Queued(n) => {
                let outbox = self.inner.runner.outbox();
                outbox
                    .notify(
                        &job.message.chat,
                        &format!("queued ({n})"),
                        Some(&job.message.message_id),
                        &format!("evt:{seq}:queued"),
                    )
                    .await;
            }
            Followup::Rejected => {
                let text = format!(
                    "Too many messages are waiting in this conversation ({}). Wait for the current ones to finish, or send /stop.",
                    self.inner.settings.max_queued
                );
                let reply = self.inner.runner.outbox().compose(
                    &job.message.chat,
                    &text,
                    OutboundKind::Error,
                    Some(&job.message.message_id),
                );
                self.close_as(seq, &job.message.chat, &reply, EventState::Failed).await;
            }
        }
    }

    fn spawn_actor(&self, key: &str) -> Actor {
        let state = Arc::new(ActorState::new(self.inner.settings.max_queued));
        self.inner.metrics.active_sessions.fetch_add(1, Ordering::Relaxed);
        let inner = self.inner.clone();
        let (key, actor_state) = (key.to_owned(), state.clone());
        self.inner.tracker.spawn(actor_loop(inner, key, actor_state));
        Actor { state }
    }

    async fn answer(&self, seq: i64, message: &InboundMessage, text: &str) {
        let reply =
            self.inner.runner.outbox().compose(&message.chat, text, OutboundKind::Reply, Some(&message.message_id));
        self.close(seq, &message.chat, &reply).await;
    }

    async fn close(&self, seq: i64, chat: &hermesd_platform::ChatRef, reply: &[hermesd_platform::OutboundMessage]) {
        self.close_as(seq, chat, reply, EventState::Done).await;
    }

    async fn close_as(
        &self,
        seq: i64,
        chat: &hermesd_platform::ChatRef,
        reply: &[hermesd_platform::OutboundMessage],
        state: EventState,
    ) {
        let turn_id = format!("evt:{seq}");
        let store = self.inner.runner.store();
        match store.close_event(seq, state, None, reply, &turn_id, now_ms()).await {
            Ok(()) => self.inner.runner.outbox().deliver(chat, &turn_id),
            Err(e) => tracing::error!(error = %e, seq, "close event"),
        }
    }

    /// Stop starting turns; queued events stay in the store for the next start.
    pub fn begin_drain(&self) {
        self.inner.draining.cancel();
    }

    /// Wait up to `deadline` for running turns, then make the rest persist themselves.
    pub async fn drain(&self, deadline: Duration) {
        self.begin_drain();
        self.inner.tracker.close();
        let background = self.inner.runner.background();
        background.close();
        let all = async {
            self.inner.tracker.wait().await;
            background.wait().await;
        };
        if tokio::time::timeout(deadline, all).await.is_err() {
            tracing::info!("drain deadline reached; persisting running turns");
            self.inner.abort_turns.cancel();
            self.inner.tracker.wait().await;
        }
    }

    /// Turns running now (holding a worker permit).
    pub fn running_turns(&self) -> usize {
        self.inner.pool.busy()
    }

    /// Turns waiting for a person without a worker permit.
    pub fn parked_turns(&self) -> usize {
        self.inner.pool.parked()
    }

    /// What accepting `event` must outlive before its platform hears it was taken
    /// (`Outbox::outlive`).
    pub fn outlive(&self, event: &InboundEvent) -> Outlive {
        self.inner.runner.outbox().outlive(event.chat())
    }
}

/// Below this capacity the actors map is not worth shrinking.
const SHRINK_ABOVE: usize = 64;

/// Give the actors map's memory back once it uses under a quarter of its capacity (called where
/// an actor removes itself; each shrink is paid for by the removals before it).
fn shrink_actors(actors: &mut HashMap<String, Actor>) {
    if actors.capacity() > SHRINK_ABOVE.max(4 * actors.len()) {
        actors.shrink_to(2 * actors.len());
    }
}

/// The platform message an answer to `event` replies to.
fn reply_to(event: &InboundEvent) -> &str {
    match event {
        InboundEvent::Message { message, .. } => &message.message_id,
        InboundEvent::Action { action, .. } => &action.message_id,
    }
}

fn short(id: &str) -> &str {
    id.get(id.len().saturating_sub(8)..).unwrap_or(id)
}
