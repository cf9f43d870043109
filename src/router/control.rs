//! The control lane: chat commands answered at once, never queued behind a running turn, and never
//! a model call or a wait for one in the adapter's receive loop. `/compress` becomes a
//! `Work::Compress` job in the session's mailbox, run by the actor under a worker permit and
//! `/stop`-able; `/model`, `/title` and `/reasoning` act on the session at once when
//! `TurnRunner::current_session` has it, and become a `Work::Command` job when the session expired
//! or is being flushed. Commands that change the transcript (`/retry`, `/undo`, `/compress`) refuse
//! while a turn runs and say so; `/queue` and `/steer` turn their text into a turn of their own.
//! Commands that change what every chat shares (`/sethome`, switching with `/model <name>`) need an
//! admin.
//!
//! The commands: `/new`, `/stop`, `/status`, `/compress`, `/approve`, `/deny`, `/retry`, `/undo`,
//! `/model`, `/title`, `/sessions`, `/resume`, `/sethome`, `/queue`, `/steer`, `/usage`,
//! `/reasoning on|off` (per session, stored), `/skills` and `/help`. Answers to approvals and
//! questions (`/approve`, `/deny`, a button) travel here too, so they never wait behind the turn
//! that asked.

use std::sync::atomic::Ordering;
use std::time::Instant;

use hermesd_platform::{InboundEvent, InboundMessage};

use super::actor::ActorState;
use super::batch::{Queued, Work};
use super::commands::{self, ChatCommand, Toggle};
use super::{Router, short};
use crate::clock::now_ms;
use crate::config::BusyPolicy;
use crate::store::{AcceptOutcome, SessionInfo, SessionKey};
use crate::turn::approvals::{Answered, Decision};
use crate::turn::{StopReason, TurnJob};

const BUSY: &str = "A turn is running; send this again after it finishes (or /stop it).";

