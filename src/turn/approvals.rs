//! The gateway side of `Human`: approvals and clarifying questions asked in the chat, answered
//! by `/approve`, `/deny`, a button press, or (for questions) the user's next message. Answers
//! travel on the router's control lane, so they never wait behind the turn that asked.
//!
//! Fail closed: no answer within the timeout is a denial. Where nobody can answer, approvals are
//! `Unavailable` at once. While a turn waits for an answer it is parked: its worker permit goes
//! back to the pool (`WorkerSlot::park`), so waiting people never stall other sessions.
//!
//! A waiter lives only as long as the wait that registered it: when the turn that asked is gone
//! (answered, timed out, stopped, crashed), its waiter is removed, and one whose receiver is gone
//! answers nothing, so the user's next message is never swallowed by a question nobody awaits.
//!
//! `Approvals` is the broker; `ChatHuman` is the `Human` the tools ask. A parked turn rejoins the
//! pool (`Human::rejoin`) after each tool batch.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hermesd_platform::{Button, ChatRef, OutboundKind};
use tokio::sync::oneshot;

use super::WorkerSlot;
use crate::agent::tools::{Approval, Human};
use crate::clock::now_ms;
use crate::outbox::Outbox;

/// Button data for approvals.
pub const APPROVE: &str = "hermesd:approve";
/// Button data for denials.
pub const DENY: &str = "hermesd:deny";
/// Prefix of button data for clarify choices.
pub const CHOICE_PREFIX: &str = "hermesd:choice:";

enum Waiter {
    Approval(oneshot::Sender<bool>),
    Question { tx: oneshot::Sender<String>, choices: Vec<String> },
}

impl Waiter {
    /// Whether the wait that registered it has ended, so nobody would get an answer.
    fn is_closed(&self) -> bool {
        match self {
            Self::Approval(tx) => tx.is_closed(),
            Self::Question { tx, .. } => tx.is_closed(),
        }
    }
}

/// Pending questions by session key; one at a time per session (a turn runs one tool at a time
/// where approvals are involved, since those tools are not parallel-safe). Each is tagged with
/// the registration that made it, so an ended wait removes its own waiter and never a newer one.
#[derive(Default)]
pub struct Approvals {
    pending: Mutex<HashMap<String, (u64, Waiter)>>,
    next: AtomicU64,
}

/// A registered waiter; dropping it (the wait ended, or the turn's future was dropped) removes
/// the waiter unless another registration replaced it.
struct Registration<'a> {
    approvals: &'a Approvals,
    session_key: &'a str,
    id: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut pending = self.approvals.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if pending.get(self.session_key).is_some_and(|(id, _)| *id == self.id) {
            pending.remove(self.session_key);
        }
    }
}

/// What an incoming answer did.
#[derive(Debug, PartialEq, Eq)]
pub enum Answered {
    /// It answered a pending question.
    Yes,
    /// Nothing was waiting for it.
    NothingPending,
}

impl Approvals {
    /// Resolve a pending approval for `session_key`.
    pub fn decide(&self, session_key: &str, approved: bool) -> Answered {
        let mut pending = self.pending.lock().expect("approvals lock poisoned");
        match take_live(&mut pending, session_key) {
            Some((_, Waiter::Approval(tx))) => {
                if tx.send(approved).is_ok() {
                    Answered::Yes
                } else {
                    Answered::NothingPending
                }
            }
            Some(other) => {
                pending.insert(session_key.to_owned(), other);
                Answered::NothingPending
            }
            None => Answered::NothingPending,
        }
    }

    /// Hand the user's message or button press to a pending question, if one waits.
    pub fn answer(&self, session_key: &str, text: &str) -> Answered {
        let mut pending = self.pending.lock().expect("approvals lock poisoned");
        match take_live(&mut pending, session_key) {
            Some((_, Waiter::Question { tx, choices })) => {
                let answer = text
                    .strip_prefix(CHOICE_PREFIX)
                    .and_then(|i| i.parse::<usize>().ok())
                    .and_then(|i| choices.get(i).cloned())
                    .unwrap_or_else(|| text.to_owned());
                if tx.send(answer).is_ok() { Answered::Yes } else { Answered::NothingPending }
            }
            Some(other) => {
                pending.insert(session_key.to_owned(), other);
                Answered::NothingPending
            }
            None => Answered::NothingPending,
        }
    }

