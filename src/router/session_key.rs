//! Session keys as Hermes forms them, and the reset policy that decides when a key gets a fresh
//! session. Pure functions: no store, no clock.

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use hermesd_platform::{ChatRef, ChatType, Sender};

use crate::config::{ResetMode, ResetPolicy};
use crate::store::SessionKey;

/// `agent:main:{platform}:{chat_type}:{chat_id}[:{thread_id}][:{user_id}]`. Groups and channels
/// are isolated per user when `group_per_user`; threads are shared by everyone in them.
pub fn session_key(chat: &ChatRef, sender: &Sender, group_per_user: bool) -> SessionKey {
    let mut key = format!("agent:main:{}:{}:{}", chat.platform, chat.chat_type.as_str(), chat.chat_id);
    if let Some(thread) = &chat.thread_id {
        key.push(':');
        key.push_str(thread);
    }
    let per_user =
        group_per_user && chat.thread_id.is_none() && matches!(chat.chat_type, ChatType::Group | ChatType::Channel);
    if per_user {
        key.push(':');
        key.push_str(&sender.id);
    }
    SessionKey {
        key,
        platform: chat.platform.clone(),
        chat_id: chat.chat_id.clone(),
        chat_type: chat.chat_type,
        thread_id: chat.thread_id.clone(),
        user_id: per_user.then(|| sender.id.clone()),
    }
}

/// Whether a session last active at `last_active_ms` has expired under `policy` at `now_ms`.
pub fn is_expired(policy: ResetPolicy, last_active_ms: i64, now_ms: i64) -> bool {
    let idle = || now_ms - last_active_ms > i64::from(policy.idle_minutes) * 60_000;
    let daily = || {
        let Some(now) = DateTime::<Utc>::from_timestamp_millis(now_ms) else { return false };
        let Some(today) = now.date_naive().and_hms_opt(u32::from(policy.at_hour.min(23)), 0, 0) else {
            return false;
        };
        let today = today.and_utc();
        let boundary = if today <= now { today } else { today - ChronoDuration::days(1) };
        last_active_ms < boundary.timestamp_millis()
    };
    match policy.reset {
        ResetMode::None => false,
        ResetMode::Idle => idle(),
        ResetMode::Daily => daily(),
        ResetMode::Both => idle() || daily(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sender() -> Sender {
        Sender { id: "u7".into(), name: None, is_bot: false, roles: Vec::new() }
    }

    #[test]
    fn keys_follow_hermes_shape() {
        let cases = [
            (ChatRef::new("telegram", "42", ChatType::Dm), true, "agent:main:telegram:dm:42"),
            (ChatRef::new("telegram", "-100", ChatType::Group), true, "agent:main:telegram:group:-100:u7"),
            (ChatRef::new("telegram", "-100", ChatType::Group), false, "agent:main:telegram:group:-100"),
            (
                ChatRef { thread_id: Some("9".into()), ..ChatRef::new("slack", "C1", ChatType::Thread) },
                true,
                "agent:main:slack:thread:C1:9",
            ),
        ];
        for (chat, per_user, expected) in cases {
            assert_eq!(session_key(&chat, &sender(), per_user).key, expected);
        }
    }

    #[test]
    fn reset_policies() {
        let hour = 3_600_000;
        let policy = |reset, idle_minutes| ResetPolicy { reset, idle_minutes, at_hour: 4 };
        // 2026-01-02 10:00 UTC
        let now = DateTime::parse_from_rfc3339("2026-01-02T10:00:00Z").unwrap().timestamp_millis();
        assert!(!is_expired(policy(ResetMode::None, 1), 0, now));
        assert!(is_expired(policy(ResetMode::Idle, 60), now - 2 * hour, now));
        assert!(!is_expired(policy(ResetMode::Idle, 60), now - hour / 2, now));
        // Last active 05:00 today: after today's 04:00 boundary.
        assert!(!is_expired(policy(ResetMode::Daily, 1), now - 5 * hour, now));
        // Last active 03:00 today: before it.
        assert!(is_expired(policy(ResetMode::Daily, 1), now - 7 * hour, now));
        assert!(is_expired(policy(ResetMode::Both, 10_000), now - 7 * hour, now));
    }
}