impl Router {
    pub(super) async fn control(
        &self,
        seq: i64,
        key: &SessionKey,
        message: &InboundMessage,
        command: ChatCommand,
        prefix: char,
    ) {
        let state = {
            let actors = self.inner.actors.lock().expect("router lock poisoned");
            actors.get(&key.key).map(|a| a.state.clone())
        };
        let running = state.as_ref().is_some_and(|s| s.is_running());
        let text = match command {
            ChatCommand::Stop => match state.as_ref().filter(|_| running) {
                Some(state) => {
                    state.stop_running(StopReason::Stopped);
                    // The stopped turn answers "Stopped." itself; this is only the acknowledgement.
                    "Stopping the current turn.".to_owned()
                }
                None => "Nothing is running.".to_owned(),
            },
            ChatCommand::New => self.new_session(key, message, state.clone(), prefix).await,
            ChatCommand::Sessions => self.list_sessions(key, prefix).await,
            ChatCommand::Resume { .. } if running => BUSY.to_owned(),
            ChatCommand::Resume { words } => self.resume(key, &words, prefix).await,
            ChatCommand::Status => self.status(key, state.as_deref()).await,
            ChatCommand::Whoami => self.whoami(key, message).await,
            ChatCommand::Compress if running => BUSY.to_owned(),
            ChatCommand::Compress => match self.queue_work(seq, key, message, Work::Compress) {
                Ok(()) => return,
                Err(text) => text,
            },
            ChatCommand::Approve { scope } => match Decision::of_scope(scope.as_deref()) {
                Some(decision) => match self.inner.runner.approvals().decide(&key.key, decision) {
                    Answered::Yes => decision.said().to_owned(),
                    Answered::NothingPending => "Nothing is waiting for approval.".to_owned(),
                },
                None => format!("{prefix}approve once, {prefix}approve session or {prefix}approve always"),
            },
            ChatCommand::Deny => match self.inner.runner.approvals().decide(&key.key, Decision::Deny) {
                Answered::Yes => "Denied.".to_owned(),
                Answered::NothingPending => "Nothing is waiting for approval.".to_owned(),
            },
            ChatCommand::Approvals { words } => self.approvals_command(message, &words, prefix).await,
            ChatCommand::Retry | ChatCommand::Undo if running => BUSY.to_owned(),
            ChatCommand::Retry => match self.retry(seq, key, message).await {
                Ok(true) => return,
                Ok(false) => "There is nothing to retry yet.".to_owned(),
                Err(e) => e,
            },
            ChatCommand::Undo => match self.undo(key).await {
                Ok(Some(removed)) => format!("Removed the last exchange (your message: \"{}\").", preview(&removed)),
                Ok(None) => "There is nothing to undo.".to_owned(),
                Err(e) => e,
            },
            ChatCommand::Model { name: Some(_) } if !self.is_admin(message) => {
                refuse_not_admin(message, "switch the model")
            }
            command @ (ChatCommand::Model { .. } | ChatCommand::Title { .. } | ChatCommand::Reasoning { .. }) => {
                match self.inner.runner.current_session(key).await {
                    Ok(Some(session)) => self.on_session(key, &session, command).await,
                    // Expired, being flushed, or none yet: resolved in the mailbox, where
                    // waiting for a flush (or running one) holds no receive loop.
                    Ok(None) => match self.queue_work(seq, key, message, Work::Command(command)) {
                        Ok(()) => return,
                        Err(text) => text,
                    },
                    Err(e) => format!("Could not read the session: {e}"),
                }
            }
            ChatCommand::Sethome if !self.is_admin(message) => refuse_not_admin(message, "set the home channel"),
            ChatCommand::Sethome => match self.inner.runner.store().set_home_channel(&message.chat, now_ms()).await {
                Ok(()) => format!(
                    "This chat is now the {platform} home channel: deliveries to \"{platform}\" (cron jobs, webhooks, \
                     send_message) arrive here.",
                    platform = message.chat.platform
                ),
                Err(e) => format!("Could not save the home channel: {e}"),
            },
            ChatCommand::Queue { .. } | ChatCommand::Steer { .. } => {
                let text = commands::rest(&message.text);
                if text.is_empty() {
                    format!("Usage: {prefix}queue <message> or {prefix}steer <message>")
                } else {
                    let policy = if matches!(command, ChatCommand::Queue { .. }) {
                        BusyPolicy::Queue
                    } else {
                        BusyPolicy::Steer
                    };
                    let message = InboundMessage { text: text.to_owned(), ..message.clone() };
                    self.enqueue(seq, key.clone(), message, policy).await;
                    return;
                }
            }
            ChatCommand::Usage => self.usage(key, message).await,
            ChatCommand::Skills => self.skills_text(key, &message.chat.platform, prefix),
            ChatCommand::Help => commands::help(prefix),
        };
        self.answer(seq, message, &text).await;
    }

    /// `/whoami`: the sender as this platform knows them, the profile and the route answering the
    /// chat, and the model its session uses now.
    async fn whoami(&self, key: &SessionKey, message: &InboundMessage) -> String {
        let runner = &self.inner.runner;
        let sender = &message.sender;
        let who = match &sender.name {
            Some(name) => format!("{name} ({}:{})", message.chat.platform, sender.id),
            None => format!("{}:{}", message.chat.platform, sender.id),
        };
        let admin = if self.is_admin(message) { " · admin" } else { "" };
        let routed = runner.route(&message.chat, &sender.id);
        let route = match &routed {
            Some((index, route)) => {
                let mut sets = Vec::new();
                sets.extend(route.profile.as_ref().map(|p| format!("profile {p}")));
                sets.extend(route.model.as_ref().map(|m| format!("model {m}")));
                sets.extend(route.system_prompt.as_ref().map(|_| "a system prompt".to_owned()));
                sets.extend(route.toolsets.as_ref().map(|t| format!("toolsets {}", t.join(", "))));
                sets.extend(route.require_mention.map(|r| format!("require_mention {r}")));
                format!("routes[{index}] ({})", sets.join(", "))
            }
            None => "none".to_owned(),
        };
        let model = match runner.store().route(&key.key).await {
            Ok(Some(session)) => runner.store().session(&session.id).await.ok().flatten().and_then(|s| s.model),
            _ => None,
        };
        let model = model.or_else(|| routed.and_then(|(_, r)| r.model.clone())).unwrap_or_else(|| runner.model(key));
        let profile = &runner.agent(key).name;
        format!("you: {who}{admin}\nprofile: {profile}\nroute: {route}\nmodel: {model}")
    }

