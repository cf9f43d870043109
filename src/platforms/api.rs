//! The API platform: requests to `/v1/chat/completions` become inbound events like any chat
//! message; the reply comes back through the outbox to `send`, which completes the waiting
//! request. Queue acks and progress are not part of an HTTP answer and are dropped here.
//!
//! `send` is also where an `Idempotency-Key` request's response is stored, before the waiting
//! client sees it (a retry right after the answer must replay it, not get 409) and even when no
//! client waits any more (it hung up, or the turn ran again after a restart).
//!
//! A streaming request gets the model's deltas as SSE, reasoning as `reasoning_content`. The
//! `usage` field is the turn's sum over its model calls (`usage_json`, with `cached_tokens` when
//! reported), taken from the `UsageBoard`; with `stream_options.include_usage` a last chunk with
//! `choices: []` carries it. A stored response (`completion`) is rendered with the `ReplyMeta`
//! fixed at the request's arrival. Files reach an API client as links: `file_link` makes them,
//! `is_file_link` checks a request's id and name (served by `http/files.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use hermesd_platform::{
    Capabilities, ChatRef, FileLimits, LengthUnit, MarkdownDialect, MessageRef, OutboundFile, OutboundKind,
    OutboundMessage, Platform, PlatformContext, PlatformError,
};
use serde_json::json;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use crate::agent::tools::send_file::stage::{OUTBOUND_DIR, safe_name};
use crate::clock::now_ms;
use crate::store::{IdempotencyStore, ResponseStore, StoredApiResponse, StoredResponse};
use crate::usage::{ClientCalls, TurnUsage, UsageBoard};
use crate::vocab::message::ToolCall;

/// The platform name in chat refs and session keys.
pub const NAME: &str = crate::vocab::origin::Origin::API;

/// The link an API client downloads the stored file `path` (`media/outbound/<id>/<name>`)
/// from: `GET /v1/files/{id}/{name}`, served by `http::files`.
pub fn file_link(path: &str) -> Option<String> {
    let rest = path.strip_prefix(OUTBOUND_DIR)?.strip_prefix('/')?;
    let (id, name) = rest.split_once('/')?;
    is_file_link(id, name).then(|| format!("/v1/files/{id}/{name}"))
}

/// Whether `id` and `name` are what `file_link` makes: a bare hex id and a plain file name.
pub fn is_file_link(id: &str, name: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) && safe_name(name) == name
}

/// The final answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiReply {
    /// The text.
    pub text: String,
    /// Whether the turn ended in an error.
    pub error: bool,
    /// Whether the error was in what the client sent (answered 400, not 502).
    pub refused: bool,
    /// What the turn's model calls used, summed; `None`: no model call (a command, a cap).
    pub usage: Option<TurnUsage>,
    /// Calls of the client's functions the turn ended with (the Responses API's
    /// `function_call` items); `text` is then only what the model said beside them.
    pub calls: Vec<ToolCall>,
}

/// The OpenAI `usage` object: the sum over the turn's model calls; `cached_tokens` when the
/// provider reported cache reads.
pub fn usage_json(usage: Option<&TurnUsage>) -> serde_json::Value {
    let t = usage.map(|u| u.tokens).unwrap_or_default();
    let mut value = json!({
        "prompt_tokens": t.prompt,
        "completion_tokens": t.completion,
        "total_tokens": t.prompt.saturating_add(t.completion),
    });
    if t.cache_read > 0 {
        value["prompt_tokens_details"] = json!({ "cached_tokens": t.cache_read });
    }
    value
}

/// Answer text streamed so far and not yet written to the client.
#[derive(Debug, Default)]
pub struct StreamBuffer {
    pending: Mutex<String>,
    /// Reasoning streamed so far and not yet written (sent as `reasoning_content`).
    reasoning: Mutex<String>,
    /// Signalled whenever text is added.
    pub ready: Notify,
}

impl StreamBuffer {
    /// Take what arrived since the last call.
    pub fn take(&self) -> String {
        std::mem::take(&mut *self.pending.lock().expect("api lock poisoned"))
    }

    /// Take the reasoning that arrived since the last call.
    pub fn take_reasoning(&self) -> String {
        std::mem::take(&mut *self.reasoning.lock().expect("api lock poisoned"))
    }
}

/// What the final answer of a request is rendered with, fixed when the request arrives so a
/// stored response and the one the client got are the same bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyMeta {
    /// The model id the response names.
    pub model: String,
    /// The response's `created` time, Unix seconds.
    pub created: i64,
    /// The request carried an `Idempotency-Key`: store its response.
    pub idempotent: bool,
    /// Which API the answer is shaped for.
    pub shape: ReplyShape,
}

