//! signal-cli's `receive` payload (`{"envelope": {...}, "account": ...}`) → `InboundEvent`.
//!
//! Only data messages start turns: receipts, typing, sync, call, story and edit envelopes,
//! reactions, remote deletes, group updates without text and (with `require_mention`) group
//! messages that do not address the bot are dropped here. A user is the
//! sender's ACI UUID (`sourceUuid`; numbers can be hidden or change); their number rides along
//! in `Sender.roles` so an allowlist may name either. The event id is Signal's message identity,
//! `<sourceUuid>:<timestamp>`, and doubles as the message id a reply quotes.
//!
//! A DM's chat is the sender's UUID, a group's `group:<groupId>`. In a group (with
//! `require_mention`) a message addresses the bot by a `mentions[]` entry naming the account, a
//! quote of the bot, a leading `/`, or one of `mention_patterns`. Signal's U+FFFC mention marks are
//! spelled out as `@<number or uuid>`, and a quote becomes `reply_to`.

use hermesd_platform::{AttachmentKind, ChatRef, ChatType, InboundEvent, InboundMessage, ReplyContext, Sender};
use serde_json::Value;

/// Who the bot is and when a group message addresses it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rules {
    /// The account's number.
    pub(crate) account: String,
    /// The account's ACI UUID, when known.
    pub(crate) account_uuid: Option<String>,
    pub(crate) require_mention: bool,
    /// Lowercase words that address the bot in a group.
    pub(crate) patterns: Vec<String>,
}

impl Rules {
    fn is_self(&self, number: Option<&str>, uuid: Option<&str>) -> bool {
        number.is_some_and(|n| n == self.account)
            || uuid.is_some_and(|u| self.account_uuid.as_deref().is_some_and(|me| me.eq_ignore_ascii_case(u)))
    }
}

/// An attachment to fetch with `getAttachment` once the sender is admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileRequest {
    /// signal-cli's attachment id.
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) mime: Option<String>,
    /// The size the envelope announced.
    pub(crate) size: Option<u64>,
    pub(crate) kind: AttachmentKind,
}

/// A normalised message and the files still to fetch for it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Normalised {
    pub(crate) event: InboundEvent,
    pub(crate) files: Vec<FileRequest>,
    /// The group id for `getAttachment` (`None` in a DM).
    pub(crate) group_id: Option<String>,
    /// The sender as signal-cli names a recipient (UUID, else number).
    pub(crate) author: String,
}

/// The chat id of a group.
pub(crate) fn group_chat_id(group_id: &str) -> String {
    format!("group:{group_id}")
}