    pub(super) async fn status(&self, key: &SessionKey, state: Option<&ActorState>) -> String {
        let store = self.inner.runner.store();
        let routed = match store.route(&key.key).await {
            Ok(Some(s)) => store.session(&s.id).await,
            other => other,
        };
        let (session, model) = match routed {
            Ok(Some(s)) => {
                let title = s.title.as_deref().map(|t| format!(" \"{t}\"")).unwrap_or_default();
                (format!("session {}{title} · {} messages", short(&s.id), s.message_count), s.model)
            }
            Ok(None) => ("no session yet".to_owned(), None),
            Err(e) => (format!("session unknown ({e})"), None),
        };
        let running = match state.and_then(ActorState::running_for) {
            Some(elapsed) if state.is_some_and(ActorState::parked) => {
                format!("waiting for your answer (running for {}s)", elapsed.as_secs())
            }
            Some(elapsed) => format!("running for {}s", elapsed.as_secs()),
            None => "idle".to_owned(),
        };
        let waiting = state.map_or(0, |s| s.waiting.load(Ordering::SeqCst));
        let model = model.unwrap_or_else(|| self.inner.runner.model(key));
        format!("{session}\nmodel: {model}\nturn: {running} · {waiting} queued")
    }

    /// Put a command job (`/compress`, a session command waiting for its session) in the
    /// session's mailbox: it runs in order with the chat's turns, under a worker permit, never in
    /// the adapter's receive loop. `Err` is the answer when the mailbox is full.
    fn queue_work(&self, seq: i64, key: &SessionKey, message: &InboundMessage, work: Work) -> Result<(), String> {
        let admin = self.is_admin(message);
        let job = TurnJob {
            seq,
            message: message.clone(),
            key: key.clone(),
            accepted_at: Instant::now(),
            admin,
            batched: vec![],
        };
        let mut actors = self.inner.actors.lock().expect("router lock poisoned");
        let actor = actors.entry(key.key.clone()).or_insert_with(|| self.spawn_actor(&key.key));
        actor.state.waiting.fetch_add(1, Ordering::SeqCst);
        self.inner.metrics.queue_depth.fetch_add(1, Ordering::Relaxed);
        match actor.state.mailbox.try_send(Box::new(Queued { job, batchable: false, work })) {
            Ok(()) => Ok(()),
            Err(_) => {
                actor.state.waiting.fetch_sub(1, Ordering::SeqCst);
                self.inner.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
                Err(format!(
                    "Too many messages are waiting in this conversation ({}); send the command again after they finish.",
                    self.inner.settings.max_queued
                ))
            }
        }
    }

    /// A session command run in the mailbox: its session resolved first (started when there is
    /// none, after the reset policy's flush when it expired), then answered as at once.
    pub(super) async fn session_command(&self, key: &SessionKey, command: ChatCommand) -> String {
        match self.inner.runner.resolve_session(key).await {
            Ok(session) => self.on_session(key, &session, command).await,
            Err(e) => format!("Could not read the session: {e}"),
        }
    }

    /// `/model`, `/title` or `/reasoning` on `session`.
    async fn on_session(&self, key: &SessionKey, session: &SessionInfo, command: ChatCommand) -> String {
        match command {
            ChatCommand::Model { name } => self.model(key, session, name.as_deref()).await,
            ChatCommand::Title { words } => self.title(session, &words.join(" ")).await,
            ChatCommand::Reasoning { mode } => self.reasoning(session, mode).await,
            other => format!("{other:?} is not a session command"),
        }
    }