/// Which API a request came through, and so the shape of its answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ReplyShape {
    /// `POST /v1/chat/completions`: a `chat.completion`.
    #[default]
    ChatCompletion,
    /// `POST /v1/responses`: a `response` object.
    Response(Box<ResponseMeta>),
}

/// What a Responses API answer says besides the reply: its id, the chat it continues, and the
/// request's fields a response echoes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseMeta {
    /// `resp_…`.
    pub id: String,
    /// The API chat (session) it was given in, which `previous_response_id` continues.
    pub chat_id: String,
    /// Kept for `GET /v1/responses/{id}` and `previous_response_id`.
    pub store: bool,
    /// The response it continues.
    pub previous_response_id: Option<String>,
    /// The request's instructions.
    pub instructions: Option<String>,
    /// The request's `user`.
    pub user: Option<String>,
    /// The request's `metadata`.
    pub metadata: serde_json::Value,
    /// The request's `tools`.
    pub tools: serde_json::Value,
    /// The messages the conversation opened with (its first request's earlier input items).
    pub context: Vec<hermesd_platform::HistoryMessage>,
}

/// The Responses API `usage` object.
pub fn response_usage_json(usage: Option<&TurnUsage>) -> serde_json::Value {
    let t = usage.map(|u| u.tokens).unwrap_or_default();
    json!({
        "input_tokens": t.prompt,
        "input_tokens_details": { "cached_tokens": t.cache_read },
        "output_tokens": t.completion,
        "output_tokens_details": { "reasoning_tokens": 0 },
        "total_tokens": t.prompt.saturating_add(t.completion),
    })
}

/// The message item of a response's output: the reply as one `output_text` part.
pub fn response_message_item(response_id: &str, text: &str, status: &str) -> serde_json::Value {
    let content = if status == "in_progress" {
        json!([])
    } else {
        json!([{ "type": "output_text", "text": text, "annotations": [] }])
    };
    json!({
        "type": "message",
        "id": format!("msg_{}", response_id.trim_start_matches("resp_")),
        "status": status,
        "role": "assistant",
        "content": content,
    })
}

/// A function call item of a response's output.
pub fn function_call_item(call: &ToolCall) -> serde_json::Value {
    json!({
        "type": "function_call",
        "id": format!("fc_{}", call.id),
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
        "status": "completed",
    })
}

/// A completed reply's output items: its text as a message (left out when a turn that ended
/// with function calls said nothing), then the calls.
pub fn response_output(response_id: &str, reply: &ApiReply) -> Vec<serde_json::Value> {
    let message = (reply.calls.is_empty() || !reply.text.trim().is_empty())
        .then(|| response_message_item(response_id, &reply.text, "completed"));
    message.into_iter().chain(reply.calls.iter().map(function_call_item)).collect()
}

/// A `response` object: `in_progress` without a reply yet, `completed` or `failed` with one.
pub fn response_object(meta: &ReplyMeta, response: &ResponseMeta, reply: Option<&ApiReply>) -> serde_json::Value {
    let (status, output, error, usage) = match reply {
        None => ("in_progress", json!([]), serde_json::Value::Null, serde_json::Value::Null),
        Some(reply) if reply.error => (
            "failed",
            json!([]),
            json!({ "code": "server_error", "message": reply.text }),
            response_usage_json(reply.usage.as_ref()),
        ),
        Some(reply) => (
            "completed",
            serde_json::Value::Array(response_output(&response.id, reply)),
            serde_json::Value::Null,
            response_usage_json(reply.usage.as_ref()),
        ),
    };
    json!({
        "id": response.id,
        "object": "response",
        "created_at": meta.created,
        "status": status,
        "error": error,
        "incomplete_details": null,
        "instructions": response.instructions,
        "max_output_tokens": null,
        "model": meta.model,
        "output": output,
        "parallel_tool_calls": true,
        "previous_response_id": response.previous_response_id,
        "reasoning": { "effort": null, "summary": null },
        "store": response.store,
        "temperature": null,
        "text": { "format": { "type": "text" } },
        "tool_choice": "auto",
        "tools": response.tools,
        "top_p": null,
        "truncation": "disabled",
        "usage": usage,
        "user": response.user,
        "metadata": response.metadata,
    })
}

/// The id of the response answering the request `request_id`.
pub fn response_id(request_id: &str) -> String {
    format!("resp_{}", request_id.replace('-', ""))
}

