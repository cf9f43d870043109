//! A scripted OpenAI-compatible LLM: `POST /v1/chat/completions` answers the next scripted step
//! (a reply, tool calls, a delay, an HTTP error with Retry-After, garbage, a cut stream) or
//! echoes the last user message when the script is empty. Requests with `"stream": true` get a
//! real SSE stream. Compression summary requests are answered automatically without using the
//! script. Every request body is recorded, image parts included (`image_urls`).
//! `POST /v1/audio/transcriptions` answers `{"text": <transcript>}` and records each upload.

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
use futures_util::StreamExt;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Step {
    /// Answer this text.
    Reply(String),
    /// Answer this text and report this many prompt tokens.
    ReplyWithUsage(String, u64),
    /// Call tools: (name, JSON arguments), in order.
    ToolCalls(Vec<(String, String)>),
    /// An empty answer.
    Empty,
    /// A 400 saying the prompt exceeds the context window.
    ContextTooLong,
    /// Stream this text, then drop the connection before the end.
    CutStream(String),
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
    transcript: String,
    audio: Mutex<Vec<Upload>>,
}

/// One `/audio/transcriptions` request as received.
#[derive(Debug, Clone)]
pub struct Upload {
    /// Its `authorization` header, if any.
    pub authorization: Option<String>,
    /// The raw multipart body.
    pub body: Vec<u8>,
}

impl Upload {
    /// Whether the body holds `needle` (the audio bytes, the model name).
    pub fn contains(&self, needle: &[u8]) -> bool {
        self.body.windows(needle.len().max(1)).any(|w| w == needle)
    }
}

/// Builds a fake LLM.
pub struct FakeLlmBuilder {
    script: VecDeque<(Duration, Step)>,
    latency: Duration,
    transcript: String,
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
        FakeLlmBuilder { script: VecDeque::new(), latency: Duration::ZERO, transcript: "transcribed audio".into() }
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

    /// Every `image_url` URL sent in any request so far (data URLs for images).
    pub fn image_urls(&self) -> Vec<String> {
        let mut urls = Vec::new();
        for request in self.requests() {
            for message in request["messages"].as_array().into_iter().flatten() {
                for part in message["content"].as_array().into_iter().flatten() {
                    if let Some(url) = part["image_url"]["url"].as_str() {
                        urls.push(url.to_owned());
                    }
                }
            }
        }
        urls
    }

    /// `/audio/transcriptions` requests received so far.
    pub fn audio_uploads(&self) -> Vec<Upload> {
        self.shared.audio.lock().unwrap().clone()
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

    /// Call these tools next: (name, JSON arguments).
    pub fn tool_calls(mut self, calls: &[(&str, &str)]) -> Self {
        let calls = calls.iter().map(|(n, a)| ((*n).to_owned(), (*a).to_owned())).collect();
        self.script.push_back((Duration::ZERO, Step::ToolCalls(calls)));
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

    /// What `/audio/transcriptions` answers (default "transcribed audio").
    pub fn transcript(mut self, text: &str) -> Self {
        self.transcript = text.into();
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
            transcript: self.transcript,
            audio: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .route("/v1/audio/transcriptions", post(transcriptions))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake llm");
        let addr = listener.local_addr().expect("fake llm addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeLlm { addr, shared }
    }
}

/// Text of the answer to a compression request (recognised by its system prompt).
pub const SUMMARY: &str = "## Goal\nkeep going\n## Progress\nsummarised by the fake";

async fn completions(State(shared): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    shared.requests.lock().unwrap().push(body.clone());
    let is_summary = body["messages"][0]["content"].as_str().is_some_and(|c| c.contains("handover summaries"));
    let (delay, step) = if is_summary {
        (Duration::ZERO, Step::Reply(SUMMARY.into()))
    } else {
        shared.script.lock().unwrap().pop_front().unwrap_or((Duration::ZERO, Step::Echo))
    };
    tokio::time::sleep(shared.latency + delay).await;
    let stream = body["stream"].as_bool().unwrap_or(false);
    let (text, calls, usage) = match step {
        Step::Reply(text) => (text, vec![], 10),
        Step::ReplyWithUsage(text, tokens) => (text, vec![], tokens),
        Step::ToolCalls(calls) => (String::new(), calls, 10),
        Step::Empty => (String::new(), vec![], 10),
        Step::Echo => {
            let last_user = body["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .and_then(|m| m["content"].as_str())
                .unwrap_or("")
                .to_owned();
            (format!("echo: {last_user}"), vec![], 10)
        }
        Step::Status(code, body, retry_after) => {
            let mut response = (StatusCode::from_u16(code).unwrap(), body).into_response();
            if let Some(secs) = retry_after {
                response.headers_mut().insert("retry-after", secs.to_string().parse().unwrap());
            }
            return response;
        }
        Step::ContextTooLong => {
            let error = json!({"error": {"message": "This model's maximum context length is 8192 tokens", "code": "context_length_exceeded"}});
            return (StatusCode::BAD_REQUEST, Json(error)).into_response();
        }
        Step::Garbage => return (StatusCode::OK, "<html>not json</html>").into_response(),
        Step::CutStream(partial) => return sse(&partial, &[], 10, false),
    };
    if stream {
        return sse(&text, &calls, usage, true);
    }
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    let mut message = json!({ "role": "assistant", "content": text });
    if !tool_calls.is_empty() {
        message["tool_calls"] = json!(tool_calls);
    }
    let finish = if calls.is_empty() { "stop" } else { "tool_calls" };
    Json(json!({
        "id": "cmpl-fake",
        "object": "chat.completion",
        "model": body["model"],
        "choices": [{ "index": 0, "message": message, "finish_reason": finish }],
        "usage": { "prompt_tokens": usage, "completion_tokens": 5, "total_tokens": usage + 5 },
    }))
    .into_response()
}

async fn transcriptions(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let multipart =
        headers.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("multipart/form-data"));
    shared.audio.lock().unwrap().push(Upload { authorization, body: body.to_vec() });
    if !multipart {
        return (StatusCode::BAD_REQUEST, "expected multipart/form-data").into_response();
    }
    Json(json!({ "text": shared.transcript })).into_response()
}

/// An SSE body: the text in three deltas, tool calls, a finish chunk, usage and `[DONE]` — or,
/// when `complete` is false, just the deltas (the connection then closes mid-stream).
fn sse(text: &str, calls: &[(String, String)], usage: u64, complete: bool) -> Response {
    let mut events = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(chars.len().div_ceil(3).max(1)) {
        let piece: String = piece.iter().collect();
        events.push(json!({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]}));
    }
    for (i, (name, args)) in calls.iter().enumerate() {
        let call = json!({"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": args}});
        events.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]}));
    }
    let mut frames: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    if complete {
        let finish = if calls.is_empty() { "stop" } else { "tool_calls" };
        let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]});
        let usage = json!({"choices": [], "usage": {"prompt_tokens": usage, "completion_tokens": 5}});
        frames.push(format!("data: {end}\n\n"));
        frames.push(format!("data: {usage}\n\n"));
        frames.push("data: [DONE]\n\n".to_owned());
    }
    // Frames are paced like a model writing, so a client sees them arrive one by one.
    let paced = futures_util::stream::iter(frames).then(|frame| async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        Ok::<_, std::convert::Infallible>(frame)
    });
    ([("content-type", "text/event-stream")], axum::body::Body::from_stream(paced)).into_response()
}
