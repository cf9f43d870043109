//! Properties of markdown → Telegram HTML over generated model output: the HTML is always
//! well-formed (only Telegram's tags, properly nested and closed, every `&` an entity) and no
//! text is dropped.

use proptest::prelude::*;

use super::html_check::check_html;
use super::*;

/// Model-like markdown: words and every marker the converter knows, unpaired ones included.
fn markdown() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-zA-Z0-9]{1,8}",
        2 => Just(" ".to_owned()),
        1 => Just("\n".to_owned()),
        3 => prop::sample::select(vec![
            "**", "*", "_", "__", "~~", "`", "```", "\n```py\n", "\n```\n", "# ", "\n## ", "[", "](", ")",
            "](https://example.com/a?b=1&c=2)", "<", ">", "&", "\"", "'", "&amp;", "<b>", "é", "😀",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(piece, 0..60).prop_map(|pieces| pieces.concat())
}

fn words(text: &str) -> Vec<char> {
    text.chars().filter(|c| c.is_alphanumeric()).collect()
}

/// The same without what moves text into attributes (link URLs, fence info strings), so every
/// letter must come through as text.
fn plain_markdown() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-zA-Z0-9]{1,8}",
        2 => Just(" ".to_owned()),
        1 => Just("\n".to_owned()),
        3 => prop::sample::select(vec![
            "**", "*", "_", "__", "~~", "`", "\n```\n", "# ", "\n## ", "[", "]", ")", "<", ">", "&", "\"", "é",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(piece, 0..60).prop_map(|pieces| pieces.concat())
}

proptest! {
    #[test]
    fn html_is_well_formed(markdown in markdown()) {
        let html = markdown_to_html(&markdown);
        check_html(&html).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn no_text_is_dropped(markdown in plain_markdown()) {
        let html = markdown_to_html(&markdown);
        let text = check_html(&html).map_err(TestCaseError::fail)?;
        prop_assert_eq!(words(&text), words(&markdown), "{:?} -> {:?}", markdown, html);
    }

    #[test]
    fn escaped_text_is_exactly_the_input(text in "\\PC{0,80}") {
        let html = escape(&text);
        prop_assert_eq!(check_html(&html).map_err(TestCaseError::fail)?, text);
    }
}