/// The row of a response: `in_progress` without a reply yet.
pub fn stored_response(meta: &ReplyMeta, response: &ResponseMeta, reply: Option<&ApiReply>) -> StoredApiResponse {
    StoredApiResponse {
        id: response.id.clone(),
        chat_id: response.chat_id.clone(),
        body: response_object(meta, response, reply).to_string(),
        created_at: now_ms(),
        context: response.context.clone(),
    }
}

/// What an `in_progress` row says of its request, to shape the answer that comes after a
/// restart as its client asked (`None`: the row is settled or unreadable).
fn pending_meta(row: &StoredApiResponse) -> Option<ReplyMeta> {
    let body: serde_json::Value = serde_json::from_str(&row.body).ok()?;
    if body["status"] != "in_progress" {
        return None;
    }
    let text = |key: &str| body[key].as_str().map(str::to_owned);
    let response = ResponseMeta {
        id: row.id.clone(),
        chat_id: row.chat_id.clone(),
        store: body["store"].as_bool().unwrap_or(true),
        previous_response_id: text("previous_response_id"),
        instructions: text("instructions"),
        user: text("user"),
        metadata: body["metadata"].clone(),
        tools: body["tools"].clone(),
        context: row.context.clone(),
    };
    Some(ReplyMeta {
        model: text("model")?,
        created: body["created_at"].as_i64().unwrap_or_else(|| now_ms() / 1000),
        idempotent: true,
        shape: ReplyShape::Response(Box::new(response)),
    })
}

/// The OpenAI-shaped HTTP answer (status and JSON body) for a turn's final reply.
pub fn completion(reply: &ApiReply, meta: &ReplyMeta, request_id: &str) -> StoredResponse {
    if reply.refused {
        let body =
            json!({ "error": { "message": reply.text, "type": "invalid_request_error", "code": "invalid_input" } });
        return StoredResponse { status: 400, body: body.to_string() };
    }
    if let ReplyShape::Response(response) = &meta.shape {
        let body = response_object(meta, response, Some(reply));
        let status = if reply.error { 502 } else { 200 };
        return StoredResponse { status, body: body.to_string() };
    }
    if reply.error {
        let body = json!({ "error": { "message": reply.text, "type": "server_error", "code": "turn_failed" } });
        return StoredResponse { status: 502, body: body.to_string() };
    }
    let body = json!({
        "id": format!("chatcmpl-{request_id}"),
        "object": "chat.completion",
        "created": meta.created,
        "model": meta.model,
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": reply.text }, "finish_reason": "stop" }],
        "usage": usage_json(reply.usage.as_ref()),
    });
    StoredResponse { status: 200, body: body.to_string() }
}

struct Waiter {
    tx: oneshot::Sender<ApiReply>,
    text: String,
    stream: Option<Arc<StreamBuffer>>,
    meta: ReplyMeta,
}

/// Requests waiting for their reply, by request id; chunks are joined before completing.
#[derive(Default)]
pub struct ApiPlatform {
    waiters: Mutex<HashMap<String, Waiter>>,
    /// Where idempotent responses are stored (absent in tests of the platform alone).
    records: Option<Arc<dyn IdempotencyStore>>,
    /// The model id replies name when no request is waiting for them.
    model_id: String,
    /// Where image parts of requests are saved (`media/api`); absent: image parts are ignored.
    media: Option<hermesd_platform::media::MediaDir>,
    /// Where turns post their usage for the `usage` field; absent: usage is reported as 0.
    usage: Option<Arc<UsageBoard>>,
    /// Where Responses API responses are kept (`store: true`).
    responses: Option<Arc<dyn ResponseStore>>,
}

impl ApiPlatform {
    /// The platform, storing idempotent responses in `records`; `model_id` names the model in
    /// responses stored for requests nobody waits for any more.
    pub fn new(records: Arc<dyn IdempotencyStore>, model_id: &str) -> Self {
        Self {
            waiters: Mutex::default(),
            records: Some(records),
            model_id: model_id.to_owned(),
            media: None,
            usage: None,
            responses: None,
        }
    }

    /// Keep Responses API responses (`store: true`) in `responses`.
    pub fn with_responses(mut self, responses: Arc<dyn ResponseStore>) -> Self {
        self.responses = Some(responses);
        self
    }

