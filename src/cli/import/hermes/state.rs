//! Hermes' `state.db` read: its sessions (gateway and CLI), their live messages in order, and
//! which session each chat's key routes to now (`gateway_routing`). The file is copied (with its
//! write-ahead log) and the copy read, so Hermes' home is never written, not even a lock file, and
//! a running Hermes' last writes are included.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::OptionalExtension;

use crate::vocab::message::{Message, Role, ToolCall};

/// Hermes' prefix of a message whose content is JSON (text and image parts).
const JSON_PREFIX: &str = "\u{0}json:";

/// One Hermes session with its messages.
#[derive(Debug, Clone)]
pub(crate) struct HermesSession {
    /// Hermes' session id.
    pub(crate) id: String,
    /// `telegram`, `discord`, …, or `cli`.
    pub(crate) source: String,
    /// Its key (`agent:<profile>:<platform>:<chat_type>:<chat>[:…]`); none for CLI sessions.
    pub(crate) key: Option<String>,
    /// The chat.
    pub(crate) chat_id: Option<String>,
    /// `dm`, `group`, `channel`, `thread`.
    pub(crate) chat_type: Option<String>,
    /// The thread.
    pub(crate) thread_id: Option<String>,
    /// The person, where the session is one person's.
    pub(crate) user_id: Option<String>,
    /// Title.
    pub(crate) title: Option<String>,
    /// Started, Unix ms.
    pub(crate) started_at: i64,
    /// Its messages, each with when it was written (Unix ms).
    pub(crate) messages: Vec<(Message, i64)>,
    /// Messages left out, with why (one line each kind).
    pub(crate) left_out: Vec<String>,
}

/// The sessions of a `state.db` and the key → session id routes.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Sessions, oldest first.
    pub(crate) sessions: Vec<HermesSession>,
    /// Key → the session id it routes to.
    pub(crate) routes: BTreeMap<String, String>,
}

/// Read `db` (a Hermes `state.db`) through a copy in `scratch`.
pub(crate) fn read(db: &Path, scratch: &Path) -> Result<State, String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(scratch)
        .map_err(|e| format!("{}: {e}", scratch.display()))?;
    let copy = scratch.join("state.db");
    std::fs::copy(db, &copy).map_err(|e| format!("copy {}: {e}", db.display()))?;
    for suffix in ["-wal", "-shm"] {
        let side = db.with_file_name(format!("state.db{suffix}"));
        if side.exists() {
            std::fs::copy(&side, scratch.join(format!("state.db{suffix}")))
                .map_err(|e| format!("copy {}: {e}", side.display()))?;
        }
    }
    let conn = rusqlite::Connection::open(&copy).map_err(|e| format!("open {}: {e}", db.display()))?;
    // The file and its log are copied one after the other: if Hermes wrote in between, reading the
    // copy fails, and the import says to run again (or stop Hermes first).
    read_conn(&conn)
        .map_err(|e| format!("read {}: {e} (if Hermes is running, stop it or run the import again)", db.display()))
}