    /// Undo the last exchange and run its message again as a new event; false: nothing to redo.
    async fn retry(&self, seq: i64, key: &SessionKey, message: &InboundMessage) -> Result<bool, String> {
        let Some(text) = self.undo(key).await? else { return Ok(false) };
        let again = InboundMessage { text, ..message.clone() };
        let event = InboundEvent::Message { event_id: format!("retry:{seq}"), message: again.clone() };
        let store = self.inner.runner.store();
        match store.accept_inbound(&event, now_ms(), self.outlive(&event)).await {
            Ok(AcceptOutcome::New { seq: retry_seq }) => {
                self.close(seq, &message.chat, &[]).await;
                self.enqueue(retry_seq, key.clone(), again, BusyPolicy::Queue).await;
                Ok(true)
            }
            Ok(AcceptOutcome::Duplicate) => Ok(true),
            Err(e) => Err(format!("Could not queue the retry: {e}")),
        }
    }

    async fn undo(&self, key: &SessionKey) -> Result<Option<String>, String> {
        let store = self.inner.runner.store();
        let Some(session) = store.route(&key.key).await.map_err(|e| format!("Could not read the session: {e}"))? else {
            return Ok(None);
        };
        store.undo_last_exchange(&session.id).await.map_err(|e| format!("Could not undo: {e}"))
    }

    async fn model(&self, key: &SessionKey, session: &SessionInfo, name: Option<&str>) -> String {
        let models = self.inner.runner.models(key);
        let Some(name) = name else {
            let current = session.model.as_deref().unwrap_or(&models[0]);
            return format!("model: {current}\nconfigured: {} (first is the default)", models.join(", "));
        };
        let chosen = match name {
            "default" | "primary" => None,
            name if models.iter().any(|m| m == name) => Some(name),
            name => return format!("{name} is not a configured model; choose one of: {}", models.join(", ")),
        };
        match self.inner.runner.store().set_session_model(&session.id, chosen).await {
            Ok(()) => format!("This session now uses {}.", chosen.unwrap_or(&models[0])),
            Err(e) => format!("Could not switch the model: {e}"),
        }
    }

    async fn title(&self, session: &SessionInfo, title: &str) -> String {
        if title.trim().is_empty() {
            return match &session.title {
                Some(title) => format!("Title: {title}"),
                None => "This session has no title; set one with /title <text>.".to_owned(),
            };
        }
        let title: String = title.trim().chars().take(100).collect();
        match self.inner.runner.store().set_title(&session.id, Some(&title)).await {
            Ok(()) => format!("Title set: {title}"),
            Err(e) => format!("Could not set the title: {e}"),
        }
    }
}

impl Router {
    /// `/reasoning [on|off]`: the setting is stored with the session, so it holds across
    /// restarts; reasoning already stored is shown or hidden from the next answer on.
    async fn reasoning(&self, session: &SessionInfo, mode: Option<Toggle>) -> String {
        let store = self.inner.runner.store();
        let Some(mode) = mode else {
            return match store.show_reasoning(&session.id).await {
                Ok(true) => "Reasoning is shown before answers in this session (/reasoning off hides it).".to_owned(),
                Ok(false) => "Reasoning is hidden in this session (/reasoning on shows it).".to_owned(),
                Err(e) => format!("Could not read the setting: {e}"),
            };
        };
        let on = mode == Toggle::On;
        match store.set_show_reasoning(&session.id, on).await {
            Ok(()) if on => "The model's reasoning will be shown before its answers in this session.".to_owned(),
            Ok(()) => "The model's reasoning will no longer be shown in this session.".to_owned(),
            Err(e) => format!("Could not change the setting: {e}"),
        }
    }
}

/// The answer to a non-admin asking for an admin command: what is refused and how to allow it.
fn refuse_not_admin(message: &InboundMessage, what: &str) -> String {
    format!(
        "Only an admin can {what}. The operator can name admins in {}_ADMIN_USERS or GATEWAY_ADMIN_USERS.",
        message.chat.platform.to_ascii_uppercase()
    )
}

fn preview(text: &str) -> String {
    let mut out: String = text.chars().take(60).collect();
    if text.chars().count() > 60 {
        out.push('…');
    }
    out
}
