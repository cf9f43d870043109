//! The model's markdown → Slack mrkdwn.
//!
//! It must never drop text: a marker it cannot pair stays as typed. `&`, `<` and `>` of the input
//! are always escaped (Slack reads `<…>` as links and mentions), so only the links this converter
//! writes itself are markup.

/// Stands in for a bold `*` until italics are converted, so `**bold**` does not become italic.
const BOLD: char = '\u{1}';

/// Converts markdown to mrkdwn: bold, italic, strikethrough, links, headings and bullets; code
/// (inline and fenced) is kept verbatim apart from escaping.
pub(crate) fn markdown_to_mrkdwn(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len() + markdown.len() / 8);
    let mut in_fence = false;
    for (index, line) in markdown.split('\n').enumerate() {
        if index > 0 {
            out.push('\n');
        }
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            // Slack ignores a language tag after the fence and would show it as code; text after
            // a closing fence is still text, escaped like any other.
            if in_fence {
                out.push_str("```");
            } else {
                out.push_str(&escape(line.trim()));
            }
            continue;
        }
        if in_fence {
            out.push_str(&escape(line));
            continue;
        }
        out.push_str(&convert_line(line));
    }
    out.replace(BOLD, "*")
}

fn convert_line(line: &str) -> String {
    let indent = &line[..line.len() - line.trim_start().len()];
    let body = line.trim_start();
    if let Some(title) = heading(body) {
        return format!("{indent}{BOLD}{}{BOLD}", inline(title));
    }
    if let Some(item) = body.strip_prefix("- ").or_else(|| body.strip_prefix("* ")) {
        return format!("{indent}• {}", inline(item));
    }
    format!("{indent}{}", inline(body))
}

fn heading(line: &str) -> Option<&str> {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    let rest = line.get(hashes..)?;
    ((1..=6).contains(&hashes) && rest.starts_with(' ')).then(|| rest.trim())
}

/// Converts one line outside code fences; inline code spans are kept verbatim.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (index, part) in text.split('`').enumerate() {
        if index > 0 {
            out.push('`');
        }
        // Odd parts sit between backticks; an unpaired last backtick leaves ordinary text.
        let is_code = index % 2 == 1 && text.matches('`').count() > index;
        if is_code {
            out.push_str(&escape(part));
        } else {
            out.push_str(&styles(&links(part)));
        }
    }
    out
}

/// The URL schemes a `[label](url)` may link to. Anything else inside `<…>` Slack reads as markup
/// of its own: `<!channel|x>` pings everyone, `<@U1|x>` mentions a user, `<#C1|x>` links a
/// channel, so such a "link" from the model stays text.
const LINK_SCHEMES: [&str; 3] = ["https://", "http://", "mailto:"];

