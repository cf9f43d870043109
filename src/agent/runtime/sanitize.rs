//! The transcript sanitiser, run before every model call: no orphan tool results, no tool call
//! without a result (stubbed), strict user/assistant alternation, repaired tool arguments.
//!
//! It only rewrites the copy sent to the model; the stored transcript is left as it is.

use std::collections::HashSet;

use crate::vocab::message::{Message, Role};

/// The result written for a tool call whose result was never recorded.
pub const MISSING_RESULT: &str =
    "error: no result was recorded for this call (it was interrupted); call it again if needed";

/// Make `messages` acceptable to every provider. System messages stay first; later ones become
/// user notes so alternation holds.
pub fn sanitize(messages: Vec<Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut open_calls: Vec<String> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let mut leading_system = true;
    for mut message in messages {
        match message.role {
            Role::System if leading_system => {
                out.push(message);
                continue;
            }
            Role::System => {
                message.role = Role::User;
                message.content = Some(format!("[system note] {}", message.content.unwrap_or_default()));
            }
            Role::Tool => {
                let id = message.tool_call_id.clone().unwrap_or_default();
                if !open_calls.contains(&id) || !answered.insert(id) {
                    // An orphan (or a second result for one call): the model never asked for it.
                    continue;
                }
                out.push(message);
                continue;
            }
            _ => {}
        }
        leading_system = false;
        // A non-tool message closes the previous assistant's calls: stub the unanswered ones.
        close_calls(&mut out, &mut open_calls, &answered);
        if message.role == Role::Assistant {
            for call in &mut message.tool_calls {
                call.arguments = repair_arguments(&call.arguments);
            }
            if message.content.as_deref().is_some_and(|c| c.trim().is_empty()) && !message.tool_calls.is_empty() {
                message.content = None;
            }
            open_calls = message.tool_calls.iter().map(|c| c.id.clone()).collect();
            answered.clear();
        }
        push_alternating(&mut out, message);
    }
    close_calls(&mut out, &mut open_calls, &answered);
    out
}

fn close_calls(out: &mut Vec<Message>, open_calls: &mut Vec<String>, answered: &HashSet<String>) {
    for id in open_calls.drain(..) {
        if !answered.contains(&id) {
            out.push(Message {
                role: Role::Tool,
                content: Some(MISSING_RESULT.into()),
                tool_calls: vec![],
                tool_call_id: Some(id),
                reasoning: None,
                images: Vec::new(),
            });
        }
    }
}

/// Merge a message into the previous one when both are plain user (or plain assistant) text.
fn push_alternating(out: &mut Vec<Message>, message: Message) {
    if let Some(last) = out.last_mut() {
        let mergeable = last.role == message.role
            && matches!(message.role, Role::User | Role::Assistant)
            && last.tool_calls.is_empty()
            && message.tool_calls.is_empty();
        if mergeable {
            let joined = [last.content.take(), message.content].into_iter().flatten().collect::<Vec<_>>().join("\n\n");
            last.content = Some(joined);
            // Reasoning items must still reach the provider: they move with the merged text.
            if let Some(more) = message.reasoning {
                let merged = last.reasoning.get_or_insert_with(Default::default);
                if !more.text.is_empty() {
                    if !merged.text.is_empty() {
                        merged.text.push_str("\n\n");
                    }
                    merged.text.push_str(&more.text);
                }
                merged.items.extend(more.items);
            }
            return;
        }
    }
    out.push(message);
}

