//! The session lifecycle in chat: `/new` (stops a running turn, starts a fresh session at once,
//! and flushes the old one's memory in the background — the key's next turn waits for that
//! flush, so nothing races), `/sessions` (this chat's recent sessions) and `/resume` (back to
//! one of them). A session left behind is never deleted: it stays listed and resumable.
//!
//! `/new` repoints the key at once and runs the old session's flush in the background holding the
//! key's flush gate. `/resume` takes a number from `/sessions` or words of a title.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use hermesd_platform::InboundMessage;

use super::actor::ActorState;
use super::{Router, short};
use crate::clock::now_ms;
use crate::store::{SessionInfo, SessionKey};
use crate::turn::StopReason;
use crate::turn::flush::FlushCause;
use crate::turn::lifecycle::target_of;

/// Sessions `/sessions` lists and `/resume` chooses from.
const LISTED: u32 = 10;
/// How long a `/new` flush waits for the turn it stopped to store what it did.
const STOPPED_TURN_GRACE: Duration = Duration::from_secs(5);

impl Router {
    /// `/new`: stop a running turn, point the key at a fresh session now, flush the old one.
    pub(super) async fn new_session(
        &self,
        key: &SessionKey,
        message: &InboundMessage,
        state: Option<Arc<ActorState>>,
        prefix: char,
    ) -> String {
        let running = state.as_ref().filter(|s| s.is_running());
        if let Some(state) = running {
            // The stopped turn answers "Stopped." itself.
            state.stop_running(StopReason::Stopped);
        }
        let stopped = running.is_some();
        let runner = &self.inner.runner;
        let store = runner.store();
        let old = match store.route(&key.key).await {
            Ok(old) => old,
            Err(e) => {
                tracing::warn!(error = %e, "read the session before /new");
                None
            }
        };
        // Claimed before the route moves: the key's next turn waits for this flush to end.
        let guard = old.as_ref().and_then(|_| runner.flusher().gate.begin(&key.key));
        let session = match store.start_session(key, now_ms()).await {
            Ok(session) => session,
            Err(e) => {
                tracing::error!(error = %e, "start session for /new");
                return "Could not start a new session; see the hermesd logs.".to_owned();
            }
        };
        // A reset the sweep left for this key is moot: the user chose a fresh start.
        if let Err(e) = store.take_reset(&key.key).await {
            tracing::warn!(error = %e, "drop a pending reset notice");
        }
        if let (Some(old), Some(guard)) = (&old, guard) {
            let target = target_of(&old.id, key, message, self.is_admin(message));
            let runner = runner.clone();
            self.inner.tracker.spawn(async move {
                let _guard = guard;
                if let Some(state) = state {
                    wait_until_idle(&state).await;
                }
                runner.flusher().flush(&target, FlushCause::New).await;
            });
        }
        let mut text = format!("Started a new session ({})", short(&session.id));
        if stopped {
            text.push_str(" after stopping the running turn");
        }
        text.push('.');
        if old.is_some() {
            text.push_str(&format!(" The previous one is archived — {prefix}resume to return to it."));
        }
        text
    }

    /// `/sessions`: this key's recent sessions, newest first, numbered for `/resume`.
    pub(super) async fn list_sessions(&self, key: &SessionKey, prefix: char) -> String {
        let store = self.inner.runner.store();
        let (sessions, current) = match (store.key_sessions(&key.key, LISTED).await, store.route(&key.key).await) {
            (Ok(sessions), Ok(current)) => (sessions, current.map(|s| s.id)),
            (Err(e), _) | (_, Err(e)) => return format!("Could not list the sessions: {e}"),
        };
        if sessions.is_empty() {
            return "No sessions in this chat yet.".to_owned();
        }
        let mut out = String::from("Sessions in this chat, newest first:\n");
        for (n, session) in sessions.iter().enumerate() {
            let mark = if current.as_deref() == Some(session.id.as_str()) { " ← current" } else { "" };
            out.push_str(&format!("{}. {}{mark}\n", n + 1, describe(session)));
        }
        out.push_str(&format!("{prefix}resume <number> or {prefix}resume <title words> returns to one."));
        out
    }

