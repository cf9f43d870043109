//! OpenClaw's conversations as hermesd sessions: the session index and transcripts of an agent's
//! database (`agents/<id>/agent/openclaw-agent.sqlite`: `session_nodes`, `transcript_events`,
//! zstd-compressed rows included), or of the older files (`agents/<id>/sessions/sessions.json`
//! and one JSONL transcript per session). A transcript is a tree of events; the branch the
//! session is on (from its newest event back to the root) is what is imported, its messages as
//! hermesd's (text, tool calls, tool results). A chat's key is formed as hermesd's adapter forms
//! it, so that a Telegram or Signal chat continues where it was.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use hermesd_platform::{ChatRef, ChatType, Sender};
use serde_json::Value;

use crate::cli::import::{Note, Plan};
use crate::config::DEFAULT_PROFILE;
use crate::store::SessionKey;
use crate::store::import::ImportedSession;
use crate::turn::session_key::session_key;
use crate::vocab::message::{Message, Role, ToolCall};

/// One OpenClaw session: its key, its index entry and its transcript's events in order.
pub(super) struct Conversation {
    pub(super) key: String,
    pub(super) id: String,
    pub(super) entry: Value,
    pub(super) events: Vec<Value>,
}

/// The conversations of the agent database at `db` (an opened copy).
pub(super) fn from_database(conn: &rusqlite::Connection) -> Result<Vec<Conversation>, String> {
    let has = |table: &str| -> bool {
        conn.query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", [table], |_| Ok(())).is_ok()
    };
    if !has("session_nodes") || !has("transcript_events") {
        return Ok(Vec::new());
    }
    let mut nodes = conn
        .prepare("SELECT session_key, current_session_id, entry_json FROM session_nodes ORDER BY updated_at")
        .map_err(|e| e.to_string())?;
    let rows: Vec<(String, String, String)> = nodes
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .and_then(Iterator::collect)
        .map_err(|e| e.to_string())?;
    let mut events = conn
        .prepare("SELECT event_json, event_zstd FROM transcript_events WHERE session_id = ?1 ORDER BY seq")
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (key, id, entry) in rows {
        let entry = serde_json::from_str(&entry).unwrap_or(Value::Null);
        let rows: Vec<(Option<String>, Option<Vec<u8>>)> = events
            .query_map([&id], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(Iterator::collect)
            .map_err(|e| e.to_string())?;
        let mut list = Vec::new();
        for (json, zstd) in rows {
            let text = match (json, zstd) {
                (Some(json), _) => json,
                (None, Some(frame)) => unzstd(&frame).map_err(|e| format!("session {key}: a compressed event: {e}"))?,
                (None, None) => continue,
            };
            if let Ok(event) = serde_json::from_str(&text) {
                list.push(event);
            }
        }
        out.push(Conversation { key, id, entry, events: list });
    }
    Ok(out)
}

fn unzstd(frame: &[u8]) -> Result<String, String> {
    let mut source = frame;
    let mut decoder = ruzstd::decoding::StreamingDecoder::new(&mut source).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    decoder.read_to_end(&mut out).map_err(|e| e.to_string())?;
    String::from_utf8(out).map_err(|e| e.to_string())
}

/// The conversations of an older agent's `sessions/` folder (`sessions.json` and JSONL files).
pub(super) fn from_files(dir: &Path, local: &dyn Fn(&str) -> std::path::PathBuf) -> Result<Vec<Conversation>, String> {
    let index = dir.join("sessions.json");
    let Ok(text) = std::fs::read_to_string(&index) else { return Ok(Vec::new()) };
    let Value::Object(map) = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", index.display()))? else {
        return Err(format!("{}: not an object of sessions", index.display()));
    };
    let mut out = Vec::new();
    let mut entries: Vec<(String, Value)> = map.into_iter().collect();
    entries.sort_by_key(|(_, e)| e.get("updatedAt").and_then(Value::as_i64).unwrap_or(0));
    for (key, entry) in entries {
        let Some(id) = entry.get("sessionId").and_then(Value::as_str).map(str::to_owned) else { continue };
        let file = entry
            .get("sessionFile")
            .and_then(Value::as_str)
            .map(local)
            .filter(|p| p.is_file())
            .unwrap_or_else(|| dir.join(format!("{id}.jsonl")));
        let events = std::fs::read_to_string(&file)
            .map(|text| text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect())
            .unwrap_or_default();
        out.push(Conversation { key, id, entry, events });
    }
    Ok(out)
}