/// Tool arguments must be a JSON object. Fences and trailing junk around an object are removed;
/// anything else becomes `{}` (the call's result then tells the model what went wrong).
pub fn repair_arguments(text: &str) -> String {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return "{}".into();
    }
    if serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(trimmed).is_ok() {
        return trimmed.to_owned();
    }
    let unfenced = trimmed.trim_start_matches("```json").trim_start_matches("```").trim_end_matches("```").trim();
    // The last `}` may come before the first `{` (`} x {`): then there is no object to cut out.
    if let (Some(start), Some(end)) = (unfenced.find('{'), unfenced.rfind('}'))
        && start < end
    {
        let candidate = &unfenced[start..=end];
        if serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(candidate).is_ok() {
            return candidate.to_owned();
        }
    }
    "{}".into()
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::message::ToolCall;

    fn text(role: Role, content: &str) -> Message {
        Message::text(role, content)
    }

    fn calls(ids: &[&str]) -> Message {
        Message {
            role: Role::Assistant,
            content: Some(" ".into()),
            tool_calls: ids
                .iter()
                .map(|id| ToolCall { id: (*id).into(), name: "t".into(), arguments: "".into() })
                .collect(),
            tool_call_id: None,
            reasoning: None,
            images: Vec::new(),
        }
    }

    fn result(id: &str) -> Message {
        Message {
            role: Role::Tool,
            content: Some(format!("r{id}")),
            tool_calls: vec![],
            tool_call_id: Some(id.into()),
            reasoning: None,
            images: Vec::new(),
        }
    }

    fn shape(messages: &[Message]) -> Vec<String> {
        messages
            .iter()
            .map(|m| match m.role {
                Role::Tool => format!("tool:{}", m.tool_call_id.as_deref().unwrap_or("")),
                Role::Assistant if !m.tool_calls.is_empty() => format!("calls:{}", m.tool_calls.len()),
                role => format!("{}:{}", role.as_str(), m.content.as_deref().unwrap_or("")),
            })
            .collect()
    }

    #[test]
    fn stubs_missing_results_and_drops_orphans() {
        let out = sanitize(vec![
            text(Role::System, "sys"),
            result("ghost"),
            text(Role::User, "go"),
            calls(&["a", "b"]),
            result("b"),
            result("b"),
            text(Role::User, "next"),
        ]);
        assert_eq!(shape(&out), ["system:sys", "user:go", "calls:2", "tool:b", "tool:a", "user:next"]);
        assert_eq!(out[4].content.as_deref(), Some(MISSING_RESULT));
        assert_eq!(out[2].content, None, "blank text next to tool calls is dropped");
        assert_eq!(out[2].tool_calls[0].arguments, "{}");
    }

    #[test]
    fn merges_for_alternation_and_demotes_late_system() {
        let out = sanitize(vec![
            text(Role::System, "a"),
            text(Role::System, "b"),
            text(Role::User, "1"),
            text(Role::User, "2"),
            text(Role::System, "late"),
            text(Role::Assistant, "x"),
            text(Role::Assistant, "y"),
            calls(&["c"]),
        ]);
        assert_eq!(
            shape(&out),
            ["system:a", "system:b", "user:1\n\n2\n\n[system note] late", "assistant:x\n\ny", "calls:1", "tool:c"]
        );
    }

    #[test]
    fn repairs_arguments() {
        assert_eq!(repair_arguments(r#"{"a":1}"#), r#"{"a":1}"#);
        assert_eq!(repair_arguments("```json\n{\"a\":1}\n```"), r#"{"a":1}"#);
        assert_eq!(repair_arguments(r#"sure: {"a":1} done"#), r#"{"a":1}"#);
        assert_eq!(repair_arguments("[1]"), "{}");
        assert_eq!(repair_arguments("{broken"), "{}");
    }

    #[test]
    fn a_closing_brace_before_the_first_opening_one_is_no_object() {
        // Found by the fuzz target (tests/fuzz, tool_arguments): slicing from the first `{` to
        // the last `}` panicked when the `}` came first, on text any model may send.
        for text in ["}{", "} x {", "```json\n}\n{```", r#"}"path":"a.txt"{"#] {
            assert_eq!(repair_arguments(text), "{}", "{text:?}");
        }
        assert_eq!(repair_arguments(r#"} {"a":1}"#), r#"{"a":1}"#);
    }
}
