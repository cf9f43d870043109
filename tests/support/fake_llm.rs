//! A scripted OpenAI-compatible LLM: `POST /v1/chat/completions` answers the next scripted step
//! (a reply, tool calls, a delay, an HTTP error with Retry-After, garbage, a cut stream) or
//! echoes the last user message when the script is empty. Requests with `"stream": true` get a
//! real SSE stream. Compression summary requests are answered automatically without using the
//! script. Memory flush turns (their instruction holds `[Memory flush]`) are answered from
//! a script of their own (else "DONE") and recorded apart (`flush_requests`), so they never
//! shift what other tests see. Every request body is recorded, image parts included (`image_urls`).
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
    /// Stream these pieces with this pause before each (a model writing slowly); without
    /// `"stream": true` the joined text is the answer.
    SlowStream(Vec<String>, Duration),
    /// Reason (DeepSeek-style `reasoning_content`; a reasoning summary on `/v1/responses`), then
    /// answer this text.
    Reasoned(String, String),
}

struct Shared {
    script: Mutex<VecDeque<(Duration, Step)>>,
    latency: Duration,
    requests: Mutex<Vec<Value>>,
    /// Requests received (kept even when the bodies are not).
    count: std::sync::atomic::AtomicUsize,
    /// Whether request bodies are kept for `requests()`.
    keep: bool,
    transcript: String,
    audio: Mutex<Vec<Upload>>,
    /// Cached prompt tokens reported by chat completions (`prompt_tokens_details.cached_tokens`;
    /// 0: the field is left out).
    cached_tokens: u64,
    /// Answers to memory flush requests, in order ("DONE" when empty).
    flush_script: Mutex<VecDeque<(Duration, Step)>>,
    /// Memory flush request bodies.
    flushes: Mutex<Vec<Value>>,
    /// How long compression summary requests are held before their answer.
    summary_delay: Duration,
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
    flush_script: VecDeque<(Duration, Step)>,
    latency: Duration,
    keep: bool,
    transcript: String,
    cached_tokens: u64,
    summary_delay: Duration,
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
        FakeLlmBuilder {
            script: VecDeque::new(),
            flush_script: VecDeque::new(),
            latency: Duration::ZERO,
            keep: true,
            transcript: "transcribed audio".into(),
            cached_tokens: 0,
            summary_delay: Duration::ZERO,
        }
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
        self.shared.count.load(std::sync::atomic::Ordering::SeqCst)
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

    /// Memory flush request bodies received so far (not in `requests` or `count`).
    pub fn flush_requests(&self) -> Vec<Value> {
        self.shared.flushes.lock().unwrap().clone()
    }

