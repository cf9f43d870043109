//! The API platform: requests to `/v1/chat/completions` become inbound events like any chat
//! message; the reply comes back through the outbox to `send`, which completes the waiting
//! request. Queue acks and progress are not part of an HTTP answer and are dropped here.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use hermesd_platform::{
    Capabilities, ChatRef, LengthUnit, MarkdownDialect, MessageRef, OutboundKind, OutboundMessage, Platform,
    PlatformContext, PlatformError,
};
use tokio::sync::oneshot;
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

/// Requests waiting for their reply, by request id; chunks are joined before completing.
#[derive(Default)]
pub struct ApiPlatform {
    waiters: Mutex<HashMap<String, (oneshot::Sender<ApiReply>, String)>>,
}

impl ApiPlatform {
    /// Register a request before accepting its event, so the reply cannot outrun the waiter.
    pub fn register(&self, request_id: &str) -> oneshot::Receiver<ApiReply> {
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().expect("api lock poisoned").insert(request_id.to_owned(), (tx, String::new()));
        rx
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
            if let Some((tx, mut text)) = waiters.remove(request_id) {
                text.push_str(&message.text);
                // A client that hung up is fine: the reply is in the session history.
                let _ = tx.send(ApiReply { text, error: message.kind == OutboundKind::Error });
            }
        } else if let Some((_, text)) = waiters.get_mut(request_id) {
            text.push_str(&message.text);
        }
        Ok(done)
    }

    async fn edit(&self, _message: &MessageRef, _text: &str) -> Result<(), PlatformError> {
        Ok(())
    }

    async fn typing(&self, _chat: &ChatRef) -> Result<(), PlatformError> {
        Ok(())
    }
}
