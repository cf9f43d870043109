//! A checker for the mrkdwn `markdown_to_mrkdwn` writes, over any input: the only `<…>` are the
//! links it writes (`<scheme://…|label>`, never a mention, channel or broadcast such as
//! `<@U1>` or `<!channel>`), no bare `&`, and the bold placeholder never leaks. Used by the fuzz
//! target (tests/fuzz) and the tests.

use super::BOLD;

/// Link targets the converter may write; anything else in `<…>` Slack would read as a mention
/// (`@`), a channel (`#`) or a broadcast (`!`).
const SCHEMES: [&str; 3] = ["http://", "https://", "mailto:"];

/// Checks `mrkdwn`; `Ok` carries the text Slack shows (link labels in place of links).
pub(crate) fn check_mrkdwn(mrkdwn: &str) -> Result<String, String> {
    if mrkdwn.contains(BOLD) {
        return Err(format!("bold placeholder leaked in {mrkdwn:?}"));
    }
    let mut text = String::new();
    let mut rest = mrkdwn;
    while let Some(c) = rest.chars().next() {
        match c {
            '<' => {
                let end = rest.find('>').ok_or_else(|| format!("unclosed '<' in {mrkdwn:?}"))?;
                let inner = &rest[1..end];
                let (url, label) = inner.split_once('|').ok_or_else(|| format!("<{inner}> is no link"))?;
                if !SCHEMES.iter().any(|scheme| url.starts_with(scheme)) || inner.contains('<') {
                    return Err(format!("<{inner}> is markup other than a link, in {mrkdwn:?}"));
                }
                text.push_str(&decode(label).ok_or_else(|| format!("bare '&' in label {label:?}"))?);
                rest = &rest[end + 1..];
            }
            '>' => return Err(format!("raw '>' in {mrkdwn:?}")),
            '&' => {
                let entity = ["&amp;", "&lt;", "&gt;"]
                    .into_iter()
                    .find(|entity| rest.starts_with(entity))
                    .ok_or_else(|| format!("bare '&' in {mrkdwn:?}"))?;
                text.push_str(&decode(entity).unwrap_or_default());
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

/// Decodes Slack's three entities; `None` for a bare `&`.
fn decode(escaped: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = escaped;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let (entity, decoded) =
            [("&amp;", '&'), ("&lt;", '<'), ("&gt;", '>')].into_iter().find(|(e, _)| rest[at..].starts_with(e))?;
        out.push(decoded);
        rest = &rest[at + entity.len()..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_converters_links_pass() {
        assert_eq!(check_mrkdwn("a &amp; <https://x.io/?a=1&amp;b|see &lt;it&gt;> b"), Ok("a & see <it> b".into()));
        for bad in ["<@U123>", "<!channel|hi>", "<@U1|x>", "<#C1|general>", "a & b", "a > b", "x\u{1}"] {
            assert!(check_mrkdwn(bad).is_err(), "{bad:?} passed");
        }
    }
}
