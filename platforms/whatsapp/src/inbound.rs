//! Meta's webhook payload (`entry[].changes[].value`) → `InboundEvent`s and delivery statuses.
//!
//! Only messages to our own business number count (one app's webhook may serve several
//! numbers). Text, replies (`context.id`), media (image, audio and voice, video, document,
//! sticker: the media id is fetched later, after admission), locations and shared contacts
//! become messages; a reply button or list choice (`interactive`) becomes an `Action` carrying
//! the id the host gave the button; reactions, system notices and unsupported kinds never start
//! a turn. Statuses (sent, delivered, read, failed) are reported to the host, never as events.

use hermesd_platform::{
    AttachmentKind, ChatRef, ChatType, DeliveryStatus, InboundAction, InboundEvent, InboundMessage, ReplyContext,
    Sender,
};
use serde::Deserialize;
use serde_json::Value;

use crate::NAME;

/// A message's media, to fetch (`GET /{media-id}`) once its sender is admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MediaRequest {
    /// Graph's media id.
    pub(crate) id: String,
    pub(crate) kind: AttachmentKind,
    pub(crate) mime: Option<String>,
    /// The file name the attachment gets.
    pub(crate) name: String,
}

/// One normalised message or button press, with its media still to fetch.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Normalised {
    pub(crate) event: InboundEvent,
    pub(crate) media: Option<MediaRequest>,
    /// The user's message time, Unix ms (the 24-hour window starts here).
    pub(crate) at_ms: i64,
}

/// A status callback for a message the bot sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StatusReport {
    /// The sent message's wamid.
    pub(crate) id: String,
    pub(crate) status: DeliveryStatus,
    /// The Graph error code of a failure (131047: outside the 24-hour window).
    pub(crate) code: Option<i64>,
}

/// What one webhook body holds for our number, in payload order.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Parsed {
    pub(crate) events: Vec<Normalised>,
    pub(crate) statuses: Vec<StatusReport>,
    /// Messages skipped (reactions, unsupported kinds, other numbers), for debug logs.
    pub(crate) skipped: usize,
}

#[derive(Debug, Deserialize)]
struct Notification {
    #[serde(default)]
    entry: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    #[serde(default)]
    changes: Vec<Change>,
}

#[derive(Debug, Deserialize)]
struct Change {
    #[serde(default)]
    field: String,
    #[serde(default)]
    value: ChangeValue,
}

#[derive(Debug, Default, Deserialize)]
struct ChangeValue {
    #[serde(default)]
    metadata: Metadata,
    #[serde(default)]
    contacts: Vec<Contact>,
    /// Kept raw: one message of a kind we cannot read must not hide the others.
    #[serde(default)]
    messages: Vec<Value>,
    #[serde(default)]
    statuses: Vec<Value>,
}

#[derive(Debug, Default, Deserialize)]
struct Metadata {
    #[serde(default)]
    display_phone_number: String,
    #[serde(default)]
    phone_number_id: String,
}

#[derive(Debug, Deserialize)]
struct Contact {
    #[serde(default)]
    wa_id: String,
    #[serde(default)]
    profile: Option<Profile>,
}

