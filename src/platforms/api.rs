//! The API platform: requests to `/v1/chat/completions` become inbound events like any chat
//! message; the reply comes back through the outbox to `send`, which completes the waiting
//! request. Queue acks and progress are not part of an HTTP answer and are dropped here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use hermesd_platform::{
    Capabilities, ChatRef, LengthUnit, MarkdownDialect, MessageRef, OutboundKind, OutboundMessage, Platform,
    PlatformContext, PlatformError,
};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

/// The platform name in chat refs and session keys.
pub const NAME: &str = "api";

/// The final answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiReply {
    /// The text.
    pub text: String,
    /// Whether the turn ended in an error.
    pub error: bool,
}

/// Answer text streamed so far and not yet written to the client.
#[derive(Debug, Default)]
pub struct StreamBuffer {
    pending: Mutex<String>,
    /// Signalled whenever text is added.
    pub ready: Notify,
}

impl StreamBuffer {
    /// Take what arrived since the last call.
    pub fn take(&self) -> String {
        std::mem::take(&mut *self.pending.lock().expect("api lock poisoned"))
    }
}

struct Waiter {
    tx: oneshot::Sender<ApiReply>,
    text: String,
    stream: Option<Arc<StreamBuffer>>,
}

/// Requests waiting for their reply, by request id; chunks are joined before completing.
#[derive(Default)]
pub struct ApiPlatform {
    waiters: Mutex<HashMap<String, Waiter>>,
}

impl ApiPlatform {
    /// Register a request before accepting its event, so the reply cannot outrun the waiter.
    pub fn register(&self, request_id: &str) -> oneshot::Receiver<ApiReply> {
        let (tx, rx) = oneshot::channel();
        let waiter = Waiter { tx, text: String::new(), stream: None };
        self.waiters.lock().expect("api lock poisoned").insert(request_id.to_owned(), waiter);
        rx
    }

    /// Register a streaming request: deltas arrive in the returned buffer as the model writes.
    pub fn register_stream(&self, request_id: &str) -> (oneshot::Receiver<ApiReply>, Arc<StreamBuffer>) {
        let (tx, rx) = oneshot::channel();
        let buffer = Arc::new(StreamBuffer::default());
        let waiter = Waiter { tx, text: String::new(), stream: Some(buffer.clone()) };
        self.waiters.lock().expect("api lock poisoned").insert(request_id.to_owned(), waiter);
        (rx, buffer)
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
        let mut waiters = self.waiters.lock().expect("api lock poisoned");
        let last = message.chunk.0 + 1 >= message.chunk.1;
        if last {
            if let Some(mut waiter) = waiters.remove(request_id) {
                waiter.text.push_str(&message.text);
                // A client that hung up is fine: the reply is in the session history.
                let _ = waiter.tx.send(ApiReply { text: waiter.text, error: message.kind == OutboundKind::Error });
            }
        } else if let Some(waiter) = waiters.get_mut(request_id) {
            waiter.text.push_str(&message.text);
        }
        Ok(done)
    }

    fn stream_delta(&self, reply_to: &str, text: &str) {
        let waiters = self.waiters.lock().expect("api lock poisoned");
        if let Some(buffer) = waiters.get(reply_to).and_then(|w| w.stream.as_ref()) {
            buffer.pending.lock().expect("api lock poisoned").push_str(text);
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