    /// Settle a Responses API response's row (written `in_progress` when its request was
    /// accepted): the answer kept when the client asked to store it; the row deleted otherwise,
    /// and for a failed turn (the conversation continues from its last good answer). Failures
    /// are logged; the reply still goes out (a later `GET` or `previous_response_id` then finds
    /// nothing, or the response still in progress).
    async fn keep(&self, reply: &ApiReply, meta: &ReplyMeta) {
        let (Some(responses), ReplyShape::Response(response)) = (&self.responses, &meta.shape) else { return };
        let done = match response.store && !reply.error {
            true => responses.save_response(&stored_response(meta, response, Some(reply))).await,
            false => responses.delete_response(&response.id).await.map(drop),
        };
        if let Err(e) = done {
            tracing::warn!(error = %e, "response not settled; GET and previous_response_id may not find it");
        }
    }

    /// The shape of the answer to `request_id` when nobody waits for it (it ran after a
    /// restart): a Responses API request left its row `in_progress`; anything else was a chat
    /// completion.
    async fn orphan_meta(&self, request_id: &str) -> ReplyMeta {
        let chat_completion = || ReplyMeta {
            model: self.model_id.clone(),
            created: now_ms() / 1000,
            idempotent: true,
            shape: ReplyShape::ChatCompletion,
        };
        let Some(responses) = &self.responses else { return chat_completion() };
        match responses.api_response(&response_id(request_id)).await {
            Ok(Some(row)) => pending_meta(&row).unwrap_or_else(chat_completion),
            Ok(None) => chat_completion(),
            Err(e) => {
                tracing::warn!(error = %e, "response row not read; the answer is kept as a chat completion");
                chat_completion()
            }
        }
    }

    /// Read each turn's usage from `board` (where the turn runner posts it).
    pub fn with_usage(mut self, board: Arc<UsageBoard>) -> Self {
        self.usage = Some(board);
        self
    }

    /// Save image parts of requests in `media` (`$HERMESD_HOME/media/api`).
    pub fn with_media(mut self, media: hermesd_platform::media::MediaDir) -> Self {
        self.media = Some(media);
        self
    }

    /// Where image parts of requests are saved.
    pub fn media(&self) -> Option<&hermesd_platform::media::MediaDir> {
        self.media.as_ref()
    }

    /// Register a request before accepting its event, so the reply cannot outrun the waiter.
    pub fn register(&self, request_id: &str, meta: ReplyMeta) -> oneshot::Receiver<ApiReply> {
        let (tx, rx) = oneshot::channel();
        let waiter = Waiter { tx, text: String::new(), stream: None, meta };
        self.waiters.lock().expect("api lock poisoned").insert(request_id.to_owned(), waiter);
        rx
    }

    /// Register a streaming request: deltas arrive in the returned buffer as the model writes.
    pub fn register_stream(
        &self,
        request_id: &str,
        meta: ReplyMeta,
    ) -> (oneshot::Receiver<ApiReply>, Arc<StreamBuffer>) {
        let (tx, rx) = oneshot::channel();
        let buffer = Arc::new(StreamBuffer::default());
        let waiter = Waiter { tx, text: String::new(), stream: Some(buffer.clone()), meta };
        self.waiters.lock().expect("api lock poisoned").insert(request_id.to_owned(), waiter);
        (rx, buffer)
    }

    /// Store the response of an idempotent request (or of one nobody waits for: after a restart
    /// only the store knows whether it had a key). Failures are logged; the reply still goes out.
    async fn record(&self, request_id: &str, reply: &ApiReply, meta: &ReplyMeta) {
        let Some(records) = &self.records else { return };
        let response = completion(reply, meta, request_id);
        if let Err(e) = records.complete_idempotent(request_id, &response, now_ms()).await {
            tracing::warn!(error = %e, "idempotent response not stored; retries get 409 until the key expires");
        }
    }

    /// Forget a request whose client went away or whose event was a duplicate.
    pub fn forget(&self, request_id: &str) {
        self.waiters.lock().expect("api lock poisoned").remove(request_id);
    }

    /// Drop every waiter (shutdown): their handlers answer 503 and the turns run next start.
    pub fn release_all(&self) {
        self.waiters.lock().expect("api lock poisoned").clear();
    }
}

