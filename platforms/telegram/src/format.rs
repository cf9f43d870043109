//! The model's markdown → Telegram's HTML subset.
//!
//! It must always produce well-formed HTML (every tag it opens it closes, every `&`, `<`, `>` of
//! the input escaped) and never drop text: a marker it cannot pair stays as typed.

/// Converts markdown to Telegram HTML: bold, italic, strikethrough, inline code, fenced code,
/// links and headings; everything else is escaped text.
pub(crate) fn markdown_to_html(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len() + markdown.len() / 8);
    let lines: Vec<&str> = markdown.split('\n').collect();
    let mut index = 0;
    while index < lines.len() {
        if index > 0 {
            out.push('\n');
        }
        let line = lines[index];
        if let Some(lang) = fence_open(line)
            && let Some(close) = (index + 1..lines.len()).find(|&i| lines[i].trim() == "```")
        {
            push_pre(&mut out, lang, &lines[index + 1..close]);
            index = close + 1;
            continue;
        }
        match heading(line) {
            Some(title) => {
                out.push_str("<b>");
                inline(&mut out, &title.chars().collect::<Vec<_>>());
                out.push_str("</b>");
            }
            None => inline(&mut out, &line.chars().collect::<Vec<_>>()),
        }
        index += 1;
    }
    out
}

/// Escapes text for Telegram HTML (also safe inside a double-quoted attribute).
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    out
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '"' => out.push_str("&quot;"),
        _ => out.push(c),
    }
}

/// The info string of an opening fence line, if `line` is one.
fn fence_open(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("```")?;
    let lang = rest.trim();
    (!lang.contains('`')).then_some(lang)
}

fn push_pre(out: &mut String, lang: &str, body: &[&str]) {
    // Telegram accepts a language class only on a <code> directly inside <pre>.
    let lang = lang.split_whitespace().next().unwrap_or("");
    if lang.is_empty() {
        out.push_str("<pre><code>");
    } else {
        out.push_str("<pre><code class=\"language-");
        out.push_str(&escape(lang));
        out.push_str("\">");
    }
    out.push_str(&escape(&body.join("\n")));
    out.push_str("</code></pre>");
}

/// The title of an ATX heading line (`# x` to `###### x`).
fn heading(line: &str) -> Option<&str> {
    let hashes = line.len() - line.trim_start_matches('#').len();
    let rest = &line[hashes..];
    ((1..=6).contains(&hashes) && rest.starts_with([' ', '\t'])).then(|| rest.trim())
}

/// Renders one line's inline markup.
fn inline(out: &mut String, s: &[char]) {
    let mut i = 0;
    while i < s.len() {
        if let Some(next) = span(out, s, i) {
            i = next;
        } else {
            push_escaped(out, s[i]);
            i += 1;
        }
    }
}

/// Tries to render a span starting at `i`; returns where the text after it starts.
fn span(out: &mut String, s: &[char], i: usize) -> Option<usize> {
    match s[i] {
        '`' => {
            let close = (i + 1..s.len()).find(|&j| s[j] == '`').filter(|&j| j > i + 1)?;
            out.push_str("<code>");
            out.push_str(&escape(&s[i + 1..close].iter().collect::<String>()));
            out.push_str("</code>");
            Some(close + 1)
        }
        '[' => link(out, s, i),
        '*' | '_' | '~' if at(s, i + 1) == Some(s[i]) => {
            let tag = if s[i] == '~' { "s" } else { "b" };
            let (start, end) = double_span(s, i)?;
            wrap(out, tag, &s[start..end]);
            Some(end + 2)
        }
        '*' | '_' => {
            let close = single_close(s, i)?;
            wrap(out, "i", &s[i + 1..close]);
            Some(close + 1)
        }
        _ => None,
    }
}

fn at(s: &[char], i: usize) -> Option<char> {
    s.get(i).copied()
}

fn wrap(out: &mut String, tag: &str, content: &[char]) {
    out.push('<');
    out.push_str(tag);
    out.push('>');
    inline(out, content);
    out.push_str("</");
    out.push_str(tag);
    out.push('>');
}

/// The content range of `**x**`, `__x__` or `~~x~~` opening at `i`.
fn double_span(s: &[char], i: usize) -> Option<(usize, usize)> {
    let marker = s[i];
    let start = i + 2;
    if at(s, start).is_none_or(char::is_whitespace) {
        return None;
    }
    // A run of three markers (`***x***`) nests an italic inside: include it in the content.
    let mut close = (start + 1..s.len().saturating_sub(1))
        .find(|&j| s[j] == marker && s[j + 1] == marker && !s[j - 1].is_whitespace())?;
    if at(s, close + 2) == Some(marker) && s[start] == marker {
        close += 1;
    }
    Some((start, close))
}

