//! The model's markdown → the HTML part of a reply. Raw HTML in the markdown is shown as text,
//! never passed through: a reply must not carry markup (or tracking pixels) the model was
//! talked into writing.

use pulldown_cmark::{Event, Options, Parser, html};

/// A complete small HTML document rendering `markdown`.
pub(crate) fn markdown_to_html(markdown: &str) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let events = Parser::new_ext(markdown, options).map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        other => other,
    });
    let mut body = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut body, events);
    format!("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head><body>\n{body}</body></html>\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_renders_and_raw_html_is_escaped() {
        let html = markdown_to_html("**Bold** and `code`\n\n- one\n- two\n\n<img src=\"http://x/t.gif\">");
        assert!(html.contains("<strong>Bold</strong>"), "{html}");
        assert!(html.contains("<code>code</code>"));
        assert!(html.contains("<li>one</li>"));
        assert!(html.contains("&lt;img"), "{html}");
        assert!(!html.contains("<img"));
        assert!(html.starts_with("<!DOCTYPE html>"));
    }
}
