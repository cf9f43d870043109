//! A raw RFC 5322 message → an `InboundEvent`, or the reason it gets no turn.
//!
//! Order matters: loop checks and sender authentication come first, so an auto-reply, a bounce or
//! a spoofed sender never reaches the host's access check (and never costs a pairing reply).
//! The event id is the Message-ID, so the host's dedup also covers a mailbox whose UIDs changed.
//!
//! The chat is the sender's address, lowercase; the thread is the root Message-ID (the first of
//! References, else In-Reply-To, else the message's own). The text is the trimmed body (`text.rs`),
//! led by the subject when the mail starts a thread; attachments are kept under the size cap.
//! Sender authentication asks for `dmarc=pass` (`headers.rs`) unless `require_auth = false`.

use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, Sender};
use mail_parser::{HeaderValue, Message, MessageParser, MimeHeaders};

use crate::headers::{self, Skip, Verdict};
use crate::text;

/// The platform name.
pub const NAME: &str = "email";

/// What decides whether a message is answered.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    /// Our own address, lowercase.
    pub(crate) own: String,
    /// Our receiving server's authserv-id.
    pub(crate) authserv_id: String,
    /// Refuse mail without our server's `dmarc=pass`.
    pub(crate) require_auth: bool,
    /// Attachments larger than this are noted, not kept.
    pub(crate) max_file_bytes: u64,
}

/// An attachment of an inbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InPart {
    /// File name as sent (or a made-up one).
    pub(crate) name: String,
    /// MIME type.
    pub(crate) mime: String,
    /// Size in bytes.
    pub(crate) size: u64,
    /// The bytes, when within the cap.
    pub(crate) bytes: Option<Vec<u8>>,
}

/// What a reply to a message needs to thread correctly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ThreadInfo {
    /// The message's own subject.
    pub(crate) subject: String,
    /// The message's References followed by its own Message-ID: a reply's References.
    pub(crate) references: Vec<String>,
}

/// A message that passed the loop and authentication checks.
#[derive(Debug, Clone)]
pub(crate) struct Normalised {
    /// The event, without attachments yet (they are saved after `admit`).
    pub(crate) event: InboundEvent,
    /// Attachments to save after the access check.
    pub(crate) parts: Vec<InPart>,
    /// For threading the reply.
    pub(crate) thread: ThreadInfo,
}

/// Message ids of a header (`Message-ID`, `In-Reply-To`, `References`), without angle brackets.
fn ids(value: &HeaderValue<'_>) -> Vec<String> {
    let raw: Vec<String> = match value {
        HeaderValue::Text(text) => vec![text.to_string()],
        HeaderValue::TextList(list) => list.iter().map(ToString::to_string).collect(),
        _ => Vec::new(),
    };
    raw.iter().flat_map(|v| v.split_whitespace()).map(clean_id).filter(|id| !id.is_empty()).collect()
}

/// A message id without angle brackets or spaces.
pub(crate) fn clean_id(id: &str) -> String {
    id.trim().trim_start_matches('<').trim_end_matches('>').chars().filter(|c| !c.is_whitespace()).collect()
}

/// The raw header list, in message order.
fn raw_headers(message: &Message<'_>) -> Vec<(String, String)> {
    message.headers_raw().map(|(n, v)| (n.to_owned(), v.to_owned())).collect()
}

