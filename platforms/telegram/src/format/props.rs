//! Properties of markdown → Telegram HTML over generated model output: the HTML is always
//! well-formed (only Telegram's tags, properly nested and closed, every `&` an entity) and no
//! text is dropped.

use proptest::prelude::*;

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

const TAGS: [&str; 6] = ["b", "i", "s", "code", "pre", "a"];

/// Checks the HTML: known tags only, each closed in order, entities only where `&` appears.
/// Returns its text with tags removed and entities decoded.
fn check_html(html: &str) -> Result<String, String> {
    let mut stack: Vec<String> = Vec::new();
    let mut text = String::new();
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        match c {
            '<' => {
                let end = rest.find('>').ok_or_else(|| format!("unclosed tag in {html:?}"))?;
                let tag = &rest[1..end];
                if let Some(name) = tag.strip_prefix('/') {
                    let open = stack.pop().ok_or_else(|| format!("</{name}> closes nothing in {html:?}"))?;
                    if open != name {
                        return Err(format!("</{name}> closes <{open}> in {html:?}"));
                    }
                } else {
                    let name = tag.split(' ').next().unwrap_or("");
                    if !TAGS.contains(&name) {
                        return Err(format!("unknown tag <{tag}> in {html:?}"));
                    }
                    let attrs = &tag[name.len()..];
                    if !(attrs.is_empty() || attrs.starts_with(" href=\"") || attrs.starts_with(" class=\"language-")) {
                        return Err(format!("unexpected attributes <{tag}> in {html:?}"));
                    }
                    if !attrs.matches('"').count().is_multiple_of(2) {
                        return Err(format!("unbalanced quotes <{tag}> in {html:?}"));
                    }
                    stack.push(name.to_owned());
                }
                rest = &rest[end + 1..];
            }
            '>' => return Err(format!("raw '>' in {html:?}")),
            '&' => {
                let (entity, decoded) = [("&amp;", '&'), ("&lt;", '<'), ("&gt;", '>'), ("&quot;", '"')]
                    .into_iter()
                    .find(|(entity, _)| rest.starts_with(entity))
                    .ok_or_else(|| format!("raw '&' in {html:?}"))?;
                text.push(decoded);
                rest = &rest[entity.len()..];
            }
            c => {
                text.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    match stack.last() {
        Some(open) => Err(format!("<{open}> never closed in {html:?}")),
        None => Ok(text),
    }
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
