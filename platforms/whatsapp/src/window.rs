//! WhatsApp's 24-hour customer service window: a free-form message reaches a user only within
//! 24 hours of their last message; outside it Meta accepts the send and fails it later (131047).
//!
//! The adapter remembers each chat's last inbound time and message id in a capped map (the id
//! is what the typing indicator and mark-as-read refer to); after a restart, or for a chat the
//! map has dropped, the host's durable record answers (`Ingress::last_inbound_at`).
//!
//! The window is measured from the user's last message and taken 5 minutes short (`MARGIN`).
//! Outside it no free-form message is sent: the re-engagement template goes out instead, once per
//! lapsed window, and the message fails permanently with a reason naming the window; without a
//! template it fails the same way and nothing is sent (`check_window` in `lib.rs`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How long after the user's last message free-form messages are allowed.
pub(crate) const WINDOW: Duration = Duration::from_secs(24 * 3600);
/// Sends this close to the window's end are treated as outside: the host's record is the time
/// the event was stored, a little after the user sent it, and a send takes time to arrive.
pub(crate) const MARGIN: Duration = Duration::from_secs(5 * 60);
/// Chats remembered; past it the oldest half is dropped (the store still knows them).
const CAPACITY: usize = 10_000;

#[derive(Debug, Clone, Default)]
struct Chat {
    /// The user's last message, Unix ms.
    last_inbound_ms: i64,
    /// Its wamid (typing indicator, mark as read).
    last_message_id: Option<String>,
    /// When the re-engagement template was last sent to this chat, Unix ms.
    template_sent_ms: Option<i64>,
}

/// Per-chat window state, capped.
#[derive(Debug, Default)]
pub(crate) struct Windows {
    chats: Mutex<HashMap<String, Chat>>,
}

/// Wamids of messages this process sent lately, newest last, capped: a status about one of
/// them that finds no receipt arrived before the host recorded the send.
#[derive(Debug, Default)]
pub(crate) struct RecentSends {
    ids: Mutex<std::collections::VecDeque<String>>,
}

/// Sent wamids remembered.
const RECENT_SENDS: usize = 4096;

impl RecentSends {
    pub(crate) fn sent(&self, id: &str) {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        if ids.len() >= RECENT_SENDS {
            ids.pop_front();
        }
        ids.push_back(id.to_owned());
    }

    pub(crate) fn contains(&self, id: &str) -> bool {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner).iter().rev().any(|sent| sent == id)
    }
}

/// Where a send stands against the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Free-form messages are delivered.
    Open,
    /// Outside the window; the template was not sent since the user's last message.
    Closed,
    /// Outside the window and the template already went out since the user's last message.
    ClosedTemplateSent,
}

impl Windows {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Chat>> {
        self.chats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The user of `chat` wrote at `at_ms` (message `message_id`).
    pub(crate) fn inbound(&self, chat: &str, at_ms: i64, message_id: &str) {
        let mut chats = self.lock();
        if chats.len() >= CAPACITY && !chats.contains_key(chat) {
            let mut times: Vec<i64> = chats.values().map(|c| c.last_inbound_ms).collect();
            times.sort_unstable();
            let cut = times[times.len() / 2];
            chats.retain(|_, c| c.last_inbound_ms > cut);
        }
        let entry = chats.entry(chat.to_owned()).or_default();
        if at_ms >= entry.last_inbound_ms {
            entry.last_inbound_ms = at_ms;
            entry.last_message_id = Some(message_id.to_owned());
        }
    }

    /// The chat's last inbound time, when this map knows it.
    pub(crate) fn last_inbound(&self, chat: &str) -> Option<i64> {
        self.lock().get(chat).map(|c| c.last_inbound_ms).filter(|&at| at > 0)
    }

    /// The wamid of the chat's last inbound message.
    pub(crate) fn last_message_id(&self, chat: &str) -> Option<String> {
        self.lock().get(chat).and_then(|c| c.last_message_id.clone())
    }

    /// Learn a time from the host's record (no message id).
    pub(crate) fn learn(&self, chat: &str, at_ms: i64) {
        let mut chats = self.lock();
        let entry = chats.entry(chat.to_owned()).or_default();
        entry.last_inbound_ms = entry.last_inbound_ms.max(at_ms);
    }

    /// Where a send to `chat` at `now_ms` stands, given the user's last message at `last`.
    pub(crate) fn standing(&self, chat: &str, last: Option<i64>, now_ms: i64) -> Standing {
        let limit = i64::try_from((WINDOW - MARGIN).as_millis()).unwrap_or(i64::MAX);
        if last.is_some_and(|at| now_ms.saturating_sub(at) < limit) {
            return Standing::Open;
        }
        let chats = self.lock();
        let sent = chats.get(chat).and_then(|c| c.template_sent_ms);
        match sent {
            Some(sent) if last.is_none_or(|at| sent >= at) => Standing::ClosedTemplateSent,
            _ => Standing::Closed,
        }
    }

    /// The re-engagement template went to `chat` at `now_ms`.
    pub(crate) fn template_sent(&self, chat: &str, now_ms: i64) {
        self.lock().entry(chat.to_owned()).or_default().template_sent_ms = Some(now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;

    #[test]
    fn the_window_is_24_hours_from_the_last_inbound_message() {
        let windows = Windows::default();
        let now = 100 * HOUR;
        assert_eq!(windows.standing("a", None, now), Standing::Closed, "never wrote: outside");
        windows.inbound("a", now - 2 * HOUR, "wamid.1");
        assert_eq!(windows.standing("a", windows.last_inbound("a"), now), Standing::Open);
        assert_eq!(windows.standing("a", Some(now - 23 * HOUR), now), Standing::Open);
        assert_eq!(windows.standing("a", Some(now - 24 * HOUR + 60_000), now), Standing::Closed, "within the margin");
        assert_eq!(windows.standing("a", Some(now - 25 * HOUR), now), Standing::Closed);
        windows.template_sent("a", now);
        assert_eq!(windows.standing("a", Some(now - 25 * HOUR), now + 1), Standing::ClosedTemplateSent);
        // The user answers the template: the window opens again, and a later lapse needs a new one.
        windows.inbound("a", now + 10, "wamid.2");
        assert_eq!(windows.standing("a", windows.last_inbound("a"), now + 20), Standing::Open);
        assert_eq!(windows.standing("a", windows.last_inbound("a"), now + 30 * HOUR), Standing::Closed);
        assert_eq!(windows.last_message_id("a").as_deref(), Some("wamid.2"));
        // An older redelivery does not move the window back.
        windows.inbound("a", now - 50 * HOUR, "wamid.0");
        assert_eq!(windows.last_message_id("a").as_deref(), Some("wamid.2"));
    }

    #[test]
    fn recent_sends_are_capped() {
        let recent = RecentSends::default();
        for i in 0..(RECENT_SENDS + 10) {
            recent.sent(&format!("wamid.{i}"));
        }
        assert!(!recent.contains("wamid.0") && recent.contains(&format!("wamid.{}", RECENT_SENDS + 9)));
    }

    #[test]
    fn the_map_stays_under_its_cap() {
        let windows = Windows::default();
        for i in 0..(CAPACITY as i64 + 500) {
            windows.inbound(&i.to_string(), i + 1, "w");
        }
        assert!(windows.lock().len() <= CAPACITY);
        assert!(windows.last_inbound(&(CAPACITY as i64 + 499).to_string()).is_some(), "the newest stays");
    }
}
