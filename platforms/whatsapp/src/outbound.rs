//! `OutboundMessage` → Graph `/messages` payloads: text (with reply context), reply buttons
//! (at most 3, titles up to 20 characters) or a list (up to 10 rows) for approvals and clarify
//! choices, the re-engagement template, and the typing indicator with mark-as-read.
//!
//! Only payloads are built here (pure, table-tested); `lib.rs` sends them.
//!
//! A reply carries `context.message_id`; the typing indicator is a `status: read` with
//! `typing_indicator`. The model's markdown becomes WhatsApp's own formatting (`*bold*`,
//! `~strike~`, headings as bold lines, links as `text (url)`).

use hermesd_platform::{Button, OutboundMessage};
use serde_json::{Value, json};

/// WhatsApp's text message limit, in characters.
pub(crate) const MAX_TEXT_CHARS: usize = 4096;
/// The body of an interactive message is shorter.
pub(crate) const MAX_INTERACTIVE_BODY: usize = 1024;
/// Reply buttons per message.
pub(crate) const MAX_BUTTONS: usize = 3;
/// Rows in a list message.
pub(crate) const MAX_ROWS: usize = 10;
const MAX_BUTTON_TITLE: usize = 20;
const MAX_ROW_TITLE: usize = 24;
const MAX_ID: usize = 256;

fn base(to: &str, reply_to: Option<&str>) -> Value {
    let mut body = json!({ "messaging_product": "whatsapp", "recipient_type": "individual", "to": to });
    if let Some(id) = reply_to.filter(|id| !id.is_empty()) {
        body["context"] = json!({ "message_id": id });
    }
    body
}

/// A plain text message.
pub(crate) fn text(to: &str, text: &str, reply_to: Option<&str>) -> Value {
    let mut body = base(to, reply_to);
    body["type"] = json!("text");
    body["text"] = json!({ "preview_url": false, "body": text });
    body
}

/// The payloads for `message`: one, or two when buttons come with a text longer than an
/// interactive body may be (the text first, then the choices under a short prompt).
pub(crate) fn payloads(message: &OutboundMessage) -> Vec<Value> {
    let to = message.chat.chat_id.as_str();
    let reply_to = message.reply_to.as_deref();
    let body = whatsapp_text(&message.text);
    if message.buttons.is_empty() {
        return vec![text(to, &body, reply_to)];
    }
    if body.chars().count() <= MAX_INTERACTIVE_BODY && !body.trim().is_empty() {
        return vec![interactive(to, &body, &message.buttons, reply_to)];
    }
    vec![text(to, &body, reply_to), interactive(to, "Choose:", &message.buttons, None)]
}

/// Reply buttons for up to three choices, a list for more (the first ten).
fn interactive(to: &str, body: &str, buttons: &[Button], reply_to: Option<&str>) -> Value {
    let mut payload = base(to, reply_to);
    payload["type"] = json!("interactive");
    if buttons.len() <= MAX_BUTTONS {
        let buttons: Vec<Value> = buttons
            .iter()
            .map(|b| json!({ "type": "reply", "reply": { "id": cut(&b.data, MAX_ID), "title": cut(&b.label, MAX_BUTTON_TITLE) } }))
            .collect();
        payload["interactive"] =
            json!({ "type": "button", "body": { "text": body }, "action": { "buttons": buttons } });
    } else {
        let rows: Vec<Value> = buttons
            .iter()
            .take(MAX_ROWS)
            .map(|b| {
                let mut row = json!({ "id": cut(&b.data, MAX_ID), "title": cut(&b.label, MAX_ROW_TITLE) });
                if b.label.chars().count() > MAX_ROW_TITLE {
                    row["description"] = json!(cut(&b.label, 72));
                }
                row
            })
            .collect();
        payload["interactive"] = json!({
            "type": "list",
            "body": { "text": body },
            "action": { "button": "Choose", "sections": [{ "title": "Choices", "rows": rows }] },
        });
    }
    payload
}

/// The re-engagement template (no parameters) in `language`.
pub(crate) fn template(to: &str, name: &str, language: &str) -> Value {
    let mut body = base(to, None);
    body["type"] = json!("template");
    body["template"] = json!({ "name": name, "language": { "code": language } });
    body
}

/// Marks `message_id` (the user's last message) read and shows the typing indicator.
pub(crate) fn typing(message_id: &str) -> Value {
    json!({
        "messaging_product": "whatsapp",
        "status": "read",
        "message_id": message_id,
        "typing_indicator": { "type": "text" },
    })
}

/// The wamid Graph gave a sent message (`messages[0].id`).
pub(crate) fn sent_id(answer: &Value) -> Option<String> {
    answer["messages"][0]["id"].as_str().filter(|id| !id.is_empty()).map(str::to_owned)
}

/// `text` cut to `max` characters, an ellipsis marking the cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(max.saturating_sub(1)).collect();
    short.push('…');
    short
}