    /// `/resume [n|title words]`: point the key at one of its sessions again (without an
    /// argument, the most recent one other than the current).
    pub(super) async fn resume(&self, key: &SessionKey, words: &[String], prefix: char) -> String {
        let store = self.inner.runner.store();
        let (sessions, current) = match (store.key_sessions(&key.key, LISTED).await, store.route(&key.key).await) {
            (Ok(sessions), Ok(current)) => (sessions, current.map(|s| s.id)),
            (Err(e), _) | (_, Err(e)) => return format!("Could not read the sessions: {e}"),
        };
        let chosen = match choose(&sessions, current.as_deref(), words) {
            Ok(chosen) => chosen,
            Err(Unchosen::NoPrevious) => return "There is no earlier session in this chat to resume.".to_owned(),
            Err(Unchosen::NoSuch(what)) => {
                return format!("No session matches \"{what}\"; {prefix}sessions lists them.");
            }
        };
        if current.as_deref() == Some(chosen.id.as_str()) {
            return format!("That is the current session: {}.", describe(chosen));
        }
        match store.resume_session(&key.key, &chosen.id, now_ms()).await {
            Ok(true) => format!("Resumed {}. The session you left stays in {prefix}sessions.", describe(chosen)),
            Ok(false) => "That session is gone; /sessions lists the ones left.".to_owned(),
            Err(e) => format!("Could not resume the session: {e}"),
        }
    }
}

/// Why `/resume` found nothing.
#[derive(Debug, PartialEq, Eq)]
enum Unchosen {
    NoPrevious,
    NoSuch(String),
}

/// The session `/resume words` names among `sessions` (newest first): a number from
/// `/sessions`, else the newest whose title holds every word; no words: the newest that is
/// not `current`.
fn choose<'a>(
    sessions: &'a [SessionInfo],
    current: Option<&str>,
    words: &[String],
) -> Result<&'a SessionInfo, Unchosen> {
    if words.is_empty() {
        return sessions.iter().find(|s| Some(s.id.as_str()) != current).ok_or(Unchosen::NoPrevious);
    }
    let asked = words.join(" ");
    if let Ok(n) = asked.parse::<usize>() {
        return n.checked_sub(1).and_then(|i| sessions.get(i)).ok_or(Unchosen::NoSuch(asked));
    }
    let wanted: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    sessions
        .iter()
        .find(|s| {
            let title = s.title.as_deref().unwrap_or_default().to_lowercase();
            wanted.iter().all(|w| title.contains(w.as_str()))
        })
        .ok_or(Unchosen::NoSuch(asked))
}

/// `"Rocket plans" · 2026-01-02 10:00 UTC · 12 messages`
fn describe(session: &SessionInfo) -> String {
    let title = session.title.as_deref().map_or_else(|| "(untitled)".to_owned(), |t| format!("\"{t}\""));
    let when = DateTime::<Utc>::from_timestamp_millis(session.updated_at)
        .map_or_else(String::new, |t| t.format("%Y-%m-%d %H:%M UTC").to_string());
    let count = match session.message_count {
        1 => "1 message".to_owned(),
        n => format!("{} messages", n.max(0)),
    };
    format!("{title} · {when} · {count}")
}

/// Wait (briefly) until a stopped turn has stored its end.
async fn wait_until_idle(state: &ActorState) {
    let deadline = tokio::time::Instant::now() + STOPPED_TURN_GRACE;
    while state.is_running() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str, title: Option<&str>, updated_at: i64) -> SessionInfo {
        SessionInfo {
            id: id.into(),
            key: "k".into(),
            title: title.map(str::to_owned),
            created_at: 0,
            updated_at,
            restart_count: 0,
            suspended: false,
            message_count: 4,
            system_prompt: None,
            last_prompt_tokens: 0,
            model: None,
        }
    }

    #[test]
    fn resume_picks_by_number_title_words_or_the_previous_one() {
        let sessions =
            [session("c", None, 3), session("b", Some("Rocket launch plans"), 2), session("a", Some("Tea"), 1)];
        let words = |text: &str| text.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(choose(&sessions, Some("c"), &[]).unwrap().id, "b", "the previous one");
        assert_eq!(choose(&sessions, None, &[]).unwrap().id, "c", "archived by a reset: the last one");
        assert_eq!(choose(&sessions, Some("c"), &words("3")).unwrap().id, "a");
        assert_eq!(choose(&sessions, Some("c"), &words("launch ROCKET")).unwrap().id, "b");
        assert_eq!(choose(&sessions, Some("c"), &words("4")).unwrap_err(), Unchosen::NoSuch("4".into()));
        assert_eq!(choose(&sessions, Some("c"), &words("coffee")).unwrap_err(), Unchosen::NoSuch("coffee".into()));
        assert_eq!(choose(&sessions[..1], Some("c"), &[]).unwrap_err(), Unchosen::NoPrevious);
    }

    #[test]
    fn a_session_is_described_by_title_date_and_size() {
        let text = describe(&session("a", Some("Tea"), 1_767_348_000_000));
        assert_eq!(text, "\"Tea\" · 2026-01-02 10:00 UTC · 4 messages");
        assert!(describe(&session("b", None, 0)).starts_with("(untitled)"));
    }
}