    /// Whether a question (not an approval) waits in `session_key`.
    pub fn question_pending(&self, session_key: &str) -> bool {
        matches!(
            self.pending.lock().expect("approvals lock poisoned").get(session_key),
            Some((_, waiter @ Waiter::Question { .. })) if !waiter.is_closed()
        )
    }

    /// Wait for answers in `session_key` with `waiter` until the registration is dropped.
    fn register<'a>(&'a self, session_key: &'a str, waiter: Waiter) -> Registration<'a> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.pending.lock().expect("approvals lock poisoned").insert(session_key.to_owned(), (id, waiter));
        Registration { approvals: self, session_key, id }
    }
}

/// The waiter of `session_key` if someone still awaits it; a closed one is removed.
fn take_live(pending: &mut HashMap<String, (u64, Waiter)>, session_key: &str) -> Option<(u64, Waiter)> {
    pending.remove(session_key).filter(|(_, waiter)| !waiter.is_closed())
}

/// The person in one chat, as tools see them.
pub struct ChatHuman {
    /// The broker.
    pub approvals: Arc<Approvals>,
    /// Delivers the questions.
    pub outbox: Outbox,
    /// Where to ask.
    pub chat: ChatRef,
    /// The session key answers arrive under.
    pub session_key: String,
    /// The message the turn answers (questions reply to it).
    pub reply_to: String,
    /// Whether a person can answer here at all.
    pub interactive: bool,
    /// The turn's worker permit, given back while it waits for an answer.
    pub worker: Option<Arc<WorkerSlot>>,
}

impl ChatHuman {
    async fn ask(&self, text: &str, buttons: Vec<Button>) {
        let mut messages = self.outbox.compose(&self.chat, text, OutboundKind::Notice, Some(&self.reply_to));
        if let Some(last) = messages.last_mut() {
            last.buttons = buttons;
        }
        let turn_id = format!("ask:{}:{}", self.session_key, now_ms());
        self.outbox.send_notice(&self.chat, &turn_id, &messages).await;
    }

    /// Wait for `rx` up to `timeout`, parked (without a worker permit) when the turn has one.
    async fn wait<T>(&self, rx: oneshot::Receiver<T>, timeout: Duration) -> WaitEnd<T> {
        let wait = tokio::time::timeout(timeout, rx);
        let outcome = match &self.worker {
            Some(worker) => worker.park(wait).await,
            None => wait.await,
        };
        match outcome {
            Ok(Ok(value)) => WaitEnd::Answered(value),
            Ok(Err(_)) => WaitEnd::Dropped,
            Err(_) => WaitEnd::TimedOut,
        }
    }
}

/// How a wait for a person ended.
enum WaitEnd<T> {
    Answered(T),
    /// The waiter was replaced (another question in the same session).
    Dropped,
    TimedOut,
}

#[async_trait]
impl Human for ChatHuman {
    async fn approve(&self, action: &str, timeout: Duration) -> Approval {
        if !self.interactive {
            return Approval::Unavailable;
        }
        let (tx, rx) = oneshot::channel();
        let registration = self.approvals.register(&self.session_key, Waiter::Approval(tx));
        let minutes = timeout.as_secs().div_ceil(60);
        let text = format!("Approval needed: {action}\nReply /approve or /deny (expires in {minutes} min).");
        let buttons = vec![
            Button { label: "Approve".into(), data: APPROVE.into() },
            Button { label: "Deny".into(), data: DENY.into() },
        ];
        self.ask(&text, buttons).await;
        let end = self.wait(rx, timeout).await;
        drop(registration);
        match end {
            WaitEnd::Answered(true) => Approval::Approved,
            WaitEnd::Answered(false) | WaitEnd::Dropped => Approval::Denied,
            WaitEnd::TimedOut => {
                self.outbox
                    .notify(
                        &self.chat,
                        "No answer in time: not approved.",
                        Some(&self.reply_to),
                        &format!("ask:{}:timeout:{}", self.session_key, now_ms()),
                    )
                    .await;
                Approval::TimedOut
            }
        }
    }