/// The model's markdown in WhatsApp's own formatting: `**bold**` → `*bold*`, `~~x~~` → `~x~`,
/// headings → bold lines, `[text](url)` → `text (url)`. Code spans and fences are kept as
/// WhatsApp shows them (monospace), untouched inside.
pub(crate) fn whatsapp_text(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut in_fence = false;
    for (index, line) in markdown.split('\n').enumerate() {
        if index > 0 {
            out.push('\n');
        }
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            out.push_str(line);
            continue;
        }
        if in_fence {
            out.push_str(line);
            continue;
        }
        let trimmed = line.trim_start();
        let hashes = trimmed.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
            let heading = trimmed[hashes..].trim().replace("**", "");
            out.push_str(&format!("*{heading}*"));
            continue;
        }
        out.push_str(&inline(line));
    }
    out
}

/// Inline conversions outside code spans.
fn inline(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for (index, part) in line.split('`').enumerate() {
        if index > 0 {
            out.push('`');
        }
        if index % 2 == 1 {
            out.push_str(part);
            continue;
        }
        out.push_str(&links(&part.replace("**", "*").replace("~~", "~")));
    }
    out
}

/// `[text](url)` → `text (url)`.
fn links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find("](") else { break };
        let Some(end) = after[close + 2..].find(')') else { break };
        let label = &after[..close];
        let url = &after[close + 2..close + 2 + end];
        if label.contains('[') || url.contains(char::is_whitespace) {
            out.push_str(&rest[..=open]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..open]);
        if label == url || label.is_empty() {
            out.push_str(url);
        } else {
            out.push_str(&format!("{label} ({url})"));
        }
        rest = &after[close + 2 + end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use hermesd_platform::{ChatRef, ChatType, OutboundKind};

    use super::*;

    fn message(text: &str, buttons: usize) -> OutboundMessage {
        OutboundMessage {
            chat: ChatRef::new("whatsapp", "15551234567", ChatType::Dm),
            text: text.into(),
            reply_to: Some("wamid.IN".into()),
            kind: OutboundKind::Reply,
            buttons: (0..buttons)
                .map(|i| Button { label: format!("A rather long choice number {i}"), data: format!("choice:{i}") })
                .collect(),
            chunk: (0, 1),
            file: None,
        }
    }

    #[test]
    fn text_replies_carry_the_reply_context() {
        let [body] = payloads(&message("**Hi** there", 0)).try_into().unwrap();
        assert_eq!(body["messaging_product"], "whatsapp");
        assert_eq!(body["to"], "15551234567");
        assert_eq!(body["type"], "text");
        assert_eq!(body["text"]["body"], "*Hi* there");
        assert_eq!(body["context"]["message_id"], "wamid.IN");
    }

    #[test]
    fn up_to_three_choices_are_reply_buttons_and_more_a_list() {
        let [buttons] = payloads(&message("Approve?", 2)).try_into().unwrap();
        assert_eq!(buttons["interactive"]["type"], "button");
        let list = buttons["interactive"]["action"]["buttons"].as_array().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0]["reply"]["id"], "choice:0");
        assert_eq!(list[0]["reply"]["title"].as_str().unwrap().chars().count(), 20);
        let [rows] = payloads(&message("Pick one", 12)).try_into().unwrap();
        assert_eq!(rows["interactive"]["type"], "list");
        let rows = rows["interactive"]["action"]["sections"][0]["rows"].as_array().unwrap();
        assert_eq!(rows.len(), MAX_ROWS);
        assert!(rows.iter().all(|r| r["title"].as_str().unwrap().chars().count() <= 24));
        let long = payloads(&message(&"x".repeat(2000), 2));
        assert_eq!(long.len(), 2, "a long text goes first, the buttons after it");
        assert_eq!(long[0]["type"], "text");
        assert_eq!(long[1]["interactive"]["body"]["text"], "Choose:");
    }

    #[test]
    fn markdown_becomes_whatsapp_formatting() {
        let table = [
            ("**bold** and ~~gone~~", "*bold* and ~gone~"),
            ("## Title", "*Title*"),
            ("see [docs](https://x.example/a) now", "see docs (https://x.example/a) now"),
            ("`**kept**` **b**", "`**kept**` *b*"),
            ("```\n**kept**\n```", "```\n**kept**\n```"),
            ("[unclosed](x", "[unclosed](x"),
            ("#hashtag", "#hashtag"),
        ];
        for (markdown, want) in table {
            assert_eq!(whatsapp_text(markdown), want, "{markdown}");
        }
    }

    #[test]
    fn template_and_typing_payloads() {
        let body = template("1555", "reengage", "en_US");
        assert_eq!(body["type"], "template");
        assert_eq!(body["template"]["name"], "reengage");
        assert_eq!(body["template"]["language"]["code"], "en_US");
        let typing = typing("wamid.X");
        assert_eq!(typing["status"], "read");
        assert_eq!(typing["typing_indicator"]["type"], "text");
        assert_eq!(sent_id(&json!({"messages": [{"id": "wamid.OUT"}]})).as_deref(), Some("wamid.OUT"));
        assert_eq!(sent_id(&json!({})), None);
    }
}
