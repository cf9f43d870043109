//! Front matter as skills are written in the wild: Hermes' own, the Agent Skills spec's fields,
//! folded and quoted descriptions, lists in both styles, and the errors for broken files.

use super::*;

#[test]
fn reads_a_hermes_skill_and_skips_what_it_does_not_need() {
    let text = "---\nname: excalidraw\ndescription: Create hand-drawn style diagrams using Excalidraw JSON format.\n\
                version: 1.0.0\nauthor: Hermes Agent\nlicense: MIT\ntags: [Excalidraw, Diagrams]\n\
                dependencies: []\nmetadata:\n  hermes:\n    tags: [a, b]\n    related_skills: [x]\n\
                prerequisites:\n  env_vars: [API_KEY]\nsetup:\n  collect_secrets:\n    - env_var: API_KEY\n      prompt: \"Enter: it\"\n\
                ---\n\n# Excalidraw\nBody text.\n";
    let (meta, body) = split(text).unwrap();
    assert_eq!(meta.name.as_deref(), Some("excalidraw"));
    assert_eq!(meta.description.as_deref(), Some("Create hand-drawn style diagrams using Excalidraw JSON format."));
    assert!(meta.platforms.is_empty());
    assert_eq!(body, "\n# Excalidraw\nBody text.\n");
}

#[test]
fn folded_literal_quoted_and_multi_line_descriptions() {
    let folded =
        "---\nname: a\ndescription: >\n  Summarise a pull request\n  in three bullets.\n\n  Then stop.\n---\nx";
    assert_eq!(
        split(folded).unwrap().0.description.as_deref(),
        Some("Summarise a pull request in three bullets.\nThen stop.")
    );
    let literal = "---\ndescription: |-\n  line one\n    indented\n---\n";
    assert_eq!(split(literal).unwrap().0.description.as_deref(), Some("line one\n  indented"));
    let double = "---\ndescription: \"Say \\\"hi\\\" # not a comment\\u00e9\"  # a comment\n---\n";
    assert_eq!(split(double).unwrap().0.description.as_deref(), Some("Say \"hi\" # not a comment\u{e9}"));
    let single = "---\ndescription: 'It''s: fine'\n---\n";
    assert_eq!(split(single).unwrap().0.description.as_deref(), Some("It's: fine"));
    let plain = "---\ndescription: Use this when\n  the user asks for a report. # why\n---\n";
    assert_eq!(split(plain).unwrap().0.description.as_deref(), Some("Use this when the user asks for a report."));
    let quoted_lines = "---\ndescription: \"one\n  two\"\n---\n";
    assert_eq!(split(quoted_lines).unwrap().0.description.as_deref(), Some("one two"));
}

#[test]
fn platforms_in_every_list_style() {
    let flow = "---\nplatforms: [Telegram, \"linux\", 'slack']\n---\n";
    assert_eq!(split(flow).unwrap().0.platforms, ["telegram", "linux", "slack"]);
    let block = "---\nplatforms:\n  - macos\n  - discord # chat\n---\n";
    assert_eq!(split(block).unwrap().0.platforms, ["macos", "discord"]);
    let column_zero = "---\nplatforms:\n- linux\nname: x\n---\n";
    let (meta, _) = split(column_zero).unwrap();
    assert_eq!((meta.platforms, meta.name.as_deref()), (vec!["linux".to_owned()], Some("x")));
    let single = "---\nplatforms: linux\n---\n";
    assert_eq!(split(single).unwrap().0.platforms, ["linux"]);
}

#[test]
fn crlf_bom_comments_and_empty_values() {
    let text = "\u{feff}---\r\n# a comment\r\nname: crlf\r\ndescription:\r\n---\r\nbody\r\n";
    let (meta, body) = split(text).unwrap();
    assert_eq!(meta.name.as_deref(), Some("crlf"));
    assert_eq!(meta.description, None);
    assert_eq!(body, "body\r\n");
}

#[test]
fn clear_errors_for_broken_files() {
    assert_eq!(split("# Just markdown\n"), Err(FrontMatterError::Missing));
    assert_eq!(split(""), Err(FrontMatterError::Missing));
    assert_eq!(split("---\nname: a\n"), Err(FrontMatterError::Unclosed));
    let Err(FrontMatterError::Invalid { line, reason }) = split("---\nname: a\njust words\n---\n") else { panic!() };
    assert_eq!(line, 3);
    assert!(reason.contains("key: value"), "{reason}");
    let Err(FrontMatterError::Invalid { line, reason }) = split("---\nname: a\ndescription: \"open\n---\n") else {
        panic!()
    };
    assert_eq!(line, 3);
    assert!(reason.contains("never closed"), "{reason}");
    assert!(matches!(split("---\nplatforms: [a, b\n---\n"), Err(FrontMatterError::Invalid { .. })));
    // Broken keys hermesd does not read stay harmless.
    assert!(split("---\nname: a\nmetadata: {unclosed\n---\n").is_ok());
}

#[test]
fn never_panics_on_arbitrary_text() {
    // A small deterministic fuzz: YAML-significant characters, multi-byte ones and odd spaces.
    const ALPHABET: &[&str] = &[
        "-",
        "---",
        "\n",
        "\r\n",
        " ",
        "\t",
        ":",
        "'",
        "\"",
        "\\",
        "#",
        "[",
        "]",
        ",",
        "|",
        ">",
        "u",
        "é",
        "\u{3000}",
        "name",
        "description",
        "platforms",
        "a",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..20_000 {
        let mut text = String::from("---\n");
        for _ in 0..(state % 40) {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            text.push_str(ALPHABET[(state >> 33) as usize % ALPHABET.len()]);
        }
        if state & 1 == 0 {
            text.push_str("\n---\n");
        }
        let _ = split(&text);
    }
}
