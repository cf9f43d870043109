//! The one connection to Home Assistant, shared by the receive loop, sends and tools: ids
//! increasing per connection, a bounded map of commands waiting for their `result`, each with a
//! timeout. A command issued while no connection is up fails at once (the outbox retries sends).
//!
//! A dropped socket fails every command waiting on it as disconnected. `HassClient` (in `lib.rs`)
//! is the handle the host gives the `homeassistant` tools.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// Why a command got no successful result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HassError {
    /// No authenticated connection right now (or it dropped while the command waited).
    #[error("not connected to home assistant")]
    Disconnected,
    /// No `result` within the command timeout.
    #[error("home assistant did not answer within {0:?}")]
    Timeout(Duration),
    /// Too many commands are waiting for results.
    #[error("too many home assistant commands in flight")]
    Busy,
    /// HA answered `success: false`.
    #[error("home assistant refused the command ({code}): {message}")]
    Refused {
        /// HA's error code (`not_found`, `invalid_format`, `unauthorized`, …).
        code: String,
        /// HA's message.
        message: String,
    },
}

type Reply = Result<Value, HassError>;

struct Live {
    generation: u64,
    next_id: u64,
    writer: mpsc::Sender<String>,
    pending: HashMap<u64, oneshot::Sender<Reply>>,
}

/// The current connection, if any.
pub(crate) struct Link {
    live: Mutex<Option<Live>>,
    generations: Mutex<u64>,
    max_pending: usize,
}

impl Link {
    pub(crate) fn new(max_pending: usize) -> Self {
        Self { live: Mutex::new(None), generations: Mutex::new(0), max_pending: max_pending.max(1) }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Live>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new authenticated connection whose frames `writer` sends; returns its generation.
    /// Commands of an older connection fail as disconnected.
    pub(crate) fn attach(&self, writer: mpsc::Sender<String>) -> u64 {
        let generation = {
            let mut generations = self.generations.lock().unwrap_or_else(PoisonError::into_inner);
            *generations += 1;
            *generations
        };
        *self.lock() = Some(Live { generation, next_id: 1, writer, pending: HashMap::new() });
        generation
    }

    /// The connection `generation` ended: everything waiting on it fails as disconnected.
    pub(crate) fn detach(&self, generation: u64) {
        let mut live = self.lock();
        if live.as_ref().is_some_and(|l| l.generation == generation) {
            *live = None;
        }
    }

    /// Whether a connection is up.
    #[cfg(test)]
    pub(crate) fn connected(&self) -> bool {
        self.lock().is_some()
    }

    /// The next id of connection `generation`, for a frame whose answer the receive loop reads
    /// itself (`ping`).
    pub(crate) fn next_id(&self, generation: u64) -> Option<u64> {
        let mut live = self.lock();
        let live = live.as_mut().filter(|l| l.generation == generation)?;
        let id = live.next_id;
        live.next_id += 1;
        Some(id)
    }

    /// The `result` frame `id` of connection `generation` arrived.
    pub(crate) fn complete(&self, generation: u64, id: u64, reply: Reply) {
        let waiter = {
            let mut live = self.lock();
            live.as_mut().filter(|l| l.generation == generation).and_then(|l| l.pending.remove(&id))
        };
        if let Some(waiter) = waiter {
            // The caller may have timed out and gone; nothing to tell it then.
            let _ = waiter.send(reply);
        }
    }

    /// How many commands wait for results.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.lock().as_ref().map_or(0, |l| l.pending.len())
    }

    /// Send `command` (a JSON object without `id`) and wait up to `timeout` for its result.
    pub(crate) async fn request(&self, mut command: Value, timeout: Duration) -> Reply {
        let (tx, rx) = oneshot::channel();
        let (generation, id, writer) = {
            let mut live = self.lock();
            let live = live.as_mut().ok_or(HassError::Disconnected)?;
            if live.pending.len() >= self.max_pending {
                return Err(HassError::Busy);
            }
            let id = live.next_id;
            live.next_id += 1;
            live.pending.insert(id, tx);
            (live.generation, id, live.writer.clone())
        };
        if let Some(object) = command.as_object_mut() {
            object.insert("id".into(), Value::from(id));
        }
        let exchange = async {
            writer.send(command.to_string()).await.map_err(|_| HassError::Disconnected)?;
            rx.await.map_err(|_| HassError::Disconnected)?
        };
        let outcome = match tokio::time::timeout(timeout, exchange).await {
            Ok(reply) => reply,
            Err(_) => Err(HassError::Timeout(timeout)),
        };
        if outcome.is_err() {
            self.forget(generation, id);
        }
        outcome
    }

    fn forget(&self, generation: u64, id: u64) {
        if let Some(live) = self.lock().as_mut().filter(|l| l.generation == generation) {
            live.pending.remove(&id);
        }
    }
}

/// The reply a `result` frame carries.
pub(crate) fn result_of(frame: &Value) -> Reply {
    if frame.get("success").and_then(Value::as_bool) == Some(true) {
        return Ok(frame.get("result").cloned().unwrap_or(Value::Null));
    }
    let error = frame.get("error");
    let field = |name: &str| error.and_then(|e| e.get(name)).and_then(Value::as_str).unwrap_or_default().to_owned();
    Err(HassError::Refused { code: field("code"), message: field("message") })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn requests_get_increasing_ids_and_their_own_results() {
        let link = std::sync::Arc::new(Link::new(4));
        assert_eq!(link.request(json!({"type": "ping"}), Duration::from_secs(1)).await, Err(HassError::Disconnected));
        let (tx, mut rx) = mpsc::channel(8);
        let generation = link.attach(tx);
        let asker = link.clone();
        let first =
            tokio::spawn(async move { asker.request(json!({"type": "get_states"}), Duration::from_secs(5)).await });
        let sent: Value = serde_json::from_str(&rx.recv().await.expect("frame")).expect("json");
        assert_eq!(sent, json!({"type": "get_states", "id": 1}));
        assert_eq!(link.next_id(generation), Some(2));
        link.complete(generation, 1, result_of(&json!({"id": 1, "type": "result", "success": true, "result": [1]})));
        assert_eq!(first.await.expect("join"), Ok(json!([1])));
        assert_eq!(link.pending(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_frees_the_slot_and_a_drop_fails_the_waiters() {
        let link = std::sync::Arc::new(Link::new(1));
        let (tx, _rx) = mpsc::channel(8);
        let generation = link.attach(tx);
        let timeout = Duration::from_secs(2);
        assert_eq!(link.request(json!({"type": "x"}), timeout).await, Err(HassError::Timeout(timeout)));
        assert_eq!(link.pending(), 0);
        let asker = link.clone();
        let waiting = tokio::spawn(async move { asker.request(json!({"type": "y"}), Duration::from_secs(60)).await });
        tokio::task::yield_now().await;
        assert_eq!(link.request(json!({"type": "z"}), timeout).await, Err(HassError::Busy), "one slot only");
        link.detach(generation);
        assert_eq!(waiting.await.expect("join"), Err(HassError::Disconnected));
        assert!(!link.connected());
    }

    #[test]
    fn refused_results_carry_code_and_message() {
        let frame = json!({"id": 3, "type": "result", "success": false,
            "error": {"code": "not_found", "message": "Service not found."}});
        assert_eq!(
            result_of(&frame),
            Err(HassError::Refused { code: "not_found".into(), message: "Service not found.".into() })
        );
    }
}
