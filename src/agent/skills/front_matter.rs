//! The YAML front matter of a `SKILL.md`: the `---` block at its top, of which hermesd reads
//! `name`, `description` and `platforms`. A small reader for the YAML skills are written in
//! (plain, quoted and block scalars, flow and block lists); every other key (`license`,
//! `metadata`, `allowed-tools`, nested maps…) is skipped, never an error, so skills written
//! for other agents load unchanged.

/// What hermesd reads from the front matter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrontMatter {
    /// `name`, as written.
    pub name: Option<String>,
    /// `description`, folded onto one paragraph.
    pub description: Option<String>,
    /// `platforms`, lowercased: operating systems (`linux`, `macos`, `windows`) and/or chat
    /// platforms (`telegram`, `slack`…); empty means everywhere.
    pub platforms: Vec<String>,
}

/// Why a `SKILL.md` has no usable front matter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontMatterError {
    /// The file does not open with `---`.
    #[error("SKILL.md must start with a `---` line opening its YAML front matter")]
    Missing,
    /// No closing `---`.
    #[error("the front matter opened on line 1 is never closed by a `---` line")]
    Unclosed,
    /// A line of one of the keys hermesd reads is malformed.
    #[error("front matter line {line}: {reason}")]
    Invalid {
        /// 1-based line number in the file.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// Split `text` into its front matter and the body after it.
pub fn split(text: &str) -> Result<(FrontMatter, &str), FrontMatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().ok_or(FrontMatterError::Missing)?;
    if first.trim_end() != "---" {
        return Err(FrontMatterError::Missing);
    }
    let mut offset = first.len();
    let mut block = Vec::new();
    for line in lines {
        offset += line.len();
        let bare = line.trim_end();
        if bare == "---" || bare == "..." {
            return Ok((parse(&block)?, &text[offset..]));
        }
        block.push(line.trim_end_matches(['\n', '\r']));
    }
    Err(FrontMatterError::Unclosed)
}

/// One top-level key: the text after its colon and the lines below it (indented lines, blank
/// lines, and `- ` items at column 0, which YAML allows for a key's list).
struct Entry<'a> {
    line: usize,
    key: &'a str,
    inline: &'a str,
    below: Vec<&'a str>,
}

fn parse(block: &[&str]) -> Result<FrontMatter, FrontMatterError> {
    let mut entries: Vec<Entry<'_>> = Vec::new();
    for (index, line) in block.iter().enumerate() {
        if line.starts_with('#') {
            continue;
        }
        let top_level = !line.starts_with([' ', '\t', '-']);
        if line.trim().is_empty() || !top_level {
            if let Some(entry) = entries.last_mut() {
                entry.below.push(line);
            }
            continue;
        }
        // File line: the opening `---` is line 1, the block starts on line 2.
        let number = index + 2;
        let Some((key, inline)) = split_key(line) else {
            return Err(FrontMatterError::Invalid {
                line: number,
                reason: format!("expected `key: value`, found {line:?}"),
            });
        };
        entries.push(Entry { line: number, key, inline, below: Vec::new() });
    }
    let mut out = FrontMatter::default();
    for entry in &entries {
        match entry.key {
            "name" => out.name = scalar(entry)?,
            "description" => out.description = scalar(entry)?,
            "platforms" => out.platforms = list(entry)?.into_iter().map(|p| p.to_lowercase()).collect(),
            _ => {}
        }
    }
    Ok(out)
}

/// `key: rest` → (key, rest); the colon must end the line or be followed by a space.
fn split_key(line: &str) -> Option<(&str, &str)> {
    let at = line.match_indices(':').map(|(at, _)| at).find(|&at| {
        let after = &line[at + 1..];
        after.is_empty() || after.starts_with([' ', '\t'])
    })?;
    let key = line[..at].trim().trim_matches(['"', '\'']);
    (!key.is_empty()).then_some((key, line[at + 1..].trim()))
}

fn invalid(entry: &Entry<'_>, reason: impl Into<String>) -> FrontMatterError {
    FrontMatterError::Invalid { line: entry.line, reason: format!("`{}`: {}", entry.key, reason.into()) }
}

/// A scalar value: plain, quoted, or a `|` / `>` block; `None` when empty.
fn scalar(entry: &Entry<'_>) -> Result<Option<String>, FrontMatterError> {
    if entry.inline.starts_with(['"', '\'']) {
        let joined = fold(std::iter::once(entry.inline).chain(entry.below.iter().copied()));
        let (value, rest) = quoted(&joined).map_err(|reason| invalid(entry, reason))?;
        if !strip_comment(rest).is_empty() {
            return Err(invalid(entry, format!("unexpected text after the closing quote: {rest:?}")));
        }
        let value = value.trim().to_owned();
        return Ok((!value.is_empty()).then_some(value));
    }
    let inline = strip_comment(entry.inline);
    let value = if let Some(style) = inline.strip_prefix(['|', '>']) {
        if !style.chars().all(|c| matches!(c, '-' | '+') || c.is_ascii_digit()) {
            return Err(invalid(entry, format!("unsupported block scalar header {inline:?}")));
        }
        block_scalar(&entry.below, inline.starts_with('>'))
    } else {
        fold(std::iter::once(inline).chain(entry.below.iter().map(|l| strip_comment(l))))
    };
    let value = value.trim().to_owned();
    Ok((!value.is_empty()).then_some(value))
}

