//! The session lifecycle, turn side: which session a turn runs in (a session the reset policy
//! expired is archived here when the sweep has not come by yet — memory flushed first, then a
//! fresh session), the notice that tells the user a reset happened, and the title a session gets
//! after its first reply.
//!
//! It never delays a turn longer than the flush deadline, and never tells a reset where nobody
//! reads chat (API, cron, webhooks).
//!
//! `resolve_with_reset` waits for the key's flush, takes the sweep's reset reason, or — when the
//! sweep has not come by — flushes and resets an expired session itself. The reset notice comes
//! before the answer. A title comes from the summary model (`[auxiliary.summary]`), else from the
//! first message, never over one set with `/title`; notices and titles are for chat platforms only.

use std::sync::Arc;

use hermesd_platform::{ChatRef, InboundEvent, InboundMessage};
use tokio_util::task::TaskTracker;

use super::{TurnJob, TurnRunner};
use crate::agent::auxiliary::Summarizer;
use crate::clock::now_ms;
use crate::config::ResetPolicy;
use crate::metrics::SESSION_RESETS_TOTAL;
use crate::store::{ResetReason, SessionInfo, SessionKey, StoreError};
use crate::turn::flush::{FlushCause, FlushTarget, Flusher};
use crate::turn::session_key::expired_by;
use crate::vocab::origin::Origin;

/// Longest title, in characters.
const TITLE_CHARS: usize = 60;
/// What the summary model is asked for a title.
const TITLE_INSTRUCTION: &str = "Name this conversation in at most six words, in the language it is written in. \
Answer with the title only: no quotes, no trailing punctuation.";
/// How much of the first exchange the summary model reads, per side, in characters.
const TITLE_INPUT_CHARS: usize = 1_500;

/// Whether sessions on `platform` are conversations someone comes back to (the lifecycle —
/// resets, flushes, titles — leaves one-shot sessions alone).
pub fn conversational(platform: &str) -> bool {
    !Origin::of(platform).one_shot()
}

/// Whether `platform` is a chat people read: resets are told there and sessions titled.
fn tells_resets(platform: &str) -> bool {
    Origin::of(platform).read_by_people()
}

impl TurnRunner {
    /// The command prefix of the key's platform (`!` on Slack).
    fn command_prefix(&self, key: &SessionKey) -> char {
        self.parts.outbox.platforms().command_prefix(&key.platform)
    }

    /// The memory flush turn.
    pub fn flusher(&self) -> &Arc<Flusher> {
        &self.flusher
    }

    /// Background work of turns (titles); the router waits for it when draining.
    pub fn background(&self) -> &TaskTracker {
        &self.tasks
    }

    /// The reset policy of `key`'s platform and chat type.
    pub fn reset_policy(&self, key: &SessionKey) -> ResetPolicy {
        self.settings.sessions.policy_for(&key.platform, key.chat_type)
    }

    /// Every reset policy configured (the default and each override).
    pub fn reset_policies(&self) -> Vec<ResetPolicy> {
        let sessions = &self.settings.sessions;
        let mut policies =
            vec![ResetPolicy { reset: sessions.reset, idle_minutes: sessions.idle_minutes, at_hour: sessions.at_hour }];
        policies.extend(sessions.overrides.iter().map(|o| ResetPolicy {
            reset: o.reset,
            idle_minutes: o.idle_minutes.unwrap_or(sessions.idle_minutes),
            at_hour: o.at_hour.unwrap_or(sessions.at_hour),
        }));
        policies
    }

    /// The session `key` points at now, when that needs no waiting: none is being flushed and
    /// the reset policy has not expired it. `None` otherwise (and when there is none yet): then
    /// only `resolve_session` knows, which may wait for a flush or run one.
    pub async fn current_session(&self, key: &SessionKey) -> Result<Option<SessionInfo>, StoreError> {
        if self.flusher.gate.is_running(&key.key) {
            return Ok(None);
        }
        Ok(self
            .parts
            .store
            .route(&key.key)
            .await?
            .filter(|session| expired_by(self.reset_policy(key), session.updated_at, now_ms()).is_none()))
    }