    /// Append an answer to the next memory flush request while running.
    pub fn push_flush(&self, step: Step) {
        self.shared.flush_script.lock().unwrap().push_back((Duration::ZERO, step));
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

    /// Answer the next memory flush request with `step` (flushes answer "DONE" by default).
    pub fn flush_step(mut self, step: Step) -> Self {
        self.flush_script.push_back((Duration::ZERO, step));
        self
    }

    /// Answer the next memory flush request with `step` after `delay` (a slow model).
    pub fn flush_step_after(mut self, delay: Duration, step: Step) -> Self {
        self.flush_script.push_back((delay, step));
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

    /// Keep no request bodies and read only what answering needs (benchmarks: a model server
    /// does not hold every prompt in memory, and parsing tool schemas is not gateway work).
    pub fn forget_requests(mut self) -> Self {
        self.keep = false;
        self
    }

    /// Hold every compression summary request this long before answering it (a slow `/compress`).
    pub fn summary_delay(mut self, delay: Duration) -> Self {
        self.summary_delay = delay;
        self
    }

    /// Report `n` of every chat completion's prompt tokens as read from the cache.
    pub fn cached_tokens(mut self, n: u64) -> Self {
        self.cached_tokens = n;
        self
    }

    /// Bind 127.0.0.1:0 and serve.
    pub async fn start(self) -> FakeLlm {
        let shared = Arc::new(Shared {
            script: Mutex::new(self.script),
            latency: self.latency,
            requests: Mutex::new(Vec::new()),
            count: std::sync::atomic::AtomicUsize::new(0),
            keep: self.keep,
            transcript: self.transcript,
            audio: Mutex::new(Vec::new()),
            cached_tokens: self.cached_tokens,
            flush_script: Mutex::new(self.flush_script),
            flushes: Mutex::new(Vec::new()),
            summary_delay: self.summary_delay,
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .route("/v1/responses", post(fake_responses::responses))
            .route("/v1/messages", post(fake_messages::messages))
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

/// What answering reads of a request when bodies are not kept; the rest (tool schemas) is
/// skipped without being built.
#[derive(serde::Deserialize)]
struct Brief {
    #[serde(default)]
    messages: Value,
    #[serde(default)]
    stream: bool,
}

/// Whether a request belongs to a memory flush turn (its instruction is among the messages).
fn is_flush(body: &Value) -> bool {
    body["messages"].as_array().is_some_and(|messages| {
        messages
            .iter()
            .any(|m| m["role"] == "user" && m["content"].as_str().is_some_and(|c| c.contains("[Memory flush]")))
    })
}

async fn completions(State(shared): State<Arc<Shared>>, body: axum::body::Bytes) -> Response {
    if let Ok(parsed) = serde_json::from_slice::<Value>(&body)
        && is_flush(&parsed)
    {
        shared.flushes.lock().unwrap().push(parsed.clone());
        let (delay, step) =
            shared.flush_script.lock().unwrap().pop_front().unwrap_or((Duration::ZERO, Step::Reply("DONE".into())));
        tokio::time::sleep(delay).await;
        let (text, calls) = match step {
            Step::ToolCalls(calls) => (String::new(), calls),
            Step::Reply(text) => (text, vec![]),
            Step::Status(code, body, _) => return (StatusCode::from_u16(code).unwrap(), body).into_response(),
            other => (format!("{other:?}"), vec![]),
        };
        // Ids unique per request, so a flush turn's calls never collide.
        let prefix = format!("flush_{}", parsed["messages"].as_array().map_or(0, Vec::len));
        let usage = json!({ "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15 });
        return completion_json(&parsed, &text, &calls, &prefix, usage);
    }
    let body: Value = if shared.keep {
        let Ok(body) = serde_json::from_slice::<Value>(&body) else {
            return (StatusCode::BAD_REQUEST, "request body is not JSON").into_response();
        };
        shared.requests.lock().unwrap().push(body.clone());
        body
    } else {
        let Ok(brief) = serde_json::from_slice::<Brief>(&body) else {
            return (StatusCode::BAD_REQUEST, "request body is not JSON").into_response();
        };
        json!({ "messages": brief.messages, "stream": brief.stream })
    };
    shared.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let is_summary = body["messages"][0]["content"].as_str().is_some_and(|c| c.contains("handover summaries"));
    let (delay, step) = if is_summary {
        (shared.summary_delay, Step::Reply(SUMMARY.into()))
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
                .map(|m| match &m["content"] {
                    // Content parts, as sent with prompt-cache markers.
                    Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<String>(),
                    other => other.as_str().unwrap_or_default().to_owned(),
                })
                .unwrap_or_default();
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
        Step::CutStream(partial) => return sse(&partial, &[], 10, false, 0),
        Step::SlowStream(pieces, pause) if stream => return slow_sse(pieces, pause),
        Step::SlowStream(pieces, _) => (pieces.concat(), vec![], 10),
        Step::Reasoned(reasoning, text) => return reasoned(&reasoning, &text, stream),
    };
    if stream {
        return sse(&text, &calls, usage, true, shared.cached_tokens);
    }
    completion_json(&body, &text, &calls, "call", wire_usage(usage, shared.cached_tokens))
}

/// A chat completion's `usage`: `prompt` tokens, 5 completion tokens, and `cached` of the
/// prompt read from the cache when not 0.
fn wire_usage(prompt: u64, cached: u64) -> Value {
    let mut usage = json!({ "prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5 });
    if cached > 0 {
        usage["prompt_tokens_details"] = json!({ "cached_tokens": cached });
    }
    usage
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
fn sse(text: &str, calls: &[(String, String)], usage: u64, complete: bool, cached: u64) -> Response {
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
        let usage = if cached > 0 {
            json!({"choices": [], "usage": wire_usage(usage, cached)})
        } else {
            json!({"choices": [], "usage": {"prompt_tokens": usage, "completion_tokens": 5}})
        };
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

/// An SSE body of `pieces`, each after `pause`, then the finish chunk and `[DONE]`.
fn slow_sse(pieces: Vec<String>, pause: Duration) -> Response {
    let mut frames: Vec<(Duration, String)> = pieces
        .iter()
        .map(|piece| {
            let event = json!({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]});
            (pause, format!("data: {event}\n\n"))
        })
        .collect();
    let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    frames.push((Duration::ZERO, format!("data: {end}\n\n")));
    frames.push((Duration::ZERO, "data: [DONE]\n\n".to_owned()));
    let paced = futures_util::stream::iter(frames).then(|(pause, frame)| async move {
        tokio::time::sleep(pause).await;
        Ok::<_, std::convert::Infallible>(frame)
    });
    ([("content-type", "text/event-stream")], axum::body::Body::from_stream(paced)).into_response()
}
/// A chat completion that reasons first: `reasoning_content` deltas, then the text, or both in
/// one message when not streamed.
fn reasoned(reasoning: &str, text: &str, stream: bool) -> Response {
    if !stream {
        let message = json!({ "role": "assistant", "content": text, "reasoning_content": reasoning });
        return Json(json!({
            "id": "cmpl-fake", "object": "chat.completion",
            "choices": [{ "index": 0, "message": message, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15 },
        }))
        .into_response();
    }
    let mut events = Vec::new();
    for piece in reasoning.split_inclusive(' ') {
        events.push(json!({"choices": [{"index": 0, "delta": {"reasoning_content": piece}, "finish_reason": null}]}));
    }
    events.push(json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}));
    events.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
    let mut frames: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    frames.push("data: [DONE]\n\n".to_owned());
    paced(frames)
}

/// An SSE response whose frames arrive one by one, like a model writing.
fn paced(frames: Vec<String>) -> Response {
    let stream = futures_util::stream::iter(frames).then(|frame| async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        Ok::<_, std::convert::Infallible>(frame)
    });
    ([("content-type", "text/event-stream")], axum::body::Body::from_stream(stream)).into_response()
}

/// `POST /v1/responses`: the OpenAI Responses API over the same script, checking what the real
/// API refuses for stateless (`store: false`) requests.
mod fake_responses {
    use super::*;

    /// Usage every response reports: most of the prompt read from the cache.
    pub const INPUT_TOKENS: u64 = 40;
    /// Cached part of [`INPUT_TOKENS`].
    pub const CACHED_TOKENS: u64 = 32;

    pub(super) async fn responses(State(shared): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
        let n = {
            let mut requests = shared.requests.lock().unwrap();
            requests.push(body.clone());
            requests.len()
        };
        if let Some(refusal) = refuse(&body) {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": {"message": refusal, "type": "invalid_request_error"}})),
            )
                .into_response();
        }
        let is_summary = body["instructions"].as_str().is_some_and(|c| c.contains("handover summaries"));
        let (delay, step) = if is_summary {
            (Duration::ZERO, Step::Reply(SUMMARY.into()))
        } else {
            shared.script.lock().unwrap().pop_front().unwrap_or((Duration::ZERO, Step::Echo))
        };
        tokio::time::sleep(shared.latency + delay).await;
        let thought = format!("thought {n}");
        let (reasoning, text, calls) = match step {
            Step::Reply(text) | Step::ReplyWithUsage(text, _) => (thought, text, vec![]),
            Step::Reasoned(reasoning, text) => (reasoning, text, vec![]),
            Step::ToolCalls(calls) => (thought, String::new(), calls),
            Step::Empty => (String::new(), String::new(), vec![]),
            Step::Echo => (thought, format!("echo: {}", last_user_text(&body)), vec![]),
            Step::Status(code, body, _) => return (StatusCode::from_u16(code).unwrap(), body).into_response(),
            other => {
                return (StatusCode::NOT_IMPLEMENTED, format!("{other:?} is not scripted for /v1/responses"))
                    .into_response();
            }
        };
        let mut output = Vec::new();
        if !reasoning.is_empty() {
            output.push(json!({"type": "reasoning", "id": format!("rs_{n}"), "encrypted_content": format!("enc-{n}"),
                "summary": [{"type": "summary_text", "text": reasoning}]}));
        }
        if !text.is_empty() {
            output
                .push(json!({"type": "message", "id": format!("msg_{n}"), "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}));
        }
        for (i, (name, arguments)) in calls.iter().enumerate() {
            output
                .push(json!({"type": "function_call", "id": format!("fc_{n}_{i}"), "call_id": format!("call_{n}_{i}"),
                "name": name, "arguments": arguments, "status": "completed"}));
        }
        let response = json!({
            "id": format!("resp_{n}"), "object": "response", "status": "completed", "model": body["model"],
            "output": output,
            "usage": {"input_tokens": INPUT_TOKENS, "input_tokens_details": {"cached_tokens": CACHED_TOKENS},
                "output_tokens": 6, "output_tokens_details": {"reasoning_tokens": 4}, "total_tokens": INPUT_TOKENS + 6},
        });
        if body["stream"].as_bool().unwrap_or(false) { events(&response) } else { Json(response).into_response() }
    }

    /// What the real API answers 400 (or 404) to: a reasoning item replayed with its id while
    /// nothing is stored, or one that is not followed by the output it led to.
    fn refuse(body: &Value) -> Option<String> {
        let input = body["input"].as_array()?;
        for (i, item) in input.iter().enumerate() {
            if item["type"] != "reasoning" {
                continue;
            }
            if body["store"] == false && item.get("id").is_some() {
                return Some(format!(
                    "Item with id '{}' not found. Items are not persisted when `store` is set to false.",
                    item["id"]
                ));
            }
            let next = input.get(i + 1).map(|n| n["type"].as_str().unwrap_or_default());
            if !matches!(next, Some("message" | "function_call" | "reasoning")) {
                return Some("Item of type 'reasoning' was provided without its required following item.".into());
            }
        }
        None
    }

    fn last_user_text(body: &Value) -> String {
        body["input"]
            .as_array()
            .and_then(|items| items.iter().rev().find(|i| i["role"] == "user"))
            .and_then(|item| item["content"][0]["text"].as_str())
            .unwrap_or("")
            .to_owned()
    }

    /// The response as the real event stream: items added, text and summary deltas, items done,
    /// `response.completed`.
    fn events(response: &Value) -> Response {
        let mut events = vec![
            json!({"type": "response.created", "response": {"id": response["id"], "status": "in_progress", "output": []}}),
        ];
        for (index, item) in response["output"].as_array().into_iter().flatten().enumerate() {
            events.push(json!({"type": "response.output_item.added", "output_index": index, "item": item}));
            match item["type"].as_str() {
                Some("reasoning") => {
                    events.push(json!({"type": "response.reasoning_summary_part.added", "output_index": index, "summary_index": 0}));
                    let text = item["summary"][0]["text"].as_str().unwrap_or_default();
                    for piece in text.split_inclusive(' ') {
                        events.push(json!({"type": "response.reasoning_summary_text.delta", "item_id": item["id"],
                            "output_index": index, "summary_index": 0, "delta": piece}));
                    }
                }
                Some("message") => {
                    let text = item["content"][0]["text"].as_str().unwrap_or_default();
                    for piece in text.split_inclusive(' ') {
                        events.push(json!({"type": "response.output_text.delta", "item_id": item["id"],
                            "output_index": index, "content_index": 0, "delta": piece}));
                    }
                }
                _ => events.push(json!({"type": "response.function_call_arguments.done", "output_index": index,
                    "arguments": item["arguments"]})),
            }
            events.push(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
        }
        events.push(json!({"type": "response.completed", "response": response}));
        paced(events.iter().map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or(""))).collect())
    }
}

#[allow(unused_imports)]
pub use fake_responses::{CACHED_TOKENS, INPUT_TOKENS};

/// `POST /v1/messages`: Anthropic's Messages API over the same script, refusing what the real
/// API refuses about prompt caching (more than four `cache_control` breakpoints).
#[path = "fake_llm/fake_messages.rs"]
mod fake_messages;

#[allow(unused_imports)]
pub use fake_messages::{CACHE_READ, CACHE_WRITE};

/// A non-streamed chat completion: `text`, or `calls` with ids `<prefix>_<i>`.
fn completion_json(body: &Value, text: &str, calls: &[(String, String)], prefix: &str, usage: Value) -> Response {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"id": format!("{prefix}_{i}"), "type": "function", "function": {"name": name, "arguments": args}}))
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
        "usage": usage,
    }))
    .into_response()
}
