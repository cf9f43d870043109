//! OutboundMessage → JSON-RPC calls: `send` (a quote for replies, attachments as data URIs),
//! `sendTyping`, `sendReaction`.
//!
//! Signal has no buttons: approvals arrive as the host's text ("Reply /approve or /deny"), and
//! the buttons of a message are dropped here. The id of a sent message is its `timestamp`.
//!
//! A send goes to `recipient` or `groupId`; the first piece of a reply carries `quoteTimestamp` and
//! `quoteAuthor`. Files go as `data:<mime>;filename=<name>;base64,…` URIs. Reactions are
//! `SignalPlatform::react`. There are no edits (Signal allows few).

use base64::Engine;
use hermesd_platform::{ChatRef, FileLimits, MessageRef, OutboundFile, OutboundMessage, PlatformError};
use serde_json::{Value, json};

use crate::rpc::Rpc;

/// Signal's attachment limit is 100 MiB; the data URI and JSON around it must fit too.
pub(crate) const LIMITS: FileLimits =
    FileLimits { max_document_bytes: 95 * 1024 * 1024, max_photo_bytes: 95 * 1024 * 1024 };

/// `recipient` or `groupId` for `chat`. The id alone decides (a UUID or number never starts with
/// `group:`), so a chat named only by id goes right too. A delivery target or home channel
/// `signal:group:<id>` reads as chat `group`, thread `<id>` in the host's target syntax
/// (`<platform>:<chat>[:<thread>]`); Signal has no threads, so that is the group.
pub(crate) fn target(chat: &ChatRef) -> Value {
    match (chat.chat_id.strip_prefix("group:"), chat.chat_id.as_str(), chat.thread_id.as_deref()) {
        (Some(group), ..) | (None, "group", Some(group)) => json!({"groupId": group}),
        _ => json!({"recipient": [chat.chat_id]}),
    }
}

/// The quoted author and timestamp of a message id `<author>:<timestamp>`.
pub(crate) fn quote_of(message_id: &str) -> Option<(&str, i64)> {
    let (author, timestamp) = message_id.rsplit_once(':')?;
    let timestamp = timestamp.parse().ok()?;
    (!author.is_empty()).then_some((author, timestamp))
}

fn params(message: &OutboundMessage) -> Value {
    let mut params = target(&message.chat);
    params["message"] = json!(message.text);
    // Only the first piece of a reply quotes the message it answers.
    if message.chunk.0 == 0
        && let Some((author, timestamp)) = message.reply_to.as_deref().and_then(quote_of)
    {
        params["quoteTimestamp"] = json!(timestamp);
        params["quoteAuthor"] = json!(author);
    }
    params
}

fn sent(chat: &ChatRef, result: &Value) -> Result<MessageRef, PlatformError> {
    let timestamp = result
        .get("timestamp")
        .and_then(Value::as_i64)
        .ok_or_else(|| PlatformError::Transient("send: no timestamp in signal-cli's answer".into()))?;
    Ok(MessageRef { chat: chat.clone(), message_id: timestamp.to_string() })
}

/// Sends one text message.
pub(crate) async fn send(rpc: &Rpc, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
    let result = rpc.call("send", params(message)).await.map_err(crate::rpc::RpcError::into_platform)?;
    sent(&message.chat, &result)
}

/// Sends a file (as a data URI) with the message text as its caption.
pub(crate) async fn send_file(
    rpc: &Rpc,
    message: &OutboundMessage,
    file: &OutboundFile,
    bytes: &[u8],
    timeout: std::time::Duration,
) -> Result<MessageRef, PlatformError> {
    let mut params = params(message);
    params["attachments"] = json!([data_uri(&file.mime, &file.name, bytes)]);
    let result = rpc.call_within("send", params, timeout).await.map_err(crate::rpc::RpcError::into_platform)?;
    sent(&message.chat, &result)
}

