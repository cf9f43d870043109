//! `UsageBoard`: a turn's usage handed from the turn runner to the platform that renders it
//! (the API's `usage` field), and the client function calls a turn ended with (the Responses
//! API's `function_call` items), keyed by the message the reply answers. Posted before the reply
//! is stored, taken when the reply is sent; bounded, so replies that never come (a shutdown, a
//! platform that does not take it) cannot grow it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::TurnUsage;
use crate::vocab::message::ToolCall;

/// Entries kept at most; the oldest goes first when full.
const CAPACITY: usize = 4096;

/// Usage of recent turns by (platform, replied-to message id).
#[derive(Debug, Default)]
pub struct UsageBoard {
    inner: Mutex<Entries<TurnUsage>>,
    calls: Mutex<Entries<ClientCalls>>,
    /// Turns that refused what the API client sent (a function named like hermesd's own tool, an
    /// output for no call): answered as the client's error, not the server's.
    refused: Mutex<Entries<()>>,
}

/// A turn that ended by calling functions the API client runs: the calls, and what the model
/// said with them (often nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCalls {
    /// The calls, in order.
    pub calls: Vec<ToolCall>,
    /// The model's text beside them.
    pub text: String,
}

#[derive(Debug)]
struct Entries<T> {
    map: HashMap<(String, String), T>,
    order: VecDeque<(String, String)>,
}

impl<T> Default for Entries<T> {
    fn default() -> Self {
        Self { map: HashMap::new(), order: VecDeque::new() }
    }
}

impl<T> Entries<T> {
    fn post(&mut self, key: (String, String), value: T) {
        if self.map.insert(key.clone(), value).is_none() {
            self.order.push_back(key);
        }
        while self.map.len() > CAPACITY {
            let Some(oldest) = self.order.pop_front() else { break };
            self.map.remove(&oldest);
        }
    }

    fn take(&mut self, key: &(String, String)) -> Option<T> {
        let value = self.map.remove(key)?;
        self.order.retain(|k| k != key);
        Some(value)
    }
}

impl UsageBoard {
    /// Post the usage of the turn answering `message_id` on `platform`.
    pub fn post(&self, platform: &str, message_id: &str, usage: TurnUsage) {
        let key = (platform.to_owned(), message_id.to_owned());
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner).post(key, usage);
    }

    /// Take the usage of the turn answering `message_id` on `platform`, if posted.
    pub fn take(&self, platform: &str, message_id: &str) -> Option<TurnUsage> {
        let key = (platform.to_owned(), message_id.to_owned());
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take(&key)
    }

    /// Post the client function calls the turn answering `message_id` ended with.
    pub fn post_calls(&self, platform: &str, message_id: &str, calls: ClientCalls) {
        let key = (platform.to_owned(), message_id.to_owned());
        self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner).post(key, calls);
    }

    /// Take the client function calls of the turn answering `message_id`, if it ended with any.
    pub fn take_calls(&self, platform: &str, message_id: &str) -> Option<ClientCalls> {
        let key = (platform.to_owned(), message_id.to_owned());
        self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take(&key)
    }

    /// Mark the turn answering `message_id` as one that refused what the client sent.
    pub fn post_refused(&self, platform: &str, message_id: &str) {
        let key = (platform.to_owned(), message_id.to_owned());
        self.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner).post(key, ());
    }

    /// Whether the turn answering `message_id` refused what the client sent (taken once).
    pub fn take_refused(&self, platform: &str, message_id: &str) -> bool {
        let key = (platform.to_owned(), message_id.to_owned());
        self.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take(&key).is_some()
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
