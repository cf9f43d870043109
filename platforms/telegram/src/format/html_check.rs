//! A checker for the HTML `markdown_to_html` writes: only Telegram's tags, properly nested and
//! closed, every `&` an entity. Shared by the property tests and the fuzz target (tests/fuzz).

const TAGS: [&str; 6] = ["b", "i", "s", "code", "pre", "a"];

/// Checks the HTML: known tags only, each closed in order, entities only where `&` appears.
/// Returns its text with tags removed and entities decoded.
pub(crate) fn check_html(html: &str) -> Result<String, String> {
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