/// A list: `[a, "b"]`, `- a` lines below the key, or a single plain value.
fn list(entry: &Entry<'_>) -> Result<Vec<String>, FrontMatterError> {
    let inline = strip_comment(entry.inline);
    if inline.starts_with('[') {
        let joined = fold(std::iter::once(inline).chain(entry.below.iter().map(|l| strip_comment(l))));
        let inner = joined.strip_prefix('[').and_then(|s| s.strip_suffix(']'));
        let inner = inner.ok_or_else(|| invalid(entry, "a `[` list must end with `]`"))?;
        return inner.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|item| item_value(entry, item)).collect();
    }
    if !inline.is_empty() {
        return Ok(vec![item_value(entry, inline)?]);
    }
    let mut items = Vec::new();
    for line in &entry.below {
        let line = strip_comment(line.trim());
        if line.is_empty() {
            continue;
        }
        let item = line
            .strip_prefix('-')
            .ok_or_else(|| invalid(entry, format!("expected a `- item` line, found {line:?}")))?;
        items.push(item_value(entry, item.trim())?);
    }
    Ok(items)
}

fn item_value(entry: &Entry<'_>, item: &str) -> Result<String, FrontMatterError> {
    if item.starts_with(['"', '\'']) {
        let (value, rest) = quoted(item).map_err(|reason| invalid(entry, reason))?;
        if !rest.trim().is_empty() {
            return Err(invalid(entry, format!("unexpected text after the closing quote: {rest:?}")));
        }
        Ok(value)
    } else {
        Ok(item.to_owned())
    }
}

/// Lines joined by single spaces, blank lines kept as line breaks (YAML folding).
fn fold<'a>(lines: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    let mut pending_break = false;
    for line in lines.map(str::trim) {
        if line.is_empty() {
            pending_break = !out.is_empty();
            continue;
        }
        if pending_break {
            out.push('\n');
            pending_break = false;
        } else if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(line);
    }
    out
}

/// The text of a `|` (literal) or `>` (folded) block: the indented lines below the key.
fn block_scalar(below: &[&str], folded: bool) -> String {
    let indent = below.iter().filter(|l| !l.trim().is_empty()).map(|l| l.len() - l.trim_start().len()).min();
    let Some(indent) = indent else { return String::new() };
    let lines: Vec<&str> = below.iter().map(|l| l.get(indent..).unwrap_or("").trim_end()).collect();
    if folded { fold(lines.into_iter()) } else { lines.join("\n") }
}

/// A quoted string at the start of `text` → (its value, the text after the closing quote).
fn quoted(text: &str) -> Result<(String, &str), String> {
    let mut chars = text.char_indices();
    let Some((_, quote)) = chars.next() else { return Err("empty value".into()) };
    let mut value = String::new();
    while let Some((at, c)) = chars.next() {
        match (quote, c) {
            ('\'', '\'') if text[at + 1..].starts_with('\'') => {
                value.push('\'');
                chars.next();
            }
            (q, c) if c == q => return Ok((value, &text[at + 1..])),
            ('"', '\\') => {
                let (_, escaped) = chars.next().ok_or("a `\\` escape at the end of the value")?;
                match escaped {
                    'n' => value.push('\n'),
                    't' => value.push('\t'),
                    'r' => value.push('\r'),
                    '0' => value.push('\0'),
                    '"' | '\\' | '/' | '\'' | ' ' => value.push(escaped),
                    'u' => {
                        let hex: String = chars.by_ref().take(4).map(|(_, c)| c).collect();
                        let code = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                        value.push(code.ok_or_else(|| format!("bad unicode escape \\u{hex}"))?);
                    }
                    other => return Err(format!("unsupported escape \\{other}")),
                }
            }
            _ => value.push(c),
        }
    }
    Err(format!("the {quote} quote is never closed"))
}

/// `value # comment` → `value` (a `#` starts a comment only after whitespace, outside quotes).
fn strip_comment(text: &str) -> &str {
    let mut quote = None;
    let mut previous = ' ';
    let mut escaped = false;
    for (at, c) in text.char_indices() {
        if std::mem::take(&mut escaped) {
            previous = c;
            continue;
        }
        match (quote, c) {
            (Some('"'), '\\') => escaped = true,
            (None, '"' | '\'') if previous.is_whitespace() || previous == '[' || previous == ',' => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if previous.is_whitespace() => return text[..at].trim_end(),
            _ => {}
        }
        previous = c;
    }
    text.trim()
}

#[cfg(test)]
mod tests;