/// `[label](url)` → `<url|label>` for web and mail URLs; everything else escaped.
fn links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let parsed = after.find("](").and_then(|close| {
            let url_part = &after[close + 2..];
            let end = url_part.find(')')?;
            let (label, url) = (&after[..close], &url_part[..end]);
            let ok = !label.is_empty()
                && !label.contains(['[', ']'])
                && LINK_SCHEMES.iter().any(|scheme| url.starts_with(scheme))
                && !url.contains(char::is_whitespace);
            ok.then(|| (label, url, open + 1 + close + 2 + end + 1))
        });
        match parsed {
            Some((label, url, consumed)) => {
                out.push_str(&escape(&rest[..open]));
                out.push_str(&format!("<{}|{}>", escape(url), escape(label)));
                rest = &rest[consumed..];
            }
            None => {
                out.push_str(&escape(&rest[..=open]));
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(&escape(rest));
    out
}

fn styles(text: &str) -> String {
    let text = pairs(text, "**", &BOLD.to_string());
    let text = pairs(&text, "__", &BOLD.to_string());
    let text = pairs(&text, "~~", "~");
    pairs(&text, "*", "_")
}

/// Replaces paired `delim…delim` on one line with `mark…mark`, when the content is non-empty and
/// does not start or end with a space (as markdown requires); unpaired markers stay as typed.
fn pairs(text: &str, delim: &str, mark: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(delim) {
        let after = &rest[start + delim.len()..];
        let close = after.find(delim).filter(|&end| {
            let inner = &after[..end];
            !inner.is_empty() && !inner.starts_with(' ') && !inner.ends_with(' ')
        });
        match close {
            Some(end) => {
                out.push_str(&rest[..start]);
                out.push_str(mark);
                out.push_str(&after[..end]);
                out.push_str(mark);
                rest = &after[end + delim.len()..];
            }
            None => {
                out.push_str(&rest[..start + delim.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Escapes the three characters Slack treats as markup in text.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(any(fuzzing, test))]
pub(crate) mod mrkdwn_check;

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_after_a_closing_fence_is_escaped() {
        // Found by the property tests: a closing fence line went out raw, so a mention after it
        // would ping.
        assert_eq!(markdown_to_mrkdwn("```\ncode\n```<@U1>"), "```\ncode\n```&lt;@U1&gt;");
    }

    #[test]
    fn links_to_mentions_channels_and_broadcasts_stay_text() {
        // Found by the fuzz target (tests/fuzz, slack_markdown): `[x](!channel)` became
        // `<!channel|x>`, which pings the whole channel; `@` and `#` targets mention a user or
        // a channel the same way.
        let table = [
            ("[hi](!channel)", "[hi](!channel)"),
            ("[x](@U123)", "[x](@U123)"),
            ("[general](#C1)", "[general](#C1)"),
            ("[team](!subteam^S1)", "[team](!subteam^S1)"),
            ("[run](javascript:alert(1))", "[run](javascript:alert(1))"),
        ];
        for (markdown, want) in table {
            assert_eq!(markdown_to_mrkdwn(markdown), want, "{markdown:?}");
            assert!(mrkdwn_check::check_mrkdwn(&markdown_to_mrkdwn(markdown)).is_ok(), "{markdown:?}");
        }
    }

    #[test]
    fn markdown_becomes_mrkdwn() {
        let table = [
            ("plain text", "plain text"),
            ("**bold** and *italic* and _also_", "*bold* and _italic_ and _also_"),
            ("__bold__ ~~gone~~", "*bold* ~gone~"),
            ("# Title\n## Sub *x*", "*Title*\n*Sub _x_*"),
            ("- one\n* two\n  - nested", "• one\n• two\n  • nested"),
            ("see [the docs](https://x.io/a?b=1&c=2)", "see <https://x.io/a?b=1&amp;c=2|the docs>"),
            ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
            ("<@U123> is not a mention here", "&lt;@U123&gt; is not a mention here"),
            ("`**not bold** <x>` but **bold**", "`**not bold** &lt;x&gt;` but *bold*"),
            ("```rust\nlet a = 1 < 2; // **x**\n```", "```\nlet a = 1 &lt; 2; // **x**\n```"),
            ("2 * 3 * 4 and a lone ** marker", "2 * 3 * 4 and a lone ** marker"),
            ("[not a link] (x) and [empty]()", "[not a link] (x) and [empty]()"),
            ("[a] b [c](https://d.io)", "[a] b <https://d.io|c>"),
            ("[c](d) and [m](mailto:a@b.io)", "[c](d) and <mailto:a@b.io|m>"),
            ("an unpaired ` backtick *here*", "an unpaired ` backtick _here_"),
        ];
        for (markdown, want) in table {
            assert_eq!(markdown_to_mrkdwn(markdown), want, "{markdown:?}");
        }
    }

    #[test]
    fn no_text_is_lost() {
        let text = "émoji 👍🏽 **half open and [x](y z) `tick";
        let out = markdown_to_mrkdwn(text);
        for word in ["émoji", "👍🏽", "half", "open", "[x](y z)", "`tick"] {
            assert!(out.contains(word), "{word} missing from {out}");
        }
    }
}
