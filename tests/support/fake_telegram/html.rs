//! Telegram's HTML parse mode as the fake checks it: known tags only, closed in order, and the
//! visible text (what the 4096-unit limit applies to).

/// Tags Telegram's HTML parse mode knows.
const TAGS: &str = "b strong i em u ins s strike del span tg-spoiler a code pre blockquote tg-emoji";

/// Telegram's HTML rules: only known tags, every tag closed, closed in order.
pub fn check_html(text: &str) -> Result<(), String> {
    let mut open: Vec<String> = Vec::new();
    let mut at = 0;
    while let Some(found) = text[at..].find('<') {
        let start = at + found;
        let Some(len) = text[start..].find('>') else {
            return Err(format!("Unclosed start tag at byte offset {start}"));
        };
        let inner = &text[start + 1..start + len];
        if let Some(name) = inner.strip_prefix('/') {
            let name = name.trim().to_lowercase();
            match open.pop() {
                Some(expected) if expected == name => {}
                Some(expected) => {
                    return Err(format!(
                        "Unmatched end tag at byte offset {start}, expected \"</{expected}>\", found \"</{name}>\""
                    ));
                }
                None => return Err(format!("Unexpected end tag at byte offset {start}")),
            }
        } else {
            let name = inner.split_whitespace().next().unwrap_or_default().to_lowercase();
            if !TAGS.split(' ').any(|tag| tag == name) {
                return Err(format!("Unsupported start tag \"{name}\" at byte offset {start}"));
            }
            open.push(name);
        }
        at = start + len + 1;
    }
    match open.pop() {
        Some(name) => Err(format!("Can't find end tag corresponding to start tag \"{name}\"")),
        None => Ok(()),
    }
}

/// The text of Telegram HTML as a user sees it: tags dropped, entities decoded.
pub fn visible_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        if c == '<'
            && let Some(end) = rest.find('>')
        {
            rest = &rest[end + 1..];
            continue;
        }
        if c == '&'
            && let Some(end) = rest.find(';').filter(|&e| e <= 10)
            && let Some(decoded) = entity(&rest[1..end])
        {
            out.push(decoded);
            rest = &rest[end + 1..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn entity(name: &str) -> Option<char> {
    match name {
        "lt" => Some('<'),
        "gt" => Some('>'),
        "amp" => Some('&'),
        "quot" => Some('"'),
        _ => {
            let number = name.strip_prefix('#')?;
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            char::from_u32(code)
        }
    }
}