fn text_of<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Normalises one `receive` payload; `None` when it starts no turn.
pub(crate) fn normalise(payload: &Value, rules: &Rules) -> Option<Normalised> {
    let envelope = payload.get("envelope")?;
    let data = envelope.get("dataMessage").filter(|d| d.is_object())?;
    if data.get("reaction").is_some_and(|r| !r.is_null())
        || data.get("remoteDelete").is_some_and(|r| !r.is_null())
        || data.get("isExpirationUpdate").and_then(Value::as_bool) == Some(true)
    {
        return None;
    }
    let number = text_of(envelope, "sourceNumber");
    let uuid = text_of(envelope, "sourceUuid");
    if rules.is_self(number, uuid) {
        return None;
    }
    let author = uuid.or(number).or_else(|| text_of(envelope, "source"))?.to_owned();
    let timestamp = envelope.get("timestamp").and_then(Value::as_i64).or_else(|| data.get("timestamp")?.as_i64())?;
    let group_id = data.pointer("/groupInfo/groupId").and_then(Value::as_str).filter(|g| !g.is_empty());
    let chat = match group_id {
        Some(group) => ChatRef::new(crate::NAME, group_chat_id(group), ChatType::Group),
        None => ChatRef::new(crate::NAME, author.clone(), ChatType::Dm),
    };
    let mentions: Vec<&Value> = data.get("mentions").and_then(Value::as_array).into_iter().flatten().collect();
    let text = with_mentions(text_of(data, "message").unwrap_or_default(), &mentions, rules);
    let files = files(data);
    if text.trim().is_empty() && files.is_empty() {
        // Group updates, stickers, polls, payments: nothing to answer.
        return None;
    }
    let reply_to = data.get("quote").filter(|q| q.is_object()).and_then(|quote| {
        let quoted_number = text_of(quote, "authorNumber");
        let quoted_uuid = text_of(quote, "authorUuid");
        let quoted_author = quoted_uuid.or(quoted_number).or_else(|| text_of(quote, "author"))?;
        Some(ReplyContext {
            message_id: format!("{quoted_author}:{}", quote.get("id").and_then(Value::as_i64)?),
            text: text_of(quote, "text").map(str::to_owned),
            from_bot: rules.is_self(quoted_number, quoted_uuid),
            author: quoted_number.or(quoted_uuid).map(str::to_owned),
        })
    });
    let mentioned = mentions.iter().any(|m| rules.is_self(text_of(m, "number"), text_of(m, "uuid")));
    let lowered = text.to_lowercase();
    let addressed = group_id.is_none()
        || !rules.require_mention
        || mentioned
        || reply_to.as_ref().is_some_and(|r| r.from_bot)
        || text.trim_start().starts_with('/')
        || rules.patterns.iter().any(|p| lowered.contains(p.as_str()));
    if !addressed {
        // Chatter in a group that does not address the bot starts nothing.
        return None;
    }
    let message_id = format!("{author}:{timestamp}");
    let message = InboundMessage {
        profile: None,
        message_id: message_id.clone(),
        chat,
        sender: Sender {
            id: author.clone(),
            name: text_of(envelope, "sourceName").map(str::to_owned),
            is_bot: false,
            roles: number.filter(|n| *n != author).map(str::to_owned).into_iter().collect(),
        },
        text,
        attachments: Vec::new(),
        reply_to,
        addressed,
        timestamp_ms: timestamp,
        history: Vec::new(),
        chat_title: data.pointer("/groupInfo/groupName").and_then(Value::as_str).map(str::to_owned),
        client: None,
    };
    Some(Normalised {
        event: InboundEvent::Message { event_id: message_id, message },
        files,
        group_id: group_id.map(str::to_owned),
        author,
    })
}

/// Signal puts U+FFFC where a mention stands; each becomes `@<number or uuid>` in order.
fn with_mentions(text: &str, mentions: &[&Value], rules: &Rules) -> String {
    let mut ordered: Vec<&Value> = mentions.to_vec();
    ordered.sort_by_key(|m| m.get("start").and_then(Value::as_i64).unwrap_or(0));
    let mut names = ordered.into_iter().map(|m| {
        let (number, uuid) = (text_of(m, "number"), text_of(m, "uuid"));
        if rules.is_self(number, uuid) {
            return format!("@{}", rules.account);
        }
        format!("@{}", number.or(uuid).or_else(|| text_of(m, "name")).unwrap_or("someone"))
    });
    text.chars()
        .map(|c| if c == '\u{FFFC}' { names.next().unwrap_or_else(|| "@someone".to_owned()) } else { c.to_string() })
        .collect()
}

fn files(data: &Value) -> Vec<FileRequest> {
    let list = data.get("attachments").and_then(Value::as_array).into_iter().flatten();
    list.filter_map(|a| {
        let id = text_of(a, "id")?.to_owned();
        let mime = text_of(a, "contentType").map(str::to_owned);
        let kind = match mime.as_deref().and_then(|m| m.split('/').next()) {
            Some("image") => AttachmentKind::Image,
            Some("audio") => AttachmentKind::Audio,
            Some("video") => AttachmentKind::Video,
            _ => AttachmentKind::Document,
        };
        Some(FileRequest {
            name: text_of(a, "filename").map_or_else(|| id.clone(), str::to_owned),
            size: a.get("size").and_then(Value::as_u64),
            id,
            mime,
            kind,
        })
    })
    .collect()
}

#[cfg(test)]
#[path = "inbound_tests.rs"]
mod tests;
