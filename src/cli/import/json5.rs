//! JSON5 as OpenClaw's config allows it, read by turning it into JSON: comments (`//`, `/* */`),
//! trailing commas, unquoted keys, single-quoted strings, and `+`, hex and leading- or
//! trailing-dot numbers. Text inside strings is never touched.

use serde_json::Value;

/// Parse `text` (JSON5 or JSON).
pub(crate) fn parse(text: &str) -> Result<Value, String> {
    serde_json::from_str(&to_json(text)?).map_err(|e| e.to_string())
}

/// `text` rewritten as strict JSON.
fn to_json(text: &str) -> Result<String, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' => {
                let (string, next) = string(&chars, i)?;
                out.push_str(&string);
                i = next;
            }
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                i += 2;
                while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                    i += 1;
                }
                i += 2;
            }
            ',' => {
                // A comma before a closing bracket (comments and blanks between) is dropped.
                let mut j = i + 1;
                loop {
                    while j < chars.len() && chars[j].is_whitespace() {
                        j += 1;
                    }
                    if chars.get(j) == Some(&'/') && chars.get(j + 1) == Some(&'/') {
                        while j < chars.len() && chars[j] != '\n' {
                            j += 1;
                        }
                    } else if chars.get(j) == Some(&'/') && chars.get(j + 1) == Some(&'*') {
                        j += 2;
                        while j < chars.len() && !(chars[j] == '*' && chars.get(j + 1) == Some(&'/')) {
                            j += 1;
                        }
                        j += 2;
                    } else {
                        break;
                    }
                }
                if !matches!(chars.get(j), Some('}' | ']')) {
                    out.push(',');
                }
                i += 1;
            }
            c if c.is_alphabetic() || c == '_' || c == '$' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let mut j = i;
                while j < chars.len() && chars[j].is_whitespace() {
                    j += 1;
                }
                match word.as_str() {
                    _ if chars.get(j) == Some(&':') => out.push_str(&serde_json::to_string(&word).expect("a string")),
                    "true" | "false" | "null" => out.push_str(&word),
                    "Infinity" | "NaN" => out.push_str("null"),
                    _ => return Err(format!("unexpected word {word:?}")),
                }
            }
            '+' => i += 1,
            '0' if matches!(chars.get(i + 1), Some('x' | 'X')) => {
                let start = i + 2;
                i = start;
                while i < chars.len() && chars[i].is_ascii_hexdigit() {
                    i += 1;
                }
                let digits: String = chars[start..i].iter().collect();
                let value = u64::from_str_radix(&digits, 16).map_err(|e| format!("hex number 0x{digits}: {e}"))?;
                out.push_str(&value.to_string());
            }
            c if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) => {
                // A whole number: `.5` and `5.` are `0.5` and `5.0` in JSON.
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_digit()
                        || chars[i] == '.'
                        || matches!(chars[i], 'e' | 'E')
                        || (matches!(chars[i], '+' | '-') && matches!(chars[i - 1], 'e' | 'E')))
                {
                    i += 1;
                }
                let number: String = chars[start..i].iter().collect();
                let number = if number.starts_with('.') { format!("0{number}") } else { number };
                out.push_str(&number.replace(".e", ".0e").replace(".E", ".0E"));
                if number.ends_with('.') {
                    out.push('0');
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// The string starting at `chars[start]` (either quote) as a JSON string, and where it ends.
fn string(chars: &[char], start: usize) -> Result<(String, usize), String> {
    let quote = chars[start];
    let mut value = String::new();
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            c if c == quote => return Ok((serde_json::to_string(&value).expect("a string"), i + 1)),
            '\\' => {
                let Some(&next) = chars.get(i + 1) else { break };
                i += 2;
                match next {
                    'n' => value.push('\n'),
                    't' => value.push('\t'),
                    'r' => value.push('\r'),
                    'b' => value.push('\u{8}'),
                    'f' => value.push('\u{c}'),
                    '0' => value.push('\0'),
                    '\n' => {}
                    'u' => {
                        let hex: String = chars.get(i..i + 4).map(|h| h.iter().collect()).unwrap_or_default();
                        let code = u32::from_str_radix(&hex, 16).map_err(|_| format!("bad escape \\u{hex}"))?;
                        // A surrogate pair: the low half follows as another \u escape.
                        let code = if (0xD800..0xDC00).contains(&code)
                            && chars.get(i + 4) == Some(&'\\')
                            && chars.get(i + 5) == Some(&'u')
                        {
                            let low: String = chars.get(i + 6..i + 10).map(|h| h.iter().collect()).unwrap_or_default();
                            let low = u32::from_str_radix(&low, 16).map_err(|_| format!("bad escape \\u{low}"))?;
                            i += 6;
                            0x10000 + ((code - 0xD800) << 10) + (low.wrapping_sub(0xDC00) & 0x3FF)
                        } else {
                            code
                        };
                        value.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                        i += 4;
                    }
                    other => value.push(other),
                }
            }
            c => {
                value.push(c);
                i += 1;
            }
        }
    }
    Err("a string that does not end".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json5_becomes_json_and_strings_stay_as_written() {
        let text = r#"{
            // the bot
            channels: { telegram: { botToken: '123:ABC', allowFrom: ["1", "2",], }, },
            /* a block */ url: "http://x/y // not a comment",
            quote: 'it\'s', n: +5, h: 0x1F, d: .5, e: 2., f: 12.25, g: -3, x: 1e3,
        }"#;
        let value = parse(text).unwrap();
        assert_eq!(value["channels"]["telegram"]["botToken"], "123:ABC");
        assert_eq!(value["channels"]["telegram"]["allowFrom"], serde_json::json!(["1", "2"]));
        assert_eq!(value["url"], "http://x/y // not a comment");
        assert_eq!(value["quote"], "it's");
        assert_eq!((value["n"].as_i64(), value["h"].as_i64()), (Some(5), Some(31)));
        assert_eq!((value["d"].as_f64(), value["e"].as_f64()), (Some(0.5), Some(2.0)));
        assert_eq!(
            (value["f"].as_f64(), value["g"].as_i64(), value["x"].as_f64()),
            (Some(12.25), Some(-3), Some(1000.0))
        );
        assert!(parse("{ a: 'open").is_err());
        assert!(parse("{ a: nope }").is_err());
    }
}
