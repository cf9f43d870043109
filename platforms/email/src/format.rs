//! The model's markdown → the HTML part of a reply. Raw HTML in the markdown is shown as text,
//! never passed through: a reply must not carry markup (or tracking pixels) the model was
//! talked into writing. Nor does it carry an `<img>`: a mail client loads a remote image when the
//! mail is opened, which tells whoever serves it that, when and from where; an image is rendered
//! as a link to it, or as its alt text inside another link.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd, html};

/// A complete small HTML document rendering `markdown`.
pub(crate) fn markdown_to_html(markdown: &str) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    // Links open around the current event; an image inside one must not open another, since
    // HTML does not nest anchors. Each image remembers whether it became a link, for its end.
    let mut links = 0usize;
    let mut images: Vec<bool> = Vec::new();
    let events = Parser::new_ext(markdown, options).filter_map(move |event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Some(Event::Text(raw)),
        Event::Start(Tag::Link { link_type, dest_url, title, id }) => {
            links += 1;
            Some(Event::Start(Tag::Link { link_type, dest_url, title, id }))
        }
        Event::End(TagEnd::Link) => {
            links = links.saturating_sub(1);
            Some(Event::End(TagEnd::Link))
        }
        Event::Start(Tag::Image { link_type, dest_url, title, id }) => {
            let as_link = links == 0;
            images.push(as_link);
            links += usize::from(as_link);
            as_link.then_some(Event::Start(Tag::Link { link_type, dest_url, title, id }))
        }
        Event::End(TagEnd::Image) => {
            let was_link = images.pop().unwrap_or(false);
            links -= usize::from(was_link);
            was_link.then_some(Event::End(TagEnd::Link))
        }
        other => Some(other),
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

    #[test]
    fn markdown_images_become_links_never_remote_loads() {
        let html = markdown_to_html("See ![the chart](https://tracker.example/p.gif?u=1 \"t\") here");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("<a href=\"https://tracker.example/p.gif?u=1\" title=\"t\">the chart</a>"), "{html}");

        let html = markdown_to_html(
            "![logo][r] and [![badge](http://x.example/b.svg)](https://site.example)\n\n[r]: http://x.example/l.png",
        );
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("<a href=\"http://x.example/l.png\">logo</a>"), "{html}");
        // An image inside a link keeps only its alt text: a link may not hold another.
        assert!(html.contains("<a href=\"https://site.example\">badge</a>"), "{html}");

        let html = markdown_to_html("![outer ![inner](http://x.example/i.png)](http://x.example/o.png)");
        assert!(!html.contains("<img"), "{html}");
        assert_eq!(html.matches("<a ").count(), 1, "{html}");
    }
}
