//! What replies need to thread correctly, remembered per Message-ID in a capped map: the
//! subject and the References chain of each message taken or sent. After a restart a miss
//! falls back to the thread root the chat carries, so a reply still joins its thread.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use crate::inbound::ThreadInfo;

/// Most messages remembered; the oldest are forgotten first.
const CAPACITY: usize = 10_000;

/// The capped map.
#[derive(Debug, Default)]
pub(crate) struct Threads {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_id: HashMap<String, ThreadInfo>,
    order: VecDeque<String>,
}

impl Threads {
    /// Remember `info` for message `id`.
    pub(crate) fn remember(&self, id: &str, info: ThreadInfo) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.by_id.insert(id.to_owned(), info).is_none() {
            inner.order.push_back(id.to_owned());
        }
        while inner.order.len() > CAPACITY {
            if let Some(old) = inner.order.pop_front() {
                inner.by_id.remove(&old);
            }
        }
    }

    /// What is known of message `id`.
    pub(crate) fn get(&self, id: &str) -> Option<ThreadInfo> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).by_id.get(id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_is_capped_oldest_first() {
        let threads = Threads::default();
        for i in 0..CAPACITY + 5 {
            threads.remember(&format!("m{i}"), ThreadInfo { subject: format!("s{i}"), references: vec![] });
        }
        assert_eq!(threads.get("m0"), None);
        assert_eq!(threads.get("m4"), None);
        assert_eq!(threads.get("m5").map(|t| t.subject), Some("s5".into()));
        assert_eq!(threads.inner.lock().unwrap().by_id.len(), CAPACITY);
    }
}