    /// The session `key` points at now, and why the previous one was just archived (by the
    /// sweep, or here when the reset policy expired it and the sweep has not come by yet). Waits
    /// first for a flush of the key that is still running (`/new`, the sweep), up to its deadline.
    pub(super) async fn resolve_with_reset(
        &self,
        key: &SessionKey,
    ) -> Result<(SessionInfo, Option<ResetReason>), StoreError> {
        let flusher = &self.flusher;
        flusher.gate.wait(&key.key, flusher.timeout()).await;
        let store = &self.parts.store;
        let now = now_ms();
        match store.route(&key.key).await? {
            Some(session) => match expired_by(self.reset_policy(key), session.updated_at, now) {
                None => Ok((session, None)),
                Some(reason) => {
                    if conversational(&key.platform) {
                        match flusher.gate.begin(&key.key) {
                            Some(_guard) => {
                                let target = self.flush_target(&session.id, key).await;
                                flusher.flush(&target, FlushCause::Reset).await;
                            }
                            // The sweep is flushing it right now: let it finish.
                            None => flusher.gate.wait(&key.key, flusher.timeout()).await,
                        }
                    }
                    let session = store.start_session(key, now).await?;
                    self.count_reset(reason, "turn");
                    Ok((session, Some(reason)))
                }
            },
            None => {
                let reason = store.take_reset(&key.key).await?;
                Ok((store.start_session(key, now).await?, reason))
            }
        }
    }

    /// Count a session the reset policy archived (`by`: `sweep` or `turn`).
    pub fn count_reset(&self, reason: ResetReason, by: &str) {
        self.parts.metrics.inc(SESSION_RESETS_TOTAL, &[("reason", reason.as_str()), ("by", by)]);
    }

    /// Tell the chat of `job`, before its answer, that its previous conversation was archived.
    pub(super) async fn tell_reset(&self, job: &TurnJob, reason: ResetReason) {
        if !tells_resets(&job.key.platform) {
            return;
        }
        let text = reset_notice(reason, self.reset_policy(&job.key), self.command_prefix(&job.key));
        let turn_id = format!("evt:{}:reset", job.seq);
        self.parts.outbox.notify(&job.message.chat, &text, Some(&job.message.message_id), &turn_id).await;
    }

    /// The same for a chat command that found the reset (its answer follows on the same lane).
    pub(super) async fn tell_reset_to_key(&self, key: &SessionKey, reason: ResetReason) {
        if !tells_resets(&key.platform) {
            return;
        }
        let text = reset_notice(reason, self.reset_policy(key), self.command_prefix(key));
        let chat = key_chat(key);
        let turn_id = format!("reset:{}", uuid::Uuid::now_v7());
        self.parts.outbox.notify(&chat, &text, None, &turn_id).await;
    }

    /// Who a flush of `session_id` saves memory for: the last person who spoke in it (else the
    /// key's own user or chat).
    pub async fn flush_target(&self, session_id: &str, key: &SessionKey) -> FlushTarget {
        let spoke = match self.parts.store.last_event(session_id).await {
            Ok(Some(InboundEvent::Message { message, .. })) => Some((message.chat, message.sender.id)),
            Ok(Some(InboundEvent::Action { action, .. })) => Some((action.chat, action.sender.id)),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, session = session_id, "who last spoke in the session");
                None
            }
        };
        let (chat, user_id) =
            spoke.unwrap_or_else(|| (key_chat(key), key.user_id.clone().unwrap_or_else(|| key.chat_id.clone())));
        FlushTarget { session_id: session_id.to_owned(), key: key.clone(), chat, user_id, admin: false }
    }

    /// Title a session that has none after its first reply, in the background: by the summary
    /// model when one is configured, else from the first message. Chat platforms only: an API
    /// client may open a session per request, and its turns stay free of the extra work.
    pub(super) fn name_later(&self, session: &SessionInfo, job: &TurnJob, answer: &str) {
        if session.title.is_some() || !tells_resets(&job.key.platform) {
            return;
        }
        let (store, summary) = (self.parts.store.clone(), self.parts.summary.clone());
        let (id, asked, answer) = (session.id.clone(), job.message.text.clone(), answer.to_owned());
        self.tasks.spawn(async move {
            let title = title_for(summary.as_deref(), &asked, &answer).await;
            if let Err(e) = store.set_title_if_none(&id, &title).await {
                tracing::warn!(error = %e, session = %id, "could not title the session");
            }
        });
    }
}

/// The chat a session key talks in.
fn key_chat(key: &SessionKey) -> ChatRef {
    ChatRef { thread_id: key.thread_id.clone(), ..ChatRef::new(&key.platform, &key.chat_id, key.chat_type) }
}

