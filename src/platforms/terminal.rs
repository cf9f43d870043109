//! The terminal platform behind `hermesd chat`: lines from stdin become messages in one local
//! DM; replies are printed to stdout. It goes through the same ingress, store and outbox as
//! every other platform.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use hermesd_platform::{
    Accepted, Capabilities, ChatRef, ChatType, InboundEvent, InboundMessage, LengthUnit, MarkdownDialect, MessageRef,
    OutboundKind, OutboundMessage, Platform, PlatformContext, PlatformError, Sender,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::clock::now_ms;

/// The platform name.
pub const NAME: &str = crate::vocab::origin::Origin::TERMINAL;

/// Reads stdin, prints replies.
pub struct TerminalPlatform {
    user: String,
    awaiting: AtomicUsize,
    replied: Notify,
    /// Fired when stdin ends and every message has its reply.
    pub finished: CancellationToken,
}

impl TerminalPlatform {
    /// A terminal chat for the local `user`.
    pub fn new(user: &str) -> Arc<Self> {
        Arc::new(Self {
            user: user.to_owned(),
            awaiting: AtomicUsize::new(0),
            replied: Notify::new(),
            finished: CancellationToken::new(),
        })
    }

    /// Wait until every message sent has its reply; false when cancelled first.
    async fn wait_for_replies(&self, cancel: &CancellationToken) -> bool {
        loop {
            let replied = self.replied.notified();
            if self.awaiting.load(Ordering::SeqCst) == 0 {
                return true;
            }
            tokio::select! {
                _ = cancel.cancelled() => return false,
                _ = replied => {}
            }
        }
    }

    fn chat(&self) -> ChatRef {
        ChatRef::new(NAME, self.user.clone(), ChatType::Dm)
    }
}

#[async_trait]
impl Platform for TerminalPlatform {
    fn name(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_len: 1024 * 1024,
            length_unit: LengthUnit::Chars,
            edits: false,
            threads: false,
            buttons: false,
            typing: false,
            interactive: true,
            request_response: false,
            markdown: MarkdownDialect::Plain,
            per_chat_rate: 1000.0,
            per_chat_burst: 1000,
            group_rate: 1000.0,
            global_rate: 10000.0,
        }
    }

    async fn run(&self, ctx: PlatformContext, cancel: CancellationToken) -> Result<(), PlatformError> {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        loop {
            let line = tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                line = lines.next_line() => line.map_err(|e| PlatformError::Permanent(format!("read stdin: {e}")))?,
            };
            let Some(line) = line else { break };
            let text = line.trim();
            if text.is_empty() {
                continue;
            }
            let id = uuid::Uuid::now_v7().to_string();
            let event = InboundEvent::Message {
                event_id: id.clone(),
                message: InboundMessage {
                    profile: None,
                    message_id: id,
                    chat: self.chat(),
                    sender: Sender { id: self.user.clone(), name: None, is_bot: false, roles: Vec::new() },
                    text: text.to_owned(),
                    attachments: Vec::new(),
                    reply_to: None,
                    addressed: true,
                    timestamp_ms: now_ms(),
                    history: Vec::new(),
                    chat_title: None,
                    client: None,
                },
            };
            self.awaiting.fetch_add(1, Ordering::SeqCst);
            match ctx.ingress.accept(event).await {
                Ok(Accepted::New) => {}
                Ok(Accepted::Duplicate) => {
                    self.awaiting.fetch_sub(1, Ordering::SeqCst);
                }
                Err(e) => {
                    self.awaiting.fetch_sub(1, Ordering::SeqCst);
                    eprintln!("hermesd: {e}");
                }
            }
            // A conversation, not a batch: the next line is read once this one is answered.
            if !self.wait_for_replies(&cancel).await {
                return Ok(());
            }
        }
        if self.wait_for_replies(&cancel).await {
            self.finished.cancel();
        }
        Ok(())
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
        let mut out = tokio::io::stdout();
        let prefix = if message.kind == OutboundKind::Error { "! " } else { "" };
        let text = format!("{prefix}{}\n", message.text);
        out.write_all(text.as_bytes()).await.map_err(|e| PlatformError::Permanent(format!("write stdout: {e}")))?;
        out.flush().await.map_err(|e| PlatformError::Permanent(format!("write stdout: {e}")))?;
        let last = message.chunk.0 + 1 >= message.chunk.1;
        if last && matches!(message.kind, OutboundKind::Reply | OutboundKind::Error) {
            let _ = self.awaiting.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            self.replied.notify_waiters();
        }
        Ok(MessageRef { chat: message.chat.clone(), message_id: uuid::Uuid::now_v7().to_string() })
    }

    async fn edit(&self, _message: &MessageRef, _text: &str) -> Result<(), PlatformError> {
        Ok(())
    }

    async fn typing(&self, _chat: &ChatRef) -> Result<(), PlatformError> {
        Ok(())
    }
}
