//! Properties of the transcript sanitiser and tool-argument repair over model output: repaired
//! arguments are always one JSON object, a valid object passes unchanged, repair is idempotent;
//! a sanitised transcript has no orphan tool results and every tool call answered.

use proptest::prelude::*;

use super::*;
use crate::vocab::message::ToolCall;

/// What models put in `arguments`: objects, fenced objects, junk around them, other JSON.
fn arguments() -> impl Strategy<Value = String> {
    let object = prop::collection::btree_map("[a-z]{1,5}", "[a-z0-9 ]{0,8}", 0..4)
        .prop_map(|m| serde_json::to_string(&m).expect("a map serialises"));
    prop_oneof![
        object.clone(),
        object.clone().prop_map(|o| format!("```json\n{o}\n```")),
        (object.clone(), "\\PC{0,10}").prop_map(|(o, junk)| format!("{o}{junk}")),
        (object, "[^{]{0,10}").prop_map(|(o, junk)| format!("{junk}{o}")),
        Just("[1, 2]".to_owned()),
        Just("null".to_owned()),
        "\\PC{0,40}",
        // Stray braces in any order (a `}` before the first `{` once panicked).
        "[{}a-z\" :]{0,16}",
    ]
}

fn is_object(text: &str) -> bool {
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text).is_ok()
}

/// Transcripts with tool calls (ids unique within a message, as providers give them) and results
/// in any order, some missing, some repeated.
fn transcript() -> impl Strategy<Value = Vec<Message>> {
    let message = prop_oneof![
        "[a-z ]{0,10}".prop_map(|t| Message::text(Role::User, t)),
        "[a-z ]{0,10}".prop_map(|t| Message::text(Role::Assistant, t)),
        prop::collection::btree_set("[abc]", 1..3).prop_map(|ids| Message {
            tool_calls: ids.into_iter().map(|id| ToolCall { id, name: "t".into(), arguments: "{}".into() }).collect(),
            ..Message::text(Role::Assistant, "")
        }),
        "[abcd]".prop_map(|id| Message { tool_call_id: Some(id), ..Message::text(Role::Tool, "result") }),
    ];
    prop::collection::vec(message, 0..12)
}

proptest! {
    #[test]
    fn repaired_arguments_are_one_json_object(text in arguments()) {
        let repaired = repair_arguments(&text);
        prop_assert!(is_object(&repaired), "{text:?} -> {repaired:?}");
        prop_assert_eq!(repair_arguments(&repaired), repaired.clone(), "idempotent");
        if is_object(text.trim()) {
            prop_assert_eq!(repaired, text.trim());
        }
    }

    #[test]
    fn sanitised_transcripts_answer_every_call_and_nothing_else(messages in transcript()) {
        let out = sanitize(messages);
        let mut open: Vec<String> = Vec::new();
        for message in &out {
            match message.role {
                Role::Tool => {
                    let id = message.tool_call_id.clone().unwrap_or_default();
                    let at = open.iter().position(|o| *o == id);
                    prop_assert!(at.is_some(), "orphan result {id:?} in {out:?}");
                    open.remove(at.unwrap_or_default());
                }
                _ => {
                    prop_assert!(open.is_empty(), "calls {open:?} unanswered before {message:?}");
                    open = message.tool_calls.iter().map(|c| c.id.clone()).collect();
                }
            }
        }
        prop_assert!(open.is_empty(), "calls {open:?} left unanswered at the end of {out:?}");
    }
}