/// The closing marker of an italic `*x*` or `_x_` opening at `i`.
fn single_close(s: &[char], i: usize) -> Option<usize> {
    let marker = s[i];
    if at(s, i + 1).is_none_or(char::is_whitespace) {
        return None;
    }
    // Underscores inside words (snake_case) are not emphasis.
    if marker == '_' && i > 0 && s[i - 1].is_alphanumeric() {
        return None;
    }
    let mut j = i + 1;
    while j < s.len() {
        if s[j] == marker && at(s, j + 1) == Some(marker) {
            j += 2;
            continue;
        }
        let closes = s[j] == marker
            && !s[j - 1].is_whitespace()
            && (marker != '_' || at(s, j + 1).is_none_or(|c| !c.is_alphanumeric()));
        if closes {
            return Some(j);
        }
        j += 1;
    }
    None
}

/// `[text](url)` opening at `i`.
fn link(out: &mut String, s: &[char], i: usize) -> Option<usize> {
    let text_end = (i + 1..s.len()).find(|&j| s[j] == ']')?;
    if at(s, text_end + 1) != Some('(') || text_end == i + 1 {
        return None;
    }
    let url_end = (text_end + 2..s.len()).find(|&j| s[j] == ')')?;
    let url: String = s[text_end + 2..url_end].iter().collect();
    if url.is_empty() || url.contains(char::is_whitespace) {
        return None;
    }
    out.push_str("<a href=\"");
    out.push_str(&escape(&url));
    out.push_str("\">");
    inline(out, &s[i + 1..text_end]);
    out.push_str("</a>");
    Some(url_end + 1)
}

#[cfg(any(fuzzing, test))]
pub(crate) mod html_check;

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_each_construct() {
        let table = [
            ("plain", "plain"),
            ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
            ("**bold** and __bold__", "<b>bold</b> and <b>bold</b>"),
            ("*it* and _it_", "<i>it</i> and <i>it</i>"),
            ("~~gone~~", "<s>gone</s>"),
            ("`a<b>`", "<code>a&lt;b&gt;</code>"),
            ("`**not bold**`", "<code>**not bold**</code>"),
            ("[site](https://x.y/?a=1&b=2)", "<a href=\"https://x.y/?a=1&amp;b=2\">site</a>"),
            ("[**b** l](https://x.y)", "<a href=\"https://x.y\"><b>b</b> l</a>"),
            ("# Title", "<b>Title</b>"),
            ("### Sub *x*", "<b>Sub <i>x</i></b>"),
            ("**bold _it_**", "<b>bold <i>it</i></b>"),
            ("*it **b** it*", "<i>it <b>b</b> it</i>"),
            ("***both***", "<b><i>both</i></b>"),
            ("say \"hi\"", "say &quot;hi&quot;"),
        ];
        for (input, want) in table {
            assert_eq!(markdown_to_html(input), want, "input {input:?}");
        }
    }

    #[test]
    fn fenced_code_becomes_pre_with_language() {
        let input = "before\n```rust\nfn main() { a < b }\n**x**\n```\nafter";
        let want = "before\n<pre><code class=\"language-rust\">fn main() { a &lt; b }\n**x**</code></pre>\nafter";
        assert_eq!(markdown_to_html(input), want);
        assert_eq!(markdown_to_html("```\nx\n```"), "<pre><code>x</code></pre>");
    }

    #[test]
    fn unbalanced_markers_stay_literal() {
        let table = [
            ("**open", "**open"),
            ("*open", "*open"),
            ("a * b * c", "a * b * c"),
            ("snake_case_name", "snake_case_name"),
            ("`open", "`open"),
            ("~~open", "~~open"),
            ("[text](no close", "[text](no close"),
            ("[text] (x)", "[text] (x)"),
            ("```rust\nno close", "```rust\nno close"),
            ("* item\n* item", "* item\n* item"),
            ("#nospace", "#nospace"),
            ("2 * 3 = 6 and 4*5", "2 * 3 = 6 and 4*5"),
        ];
        for (input, want) in table {
            assert_eq!(markdown_to_html(input), want, "input {input:?}");
        }
    }

    #[test]
    fn output_tags_are_always_balanced() {
        let inputs = ["**a *b** c*", "__a _b__ c_", "[**x](y)**", "***", "****", "*_*_", "`*`*`", "~~~~x~~"];
        for input in inputs {
            let html = markdown_to_html(input);
            for tag in ["b", "i", "s", "code", "a"] {
                let opens = html.matches(&format!("<{tag}>")).count() + html.matches(&format!("<{tag} ")).count();
                let closes = html.matches(&format!("</{tag}>")).count();
                assert_eq!(opens, closes, "{input:?} → {html:?}");
            }
        }
    }
}
