//! A scripted OpenAI-compatible LLM: `POST /v1/chat/completions` answers the next scripted step
//! (a reply, a delay, an HTTP error with Retry-After, garbage) or echoes the last user message
//! when the script is empty. Every request body is recorded.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Step {
    /// Answer this text.
    Reply(String),
    /// Answer "echo: <last user message>".
    Echo,
    /// Answer with this status, body and optional Retry-After seconds.
    Status(u16, String, Option<u64>),
    /// A 200 whose body is not JSON.
    Garbage,
}

struct Shared {
    script: Mutex<VecDeque<(Duration, Step)>>,
    latency: Duration,
    requests: Mutex<Vec<Value>>,
}

/// Builds a fake LLM.
pub struct FakeLlmBuilder {
    script: VecDeque<(Duration, Step)>,
    latency: Duration,
}

/// A running fake LLM.
#[derive(Clone)]
pub struct FakeLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FakeLlm {
    /// Start building; with no steps every call echoes.
    pub fn builder() -> FakeLlmBuilder {
        FakeLlmBuilder { script: VecDeque::new(), latency: Duration::ZERO }
    }

    /// A fake that echoes instantly.
    pub async fn echo() -> Self {
        Self::builder().start().await
    }

    /// The base URL to configure (`.../v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Request bodies received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Number of requests received.
    pub fn count(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }

    /// Append steps while running.
    pub fn push(&self, delay: Duration, step: Step) {
        self.shared.script.lock().unwrap().push_back((delay, step));
    }
}

impl FakeLlmBuilder {
    /// Answer `text` next.
    pub fn reply(mut self, text: &str) -> Self {
        self.script.push_back((Duration::ZERO, Step::Reply(text.into())));
        self
    }

    /// Answer `text` after `delay`.
    pub fn slow_reply(mut self, delay: Duration, text: &str) -> Self {
        self.script.push_back((delay, Step::Reply(text.into())));
        self
    }

    /// Fail next with `status`.
    pub fn fail(mut self, status: u16, body: &str) -> Self {
        self.script.push_back((Duration::ZERO, Step::Status(status, body.into(), None)));
        self
    }

    /// A step of any kind.
    pub fn step(mut self, delay: Duration, step: Step) -> Self {
        self.script.push_back((delay, step));
        self
    }

    /// Delay added to every answer.
    pub fn latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Bind 127.0.0.1:0 and serve.
    pub async fn start(self) -> FakeLlm {
        let shared = Arc::new(Shared {
            script: Mutex::new(self.script),
            latency: self.latency,
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new().route("/v1/chat/completions", post(completions)).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake llm");
        let addr = listener.local_addr().expect("fake llm addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeLlm { addr, shared }
    }
}

async fn completions(State(shared): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    shared.requests.lock().unwrap().push(body.clone());
    let (delay, step) = shared.script.lock().unwrap().pop_front().unwrap_or((Duration::ZERO, Step::Echo));
    tokio::time::sleep(shared.latency + delay).await;
    let text = match step {
        Step::Reply(text) => text,
        Step::Echo => {
            let last_user = body["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .and_then(|m| m["content"].as_str())
                .unwrap_or("")
                .to_owned();
            format!("echo: {last_user}")
        }
        Step::Status(code, body, retry_after) => {
            let mut response = (StatusCode::from_u16(code).unwrap(), body).into_response();
            if let Some(secs) = retry_after {
                response.headers_mut().insert("retry-after", secs.to_string().parse().unwrap());
            }
            return response;
        }
        Step::Garbage => return (StatusCode::OK, "<html>not json</html>").into_response(),
    };
    Json(json!({
        "id": "cmpl-fake",
        "object": "chat.completion",
        "model": body["model"],
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15 },
    }))
    .into_response()
}
