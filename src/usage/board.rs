//! `UsageBoard`: a turn's usage handed from the turn runner to the platform that renders it
//! (the API's `usage` field), keyed by the message the reply answers. Posted before the reply
//! is stored, taken when the reply is sent; bounded, so replies that never come (a shutdown, a
//! platform that does not take it) cannot grow it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::TurnUsage;

/// Entries kept at most; the oldest goes first when full.
const CAPACITY: usize = 4096;

/// Usage of recent turns by (platform, replied-to message id).
#[derive(Debug, Default)]
pub struct UsageBoard {
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<(String, String), TurnUsage>,
    order: VecDeque<(String, String)>,
}

impl UsageBoard {
    /// Post the usage of the turn answering `message_id` on `platform`.
    pub fn post(&self, platform: &str, message_id: &str, usage: TurnUsage) {
        let key = (platform.to_owned(), message_id.to_owned());
        let mut entries = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if entries.map.insert(key.clone(), usage).is_none() {
            entries.order.push_back(key);
        }
        while entries.map.len() > CAPACITY {
            let Some(oldest) = entries.order.pop_front() else { break };
            entries.map.remove(&oldest);
        }
    }

    /// Take the usage of the turn answering `message_id` on `platform`, if posted.
    pub fn take(&self, platform: &str, message_id: &str) -> Option<TurnUsage> {
        let key = (platform.to_owned(), message_id.to_owned());
        let mut entries = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let usage = entries.map.remove(&key)?;
        entries.order.retain(|k| k != &key);
        Some(usage)
    }

    /// Entries held (tests).
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner).map.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posted_usage_is_taken_once_and_the_board_stays_bounded() {
        let board = UsageBoard::default();
        let mut usage = TurnUsage::default();
        usage.tokens.prompt = 7;
        board.post("api", "r1", usage);
        assert_eq!(board.take("api", "r1").map(|u| u.tokens.prompt), Some(7));
        assert_eq!(board.take("api", "r1"), None);
        for i in 0..CAPACITY + 10 {
            board.post("api", &i.to_string(), usage);
        }
        assert_eq!(board.len(), CAPACITY);
        assert_eq!(board.take("api", "0"), None, "the oldest went first");
        assert!(board.take("api", &(CAPACITY + 9).to_string()).is_some());
    }
}