#[derive(Debug, Deserialize)]
struct Profile {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WaMessage {
    from: String,
    id: String,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<Text>,
    #[serde(default)]
    context: Option<Context>,
    #[serde(default)]
    image: Option<Media>,
    #[serde(default)]
    audio: Option<Media>,
    #[serde(default)]
    video: Option<Media>,
    #[serde(default)]
    document: Option<Media>,
    #[serde(default)]
    sticker: Option<Media>,
    #[serde(default)]
    location: Option<Location>,
    #[serde(default)]
    interactive: Option<Interactive>,
    #[serde(default)]
    button: Option<QuickReply>,
    #[serde(default)]
    contacts: Vec<SharedContact>,
}

#[derive(Debug, Deserialize)]
struct Text {
    #[serde(default)]
    body: String,
}

#[derive(Debug, Deserialize)]
struct Context {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    from: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Media {
    id: String,
    #[serde(default)]
    mime_type: Option<String>,
    #[serde(default)]
    caption: Option<String>,
    #[serde(default)]
    filename: Option<String>,
    #[serde(default)]
    voice: bool,
}

#[derive(Debug, Deserialize)]
struct Location {
    #[serde(default)]
    latitude: f64,
    #[serde(default)]
    longitude: f64,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    address: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Interactive {
    #[serde(default)]
    button_reply: Option<Reply>,
    #[serde(default)]
    list_reply: Option<Reply>,
}

#[derive(Debug, Deserialize)]
struct Reply {
    id: String,
}

#[derive(Debug, Deserialize)]
struct QuickReply {
    #[serde(default)]
    text: String,
}

#[derive(Debug, Deserialize)]
struct SharedContact {
    #[serde(default)]
    name: Option<ContactName>,
    #[serde(default)]
    phones: Vec<ContactPhone>,
}

#[derive(Debug, Deserialize)]
struct ContactName {
    #[serde(default)]
    formatted_name: String,
}

#[derive(Debug, Deserialize)]
struct ContactPhone {
    #[serde(default)]
    phone: String,
}

#[derive(Debug, Deserialize)]
struct WaStatus {
    id: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    errors: Vec<StatusError>,
}

#[derive(Debug, Deserialize)]
struct StatusError {
    #[serde(default)]
    code: Option<i64>,
    #[serde(default)]
    title: String,
    #[serde(default)]
    message: String,
}

/// Parses a webhook body for business number `phone_number_id`; `None` when it is not JSON of
/// Meta's shape.
pub(crate) fn parse(body: &[u8], phone_number_id: &str, now_ms: i64) -> Option<Parsed> {
    let notification: Notification = serde_json::from_slice(body).ok()?;
    let mut parsed = Parsed::default();
    for change in notification.entry.iter().flat_map(|e| &e.changes) {
        let value = &change.value;
        if change.field != "messages" || value.metadata.phone_number_id != phone_number_id {
            parsed.skipped += value.messages.len();
            continue;
        }
        for raw in &value.messages {
            match serde_json::from_value::<WaMessage>(raw.clone()).ok().and_then(|m| normalise(&m, value, now_ms)) {
                Some(event) => parsed.events.push(event),
                None => parsed.skipped += 1,
            }
        }
        parsed.statuses.extend(value.statuses.iter().filter_map(|raw| status(raw.clone())));
    }
    Some(parsed)
}

fn status(raw: Value) -> Option<StatusReport> {
    let status: WaStatus = serde_json::from_value(raw).ok()?;
    let first = status.errors.first();
    let code = first.and_then(|e| e.code);
    let delivery = match status.status.as_str() {
        "sent" => DeliveryStatus::Sent,
        "delivered" => DeliveryStatus::Delivered,
        "read" => DeliveryStatus::Read,
        "failed" => {
            let why = first.map(|e| if e.message.is_empty() { e.title.clone() } else { e.message.clone() });
            let mut text = format!("whatsapp reported the message failed (code {})", code.unwrap_or(0));
            if let Some(why) = why.filter(|w| !w.is_empty()) {
                text.push_str(&format!(": {why}"));
            }
            if code == Some(crate::api::REENGAGEMENT_CODE) {
                text.push_str(" — outside the 24-hour customer service window");
            }
            DeliveryStatus::Failed(text)
        }
        _ => return None,
    };
    Some(StatusReport { id: status.id, status: delivery, code })
}

fn normalise(message: &WaMessage, value: &ChangeValue, now_ms: i64) -> Option<Normalised> {
    if message.from.is_empty() || message.id.is_empty() {
        return None;
    }
    let chat = ChatRef::new(NAME, message.from.clone(), ChatType::Dm);
    let name = value
        .contacts
        .iter()
        .find(|c| c.wa_id == message.from)
        .and_then(|c| c.profile.as_ref()?.name.clone())
        .filter(|n| !n.trim().is_empty());
    let sender = Sender { id: message.from.clone(), name, is_bot: false, roles: Vec::new() };
    let at_ms = message
        .timestamp
        .as_deref()
        .and_then(|t| t.trim().parse::<i64>().ok())
        .and_then(|secs| secs.checked_mul(1000))
        .filter(|&ms| ms > 0)
        .unwrap_or(now_ms);
    let replied = message.context.as_ref().and_then(|c| c.id.clone().map(|id| (id, c.from.clone())));
    if let Some(data) = button_data(message) {
        let action = InboundAction {
            chat,
            sender,
            // The message carrying the button (Meta puts it in `context`).
            message_id: replied.map(|(id, _)| id).unwrap_or_else(|| message.id.clone()),
            data,
        };
        return Some(Normalised {
            event: InboundEvent::Action { event_id: message.id.clone(), action },
            media: None,
            at_ms,
        });
    }
    let (text, media) = content(message)?;
    let reply_to = replied.map(|(id, from)| ReplyContext {
        message_id: id,
        text: None,
        from_bot: from.is_some_and(|f| !f.is_empty() && f == value.metadata.display_phone_number),
        author: None,
    });
    let inbound = InboundMessage {
        profile: None,
        message_id: message.id.clone(),
        chat,
        sender,
        text,
        attachments: Vec::new(),
        reply_to,
        addressed: true,
        timestamp_ms: at_ms,
        history: Vec::new(),
        chat_title: None,
        client: None,
    };
    Some(Normalised { event: InboundEvent::Message { event_id: message.id.clone(), message: inbound }, media, at_ms })
}

/// The host's data of a pressed reply button or chosen list row.
fn button_data(message: &WaMessage) -> Option<String> {
    if message.kind != "interactive" {
        return None;
    }
    let interactive = message.interactive.as_ref()?;
    let reply = interactive.button_reply.as_ref().or(interactive.list_reply.as_ref())?;
    (!reply.id.is_empty()).then(|| reply.id.clone())
}

/// The text and media of a message of a kind that starts a turn; `None` for the others.
fn content(message: &WaMessage) -> Option<(String, Option<MediaRequest>)> {
    let media = |media: &Option<Media>, kind: AttachmentKind, default: &str| {
        let media = media.as_ref()?;
        let name = media.filename.clone().filter(|n| !n.trim().is_empty()).unwrap_or_else(|| {
            let base = if media.voice { "voice" } else { default };
            format!("{base}.{}", extension(media.mime_type.as_deref()))
        });
        let request = MediaRequest { id: media.id.clone(), kind, mime: media.mime_type.clone(), name };
        Some((media.caption.clone().unwrap_or_default(), Some(request)))
    };
    match message.kind.as_str() {
        "text" => message.text.as_ref().map(|t| (t.body.clone(), None)),
        "image" => media(&message.image, AttachmentKind::Image, "image"),
        "sticker" => media(&message.sticker, AttachmentKind::Image, "sticker"),
        "audio" => media(&message.audio, AttachmentKind::Audio, "audio"),
        "video" => media(&message.video, AttachmentKind::Video, "video"),
        "document" => media(&message.document, AttachmentKind::Document, "document"),
        "location" => message.location.as_ref().map(|l| (location_text(l), None)),
        "contacts" => Some((contacts_text(&message.contacts), None)),
        // A quick-reply button of a template the bot sent: its text is the user's answer.
        "button" => message.button.as_ref().map(|b| (b.text.clone(), None)),
        // reaction, system, unsupported, order, request_welcome, ...: never a turn.
        _ => None,
    }
    .filter(|(text, media)| !text.trim().is_empty() || media.is_some())
}

fn location_text(location: &Location) -> String {
    let mut text = format!("[location: {:.6}, {:.6}", location.latitude, location.longitude);
    for part in [&location.name, &location.address].into_iter().flatten().filter(|p| !p.trim().is_empty()) {
        text.push_str(&format!(" — {part}"));
    }
    text.push(']');
    text
}

fn contacts_text(contacts: &[SharedContact]) -> String {
    let shown: Vec<String> = contacts
        .iter()
        .map(|c| {
            let name = c.name.as_ref().map(|n| n.formatted_name.as_str()).unwrap_or("unnamed");
            let phones: Vec<&str> = c.phones.iter().map(|p| p.phone.as_str()).filter(|p| !p.is_empty()).collect();
            if phones.is_empty() { name.to_owned() } else { format!("{name} ({})", phones.join(", ")) }
        })
        .collect();
    if shown.is_empty() { String::new() } else { format!("[contact shared: {}]", shown.join("; ")) }
}

/// A file extension for a MIME type WhatsApp sends.
fn extension(mime: Option<&str>) -> &'static str {
    let mime = mime.unwrap_or_default();
    let essence = mime.split(';').next().unwrap_or_default().trim();
    match essence {
        "image/jpeg" => "jpg",
        "image/png" => "png",
        "image/webp" => "webp",
        "audio/ogg" => "ogg",
        "audio/mpeg" => "mp3",
        "audio/mp4" | "audio/aac" => "m4a",
        "audio/amr" => "amr",
        "video/mp4" => "mp4",
        "video/3gpp" => "3gp",
        "application/pdf" => "pdf",
        "text/plain" => "txt",
        _ => "bin",
    }
}

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;