/// A flush target for a session whose turn `message` belongs to.
pub fn target_of(session_id: &str, key: &SessionKey, message: &InboundMessage, admin: bool) -> FlushTarget {
    FlushTarget {
        session_id: session_id.to_owned(),
        key: key.clone(),
        chat: message.chat.clone(),
        user_id: message.sender.id.clone(),
        admin,
    }
}

/// "The previous conversation was archived after 24 h idle — /resume to return to it."
pub fn reset_notice(reason: ResetReason, policy: ResetPolicy, prefix: char) -> String {
    let cause = match reason {
        ResetReason::Idle => format!("after {} idle", idle_text(policy.idle_minutes)),
        ResetReason::Daily => format!("at the daily reset ({:02}:00 UTC)", policy.at_hour.min(23)),
    };
    format!("The previous conversation was archived {cause} — {prefix}resume to return to it.")
}

fn idle_text(minutes: u32) -> String {
    match (minutes / 60, minutes % 60) {
        (0, m) => format!("{m} min"),
        (h, 0) => format!("{h} h"),
        (h, m) => format!("{h} h {m} min"),
    }
}

async fn title_for(summary: Option<&Summarizer>, asked: &str, answer: &str) -> String {
    if let Some(summary) = summary {
        let cap = |text: &str| text.chars().take(TITLE_INPUT_CHARS).collect::<String>();
        let text = format!("User: {}\n\nAssistant: {}", cap(asked), cap(answer));
        match summary.complete(TITLE_INSTRUCTION, &text, 32).await {
            Ok(answer) => {
                if let Some(title) = clean_title(&answer) {
                    return title;
                }
            }
            Err(e) => tracing::debug!(error = %e, "no title from the summary model; using the first message"),
        }
    }
    clean_title(asked).unwrap_or_else(|| "Untitled".to_owned())
}

/// One short line: the first line, whitespace collapsed, quotes and markdown marks trimmed,
/// at most `TITLE_CHARS` (cut ones end with "…"); `None` when nothing is left.
fn clean_title(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    let marks: &[char] = &['"', '\'', '`', '*', '#', '“', '”', '«', '»', '_'];
    let line = line.trim_matches(marks).trim().trim_start_matches("Title:").trim().trim_matches(marks);
    let line = line.trim_end_matches(['.', '!', ':', ';']).trim();
    if line.is_empty() {
        return None;
    }
    if line.chars().count() <= TITLE_CHARS {
        return Some(line.to_owned());
    }
    let cut: String = line.chars().take(TITLE_CHARS - 1).collect();
    Some(format!("{}…", cut.trim_end()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ResetMode;

    #[test]
    fn notices_name_the_real_cause() {
        let policy = ResetPolicy { reset: ResetMode::Both, idle_minutes: 1440, at_hour: 4 };
        assert_eq!(
            reset_notice(ResetReason::Idle, policy, '/'),
            "The previous conversation was archived after 24 h idle — /resume to return to it."
        );
        assert_eq!(
            reset_notice(ResetReason::Daily, policy, '!'),
            "The previous conversation was archived at the daily reset (04:00 UTC) — !resume to return to it."
        );
        assert_eq!(idle_text(45), "45 min");
        assert_eq!(idle_text(90), "1 h 30 min");
    }

    #[test]
    fn titles_are_one_short_clean_line() {
        assert_eq!(clean_title("\"Rocket launch plans.\"\nmore").as_deref(), Some("Rocket launch plans"));
        assert_eq!(clean_title("Title: **Tea preferences**").as_deref(), Some("Tea preferences"));
        assert_eq!(clean_title("  \n ").as_deref(), None);
        let long = clean_title(&"word ".repeat(40)).unwrap();
        assert!(long.ends_with('…') && long.chars().count() <= TITLE_CHARS, "{long}");
    }

    #[tokio::test]
    async fn without_a_summary_model_the_first_message_names_the_session() {
        assert_eq!(
            title_for(None, "how do I  rotate the deploy key?", "like this").await,
            "how do I rotate the deploy key?"
        );
        assert_eq!(title_for(None, "", "a photo").await, "Untitled");
    }

    #[test]
    fn one_shot_sessions_are_left_alone() {
        assert!(conversational("telegram") && conversational("api"));
        assert!(!conversational("cron") && !conversational("webhook"));
        assert!(tells_resets("slack") && !tells_resets("api"));
    }
}
