//! Webhook prompt templates (DESIGN.md §7): `{dot.path}` placeholders filled from the JSON
//! payload, plus the event type from the sender's headers. Pure string work, no IO.
//!
//! Rules, in full:
//! - `{a.b.c}` looks up nested object keys; a numeric segment indexes an array
//!   (`{commits.0.message}`). Strings are inserted raw, other values as compact JSON (a present
//!   `null` renders as `null`).
//! - A path that does not resolve renders as the empty string, so a template written for one
//!   event still reads sensibly for another that lacks some fields.
//! - `{event_type}` is the event type; `{__raw__}` is the whole payload as compact JSON. Both win
//!   over payload fields of the same name.
//! - Each inserted value is cut to its first `max_value_chars` characters, followed by `…`.
//! - `{{` and `}}` are literal braces. A `{` with no closing `}`, or whose content is not a path
//!   (empty, or holding whitespace, quotes or braces, as in `{"a": 1}`), is literal text.

use serde_json::Value;

/// Headers that name the event, in order of preference.
const EVENT_HEADERS: [&str; 3] = ["x-github-event", "x-gitlab-event", "x-event-type"];
/// The longest event type taken from a header; the rest is dropped.
const MAX_EVENT_TYPE_CHARS: usize = 128;

/// Fills `template` from `payload`; see the module documentation for the rules.
pub fn render(template: &str, payload: &Value, event_type: &str, max_value_chars: usize) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find(['{', '}']) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        let placeholder = tail.strip_prefix('{').and_then(|inner| Some(&inner[..inner.find('}')?]));
        match placeholder.filter(|path| is_path(path)) {
            Some(path) => {
                if let Some(value) = lookup(path, payload, event_type) {
                    let (kept, cut) = truncate(&value, max_value_chars);
                    out.push_str(kept);
                    if cut {
                        out.push('…');
                    }
                }
                rest = &tail[path.len() + 2..];
            }
            None => {
                // A lone brace is literal text.
                out.push_str(&tail[..1]);
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The event type named by the sender: `X-GitHub-Event`, `X-Gitlab-Event` or `X-Event-Type`,
/// else `"webhook"`. Control characters are dropped and the value is capped at 128 characters,
/// as it ends up in a prompt.
pub fn event_type(headers: &impl Fn(&str) -> Option<String>) -> String {
    EVENT_HEADERS
        .iter()
        .filter_map(|name| headers(name))
        .map(|value| value.chars().filter(|c| !c.is_control()).take(MAX_EVENT_TYPE_CHARS).collect::<String>())
        .map(|value| value.trim().to_owned())
        .find(|value| !value.is_empty())
        .unwrap_or_else(|| "webhook".to_owned())
}

/// Whether the text between braces is a placeholder rather than literal text.
fn is_path(text: &str) -> bool {
    !text.is_empty() && !text.chars().any(|c| c.is_whitespace() || matches!(c, '{' | '}' | '"' | '\''))
}

/// The text a placeholder stands for, or `None` when its path does not resolve.
fn lookup(path: &str, payload: &Value, event_type: &str) -> Option<String> {
    match path {
        "event_type" => return Some(event_type.to_owned()),
        "__raw__" => return Some(payload.to_string()),
        _ => {}
    }
    let value = path.split('.').try_fold(payload, |value, segment| match value {
        Value::Object(fields) => fields.get(segment),
        Value::Array(items) => items.get(segment.parse::<usize>().ok()?),
        _ => None,
    })?;
    Some(match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    })
}

/// The first `max_chars` characters of `text`, cut on a character boundary, and whether
/// anything was cut off.
fn truncate(text: &str, max_chars: usize) -> (&str, bool) {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => (&text[..cut], true),
        None => (text, false),
    }
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests;