    async fn rejoin(&self) {
        if let Some(worker) = &self.worker {
            worker.ensure().await;
        }
    }

    async fn clarify(&self, question: &str, choices: &[String], timeout: Duration) -> Option<String> {
        if !self.interactive {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        let registration =
            self.approvals.register(&self.session_key, Waiter::Question { tx, choices: choices.to_vec() });
        let buttons = choices
            .iter()
            .enumerate()
            .map(|(i, c)| Button { label: c.clone(), data: format!("{CHOICE_PREFIX}{i}") })
            .collect();
        self.ask(question, buttons).await;
        let end = self.wait(rx, timeout).await;
        drop(registration);
        match end {
            WaitEnd::Answered(answer) => Some(answer),
            WaitEnd::Dropped | WaitEnd::TimedOut => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_reach_the_right_waiter() {
        let approvals = Approvals::default();
        assert_eq!(approvals.decide("k", true), Answered::NothingPending);
        let (tx, mut rx) = oneshot::channel();
        let _asked = approvals.register("k", Waiter::Approval(tx));
        assert_eq!(approvals.answer("k", "hello"), Answered::NothingPending, "text does not answer an approval");
        assert_eq!(approvals.decide("k", true), Answered::Yes);
        assert_eq!(rx.try_recv(), Ok(true));

        let (tx, mut rx) = oneshot::channel();
        let _asked = approvals.register("k", Waiter::Question { tx, choices: vec!["red".into(), "blue".into()] });
        assert!(approvals.question_pending("k"));
        assert_eq!(approvals.decide("k", false), Answered::NothingPending, "/deny does not answer a question");
        assert_eq!(approvals.answer("k", &format!("{CHOICE_PREFIX}1")), Answered::Yes);
        assert_eq!(rx.try_recv().as_deref(), Ok("blue"));
    }

    #[test]
    fn a_waiter_whose_turn_is_gone_answers_nothing() {
        let approvals = Approvals::default();
        // The turn that asked was stopped, crashed or timed out: its receiver is gone.
        let (tx, rx) = oneshot::channel::<String>();
        let _asked = approvals.register("k", Waiter::Question { tx, choices: Vec::new() });
        drop(rx);
        assert!(!approvals.question_pending("k"));
        assert_eq!(approvals.answer("k", "my next message"), Answered::NothingPending);
        let (tx, rx) = oneshot::channel::<bool>();
        let _asked = approvals.register("k", Waiter::Approval(tx));
        drop(rx);
        assert_eq!(approvals.decide("k", true), Answered::NothingPending);
        assert!(approvals.pending.lock().expect("lock").is_empty(), "stale waiters are dropped");
    }

    #[test]
    fn an_ended_wait_removes_its_own_waiter_only() {
        let approvals = Approvals::default();
        let (tx, _rx) = oneshot::channel::<String>();
        let first = approvals.register("k", Waiter::Question { tx, choices: Vec::new() });
        drop(first);
        assert!(!approvals.question_pending("k"), "a dropped turn's question is gone");
        let (tx, _old_rx) = oneshot::channel::<String>();
        let old = approvals.register("k", Waiter::Question { tx, choices: Vec::new() });
        let (tx, mut rx) = oneshot::channel::<String>();
        let _new = approvals.register("k", Waiter::Question { tx, choices: Vec::new() });
        drop(old);
        assert_eq!(approvals.answer("k", "yes"), Answered::Yes, "the newer question still waits");
        assert_eq!(rx.try_recv().as_deref(), Ok("yes"));
    }
}
