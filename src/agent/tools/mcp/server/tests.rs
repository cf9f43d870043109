//! The supervisor against scripted connectors, on paused time.

use std::sync::atomic::AtomicUsize;

use async_trait::async_trait;
use serde_json::{Map, json};
use tokio::sync::Notify;

use super::*;
use crate::agent::tools::mcp::client::CallOutput;

/// A session whose tool list and liveness the test controls.
struct FakeSession {
    tools: Mutex<Vec<RemoteTool>>,
    ended: Notify,
    closed: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl McpSession for FakeSession {
    async fn list_tools(&self) -> Result<Vec<RemoteTool>, McpError> {
        Ok(self.tools.lock().unwrap().clone())
    }
    async fn call_tool(&self, _name: &str, _args: Map<String, Value>) -> Result<CallOutput, McpError> {
        Ok(CallOutput::default())
    }
    async fn closed(&self) {
        if !self.closed.load(Ordering::SeqCst) {
            self.ended.notified().await;
        }
    }
    async fn close(&self) {}
}

/// Fails the first `failures` connects, then hands out `session`.
struct Script {
    failures: usize,
    attempts: AtomicUsize,
    session: Arc<FakeSession>,
    changed: Mutex<Option<mpsc::Sender<()>>>,
}

#[async_trait]
impl McpConnector for Script {
    async fn connect(&self, changed: mpsc::Sender<()>) -> Result<Arc<dyn McpSession>, McpError> {
        let attempt = self.attempts.fetch_add(1, Ordering::SeqCst);
        if attempt < self.failures {
            return Err(McpError::Connect("refused".into()));
        }
        *self.changed.lock().unwrap() = Some(changed);
        self.session.closed.store(false, Ordering::SeqCst);
        Ok(self.session.clone())
    }
}

fn remote(name: &str) -> RemoteTool {
    RemoteTool { name: name.into(), description: String::new(), input_schema: json!({ "type": "object" }) }
}

fn setup(failures: usize, tools: &[&str]) -> (Arc<ServerState>, Arc<Script>, Arc<AtomicUsize>, Supervision) {
    let session = Arc::new(FakeSession {
        tools: Mutex::new(tools.iter().map(|t| remote(t)).collect()),
        ended: Notify::new(),
        closed: Default::default(),
    });
    let script = Arc::new(Script { failures, attempts: AtomicUsize::new(0), session, changed: Mutex::new(None) });
    let changes = Arc::new(AtomicUsize::new(0));
    let counter = changes.clone();
    let config: McpServerConfig = toml::from_str("command = \"x\"\ntools = { exclude = [\"hidden\"] }").unwrap();
    let settings = Supervision {
        config,
        approval_timeout: Duration::from_secs(1),
        on_change: Arc::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        }),
    };
    (Arc::new(ServerState::new("srv")), script, changes, settings)
}

async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

fn names(state: &ServerState) -> Vec<String> {
    state.tools().iter().map(|entry| entry.spec.name.to_string()).collect()
}

#[tokio::test(start_paused = true)]
async fn failed_connects_back_off_then_tools_register() {
    let (state, script, changes, settings) = setup(2, &["b", "a", "hidden"]);
    let cancel = CancellationToken::new();
    let task = tokio::spawn(supervise(state.clone(), script.clone(), settings, cancel.clone()));
    settle().await;
    assert_eq!(state.status(), Status::Failed("connect: refused".into()));
    tokio::time::advance(Duration::from_millis(1001)).await;
    settle().await;
    assert_eq!(script.attempts.load(Ordering::SeqCst), 2, "retried after 1 s");
    assert!(matches!(state.status(), Status::Failed(_)));
    tokio::time::advance(Duration::from_millis(1500)).await;
    settle().await;
    assert_eq!(script.attempts.load(Ordering::SeqCst), 2, "the next delay doubled to 2 s");
    tokio::time::advance(Duration::from_millis(600)).await;
    settle().await;
    assert_eq!(state.status(), Status::Ready);
    assert_eq!(names(&state), ["mcp_srv_a", "mcp_srv_b"], "filtered and sorted");
    assert_eq!(changes.load(Ordering::SeqCst), 1);
    cancel.cancel();
    task.await.unwrap();
    assert_eq!(state.status(), Status::Stopped);
    assert!(state.tools().is_empty(), "a stopped server offers no tools");
}

#[tokio::test(start_paused = true)]
async fn list_changed_refreshes_and_a_dropped_session_reconnects() {
    let (state, script, changes, settings) = setup(0, &["a"]);
    let cancel = CancellationToken::new();
    let task = tokio::spawn(supervise(state.clone(), script.clone(), settings, cancel.clone()));
    settle().await;
    assert_eq!(names(&state), ["mcp_srv_a"]);

    // The same list again is no change (the tool list is part of the cached prompt prefix).
    let changed = script.changed.lock().unwrap().clone().unwrap();
    changed.send(()).await.unwrap();
    settle().await;
    assert_eq!(changes.load(Ordering::SeqCst), 1);
    script.session.tools.lock().unwrap().push(remote("c"));
    changed.send(()).await.unwrap();
    settle().await;
    assert_eq!(names(&state), ["mcp_srv_a", "mcp_srv_c"]);
    assert_eq!(changes.load(Ordering::SeqCst), 2);

    script.session.closed.store(true, Ordering::SeqCst);
    script.session.ended.notify_waiters();
    settle().await;
    assert!(state.tools().is_empty(), "tools leave with the connection");
    assert!(matches!(state.status(), Status::Failed(_)));
    tokio::time::advance(Duration::from_millis(1001)).await;
    settle().await;
    assert_eq!(state.status(), Status::Ready);
    assert_eq!(names(&state), ["mcp_srv_a", "mcp_srv_c"], "re-registered after the reconnect");
    assert_eq!(state.stats.connects.load(Ordering::SeqCst), 2);
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_call_during_a_reconnect_waits_for_the_new_session_within_its_time() {
    let (state, script, _changes, settings) = setup(0, &["a"]);
    let cancel = CancellationToken::new();
    let task = tokio::spawn(supervise(state.clone(), script.clone(), settings, cancel.clone()));
    settle().await;
    script.session.closed.store(true, Ordering::SeqCst);
    script.session.ended.notify_waiters();
    settle().await;
    assert!(state.session().is_none(), "the server crashed");
    // Asked now, the session comes with the reconnect (after the 1 s backoff), not an error.
    let waiting = tokio::spawn({
        let state = state.clone();
        async move { state.session_within(Duration::from_secs(30)).await.is_some() }
    });
    settle().await;
    assert!(!waiting.is_finished(), "it waits");
    tokio::time::advance(Duration::from_millis(1001)).await;
    settle().await;
    assert!(waiting.await.unwrap(), "served by the reconnected session");
    // A wait shorter than the reconnect ends empty-handed, at its deadline.
    script.session.closed.store(true, Ordering::SeqCst);
    script.session.ended.notify_waiters();
    settle().await;
    let started = tokio::time::Instant::now();
    assert!(state.session_within(Duration::from_millis(100)).await.is_none());
    assert_eq!(started.elapsed(), Duration::from_millis(100));
    // A server that cannot start at all is not waited for.
    let dead = ServerState::new("dead");
    dead.fail_permanently("its token is not set".into());
    assert!(dead.session_within(Duration::from_secs(30)).await.is_none());
    assert_eq!(started.elapsed(), Duration::from_millis(100), "no wait for a server given up");
    cancel.cancel();
    task.await.unwrap();
}
