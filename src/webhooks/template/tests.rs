//! Tests for webhook prompt templates and event-type detection.

use serde_json::json;

use super::*;

fn payload() -> Value {
    json!({
        "action": "opened",
        "number": 42,
        "draft": false,
        "labels": null,
        "repository": { "full_name": "acme/app", "owner": { "login": "ada" } },
        "commits": [
            { "id": "abc", "message": "fix: handle empty body" },
            { "id": "def", "message": "docs: readme" }
        ],
        "meta": { "tags": ["a", "b"], "0": "zero key" },
        "event_type": "from payload"
    })
}

fn fill(template: &str) -> String {
    render(template, &payload(), "push", 100)
}

#[test]
fn placeholders_resolve_paths() {
    let cases = [
        ("{action}", "opened"),
        ("PR #{number} in {repository.full_name} by {repository.owner.login}", "PR #42 in acme/app by ada"),
        ("{commits.0.message} / {commits.1.id}", "fix: handle empty body / def"),
        ("{draft} {labels}", "false null"),
        ("{meta.tags}", r#"["a","b"]"#),
        ("{repository.owner}", r#"{"login":"ada"}"#),
        ("{meta.0}", "zero key"),
        ("{meta.tags.1}", "b"),
        ("event: {event_type}", "event: push"),
        ("no placeholders at all", "no placeholders at all"),
    ];
    for (template, expected) in cases {
        assert_eq!(fill(template), expected, "{template}");
    }
}

#[test]
fn unknown_paths_render_empty() {
    let cases = [
        ("[{missing}]", "[]"),
        ("[{commits.5.message}]", "[]"),
        ("[{commits.first}]", "[]"),
        ("[{action.length}]", "[]"),
        ("[{repository..full_name}]", "[]"),
        ("[{commits.-1}]", "[]"),
    ];
    for (template, expected) in cases {
        assert_eq!(fill(template), expected, "{template}");
    }
}

#[test]
fn raw_is_the_whole_payload() {
    let small = json!({ "a": [1, 2], "b": "x" });
    assert_eq!(render("{__raw__}", &small, "push", 1000), r#"{"a":[1,2],"b":"x"}"#);
    assert_eq!(render("{__raw__}", &small, "push", 5), r#"{"a":…"#);
}

#[test]
fn braces_escape_and_stay_literal_when_unclosed() {
    let cases = [
        ("{{action}}", "{action}"),
        ("{{{action}}}", "{opened}"),
        ("a }} b {{ c", "a } b { c"),
        ("unclosed {action", "unclosed {action"),
        ("trailing {", "trailing {"),
        ("lone } brace", "lone } brace"),
        ("{}", "{}"),
        (r#"json {"a": 1} stays"#, r#"json {"a": 1} stays"#),
        ("{not a path}", "{not a path}"),
        ("{outer {action}", "{outer opened"),
    ];
    for (template, expected) in cases {
        assert_eq!(fill(template), expected, "{template}");
    }
}

#[test]
fn values_are_truncated_on_character_boundaries() {
    let data = json!({ "text": "héllo wörld", "emoji": "👍👍👍", "short": "ok", "n": 123456 });
    assert_eq!(render("{text}", &data, "e", 4), "héll…");
    assert_eq!(render("{emoji}", &data, "e", 2), "👍👍…");
    assert_eq!(render("{emoji}", &data, "e", 3), "👍👍👍", "exactly the limit is not cut");
    assert_eq!(render("{short}|{text}", &data, "e", 2), "ok|hé…", "each value is cut separately");
    assert_eq!(render("{n}", &data, "e", 3), "123…");
    assert_eq!(render("{text}", &data, "e", 0), "…");
    assert_eq!(render("{event_type}", &data, "merge_request", 5), "merge…");
    // The template's own text is never cut.
    assert_eq!(render("a long literal: {short}", &data, "e", 1), "a long literal: o…");
}

#[test]
fn event_type_prefers_the_senders_header() {
    let headers = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
    };
    assert_eq!(event_type(&headers(&[("x-github-event", "pull_request")])), "pull_request");
    assert_eq!(event_type(&headers(&[("x-gitlab-event", "Push Hook")])), "Push Hook");
    assert_eq!(event_type(&headers(&[("x-event-type", " deploy ")])), "deploy");
    assert_eq!(event_type(&headers(&[("x-event-type", "a"), ("x-github-event", "push")])), "push");
    assert_eq!(event_type(&headers(&[("x-github-event", "  "), ("x-event-type", "custom")])), "custom");
    assert_eq!(event_type(&headers(&[("x-github-event", "pu\nsh\u{7}")])), "push");
    assert_eq!(event_type(&headers(&[])), "webhook");
    let long: &'static str = Box::leak("x".repeat(500).into_boxed_str());
    let pairs: &'static [(&'static str, &'static str)] = Box::leak(Box::new([("x-event-type", long)]));
    assert_eq!(event_type(&headers(pairs)).len(), 128);
}

/// A xorshift64 generator: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const KEYS: &[&str] = &["a", "b", "0", "1", "é", "__raw__", ""];

fn random_value(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth == 0 { 4 } else { 6 }) {
        0 => Value::Null,
        1 => json!(rng.below(1000)),
        2 => json!(["", "x", "héllo", "👍🏽", "{a}", "}{"][rng.below(6)]),
        3 => json!(rng.below(2) == 0),
        4 => Value::Array((0..rng.below(4)).map(|_| random_value(rng, depth - 1)).collect()),
        _ => Value::Object(
            (0..rng.below(4)).map(|_| (KEYS[rng.below(KEYS.len())].to_owned(), random_value(rng, depth - 1))).collect(),
        ),
    }
}

#[test]
fn fuzz_never_panics() {
    const PIECES: &[&str] =
        &["{", "}", "{{", "}}", "a", "b", ".", "0", "1", "é", "👍", "__raw__", "event_type", " ", "\"", "x", ".."];
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    for round in 0..5_000 {
        let template: String = (0..rng.below(16)).map(|_| PIECES[rng.below(PIECES.len())]).collect();
        let payload = random_value(&mut rng, 3);
        let max = rng.below(8);
        let out = render(&template, &payload, "évent", max);
        // Text without braces passes through untouched.
        if !template.contains(['{', '}']) {
            assert_eq!(out, template, "round {round}");
        }
    }
}
