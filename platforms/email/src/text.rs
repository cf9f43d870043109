//! What the model sees of a mail body: quoted history (`> ` lines, "On … wrote:" blocks,
//! forwarded-original separators) and signatures (the `-- ` delimiter) trimmed away.
//!
//! Trimming never empties a message that had text: if everything would go, the untrimmed body
//! is kept.

/// The new text of a reply, without quoted history or signature.
pub(crate) fn trim_reply(body: &str) -> String {
    let body = body.replace("\r\n", "\n");
    let lines: Vec<&str> = body.split('\n').collect();
    let mut kept: Vec<&str> = Vec::with_capacity(lines.len());
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        let trimmed = line.trim_end();
        if trimmed == "--" || line == "-- " || is_separator(trimmed) {
            break;
        }
        if attribution_at(&lines, index) {
            break;
        }
        if !trimmed.trim_start().starts_with('>') {
            kept.push(trimmed);
        }
        index += 1;
    }
    let text = kept.join("\n").trim().to_owned();
    if text.is_empty() { body.trim().to_owned() } else { collapse_blank_runs(&text) }
}

/// Whether line `index` starts an attribution ("On Mon, 1 Jan 2024, Ann <a@x.org> wrote:"),
/// possibly wrapped over two lines, followed by quoted text or nothing.
fn attribution_at(lines: &[&str], index: usize) -> bool {
    let line = lines[index].trim();
    let joined = match lines.get(index + 1) {
        Some(next) if !line.ends_with(':') => format!("{line} {}", next.trim()),
        _ => line.to_owned(),
    };
    let lower = joined.to_ascii_lowercase();
    let starts = ["on ", "am ", "le ", "el ", "il ", "op "].iter().any(|p| lower.starts_with(p));
    let verbs = [" wrote", " schrieb", " a écrit", " escribió", " ha scritto", " schreef"];
    let ends = lower.ends_with(':') && verbs.iter().any(|v| lower.contains(v));
    starts && ends
}

fn is_separator(line: &str) -> bool {
    let lower = line.trim().to_ascii_lowercase();
    lower.starts_with("-----original message-----")
        || lower.starts_with("-------- original message --------")
        || lower.starts_with("---------- forwarded message")
        || (lower.len() >= 30 && lower.chars().all(|c| c == '_'))
}

fn collapse_blank_runs(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blanks = 0;
    for line in text.split('\n') {
        if line.trim().is_empty() {
            blanks += 1;
            if blanks > 1 {
                continue;
            }
        } else {
            blanks = 0;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
    }
    out
}

/// The subject with any number of leading `Re:` / `Fwd:` / `AW:` markers removed.
pub(crate) fn bare_subject(subject: &str) -> &str {
    let mut rest = subject.trim();
    loop {
        let lower = rest.to_ascii_lowercase();
        let Some(len) =
            ["re:", "fwd:", "fw:", "aw:", "sv:", "wg:"].iter().find(|p| lower.starts_with(*p)).map(|p| p.len())
        else {
            return rest;
        };
        rest = rest[len..].trim_start();
    }
}

/// The subject of a reply: `Re: ` once, whatever the original carried.
pub(crate) fn reply_subject(subject: &str) -> String {
    let bare = bare_subject(subject);
    if bare.is_empty() { "Re: your message".to_owned() } else { format!("Re: {bare}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_attributions_and_signatures_are_trimmed() {
        let cases = [
            ("plain", "Hello there\nSecond line", "Hello there\nSecond line"),
            ("quoted lines", "Yes please.\n\n> Shall I?\n> Really?", "Yes please."),
            (
                "attribution",
                "Sounds good.\n\nOn Mon, 1 Jan 2024 at 10:00, Agent <agent@example.com> wrote:\n> earlier text",
                "Sounds good.",
            ),
            (
                "wrapped attribution",
                "Fine.\nOn Mon, 1 Jan 2024 at 10:00, Some Long Name\n<agent@example.com> wrote:\n> x",
                "Fine.",
            ),
            ("german", "Ja.\n\nAm 01.01.2024 um 10:00 schrieb Agent:\n> x", "Ja."),
            ("signature", "Thanks!\n-- \nAnn\nACME Corp", "Thanks!"),
            ("outlook", "Ok\r\n\r\n-----Original Message-----\r\nFrom: x", "Ok"),
            ("underscores", "Ok\n________________________________\nFrom: x", "Ok"),
            ("interleaved", "> q1\nanswer 1\n> q2\nanswer 2", "answer 1\nanswer 2"),
            ("only a quote", "> just a quote", "> just a quote"),
            ("blank runs", "a\n\n\n\nb", "a\n\nb"),
        ];
        for (name, input, expected) in cases {
            assert_eq!(trim_reply(input), expected, "case {name}");
        }
    }

    #[test]
    fn subjects() {
        assert_eq!(reply_subject("Hello"), "Re: Hello");
        assert_eq!(reply_subject("Re: Hello"), "Re: Hello");
        assert_eq!(reply_subject("RE: re: Fwd: Hello"), "Re: Hello");
        assert_eq!(reply_subject("AW: Hallo"), "Re: Hallo");
        assert_eq!(reply_subject(""), "Re: your message");
        assert_eq!(reply_subject("Re:"), "Re: your message");
    }
}
