//! The instant fake OpenAI-compatible LLM the benchmarked daemons talk to.
//!
//! It runs on a thread and single-threaded runtime of its own and answers every
//! `POST /v1/chat/completions` at once, counting the calls. In plain mode it answers a fixed text
//! completion ("ok") without parsing the request. In tool mode (an atomic flag, switched between
//! workloads) it answers like a tool-using model: a `todo` tool call when the request's last
//! message is the user's, and the text "ok" once a tool result follows — two model calls a turn.
//! In realistic mode it answers like a chat model would: a paragraph of text (about 700 bytes)
//! with usage, its prompt tokens estimated from the request's size (bytes ÷ 4), and it records
//! the requests' sizes, so the bench can say how big the prompts grew.
//! The daemon asks without `stream`, so plain JSON is all the fake speaks.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

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

/// The realistic answer's text: the start is what the load checks for.
pub(crate) const REALISTIC_PREFIX: &str = "Here is what I found.";

const REALISTIC_TEXT: &str = "Here is what I found. The service restarted twice in the last hour: once at     10:42 after the health check timed out, and once at 11:07 when the deploy rolled the new image out.     Neither restart lost requests, since the load balancer drained the old instance first. The timeout     came from the database pool: every connection was busy for about 40 seconds while the nightly report     ran. Three things would help: move the report to the replica, raise the pool from 10 to 20     connections, and give the health check its own connection so that a busy pool cannot fail it. I can     open a ticket for each of these, draft the config change for the pool, or look at the report's     slowest queries first - tell me which you would like.";

/// How the fake answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Mode {
    /// "ok" at once.
    Plain = 0,
    /// A `todo` tool call, then "ok".
    Tool = 1,
    /// A paragraph with usage; request sizes recorded.
    Realistic = 2,
}

/// Shared between the handler and the bench.
#[derive(Clone)]
struct Shared {
    calls: Arc<AtomicU64>,
    mode: Arc<AtomicU8>,
    /// Bytes of every request body answered in realistic mode, and the largest.
    prompt_bytes: Arc<AtomicU64>,
    prompt_max: Arc<AtomicU64>,
}

/// The running fake.
pub(crate) struct FakeLlm {
    addr: SocketAddr,
    shared: Shared,
}

impl FakeLlm {
    pub(crate) fn start() -> Self {
        let shared = Shared {
            calls: Arc::new(AtomicU64::new(0)),
            mode: Arc::new(AtomicU8::new(Mode::Plain as u8)),
            prompt_bytes: Arc::new(AtomicU64::new(0)),
            prompt_max: Arc::new(AtomicU64::new(0)),
        };
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

    /// Answer like `mode` from now on.
    pub(crate) fn set_mode(&self, mode: Mode) {
        self.shared.mode.store(mode as u8, Ordering::Relaxed);
    }

    /// Request bytes answered in realistic mode so far, and the largest request; resets the
    /// largest.
    pub(crate) fn take_prompt_bytes(&self) -> (u64, u64) {
        (self.shared.prompt_bytes.load(Ordering::Relaxed), self.shared.prompt_max.swap(0, Ordering::Relaxed))
    }
}

/// The whole handler: count the call and pick the answer (the body is parsed in tool mode only).
async fn completion(State(shared): State<Shared>, body: Bytes) -> impl IntoResponse {
    shared.calls.fetch_add(1, Ordering::Relaxed);
    let mode = shared.mode.load(Ordering::Relaxed);
    let answer = if mode == Mode::Realistic as u8 {
        let size = body.len() as u64;
        shared.prompt_bytes.fetch_add(size, Ordering::Relaxed);
        shared.prompt_max.fetch_max(size, Ordering::Relaxed);
        realistic(size / 4)
    } else if mode == Mode::Tool as u8 && last_role(&body).as_deref() == Some("user") {
        TOOL_CALL.to_owned()
    } else {
        COMPLETION.to_owned()
    };
    ([(header::CONTENT_TYPE, "application/json")], answer)
}

/// The realistic answer, reporting `prompt_tokens`.
fn realistic(prompt_tokens: u64) -> String {
    let completion_tokens = REALISTIC_TEXT.len() as u64 / 4;
    format!(
        r#"{{"id":"chatcmpl-bench","object":"chat.completion","model":"bench","choices":[{{"index":0,"message":{{"role":"assistant","content":"{REALISTIC_TEXT}"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":{prompt_tokens},"completion_tokens":{completion_tokens},"total_tokens":{}}}}}"#,
        prompt_tokens + completion_tokens
    )
}

/// The role of the request's last message.
fn last_role(body: &[u8]) -> Option<String> {
    let request: Value = serde_json::from_slice(body).ok()?;
    Some(request["messages"].as_array()?.last()?["role"].as_str()?.to_owned())
}
