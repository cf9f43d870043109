//! A platform for tests: events are injected through the host's real ingress, every outbound
//! call is recorded, and sends can be scripted to fail (e.g. 429 with retry_after).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use hermesd_platform::{
    Accepted, Capabilities, ChatRef, ChatType, InboundAction, InboundEvent, InboundMessage, Ingress, LengthUnit,
    MarkdownDialect, MessageRef, OutboundMessage, Platform, PlatformContext, PlatformError, Sender,
};
use tokio_util::sync::CancellationToken;

/// A recorded send: when, and what.
pub type Sent = (Instant, OutboundMessage);

/// The recording platform, named `rec`.
#[derive(Default)]
pub struct RecordingPlatform {
    ingress: Mutex<Option<Arc<dyn Ingress>>>,
    sent: Mutex<Vec<Sent>>,
    failures: Mutex<VecDeque<PlatformError>>,
    max_len: usize,
    typing: Mutex<Vec<Instant>>,
    edits: Mutex<Vec<(Instant, String, String)>>,
}

impl RecordingPlatform {
    /// A platform with messages up to `max_len` characters.
    pub fn new(max_len: usize) -> Arc<Self> {
        Arc::new(Self { max_len, ..Default::default() })
    }

    /// Fail the next send with `error`.
    pub fn fail_next_send(&self, error: PlatformError) {
        self.failures.lock().unwrap().push_back(error);
    }

    /// Whether a daemon runs this platform now.
    pub fn started(&self) -> bool {
        self.ingress.lock().unwrap().is_some()
    }

    /// Everything sent so far.
    pub fn sent(&self) -> Vec<Sent> {
        self.sent.lock().unwrap().clone()
    }

    /// When typing was shown.
    pub fn typing(&self) -> Vec<Instant> {
        self.typing.lock().unwrap().clone()
    }

    /// Edits so far: when, message id, new text.
    pub fn edits(&self) -> Vec<(Instant, String, String)> {
        self.edits.lock().unwrap().clone()
    }

    /// Inject a button press on message `message_id` with `data`.
    pub async fn press(&self, event_id: &str, user: &str, message_id: &str, data: &str) -> Accepted {
        let ingress = self.ingress.lock().unwrap().clone().expect("platform started");
        let event = InboundEvent::Action {
            event_id: event_id.into(),
            action: InboundAction {
                chat: ChatRef::new("rec", user, ChatType::Dm),
                sender: Sender { id: user.into(), name: None, is_bot: false, roles: Vec::new() },
                message_id: message_id.into(),
                data: data.into(),
            },
        };
        ingress.accept(event).await.expect("accepted")
    }

    /// Texts sent so far.
    pub fn texts(&self) -> Vec<String> {
        self.sent().into_iter().map(|(_, m)| m.text).collect()
    }

    /// Inject a message from `user` in the group `chat_id` with `event_id`.
    pub async fn inject_group(&self, event_id: &str, chat_id: &str, user: &str, text: &str) -> Accepted {
        let ingress = self.ingress.lock().unwrap().clone().expect("platform started");
        let event = InboundEvent::Message {
            event_id: event_id.into(),
            message: InboundMessage {
                profile: None,
                message_id: event_id.into(),
                chat: ChatRef::new("rec", chat_id, ChatType::Group),
                sender: Sender { id: user.into(), name: None, is_bot: false, roles: Vec::new() },
                text: text.into(),
                attachments: vec![],
                reply_to: None,
                addressed: true,
                timestamp_ms: 0,
                history: vec![],
                chat_title: None,
                client: None,
            },
        };
        ingress.accept(event).await.expect("accepted")
    }

    /// Inject a DM from `user` with `event_id`, as an adapter would after normalising.
    pub async fn inject(&self, event_id: &str, user: &str, text: &str) -> Accepted {
        let ingress = self.ingress.lock().unwrap().clone().expect("platform started");
        let event = InboundEvent::Message {
            event_id: event_id.into(),
            message: InboundMessage {
                profile: None,
                message_id: event_id.into(),
                chat: ChatRef::new("rec", user, ChatType::Dm),
                sender: Sender { id: user.into(), name: None, is_bot: false, roles: Vec::new() },
                text: text.into(),
                attachments: vec![],
                reply_to: None,
                addressed: true,
                timestamp_ms: 0,
                history: vec![],
                chat_title: None,
                client: None,
            },
        };
        ingress.accept(event).await.expect("accepted")
    }
}

#[async_trait]
impl Platform for RecordingPlatform {
    fn name(&self) -> &str {
        "rec"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_len: self.max_len,
            length_unit: LengthUnit::Chars,
            edits: true,
            threads: false,
            buttons: false,
            typing: true,
            interactive: true,
            request_response: false,
            markdown: MarkdownDialect::Markdown,
            per_chat_rate: 1000.0,
            per_chat_burst: 1000,
            group_rate: 1000.0,
            global_rate: 10000.0,
        }
    }

    async fn run(&self, ctx: PlatformContext, cancel: CancellationToken) -> Result<(), PlatformError> {
        *self.ingress.lock().unwrap() = Some(ctx.ingress);
        cancel.cancelled().await;
        *self.ingress.lock().unwrap() = None;
        Ok(())
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
        if let Some(error) = self.failures.lock().unwrap().pop_front() {
            return Err(error);
        }
        let mut sent = self.sent.lock().unwrap();
        sent.push((Instant::now(), message.clone()));
        Ok(MessageRef { chat: message.chat.clone(), message_id: format!("m{}", sent.len()) })
    }

    async fn edit(&self, message: &MessageRef, text: &str) -> Result<(), PlatformError> {
        self.edits.lock().unwrap().push((Instant::now(), message.message_id.clone(), text.to_owned()));
        Ok(())
    }

    async fn typing(&self, _chat: &ChatRef) -> Result<(), PlatformError> {
        self.typing.lock().unwrap().push(Instant::now());
        Ok(())
    }
}