fn read_conn(conn: &rusqlite::Connection) -> rusqlite::Result<State> {
    let mut state = State::default();
    let has_routing: Option<i64> = conn
        .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'gateway_routing'", [], |r| r.get(0))
        .optional()?;
    if has_routing.is_some() {
        let mut routes = conn.prepare("SELECT session_key, entry_json FROM gateway_routing ORDER BY updated_at")?;
        let rows = routes.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        for row in rows {
            let (key, entry) = row?;
            let id = serde_json::from_str::<serde_json::Value>(&entry)
                .ok()
                .and_then(|v| v.get("session_id").and_then(|s| s.as_str()).map(str::to_owned));
            if let Some(id) = id {
                state.routes.insert(key, id);
            }
        }
    }
    let columns: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('sessions')")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let has = |c: &str| columns.iter().any(|name| name == c);
    let optional = |c: &str| if has(c) { c.to_owned() } else { format!("NULL AS {c}") };
    let sql = format!(
        "SELECT id, source, {}, {}, {}, {}, {}, {}, started_at FROM sessions ORDER BY started_at, id",
        optional("session_key"),
        optional("chat_id"),
        optional("chat_type"),
        optional("thread_id"),
        optional("user_id"),
        optional("title"),
    );
    let mut sessions = conn.prepare(&sql)?;
    let rows = sessions.query_map([], |r| {
        Ok(HermesSession {
            id: r.get(0)?,
            source: r.get(1)?,
            key: r.get(2)?,
            chat_id: r.get(3)?,
            chat_type: r.get(4)?,
            thread_id: r.get(5)?,
            user_id: r.get(6)?,
            title: r.get(7)?,
            started_at: secs_to_ms(r.get::<_, f64>(8)?),
            messages: Vec::new(),
            left_out: Vec::new(),
        })
    })?;
    state.sessions = rows.collect::<Result<_, _>>()?;
    let message_columns: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('messages')")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let active = if message_columns.iter().any(|c| c == "active") { "AND active = 1" } else { "" };
    let mut messages = conn.prepare(&format!(
        "SELECT role, content, tool_call_id, tool_calls, timestamp FROM messages WHERE session_id = ?1 {active} ORDER BY id"
    ))?;
    for session in &mut state.sessions {
        let rows = messages.query_map([&session.id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, f64>(4)?,
            ))
        })?;
        let mut images = 0;
        let mut system = 0;
        for row in rows {
            let (role, content, tool_call_id, tool_calls, at) = row?;
            let Some(role) = Role::parse(&role) else { continue };
            if role == Role::System {
                // hermesd builds its own system prompt.
                system += 1;
                continue;
            }
            let (content, dropped) = content_text(content);
            images += dropped;
            let mut message = Message::text(role, String::new());
            message.content = content;
            message.tool_call_id = tool_call_id.filter(|_| role == Role::Tool);
            message.tool_calls = tool_calls.as_deref().map(parse_tool_calls).unwrap_or_default();
            session.messages.push((message, secs_to_ms(at)));
        }
        if images > 0 {
            session.left_out.push(format!("{images} image(s) by URL: hermesd keeps images as files; a note stands in"));
        }
        if system > 0 {
            session.left_out.push(format!("{system} system message(s): hermesd builds its own system prompt"));
        }
    }
    Ok(state)
}

/// Hermes' float seconds as Unix ms.
fn secs_to_ms(secs: f64) -> i64 {
    (secs * 1000.0).round() as i64
}

/// A message's text: plain, or Hermes' JSON parts with each image as a note; and how many images.
fn content_text(content: Option<String>) -> (Option<String>, usize) {
    let Some(content) = content else { return (None, 0) };
    let Some(json) = content.strip_prefix(JSON_PREFIX) else {
        return ((!content.is_empty()).then_some(content), 0);
    };
    let Ok(serde_json::Value::Array(parts)) = serde_json::from_str::<serde_json::Value>(json) else {
        return (Some(json.to_owned()), 0);
    };
    let mut texts = Vec::new();
    let mut images = 0;
    for part in &parts {
        match part.get("type").and_then(|t| t.as_str()) {
            Some("text") => texts.extend(part.get("text").and_then(|t| t.as_str()).map(str::to_owned)),
            Some("image_url" | "input_image" | "image") => {
                images += 1;
                texts.push("[an image was attached here]".to_owned());
            }
            _ => {}
        }
    }
    (Some(texts.join("\n")).filter(|t| !t.is_empty()), images)
}

/// OpenAI-style tool calls (`id`, `function.name`, `function.arguments`).
fn parse_tool_calls(text: &str) -> Vec<ToolCall> {
    let Ok(serde_json::Value::Array(calls)) = serde_json::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    calls
        .iter()
        .filter_map(|call| {
            let id = call.get("id").or_else(|| call.get("call_id"))?.as_str()?.to_owned();
            let function = call.get("function")?;
            let name = function.get("name")?.as_str()?.to_owned();
            let arguments = match function.get("arguments") {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => "{}".to_owned(),
            };
            Some(ToolCall { id, name, arguments })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_keeps_its_text_and_notes_its_images() {
        let content = format!(
            "{JSON_PREFIX}{}",
            r#"[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"https://x/cat.png"}}]"#
        );
        let (text, images) = content_text(Some(content));
        assert_eq!(text.as_deref(), Some("what is this?\n[an image was attached here]"));
        assert_eq!(images, 1);
        assert_eq!(content_text(Some(String::new())), (None, 0));
    }

    #[test]
    fn tool_calls_parse_and_garbage_is_none() {
        let calls =
            parse_tool_calls(r#"[{"id":"c1","type":"function","function":{"name":"t","arguments":"{\"a\":1}"}}]"#);
        assert_eq!(calls, vec![ToolCall { id: "c1".into(), name: "t".into(), arguments: "{\"a\":1}".into() }]);
        assert!(parse_tool_calls("not json").is_empty());
    }
}