/// The events on the branch the session is on: from the newest event back to the root by
/// `parentId` (all of them, in order, when the events carry no ids).
fn active_branch(events: &[Value]) -> Vec<&Value> {
    let id_of = |e: &Value| e.get("id").and_then(Value::as_str).map(str::to_owned);
    let by_id: BTreeMap<String, &Value> = events
        .iter()
        .filter(|e| e.get("type").and_then(Value::as_str) != Some("session"))
        .filter_map(|e| Some((id_of(e)?, e)))
        .collect();
    let Some(last) = events.iter().rev().find(|e| by_id.contains_key(&id_of(e).unwrap_or_default())) else {
        return events.iter().collect();
    };
    let mut branch = vec![last];
    let mut at = last;
    while let Some(parent) = at.get("parentId").and_then(Value::as_str) {
        let Some(next) = by_id.get(parent) else { break };
        if branch.len() > events.len() {
            break;
        }
        branch.push(next);
        at = next;
    }
    branch.reverse();
    branch
}

/// What a transcript's messages become, with counts of what stays out.
#[derive(Default)]
struct Converted {
    messages: Vec<(Message, i64)>,
    images: usize,
    reasoning: usize,
    injected: usize,
}

fn text_parts(content: &Value, images: &mut usize) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| match part.get("type").and_then(Value::as_str) {
                Some("text") => part.get("text").and_then(Value::as_str).map(str::to_owned),
                Some("image") => {
                    *images += 1;
                    Some("[an image was attached here]".to_owned())
                }
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn convert(events: &[&Value], fallback_at: i64) -> Converted {
    let mut out = Converted::default();
    for event in events {
        if event.get("type").and_then(Value::as_str) != Some("message") {
            if event.get("type").and_then(Value::as_str) == Some("custom_message") {
                out.injected += 1;
            }
            continue;
        }
        let Some(message) = event.get("message") else { continue };
        let at = message
            .get("timestamp")
            .and_then(Value::as_i64)
            .or_else(|| {
                let text = event.get("timestamp")?.as_str()?;
                Some(chrono::DateTime::parse_from_rfc3339(text).ok()?.timestamp_millis())
            })
            .unwrap_or(fallback_at);
        let content = message.get("content").unwrap_or(&Value::Null);
        let converted = match message.get("role").and_then(Value::as_str) {
            Some("user") if message.get("runtimeContextCarrier").and_then(Value::as_bool) == Some(true) => {
                out.injected += 1;
                None
            }
            Some("user") => Some(Message::text(Role::User, text_parts(content, &mut out.images))),
            Some("assistant") => {
                let parts = content.as_array().cloned().unwrap_or_default();
                out.reasoning +=
                    parts.iter().filter(|p| p.get("type").and_then(Value::as_str) == Some("thinking")).count();
                let mut reply = Message::text(Role::Assistant, text_parts(content, &mut out.images));
                reply.tool_calls = parts
                    .iter()
                    .filter(|p| p.get("type").and_then(Value::as_str) == Some("toolCall"))
                    .filter_map(|p| {
                        let arguments = match p.get("arguments") {
                            Some(Value::String(s)) => s.clone(),
                            Some(other) => other.to_string(),
                            None => "{}".into(),
                        };
                        Some(ToolCall {
                            id: p.get("id")?.as_str()?.to_owned(),
                            name: p.get("name")?.as_str()?.to_owned(),
                            arguments,
                        })
                    })
                    .collect();
                (!reply.content.as_deref().unwrap_or_default().is_empty() || !reply.tool_calls.is_empty())
                    .then_some(reply)
            }
            Some("toolResult") => {
                let mut result = Message::text(Role::Tool, text_parts(content, &mut out.images));
                result.tool_call_id = message.get("toolCallId").and_then(Value::as_str).map(str::to_owned);
                result.tool_call_id.is_some().then_some(result)
            }
            _ => None,
        };
        if let Some(message) = converted {
            out.messages.push((message, at));
        }
    }
    out
}

/// Where an OpenClaw session key's chat is, as hermesd's adapters name it: the platform (or
/// `platform@account`), the chat, its type and thread; `None` for a key of no chat (the agent's
/// main session without a channel route, cron and hook sessions).
fn chat_of(key: &str, entry: &Value) -> Option<(ChatRef, Option<String>)> {
    let rest = key.strip_prefix("agent:").and_then(|r| r.split_once(':')).map_or(key, |(_, r)| r);
    let parts: Vec<&str> = rest.split(':').collect();
    let route = entry.pointer("/delivery/route").or_else(|| entry.get("route"));
    let route_channel = route.and_then(|r| r.get("channel")).and_then(Value::as_str);
    let route_peer = || {
        route
            .and_then(|r| r.pointer("/target/to"))
            .and_then(Value::as_str)
            .map(|to| to.split_once(':').map_or(to, |(_, id)| id).to_owned())
    };
    let (channel, account, kind, id, thread) = match parts.as_slice() {
        ["main"] => (route_channel?.to_owned(), None, "direct", route_peer()?, None),
        ["direct", peer] => (route_channel?.to_owned(), None, "direct", (*peer).to_owned(), None),
        [channel, "direct", peer] => ((*channel).to_owned(), None, "direct", (*peer).to_owned(), None),
        [channel, account, "direct", peer] => {
            ((*channel).to_owned(), Some(*account), "direct", (*peer).to_owned(), None)
        }
        [channel, kind @ ("group" | "channel" | "room"), id, rest @ ..] => {
            let thread = match rest {
                ["thread" | "topic", thread, ..] => Some((*thread).to_owned()),
                _ => None,
            };
            ((*channel).to_owned(), None, *kind, (*id).to_owned(), thread)
        }
        _ => return None,
    };
    let platform = match account {
        Some(account) if account != "default" => format!("{channel}@{account}"),
        _ => channel,
    };
    let chat_type = match kind {
        "direct" => ChatType::Dm,
        "channel" => ChatType::Channel,
        _ => ChatType::Group,
    };
    let person = (chat_type == ChatType::Dm).then(|| id.clone());
    let mut chat = ChatRef::new(platform, id, chat_type);
    chat.thread_id = thread;
    Some((chat, person))
}

/// The conversations of the default agent, as sessions of the default profile.
pub(super) fn sessions(plan: &mut Plan, agent: &str, conversations: Vec<Conversation>) {
    let mut left_out: BTreeMap<String, usize> = BTreeMap::new();
    for conversation in conversations {
        let Conversation { key, id, entry, events } = conversation;
        if key.starts_with("cron:") || key.starts_with("hook:") || key.contains(":cron:") || key.contains(":hook:") {
            *left_out.entry("cron and webhook runs (hermesd keeps its own)".into()).or_default() += 1;
            continue;
        }
        let started = entry.get("sessionStartedAt").and_then(Value::as_i64).unwrap_or(0);
        let branch = active_branch(&events);
        let converted = convert(&branch, started);
        for (count, what) in [
            (converted.images, "image(s): hermesd keeps images as files; a note stands in"),
            (converted.reasoning, "reasoning block(s): not part of the conversation hermesd keeps"),
            (converted.injected, "injected context message(s): OpenClaw's own, not said by anyone"),
        ] {
            if count > 0 {
                *left_out.entry(what.to_owned()).or_default() += count;
            }
        }
        if converted.messages.is_empty() {
            continue;
        }
        let created_at = if started > 0 { started } else { converted.messages[0].1 };
        let updated_at = entry
            .get("updatedAt")
            .and_then(Value::as_i64)
            .unwrap_or_else(|| converted.messages.last().map_or(created_at, |(_, at)| *at));
        // Telegram and Signal name a direct chat by the person, as OpenClaw's keys do: those
        // continue here. Discord and Slack name it by a channel OpenClaw does not key by, and
        // lower-case their ids: those are kept as history.
        let routable = |chat: &ChatRef| {
            let platform = chat.platform.split('@').next().unwrap_or_default();
            platform == "telegram" || (platform == "signal" && chat.chat_type == ChatType::Dm)
        };
        let (key, person, route) = match chat_of(&key, &entry) {
            Some((chat, person)) if routable(&chat) => {
                let sender =
                    Sender { id: person.clone().unwrap_or_default(), name: None, is_bot: false, roles: Vec::new() };
                (session_key(DEFAULT_PROFILE, &chat, &sender, false), person, true)
            }
            Some((chat, person)) => {
                *left_out
                    .entry(format!("{} chats kept as history (their next message starts anew)", chat.platform))
                    .or_default() += 1;
                (history_key(&id), person, false)
            }
            None => (history_key(&id), None, false),
        };
        let title = entry.get("displayName").or_else(|| entry.get("label")).and_then(Value::as_str).map(str::to_owned);
        plan.sessions.push(ImportedSession {
            source: format!("openclaw:{agent}:session:{id}"),
            key,
            title,
            person,
            messages: converted.messages,
            created_at,
            updated_at,
            route,
        });
    }
    for (what, count) in left_out {
        plan.notes.push(Note { what: format!("conversations: {what}"), why: format!("{count} left out or kept so") });
    }
}

/// The key of a conversation kept as history only (no chat continues it).
fn history_key(id: &str) -> SessionKey {
    SessionKey {
        key: format!("agent:main:local:dm:openclaw-{id}"),
        platform: "local".into(),
        chat_id: format!("openclaw-{id}"),
        chat_type: ChatType::Dm,
        thread_id: None,
        user_id: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_the_chats_hermesd_sees() {
        let none = Value::Null;
        let (chat, person) = chat_of("agent:main:telegram:direct:111", &none).unwrap();
        assert_eq!((chat.platform.as_str(), chat.chat_id.as_str(), chat.chat_type), ("telegram", "111", ChatType::Dm));
        assert_eq!(person.as_deref(), Some("111"));
        let (chat, _) = chat_of("agent:main:telegram:work:direct:5", &none).unwrap();
        assert_eq!(chat.platform, "telegram@work");
        let (chat, _) = chat_of("agent:main:telegram:group:-100:topic:7", &none).unwrap();
        assert_eq!((chat.chat_type, chat.thread_id.as_deref()), (ChatType::Group, Some("7")));
        let routed =
            serde_json::json!({"delivery": {"route": {"channel": "telegram", "target": {"to": "telegram:42"}}}});
        assert_eq!(chat_of("agent:main:main", &routed).unwrap().0.chat_id, "42");
        assert!(chat_of("agent:main:main", &serde_json::json!({"delivery": {"kind": "none"}})).is_none());
    }

    #[test]
    fn the_branch_is_followed_and_messages_convert() {
        let events: Vec<Value> = [
            r#"{"type":"session","id":"s"}"#,
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"hi","timestamp":1}}"#,
            r#"{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":[{"type":"text","text":"old"}],"timestamp":2}}"#,
            r#"{"type":"message","id":"c","parentId":"a","message":{"role":"assistant","content":[{"type":"thinking","thinking":"x"},{"type":"toolCall","id":"t1","name":"read","arguments":{"path":"M"}}],"timestamp":3}}"#,
            r#"{"type":"message","id":"d","parentId":"c","message":{"role":"toolResult","toolCallId":"t1","content":[{"type":"text","text":"data"}],"timestamp":4}}"#,
        ]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
        let branch = active_branch(&events);
        let converted = convert(&branch, 0);
        let roles: Vec<Role> = converted.messages.iter().map(|(m, _)| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool], "the abandoned reply is not on the branch");
        assert_eq!(converted.messages[1].0.tool_calls[0].arguments, r#"{"path":"M"}"#);
        assert_eq!(converted.messages[2].0.tool_call_id.as_deref(), Some("t1"));
        assert_eq!(converted.reasoning, 1);
    }
}
