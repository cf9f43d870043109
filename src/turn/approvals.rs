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
//!
//! A command's approval may be remembered: `/approve session` (or its button) for the rest of the
//! session (in memory, per session id, bounded), `/approve always` for good (stored per person and
//! command, `GrantStore`), and the operator's `[tools] approved_commands` for everyone. Remembered
//! approvals only skip the question: the command still runs in the sandbox.

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

/// Button data for approvals (once).
pub const APPROVE: &str = "hermesd:approve";
/// Button data for an approval for the rest of the session.
pub const APPROVE_SESSION: &str = "hermesd:approve:session";
/// Button data for an approval for good.
pub const APPROVE_ALWAYS: &str = "hermesd:approve:always";
/// Button data for denials.
pub const DENY: &str = "hermesd:deny";
/// Prefix of button data for clarify choices.
pub const CHOICE_PREFIX: &str = "hermesd:choice:";

/// How a person answered an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// `/deny`.
    Deny,
    /// `/approve`: this time.
    Once,
    /// `/approve session`: the same command for the rest of this session.
    Session,
    /// `/approve always`: the same command for good, for this person.
    Always,
}

impl Decision {
    /// The decision a button's data carries, if it is an approval button.
    pub fn of_button(data: &str) -> Option<Self> {
        Some(match data {
            APPROVE => Decision::Once,
            APPROVE_SESSION => Decision::Session,
            APPROVE_ALWAYS => Decision::Always,
            DENY => Decision::Deny,
            _ => return None,
        })
    }

    /// The decision `/approve <scope>` names; `None` for an unknown scope.
    pub fn of_scope(scope: Option<&str>) -> Option<Self> {
        match scope.map(str::trim).map(str::to_ascii_lowercase).as_deref() {
            None | Some("" | "once") => Some(Decision::Once),
            Some("session") => Some(Decision::Session),
            Some("always") => Some(Decision::Always),
            Some(_) => None,
        }
    }

    /// What the chat is told.
    pub fn said(self) -> &'static str {
        match self {
            Decision::Deny => "Denied.",
            Decision::Once => "Approved.",
            Decision::Session => "Approved for the rest of this session.",
            Decision::Always => "Approved for good (/approvals lists and revokes).",
        }
    }
}

/// Sessions whose `/approve session` commands are remembered at once; the least recently used
/// goes first.
const MAX_SESSIONS_REMEMBERED: usize = 10_000;
/// Commands remembered per session.
const MAX_COMMANDS_PER_SESSION: usize = 64;

enum Waiter {
    Approval(oneshot::Sender<Decision>),
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
pub struct Approvals {
    /// `[tools] approved_commands` (a reload replaces them).
    preapproved: crate::vocab::live::Live<[String]>,
    pending: Mutex<HashMap<String, (u64, Waiter)>>,
    next: AtomicU64,
    /// `/approve session` commands by session id, each with when it was last used.
    session_grants: Mutex<HashMap<String, (u64, Vec<String>)>>,
    uses: AtomicU64,
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

impl Default for Approvals {
    fn default() -> Self {
        Self::with_preapproved(&[])
    }
}

impl Approvals {
    /// A broker with the operator's approved commands (`[tools] approved_commands`).
    pub fn with_preapproved(preapproved: &[String]) -> Self {
        Self {
            preapproved: crate::vocab::live::Live::new(preapproved.into()),
            pending: Mutex::default(),
            next: AtomicU64::default(),
            session_grants: Mutex::default(),
            uses: AtomicU64::default(),
        }
    }

    /// The operator's approved commands.
    pub fn preapproved(&self) -> Arc<[String]> {
        self.preapproved.get()
    }

    /// Take a reloaded config's approved commands for the commands asked from now on.
    pub fn set_preapproved(&self, preapproved: &[String]) {
        self.preapproved.set(preapproved.into());
    }