/// `data:<mime>;filename=<name>;base64,<data>`, the name percent-encoded (signal-cli decodes it).
pub(crate) fn data_uri(mime: &str, name: &str, bytes: &[u8]) -> String {
    let mut encoded_name = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'-' | b'_') {
            encoded_name.push(char::from(byte));
        } else {
            encoded_name.push_str(&format!("%{byte:02X}"));
        }
    }
    let mime = if mime.contains([';', ',']) || mime.trim().is_empty() { "application/octet-stream" } else { mime };
    format!("data:{mime};filename={encoded_name};base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Shows the typing indicator in `chat`.
pub(crate) async fn typing(rpc: &Rpc, chat: &ChatRef) -> Result<(), PlatformError> {
    rpc.call("sendTyping", target(chat)).await.map(|_| ()).map_err(crate::rpc::RpcError::into_platform)
}

/// Reacts with `emoji` to message `message_id` (`<author>:<timestamp>`) in `chat`.
pub(crate) async fn react(rpc: &Rpc, chat: &ChatRef, message_id: &str, emoji: &str) -> Result<(), PlatformError> {
    let (author, timestamp) = quote_of(message_id)
        .ok_or_else(|| PlatformError::Permanent(format!("react: `{message_id}` is not <author>:<timestamp>")))?;
    let mut params = target(chat);
    params["emoji"] = json!(emoji);
    params["targetAuthor"] = json!(author);
    params["targetTimestamp"] = json!(timestamp);
    rpc.call("sendReaction", params).await.map(|_| ()).map_err(crate::rpc::RpcError::into_platform)
}

#[cfg(test)]
mod tests {
    use hermesd_platform::{ChatType, OutboundKind};

    use super::*;

    fn message(chat: ChatRef, reply_to: Option<&str>, chunk: (u32, u32)) -> OutboundMessage {
        OutboundMessage {
            chat,
            text: "hi".into(),
            reply_to: reply_to.map(str::to_owned),
            kind: OutboundKind::Reply,
            buttons: Vec::new(),
            chunk,
            file: None,
        }
    }

    #[test]
    fn parameters_name_the_chat_and_quote_the_first_piece() {
        let dm = ChatRef::new("signal", "a11ce000-0000-4000-8000-00000000000a", ChatType::Dm);
        let group = ChatRef::new("signal", "group:R3JvdXA=", ChatType::Group);
        let first = params(&message(dm.clone(), Some("a11ce000-0000-4000-8000-00000000000a:1700"), (0, 2)));
        assert_eq!(first["recipient"], json!(["a11ce000-0000-4000-8000-00000000000a"]));
        assert_eq!(
            (first["quoteTimestamp"].as_i64(), first["quoteAuthor"].as_str()),
            (Some(1700), Some("a11ce000-0000-4000-8000-00000000000a"))
        );
        let second = params(&message(dm, Some("x:1700"), (1, 2)));
        assert!(second.get("quoteTimestamp").is_none());
        let in_group = params(&message(group, Some("+15557654321:5"), (0, 1)));
        let named_only = ChatRef::new("signal", "group:R3JvdXA=", ChatType::Dm);
        assert_eq!(target(&named_only), json!({"groupId": "R3JvdXA="}));
        let as_target =
            ChatRef { thread_id: Some("R3JvdXA=".into()), ..ChatRef::new("signal", "group", ChatType::Thread) };
        assert_eq!(target(&as_target), json!({"groupId": "R3JvdXA="}));
        assert_eq!(in_group["groupId"], "R3JvdXA=");
        assert!(in_group.get("recipient").is_none());
        assert_eq!(in_group["quoteAuthor"], "+15557654321");
        assert_eq!(quote_of("nonsense"), None);
        assert_eq!(quote_of(":5"), None);
    }

    #[test]
    fn files_go_as_data_uris_with_a_safe_name() {
        let uri = data_uri("text/plain", "a b;c.txt", b"hi");
        assert_eq!(uri, "data:text/plain;filename=a%20b%3Bc.txt;base64,aGk=");
        assert!(data_uri("x;y", "f", b"").starts_with("data:application/octet-stream;"));
    }
}