/// Parses `raw`; `fallback_ms` is the server's arrival time, used when the Date header is
/// missing or unreadable.
pub(crate) fn normalise(raw: &[u8], rules: &Rules, fallback_ms: i64) -> Result<Normalised, Skip> {
    let message = MessageParser::default().parse(raw).ok_or(Skip::Unparseable)?;
    let headers = raw_headers(&message);
    let from = message.from().and_then(|a| a.first());
    let address = from.and_then(|a| a.address()).map(str::to_ascii_lowercase).ok_or(Skip::NoSender)?;
    let Some((_, domain)) = address.split_once('@').filter(|(l, d)| !l.is_empty() && !d.is_empty()) else {
        return Err(Skip::NoSender);
    };
    let content_type = message
        .root_part()
        .content_type()
        .map(|ct| format!("{}/{}", ct.ctype(), ct.subtype().unwrap_or_default()).to_ascii_lowercase())
        .unwrap_or_default();
    if let Some(skip) = headers::loop_reason(&headers, &address, &rules.own, &content_type) {
        return Err(skip);
    }
    if rules.require_auth {
        match headers::dmarc_verdict(&headers, &rules.authserv_id, domain) {
            Verdict::Pass => {}
            Verdict::Fail(why) => return Err(Skip::Unauthenticated(why)),
            Verdict::Missing => return Err(Skip::Unauthenticated("no Authentication-Results from our server".into())),
        }
    }
    let message_id = match message.message_id().map(clean_id).filter(|id| !id.is_empty()) {
        Some(id) => id,
        None => synthetic_id(&headers),
    };
    let references = ids(message.references());
    let in_reply_to = ids(message.in_reply_to());
    let root = references.first().or(in_reply_to.first()).cloned().unwrap_or_else(|| message_id.clone());
    let subject = message.subject().map(headers::unfold).unwrap_or_default();
    let body = message.body_text(0).map(|b| b.into_owned()).unwrap_or_default();
    let trimmed = text::trim_reply(&body);
    let bare = text::bare_subject(&subject).to_owned();
    // The subject opens a thread; replies repeat it with `Re:`, and a command (`/approve`, the
    // answer to an approval prompt) must reach the router as the message's first word.
    let starts_thread = references.is_empty() && in_reply_to.is_empty();
    let text = if subject.is_empty() || !starts_thread || trimmed.starts_with('/') {
        trimmed
    } else {
        format!("Subject: {subject}\n\n{trimmed}")
    };
    let timestamp_ms = message.date().map(|d| d.to_timestamp().saturating_mul(1000)).unwrap_or(fallback_ms);
    let mut chat = ChatRef::new(NAME, address.clone(), ChatType::Dm);
    chat.thread_id = Some(root);
    let parts = message.attachments().enumerate().map(|(i, part)| attachment(i, part, rules.max_file_bytes)).collect();
    let mut thread_refs = references;
    if thread_refs.is_empty() {
        thread_refs.extend(in_reply_to);
    }
    thread_refs.push(message_id.clone());
    let sender =
        Sender { id: address, name: from.and_then(|a| a.name()).map(str::to_owned), is_bot: false, roles: Vec::new() };
    let inbound = InboundMessage {
        profile: None,
        message_id: message_id.clone(),
        chat,
        sender,
        text,
        attachments: Vec::new(),
        reply_to: None,
        addressed: true,
        timestamp_ms,
        history: Vec::new(),
        chat_title: (!bare.is_empty()).then_some(bare),
        client: None,
    };
    Ok(Normalised {
        event: InboundEvent::Message { event_id: message_id, message: inbound },
        parts,
        thread: ThreadInfo { subject, references: thread_refs },
    })
}

fn attachment(index: usize, part: &mail_parser::MessagePart<'_>, cap: u64) -> InPart {
    let mime = part
        .content_type()
        .map(|ct| format!("{}/{}", ct.ctype(), ct.subtype().unwrap_or("octet-stream")).to_ascii_lowercase())
        .unwrap_or_else(|| "application/octet-stream".to_owned());
    let name = part.attachment_name().map(str::to_owned).unwrap_or_else(|| format!("attachment-{}", index + 1));
    let contents = part.contents();
    let size = contents.len() as u64;
    InPart { name, mime, size, bytes: (size <= cap).then(|| contents.to_vec()) }
}

/// A stable id for a message that has no Message-ID: a hash of its identifying headers.
fn synthetic_id(headers: &[(String, String)]) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for (name, value) in headers {
        if ["date", "from", "subject", "to"].contains(&name.to_ascii_lowercase().as_str()) {
            name.to_ascii_lowercase().hash(&mut hasher);
            value.trim().hash(&mut hasher);
        }
    }
    format!("{:016x}@no-message-id.invalid", hasher.finish())
}

#[cfg(test)]
mod tests;
