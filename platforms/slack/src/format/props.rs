//! Properties of markdown → mrkdwn over generated model output: outside the links the converter
//! writes, no `<`, `>` or bare `&` reaches Slack (it would read them as mentions or links), the
//! bold placeholder never leaks, and no letter is dropped.

use proptest::prelude::*;

use super::*;

/// Model-like markdown without links: words and every marker the converter knows.
fn markdown() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-zA-Z0-9]{1,8}",
        2 => Just(" ".to_owned()),
        1 => Just("\n".to_owned()),
        3 => prop::sample::select(vec![
            "**", "*", "_", "__", "~~", "`", "```", "\n```\n", "\n```py\n", "# ", "\n## ", "\n- ", "\n* ", "[", "]",
            "<", ">", "&", "&amp;", "<@U123>", "```<@U123>", "<!channel>", "<https://x.io|y>", "é",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(piece, 0..60).prop_map(|pieces| pieces.concat())
}

/// The text Slack shows, or why the mrkdwn is unsafe: a raw `<`/`>` or a bare `&`.
fn unescape_checked(mrkdwn: &str) -> Result<String, String> {
    let mut text = String::new();
    let mut rest = mrkdwn;
    while let Some(c) = rest.chars().next() {
        match c {
            '<' | '>' => return Err(format!("raw {c:?} in {mrkdwn:?}")),
            '&' => {
                let (entity, decoded) = [("&amp;", '&'), ("&lt;", '<'), ("&gt;", '>')]
                    .into_iter()
                    .find(|(entity, _)| rest.starts_with(entity))
                    .ok_or_else(|| format!("bare '&' in {mrkdwn:?}"))?;
                text.push(decoded);
                rest = &rest[entity.len()..];
            }
            c => {
                text.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    Ok(text)
}

fn words(text: &str) -> Vec<char> {
    text.chars().filter(|c| c.is_alphanumeric()).collect()
}

proptest! {
    #[test]
    fn nothing_reads_as_a_mention_or_link_and_no_text_is_dropped(markdown in markdown()) {
        let mrkdwn = markdown_to_mrkdwn(&markdown);
        prop_assert!(!mrkdwn.contains(BOLD), "placeholder leaked: {mrkdwn:?}");
        let text = unescape_checked(&mrkdwn).map_err(TestCaseError::fail)?;
        // An opening fence's info string is dropped on purpose (Slack would show it as code).
        let has_info = markdown.split('\n').any(|line| line.trim_start().starts_with("```") && line.trim().len() > 3);
        if has_info {
            prop_assert!(is_subsequence(&words(&text), &words(&markdown)), "{:?} -> {:?}", markdown, mrkdwn);
        } else {
            prop_assert_eq!(words(&text), words(&markdown), "{:?} -> {:?}", markdown, mrkdwn);
        }
    }

    #[test]
    fn links_are_the_only_markup(label in "[a-z ]{1,10}", path in "[a-z/]{0,10}") {
        let mrkdwn = markdown_to_mrkdwn(&format!("see [{label}](https://example.com/{path}) <now>"));
        prop_assert!(mrkdwn.contains(&format!("<https://example.com/{path}|{label}>")), "{mrkdwn:?}");
        prop_assert!(mrkdwn.ends_with("&lt;now&gt;"), "{mrkdwn:?}");
    }
}

fn is_subsequence(needle: &[char], haystack: &[char]) -> bool {
    let mut hay = haystack.iter();
    needle.iter().all(|c| hay.any(|h| h == c))
}
