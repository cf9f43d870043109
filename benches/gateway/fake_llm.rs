//! The instant fake OpenAI-compatible LLM the benchmarked daemons talk to.
//!
//! It runs on a thread and single-threaded runtime of its own and answers every
//! `POST /v1/chat/completions` at once, counting the calls. In plain mode it answers a fixed text
//! completion ("ok") without parsing the request. In tool mode (an atomic flag, switched between
//! workloads) it answers like a tool-using model: a `todo` tool call when the request's last
//! message is the user's, and the text "ok" once a tool result follows — two model calls a turn.
//! The daemon asks without `stream`, so plain JSON is all the fake speaks.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::Value;

/// The text answer: "ok".
const COMPLETION: &str = r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;

/// The tool-mode answer to a user message: one call of the built-in `todo` tool (shows the list).
const TOOL_CALL: &str = r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"todo","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;

/// Shared between the handler and the bench.
#[derive(Clone)]
struct Shared {
    calls: Arc<AtomicU64>,
    tool_mode: Arc<AtomicBool>,
}

/// The running fake.
pub(crate) struct FakeLlm {
    addr: SocketAddr,
    shared: Shared,
}

impl FakeLlm {
    pub(crate) fn start() -> Self {
        let shared = Shared { calls: Arc::new(AtomicU64::new(0)), tool_mode: Arc::new(AtomicBool::new(false)) };
        let state = shared.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("fake-llm".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("build the fake LLM runtime");
                runtime.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the fake LLM listener");
                    tx.send(listener.local_addr().expect("fake LLM address")).expect("report the fake LLM address");
                    let app = Router::new().route("/v1/chat/completions", post(completion)).with_state(state);
                    axum::serve(listener, app).await.expect("fake LLM serves");
                });
            })
            .expect("spawn the fake LLM thread");
        let addr = rx.recv().expect("fake LLM started");
        Self { addr, shared }
    }

    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Model calls answered so far.
    pub(crate) fn calls(&self) -> u64 {
        self.shared.calls.load(Ordering::Relaxed)
    }

    /// Answer like a tool-using model (`true`) or with text at once (`false`).
    pub(crate) fn set_tool_mode(&self, on: bool) {
        self.shared.tool_mode.store(on, Ordering::Relaxed);
    }
}

/// The whole handler: count the call and pick the answer (the body is parsed in tool mode only).
async fn completion(State(shared): State<Shared>, body: Bytes) -> impl IntoResponse {
    shared.calls.fetch_add(1, Ordering::Relaxed);
    let answer = if shared.tool_mode.load(Ordering::Relaxed) && last_role(&body).as_deref() == Some("user") {
        TOOL_CALL
    } else {
        COMPLETION
    };
    ([(header::CONTENT_TYPE, "application/json")], answer)
}

/// The role of the request's last message.
fn last_role(body: &[u8]) -> Option<String> {
    let request: Value = serde_json::from_slice(body).ok()?;
    Some(request["messages"].as_array()?.last()?["role"].as_str()?.to_owned())
}