#[async_trait]
impl Platform for ApiPlatform {
    fn name(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_len: 4 * 1024 * 1024,
            length_unit: LengthUnit::Chars,
            edits: false,
            threads: false,
            buttons: false,
            typing: false,
            interactive: false,
            request_response: true,
            markdown: MarkdownDialect::Markdown,
            per_chat_rate: 10_000.0,
            per_chat_burst: 10_000,
            group_rate: 1000.0,
            global_rate: 10000.0,
        }
    }

    async fn run(&self, _ctx: PlatformContext, cancel: CancellationToken) -> Result<(), PlatformError> {
        // Requests arrive through the HTTP server's routes; this only marks the platform's life.
        // Waiters stay until their turns finish or persist: the daemon releases them after the
        // drain.
        cancel.cancelled().await;
        Ok(())
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
        let id = uuid::Uuid::now_v7().to_string();
        let done = MessageRef { chat: message.chat.clone(), message_id: id };
        let final_kind = matches!(message.kind, OutboundKind::Reply | OutboundKind::Error);
        let Some(request_id) = message.reply_to.as_deref().filter(|_| final_kind) else { return Ok(done) };
        let error = message.kind == OutboundKind::Error;
        let last = message.chunk.0 + 1 >= message.chunk.1;
        let usage = || self.usage.as_ref().and_then(|board| board.take(NAME, request_id));
        let waiter = {
            let mut waiters = self.waiters.lock().expect("api lock poisoned");
            if !last {
                if let Some(waiter) = waiters.get_mut(request_id) {
                    waiter.text.push_str(&message.text);
                }
                return Ok(done);
            }
            waiters.remove(request_id)
        };
        let refused = error && self.usage.as_ref().is_some_and(|board| board.take_refused(NAME, request_id));
        match waiter {
            Some(mut waiter) => {
                waiter.text.push_str(&message.text);
                let reply = match self.usage.as_ref().and_then(|board| board.take_calls(NAME, request_id)) {
                    Some(ClientCalls { calls, text }) => ApiReply { text, error, refused, usage: usage(), calls },
                    None => ApiReply { text: waiter.text, error, refused, usage: usage(), calls: Vec::new() },
                };
                self.keep(&reply, &waiter.meta).await;
                if waiter.meta.idempotent {
                    self.record(request_id, &reply, &waiter.meta).await;
                }
                // A client that hung up is fine: the reply is in the session history.
                let _ = waiter.tx.send(reply);
            }
            None => {
                let meta = self.orphan_meta(request_id).await;
                let reply = ApiReply { text: message.text.clone(), error, refused, usage: usage(), calls: Vec::new() };
                self.keep(&reply, &meta).await;
                self.record(request_id, &reply, &meta).await;
            }
        }
        Ok(done)
    }

    fn file_limits(&self) -> Option<FileLimits> {
        // Files reach API clients as links to the stored copy; nothing is uploaded anywhere.
        Some(FileLimits { max_document_bytes: 100 * 1024 * 1024, max_photo_bytes: 100 * 1024 * 1024 })
    }

    /// A file becomes a markdown link to `GET /v1/files/{id}/{name}` in the answer it belongs
    /// to; the receipt is the link, so a tool that sent it can name it too.
    async fn send_file(
        &self,
        message: &OutboundMessage,
        file: &OutboundFile,
        _bytes: &[u8],
    ) -> Result<MessageRef, PlatformError> {
        let link = file_link(&file.path)
            .ok_or_else(|| PlatformError::Permanent(format!("{} is not a stored outbound file", file.path)))?;
        let caption = message.text.trim();
        let line = if caption.is_empty() {
            format!("[{}]({link})", file.name)
        } else {
            format!("{caption}: [{}]({link})", file.name)
        };
        let mut text = message.clone();
        text.text = format!("\n\n{line}");
        text.file = None;
        self.send(&text).await?;
        Ok(MessageRef { chat: message.chat.clone(), message_id: link })
    }

    fn stream_delta(&self, reply_to: &str, text: &str) {
        let waiters = self.waiters.lock().expect("api lock poisoned");
        if let Some(buffer) = waiters.get(reply_to).and_then(|w| w.stream.as_ref()) {
            buffer.pending.lock().expect("api lock poisoned").push_str(text);
            buffer.ready.notify_one();
        }
    }

    fn stream_reasoning(&self, reply_to: &str, text: &str) {
        let waiters = self.waiters.lock().expect("api lock poisoned");
        if let Some(buffer) = waiters.get(reply_to).and_then(|w| w.stream.as_ref()) {
            buffer.reasoning.lock().expect("api lock poisoned").push_str(text);
            buffer.ready.notify_one();
        }
    }

    fn wants_stream(&self, reply_to: &str) -> bool {
        self.waiters.lock().expect("api lock poisoned").get(reply_to).is_some_and(|w| w.stream.is_some())
    }

    async fn edit(&self, _message: &MessageRef, _text: &str) -> Result<(), PlatformError> {
        Ok(())
    }

    async fn typing(&self, _chat: &ChatRef) -> Result<(), PlatformError> {
        Ok(())
    }
}
