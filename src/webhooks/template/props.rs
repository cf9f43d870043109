//! Properties of webhook templates: rendering never panics, a payload value is inserted
//! verbatim (never expanded as a template itself) and capped, and text without placeholders is
//! left as written.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

/// JSON payloads a sender may push, nested a little.
fn payload() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,20}".prop_map(Value::from),
        Just(Value::from("{__raw__} {event_type} {a.b}")),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z0-9_]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn template() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => "[a-zA-Z ]{1,6}",
        1 => prop::sample::select(vec![
            "{", "}", "{{", "}}", "{a}", "{a.b}", "{a.0}", "{__raw__}", "{event_type}", "{ a }", "{\"a\": 1}", "{}",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(piece, 0..20).prop_map(|p| p.concat())
}

proptest! {
    #[test]
    fn any_template_and_payload_render(template in template(), payload in payload(), max in 1usize..50) {
        let _ = render(&template, &payload, "push", max);
    }

    #[test]
    fn values_are_inserted_verbatim_and_capped(value in "\\PC{0,60}", max in 1usize..50) {
        let out = render("<{v}>", &json!({ "v": value }), "push", max);
        let expected = if value.chars().count() > max {
            format!("{}…", value.chars().take(max).collect::<String>())
        } else {
            value.clone()
        };
        prop_assert_eq!(out, format!("<{expected}>"));
    }

    #[test]
    fn text_without_braces_is_unchanged(text in "[^{}]{0,80}", payload in payload()) {
        prop_assert_eq!(render(&text, &payload, "push", 10), text);
    }
}
