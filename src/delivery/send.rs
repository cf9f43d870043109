//! One message to a delivery target, outside any turn (`hermesd send`, `send_message`): stored,
//! delivered through the outbox and the chat's pacer, and reported delivered only once the
//! platform returned a message id.

use std::time::Duration;

use hermesd_platform::{ChatRef, OutboundKind};

use super::{Target, Targets};
use crate::clock::now_ms;
use crate::outbox::Outbox;
use crate::store::Store;

/// How often the store is asked whether the platform answered.
const POLL: Duration = Duration::from_millis(25);

/// How a send ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// Every chunk delivered; the platform's message ids.
    Delivered(Vec<String>),
    /// Still queued when the wait ended (the outbox keeps trying, across restarts too).
    Queued,
}

/// Send `text` to `target` (`origin` = `origin`), waiting up to `wait` for the platform's receipt.
pub async fn send(
    store: &dyn Store,
    outbox: &Outbox,
    targets: &Targets,
    target: &str,
    origin: Option<&ChatRef>,
    text: &str,
    wait: Duration,
) -> Result<(ChatRef, SendOutcome), String> {
    if text.trim().is_empty() {
        return Err("nothing to send: the text is empty".into());
    }
    let target = Target::parse(target).map_err(|e| e.to_string())?;
    let chat = targets.resolve(&target, origin).await.map_err(|e| e.to_string())?;
    let messages = outbox.compose(&chat, text, OutboundKind::Notice, None);
    let outcome = store_and_wait(store, outbox, &chat, &messages, wait).await.map_err(|e| match e {
        WaitError::Failed(error) => format!("delivery to {target} failed: {error}"),
        WaitError::Store(error) => error,
    })?;
    Ok((chat, outcome))
}

/// Why `store_and_wait` did not end with a receipt or a queued message.
#[derive(Debug)]
pub enum WaitError {
    /// The store failed.
    Store(String),
    /// The platform refused the message for good.
    Failed(String),
}

/// Store `messages` for `chat` under a fresh turn id, deliver them through the outbox, and wait up
/// to `wait` for the platform's receipts.
pub async fn store_and_wait(
    store: &dyn Store,
    outbox: &Outbox,
    chat: &ChatRef,
    messages: &[hermesd_platform::OutboundMessage],
    wait: Duration,
) -> Result<SendOutcome, WaitError> {
    let turn_id = format!("send:{}", uuid::Uuid::now_v7());
    store
        .enqueue_outbound(&turn_id, messages, now_ms())
        .await
        .map_err(|e| WaitError::Store(format!("store message: {e}")))?;
    outbox.deliver(chat, &turn_id);
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let receipts =
            store.turn_receipts(&turn_id).await.map_err(|e| WaitError::Store(format!("read receipts: {e}")))?;
        if let Some(error) = receipts.failed.first() {
            return Err(WaitError::Failed(error.clone()));
        }
        if receipts.pending == 0 {
            return Ok(SendOutcome::Delivered(receipts.delivered));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(SendOutcome::Queued);
        }
        tokio::time::sleep(POLL).await;
    }
}