    /// Resolve a pending approval for `session_key`.
    pub fn decide(&self, session_key: &str, decision: Decision) -> Answered {
        let mut pending = self.pending.lock().expect("approvals lock poisoned");
        match take_live(&mut pending, session_key) {
            Some((_, Waiter::Approval(tx))) => {
                if tx.send(decision).is_ok() {
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

    /// Remember `command` as approved for the rest of session `session_id`.
    pub fn grant_session(&self, session_id: &str, command: &str) {
        let used = self.uses.fetch_add(1, Ordering::Relaxed);
        let mut grants = self.session_grants.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !grants.contains_key(session_id) && grants.len() >= MAX_SESSIONS_REMEMBERED {
            let oldest = grants.iter().min_by_key(|(_, (at, _))| *at).map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                grants.remove(&oldest);
            }
        }
        let (at, commands) = grants.entry(session_id.to_owned()).or_default();
        *at = used;
        if !commands.iter().any(|c| c == command) {
            if commands.len() >= MAX_COMMANDS_PER_SESSION {
                commands.remove(0);
            }
            commands.push(command.to_owned());
        }
    }

    /// Whether `command` was approved for the rest of session `session_id`.
    pub fn session_granted(&self, session_id: &str, command: &str) -> bool {
        let used = self.uses.fetch_add(1, Ordering::Relaxed);
        let mut grants = self.session_grants.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match grants.get_mut(session_id) {
            Some((at, commands)) if commands.iter().any(|c| c == command) => {
                *at = used;
                true
            }
            _ => false,
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
    /// What a remembered approval needs: the session, the person and the operator's list.
    pub memory: Option<ApprovalMemory>,
}

/// Where approvals of commands are remembered for one turn.
pub struct ApprovalMemory {
    /// The session (`/approve session` lasts while it does).
    pub session_id: String,
    /// The person: (adapter, user id) (`/approve always` is theirs).
    pub person: (String, String),
    /// Lasting approvals.
    pub store: Arc<dyn crate::store::Store>,
    /// `[tools] approved_commands`: approved for everyone by the operator.
    pub preapproved: Arc<[String]>,
}

/// Whether `command` matches one of the operator's `patterns`: the same command, or, for a
/// pattern ending in ` *`, one that starts with what comes before it followed by a space.
pub fn preapproved(patterns: &[String], command: &str) -> bool {
    let command = normalise(command);
    patterns.iter().any(|pattern| {
        let pattern = normalise(pattern);
        match pattern.strip_suffix(" *") {
            // What follows the prefix are arguments only: no second command, substitution or
            // redirection rides on an approved one.
            Some(prefix) => {
                command == prefix
                    || command.strip_prefix(prefix).is_some_and(|rest| {
                        rest.starts_with(' ') && !rest.contains([';', '&', '|', '`', '$', '<', '>', '(', ')', '\n'])
                    })
            }
            None => command == pattern,
        }
    })
}

/// A command as remembered: trimmed, inner whitespace runs as one space.
pub fn normalise(command: &str) -> String {
    command.split_whitespace().collect::<Vec<_>>().join(" ")
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

impl ChatHuman {
    /// Ask, and wait for the decision; `allow_memory` offers the session and always buttons.
    async fn decide(&self, action: &str, timeout: Duration, allow_memory: bool) -> Result<Decision, Approval> {
        if !self.interactive {
            return Err(Approval::Unavailable);
        }
        let (tx, rx) = oneshot::channel();
        let registration = self.approvals.register(&self.session_key, Waiter::Approval(tx));
        let minutes = timeout.as_secs().div_ceil(60);
        let mut buttons = vec![Button { label: "Approve".into(), data: APPROVE.into() }];
        let how = if allow_memory {
            buttons.push(Button { label: "This session".into(), data: APPROVE_SESSION.into() });
            buttons.push(Button { label: "Always".into(), data: APPROVE_ALWAYS.into() });
            "Reply /approve (once), /approve session, /approve always or /deny"
        } else {
            "Reply /approve or /deny"
        };
        buttons.push(Button { label: "Deny".into(), data: DENY.into() });
        let text = format!("Approval needed: {action}\n{how} (expires in {minutes} min).");
        self.ask(&text, buttons).await;
        let end = self.wait(rx, timeout).await;
        drop(registration);
        match end {
            WaitEnd::Answered(Decision::Deny) | WaitEnd::Dropped => Err(Approval::Denied),
            // Without a memory, a session or always answer counts once.
            WaitEnd::Answered(decision) => Ok(if allow_memory { decision } else { Decision::Once }),
            WaitEnd::TimedOut => {
                self.outbox
                    .notify(
                        &self.chat,
                        "No answer in time: not approved.",
                        Some(&self.reply_to),
                        &format!("ask:{}:timeout:{}", self.session_key, now_ms()),
                    )
                    .await;
                Err(Approval::TimedOut)
            }
        }
    }

    /// Whether `command` was approved before: by the operator, for good by this person, or for
    /// this session. A store that cannot be read remembers nothing (the person is asked).
    async fn remembered(&self, memory: &ApprovalMemory, command: &str) -> Option<&'static str> {
        if preapproved(&memory.preapproved, command) {
            return Some("approved by the operator ([tools] approved_commands)");
        }
        let (platform, user) = &memory.person;
        match memory.store.has_grant(platform, user, command).await {
            Ok(true) => return Some("approved for good by this person"),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "lasting approvals unreadable: asking"),
        }
        self.approvals.session_granted(&memory.session_id, command).then_some("approved for this session")
    }
}

#[async_trait]
impl Human for ChatHuman {
    async fn approve(&self, action: &str, timeout: Duration) -> Approval {
        match self.decide(action, timeout, false).await {
            Ok(_) => Approval::Approved,
            Err(refused) => refused,
        }
    }

    async fn approve_command(&self, action: &str, command: &str, timeout: Duration) -> Approval {
        let Some(memory) = &self.memory else { return self.approve(action, timeout).await };
        let command = normalise(command);
        if let Some(how) = self.remembered(memory, &command).await {
            tracing::info!(session = %memory.session_id, how, "a command ran without asking: {command}");
            return Approval::Approved;
        }
        match self.decide(action, timeout, true).await {
            Ok(Decision::Session) => {
                self.approvals.grant_session(&memory.session_id, &command);
                Approval::Approved
            }
            Ok(Decision::Always) => {
                let (platform, user) = &memory.person;
                if let Err(e) = memory.store.add_grant(platform, user, &command, now_ms()).await {
                    tracing::warn!(error = %e, "a lasting approval was not stored; approved this once");
                }
                Approval::Approved
            }
            Ok(_) => Approval::Approved,
            Err(refused) => refused,
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
        assert_eq!(approvals.decide("k", Decision::Once), Answered::NothingPending);
        let (tx, mut rx) = oneshot::channel();
        let _asked = approvals.register("k", Waiter::Approval(tx));
        assert_eq!(approvals.answer("k", "hello"), Answered::NothingPending, "text does not answer an approval");
        assert_eq!(approvals.decide("k", Decision::Once), Answered::Yes);
        assert_eq!(rx.try_recv(), Ok(Decision::Once));

        let (tx, mut rx) = oneshot::channel();
        let _asked = approvals.register("k", Waiter::Question { tx, choices: vec!["red".into(), "blue".into()] });
        assert!(approvals.question_pending("k"));
        assert_eq!(approvals.decide("k", Decision::Deny), Answered::NothingPending, "/deny does not answer a question");
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
        let (tx, rx) = oneshot::channel::<Decision>();
        let _asked = approvals.register("k", Waiter::Approval(tx));
        drop(rx);
        assert_eq!(approvals.decide("k", Decision::Once), Answered::NothingPending);
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

    #[test]
    fn operator_patterns_approve_the_command_or_its_prefix_with_plain_arguments_only() {
        let patterns = vec!["git status".to_owned(), "npm test *".to_owned()];
        assert!(preapproved(&patterns, "git   status"));
        assert!(!preapproved(&patterns, "git status --porcelain"), "an exact pattern is exact");
        assert!(preapproved(&patterns, "npm test"));
        assert!(preapproved(&patterns, "npm test -- --watch=false"));
        assert!(!preapproved(&patterns, "npm testing"));
        for sneaky in
            ["npm test; rm -rf /", "npm test && curl x", "npm test | sh", "npm test $(id)", "npm test > /etc/x"]
        {
            assert!(!preapproved(&patterns, sneaky), "{sneaky}");
        }
    }

    #[test]
    fn session_approvals_are_per_session_and_bounded() {
        let approvals = Approvals::default();
        approvals.grant_session("s1", "git push");
        assert!(approvals.session_granted("s1", "git push"));
        assert!(!approvals.session_granted("s2", "git push"), "another session (or after /new) asks again");
        assert!(!approvals.session_granted("s1", "git push --force"));
        for n in 0..MAX_COMMANDS_PER_SESSION {
            approvals.grant_session("s1", &format!("cmd {n}"));
        }
        assert!(!approvals.session_granted("s1", "git push"), "the oldest command goes first");
        for n in 0..MAX_SESSIONS_REMEMBERED {
            approvals.grant_session(&format!("other {n}"), "x");
        }
        let remembered = approvals.session_grants.lock().unwrap().len();
        assert_eq!(remembered, MAX_SESSIONS_REMEMBERED, "bounded");
        assert_eq!(Decision::of_scope(Some("ALWAYS")), Some(Decision::Always));
        assert_eq!(Decision::of_scope(None), Some(Decision::Once));
        assert_eq!(Decision::of_scope(Some("forever")), None);
    }
}
