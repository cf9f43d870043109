//! Session keys as Hermes forms them, and the reset policy that decides when a key gets a fresh
//! session. Pure functions: no store, no clock.
//!
//! `session_key` forms a key; `expired_by` names the cause of an expiry, and `stale_bound` the last
//! activity below which any of the policies may have expired (what the sweep looks for).

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use hermesd_platform::{ChatRef, ChatType, Sender};

use crate::config::{ResetMode, ResetPolicy, profile_key};
use crate::store::{ResetReason, SessionKey};

/// `agent:{profile}:{platform}:{chat_type}:{chat_id}[:{thread_id}][:{user_id}]`, the default
/// profile being `main` (the keys from before profiles). Groups and channels are isolated per
/// user when `group_per_user`; threads are shared by everyone in them. The platform is the
/// adapter's name, so each account (`telegram@work`) has sessions of its own.
pub fn session_key(profile: &str, chat: &ChatRef, sender: &Sender, group_per_user: bool) -> SessionKey {
    let (platform, kind) = (&chat.platform, chat.chat_type.as_str());
    let mut key = format!("agent:{}:{platform}:{kind}:{}", profile_key(profile), chat.chat_id);
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

/// The profile a session key belongs to (the default for a key of another shape).
pub fn profile_of(key: &str) -> &str {
    crate::config::profile_of_session_key(key)
}

/// Whether a session last active at `last_active_ms` has expired under `policy` at `now_ms`.
pub fn is_expired(policy: ResetPolicy, last_active_ms: i64, now_ms: i64) -> bool {
    expired_by(policy, last_active_ms, now_ms).is_some()
}

/// Why a session last active at `last_active_ms` has expired under `policy` at `now_ms`, if it
/// has (idle first: with both, the idle time is the more telling cause).
pub fn expired_by(policy: ResetPolicy, last_active_ms: i64, now_ms: i64) -> Option<ResetReason> {
    let idle = || last_active_ms < idle_cutoff(policy, now_ms);
    let daily = || daily_boundary(policy, now_ms).is_some_and(|boundary| last_active_ms < boundary);
    let (idle_on, daily_on) = match policy.reset {
        ResetMode::None => (false, false),
        ResetMode::Idle => (true, false),
        ResetMode::Daily => (false, true),
        ResetMode::Both => (true, true),
    };
    if idle_on && idle() {
        Some(ResetReason::Idle)
    } else if daily_on && daily() {
        Some(ResetReason::Daily)
    } else {
        None
    }
}

/// Sessions last active before this are idle-expired (`now - last > idle`).
fn idle_cutoff(policy: ResetPolicy, now_ms: i64) -> i64 {
    now_ms - i64::from(policy.idle_minutes) * 60_000
}

/// The most recent daily reset time at or before `now_ms`.
fn daily_boundary(policy: ResetPolicy, now_ms: i64) -> Option<i64> {
    let now = DateTime::<Utc>::from_timestamp_millis(now_ms)?;
    let today = now.date_naive().and_hms_opt(u32::from(policy.at_hour.min(23)), 0, 0)?.and_utc();
    let boundary = if today <= now { today } else { today - ChronoDuration::days(1) };
    Some(boundary.timestamp_millis())
}

/// The bound below which a session's last activity may have expired under one of `policies`
/// (none expires at or after it); `None` when no policy resets. The sweep looks only below it.
pub fn stale_bound(policies: impl IntoIterator<Item = ResetPolicy>, now_ms: i64) -> Option<i64> {
    policies
        .into_iter()
        .filter_map(|policy| {
            let idle = idle_cutoff(policy, now_ms);
            let daily = daily_boundary(policy, now_ms);
            match policy.reset {
                ResetMode::None => None,
                ResetMode::Idle => Some(idle),
                ResetMode::Daily => daily,
                ResetMode::Both => Some(daily.map_or(idle, |d| d.max(idle))),
            }
        })
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_PROFILE;

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
            let key = session_key(DEFAULT_PROFILE, &chat, &sender(), per_user);
            assert_eq!(key.key, expected);
            assert_eq!(profile_of(&key.key), DEFAULT_PROFILE);
        }
        let work = session_key("work", &ChatRef::new("telegram@bot2", "42", ChatType::Dm), &sender(), true);
        assert_eq!(work.key, "agent:work:telegram@bot2:dm:42");
        assert_eq!(profile_of(&work.key), "work");
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

    #[test]
    fn the_cause_of_a_reset_and_the_sweep_bound() {
        let hour = 3_600_000;
        let policy = |reset, idle_minutes| ResetPolicy { reset, idle_minutes, at_hour: 4 };
        let now = DateTime::parse_from_rfc3339("2026-01-02T10:00:00Z").unwrap().timestamp_millis();
        assert_eq!(expired_by(policy(ResetMode::Both, 60), now - 2 * hour, now), Some(ResetReason::Idle));
        assert_eq!(expired_by(policy(ResetMode::Both, 10_000), now - 7 * hour, now), Some(ResetReason::Daily));
        assert_eq!(expired_by(policy(ResetMode::Both, 60), now - hour / 2, now), None);
        // 04:00 today is the daily boundary; an idle hour is later, so it bounds a mix.
        let four = now - 6 * hour;
        assert_eq!(stale_bound([policy(ResetMode::Daily, 1)], now), Some(four));
        assert_eq!(stale_bound([policy(ResetMode::Daily, 1), policy(ResetMode::Idle, 60)], now), Some(now - hour));
        assert_eq!(stale_bound([policy(ResetMode::Both, 60 * 24)], now), Some(four));
        assert_eq!(stale_bound([policy(ResetMode::None, 1)], now), None);
        // Before 04:00 the boundary is yesterday's.
        let early = now - 8 * hour;
        assert_eq!(stale_bound([policy(ResetMode::Daily, 1)], early), Some(early - 22 * hour));
    }
}
