//! Splitting a reply into messages that fit a platform's length limit.
//!
//! It must never split a grapheme cluster (unless one cluster alone exceeds the limit), never
//! leave a code fence open across a message boundary, and never panic or loop on any input.
//!
//! `chunk` and `measure` count a platform's limit in chars or UTF-16 units (`LengthUnit`), prefer
//! to split at blank lines, then newlines, then spaces, and close a code fence at the end of a
//! chunk and reopen it at the start of the next.

use unicode_segmentation::GraphemeCursor;

use crate::LengthUnit;

#[cfg(any(fuzzing, test))]
pub(crate) mod check;

/// Below this limit fence markers would crowd out the text, so fences are left as they are.
const MIN_FENCE_LIMIT: usize = 16;
/// Appended to a chunk that ends inside a code block.
const CLOSE_FENCE: &str = "\n```";
/// `CLOSE_FENCE` is ASCII, so its length is the same in every unit.
const CLOSE_LEN: usize = CLOSE_FENCE.len();

/// Length of `text` counted in `unit` (chars = Unicode scalar values, Utf16 = UTF-16 code units).
pub fn measure(text: &str, unit: LengthUnit) -> usize {
    match unit {
        LengthUnit::Chars => text.chars().count(),
        LengthUnit::Utf16 => text.chars().map(char::len_utf16).sum(),
    }
}

/// Split `text` into chunks each at most `limit` long counted in `unit`.
///
/// Text that fits is returned unchanged as one chunk; empty or whitespace-only text gives an
/// empty `Vec`. A chunk breaks at the last blank line in the back half of the window, else at the
/// last newline, else at the last space, else between grapheme clusters; the line breaks or space
/// broken at are dropped. A chunk that ends inside a fenced code block gets a closing fence line,
/// and the next one reopens the fence with its info string, both counted in the limit, so every
/// chunk of a split reply has balanced fences. Limits below 16 skip the fence handling.
///
/// A grapheme cluster wider than the room left is split between characters; that only happens
/// with tiny limits. A limit of 0 is treated as 1, and a single character wider than the limit
/// (a surrogate pair against a UTF-16 limit of 1) is emitted alone rather than dropped.
pub fn chunk(text: &str, limit: usize, unit: LengthUnit) -> Vec<String> {
    plan(text, limit, unit).iter().map(|piece| piece.render(text)).collect()
}

/// One planned chunk: a slice of the input plus the fence markers added around it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Piece {
    /// The fence line reopening a code block the previous chunk closed, newline included.
    reopen: Option<String>,
    /// Byte range of the input this chunk carries.
    start: usize,
    end: usize,
    /// Whether `CLOSE_FENCE` is appended.
    close: bool,
}

impl Piece {
    fn render(&self, text: &str) -> String {
        let body = &text[self.start..self.end];
        let header = self.reopen.as_deref().unwrap_or("");
        let mut out = String::with_capacity(header.len() + body.len() + CLOSE_LEN);
        out.push_str(header);
        out.push_str(body);
        if self.close {
            out.push_str(CLOSE_FENCE);
        }
        out
    }
}

/// Where a chunk's body ends and the next one starts (the bytes between are dropped whitespace).
#[derive(Debug, Clone, Copy)]
struct Cut {
    end: usize,
    next: usize,
    /// The body's length in the unit, so callers need not measure it again.
    units: usize,
    /// The rest of the text fitted; this is the last chunk.
    last: bool,
}

impl Cut {
    /// A cut that is the last one exactly when nothing follows `next`.
    fn new(end: usize, next: usize, units: usize, text: &str) -> Self {
        Self { end, next, units, last: next >= text.len() }
    }
}

/// Fence state at the end of a body.
#[derive(Default)]
struct FenceScan {
    /// Info string of the code block still open, if any.
    open: Option<String>,
    /// Byte offset in the body of the line that opened that block, when it is in this body.
    opened_at: Option<usize>,
}

/// The chunks as slices of `text` plus markers, so tests can check nothing was lost.
fn plan(text: &str, limit: usize, unit: LengthUnit) -> Vec<Piece> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    let limit = limit.max(1);
    // A byte count bounds both units from above, which saves measuring most short replies.
    if text.len() <= limit || measure(text, unit) <= limit {
        return vec![Piece { reopen: None, start: 0, end: text.len(), close: false }];
    }
    let fences = limit >= MIN_FENCE_LIMIT;
    let mut pieces = Vec::new();
    let mut open: Option<String> = None;
    let mut start = 0;
    while start < text.len() {
        let reopen = open.as_deref().map(|info| reopen_header(info, limit, unit));
        let header_len = reopen.as_deref().map_or(0, |h| measure(h, unit));
        let room = limit.saturating_sub(header_len).max(1);
        // The room left when the closing marker must fit as well.
        let tight = room.saturating_sub(CLOSE_LEN).max(1);
        let mut cut = find_cut(text, start, room, unit, true);
        let mut scan = scan_if(fences, open.as_deref(), &text[start..cut.end]);
        if scan.open.is_some() && !cut.last {
            // Swallowing the original closing fence costs about what our own would, and spares
            // the next chunk an empty code block.
            if let Some(line_end) = closing_line_after(text, cut) {
                let extra = measure(&text[cut.end..line_end], unit);
                if header_len + cut.units + extra <= limit {
                    let next = skip_newlines(text, line_end);
                    cut = Cut::new(line_end, next, cut.units + extra, text);
                    scan = scan_if(fences, open.as_deref(), &text[start..cut.end]);
                }
            }
        }
        if scan.open.is_some() && header_len + cut.units + CLOSE_LEN > limit {
            // The closing marker must fit too: cut again with room for it.
            cut = find_cut(text, start, tight, unit, true);
            scan = scan_if(fences, open.as_deref(), &text[start..cut.end]);
        }
        if !cut.last && scan.opened_at == Some(0) && !text[start..cut.end].trim_end().contains('\n') {
            // Nothing but the line opening a block would make an empty code block: the line after
            // it is too long for the room, so break inside that line instead.
            cut = find_cut(text, start, tight, unit, false);
            scan = scan_if(fences, open.as_deref(), &text[start..cut.end]);
        }
        if !cut.last
            && let Some(at) = scan.opened_at
            && !text[start + at..cut.end].contains('\n')
        {
            // A chunk ending on the line that opens a block would show an empty code block;
            // move that line to the next chunk when something else is left here.
            let end = start + text[start..start + at].trim_end_matches(['\n', '\r']).len();
            if !text[start..end].trim().is_empty() {
                cut = Cut::new(end, start + at, measure(&text[start..end], unit), text);
                scan = scan_if(fences, open.as_deref(), &text[start..end]);
            }
        }
        if !text[start..cut.end].trim().is_empty() {
            pieces.push(Piece { reopen, start, end: cut.end, close: scan.open.is_some() });
        }
        open = scan.open;
        start = cut.next;
    }
    pieces
}

/// The fence line that reopens a block. An info string is dropped when the markers would take
/// more than half the limit, so a reopened chunk keeps room for text and wide graphemes.
fn reopen_header(info: &str, limit: usize, unit: LengthUnit) -> String {
    let header = format!("```{info}\n");
    if (measure(&header, unit) + CLOSE_LEN) * 2 <= limit { header } else { "```\n".to_owned() }
}

/// Finds the longest body starting at `start` that fits `room`, at the best break point; line
/// breaks are skipped as break points when `at_lines` is false.
///
/// It walks characters, not grapheme clusters: segmenting every cluster costs several times more,
/// and boundaries are only needed where a break is actually taken.
fn find_cut(text: &str, start: usize, room: usize, unit: LengthUnit, at_lines: bool) -> Cut {
    let rest = &text[start..];
    // Each candidate is (relative byte offset where the body ends, body units there).
    let mut blank: Option<(usize, usize)> = None;
    let mut newline: Option<(usize, usize)> = None;
    let mut space: Option<(usize, usize, usize)> = None;
    // The line-break run being walked: (offset of its first break, units there, line feeds).
    let mut run: Option<(usize, usize, usize)> = None;
    let mut used = 0;
    let mut window = None;
    for (i, c) in rest.char_indices() {
        // Candidates are recorded before the fit test: breaking at the first character that does
        // not fit is fine when it is a newline or space, since it gets dropped.
        if c == '\n' || c == '\r' {
            let feeds = usize::from(c == '\n');
            let (at, units, count) = run.map_or((i, used, feeds), |(a, u, n)| (a, u, n + feeds));
            run = Some((at, units, count));
            if at > 0 {
                newline = Some((at, units));
                if count >= 2 {
                    blank = Some((at, units));
                }
            }
        } else {
            run = None;
            if i > 0 && c.is_whitespace() && !matches!(c, '\u{a0}' | '\u{2007}' | '\u{202f}') {
                space = Some((i, used, c.len_utf8()));
            }
        }
        let width = match unit {
            LengthUnit::Chars => 1,
            LengthUnit::Utf16 => c.len_utf16(),
        };
        if used + width > room {
            window = Some(i);
            break;
        }
        used += width;
    }
    let Some(window) = window else {
        return Cut::new(text.len(), text.len(), used, text);
    };
    let blank = blank.filter(|&(_, units)| units * 2 >= room);
    // Line breaks always sit on grapheme boundaries, so these need no check.
    if at_lines && let Some((at, units)) = blank.or(newline) {
        let end = start + at;
        return Cut::new(end, skip_newlines(text, end), units, text);
    }
    // Without line breaks, a space on an earlier line would leave that line alone again.
    let space = space.filter(|&(at, ..)| at_lines || newline.is_none_or(|(line, _)| at > line));
    // A space followed by a combining mark belongs to that mark's cluster.
    if let Some((at, units, width)) = space
        && is_boundary(rest, at)
        && is_boundary(rest, at + width)
    {
        return Cut::new(start + at, start + at + width, units, text);
    }
    // Boundaries are looked up in `rest` alone, which keeps the look-back within the window.
    let boundary = last_boundary(rest, window);
    if boundary > 0 {
        let units = used - measure(&rest[boundary..window], unit);
        return Cut::new(start + boundary, start + boundary, units, text);
    }
    // One grapheme is wider than the room: split it between characters, taking at least one
    // character so the loop always advances.
    let taken = if window > 0 { window } else { rest.chars().next().map_or(0, char::len_utf8) };
    let end = start + taken;
    Cut::new(end, end, measure(&text[start..end], unit), text)
}

/// Whether `at` is a grapheme cluster boundary of `text`, which must start on one; unsure answers
/// count as no.
fn is_boundary(text: &str, at: usize) -> bool {
    GraphemeCursor::new(at, text.len(), true).is_boundary(text, 0).unwrap_or(false)
}

/// The last grapheme cluster boundary of `text` at or before `at`; 0 when there is none or the
/// answer is unsure, which callers treat alike.
fn last_boundary(text: &str, at: usize) -> usize {
    if is_boundary(text, at) {
        return at;
    }
    let mut cursor = GraphemeCursor::new(at, text.len(), true);
    cursor.prev_boundary(text, 0).ok().flatten().unwrap_or(0)
}

/// The offset after the run of line breaks starting at `at`.
fn skip_newlines(text: &str, at: usize) -> usize {
    text.len() - text[at..].trim_start_matches(['\n', '\r']).len()
}

/// If the line after a newline cut is a closing fence, the offset where that line ends.
fn closing_line_after(text: &str, cut: Cut) -> Option<usize> {
    if !text[cut.end..cut.next].contains('\n') {
        return None;
    }
    let rest = &text[cut.next..];
    let line = rest.split('\n').next().unwrap_or("");
    // Ending before a carriage return keeps a "\r\n" cluster whole.
    let line = line.strip_suffix('\r').unwrap_or(line);
    fence_info(line, true).map(|_| cut.next + line.len())
}

fn scan_if(enabled: bool, open: Option<&str>, body: &str) -> FenceScan {
    if enabled { scan_fences(open, body) } else { FenceScan::default() }
}

/// Walks the fence lines of `body`, which starts inside a block with info `open` if given.
fn scan_fences(open: Option<&str>, body: &str) -> FenceScan {
    let mut scan = FenceScan { open: open.map(str::to_owned), opened_at: None };
    let mut offset = 0;
    for line in body.split('\n') {
        if let Some(info) = fence_info(line, scan.open.is_some()) {
            if scan.open.is_some() {
                scan.open = None;
                scan.opened_at = None;
            } else {
                scan.open = Some(info.to_owned());
                scan.opened_at = Some(offset);
            }
        }
        offset += line.len() + 1;
    }
    scan
}

/// If `line` is a backtick fence, its info string. Inside a block only a bare fence closes it;
/// outside, an info string holding a backtick marks inline code ("```ls```"), not a fence.
/// Tilde fences and fence lengths are ignored: model output rarely uses them.
fn fence_info(line: &str, inside: bool) -> Option<&str> {
    let unindented = line.trim_start_matches(' ');
    if line.len() - unindented.len() > 3 {
        return None;
    }
    let info = unindented.strip_prefix("```")?.trim_start_matches('`').trim();
    let is_fence = if inside { info.is_empty() } else { !info.contains('`') };
    is_fence.then_some(info)
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;
    use LengthUnit::{Chars, Utf16};
    use unicode_segmentation::UnicodeSegmentation;

    /// Every property the module promises, checked on one input.
    fn check(text: &str, limit: usize, unit: LengthUnit) -> Vec<String> {
        let pieces = plan(text, limit, unit);
        let chunks = chunk(text, limit, unit);
        let ctx = format!("limit {limit} {unit:?} text {text:?} chunks {chunks:?}");
        assert_eq!(pieces.len(), chunks.len(), "{ctx}");
        assert_eq!(chunks.is_empty(), text.trim().is_empty(), "{ctx}");
        let boundaries: Vec<usize> = text.grapheme_indices(true).map(|(i, _)| i).chain([text.len()]).collect();
        let (mut prev_end, mut stripped) = (0, String::new());
        for (piece, chunk) in pieces.iter().zip(&chunks) {
            assert!(!chunk.trim().is_empty(), "empty chunk: {ctx}");
            let width = measure(chunk, unit);
            assert!(width <= limit.max(1) || chunk.chars().count() == 1, "too long: {ctx}");
            let gap = text.get(prev_end..piece.start).unwrap_or("?");
            let ordered = piece.end > piece.start && gap.trim().is_empty();
            assert!(ordered, "out of order or dropped text: {ctx}");
            // Below 40 a reopened chunk may be narrower than a family emoji; the test text keeps
            // every cluster narrower than the room above it.
            let on_boundaries = [piece.start, piece.end].iter().all(|at| boundaries.binary_search(at).is_ok());
            let range = (piece.start, piece.end);
            assert!(limit < 40 || on_boundaries, "split grapheme at {range:?}: {ctx}");
            if limit >= MIN_FENCE_LIMIT && chunks.len() > 1 {
                assert!(scan_fences(None, chunk).open.is_none(), "unbalanced {chunk:?}: {ctx}");
            }
            let mut body = chunk.as_str();
            if let Some(header) = &piece.reopen {
                body = body.strip_prefix(header.as_str()).expect("reopen header");
            }
            if piece.close {
                body = body.strip_suffix(CLOSE_FENCE).expect("closing fence");
            }
            stripped.push_str(body);
            prev_end = piece.end;
        }
        assert!(text[prev_end..].trim().is_empty(), "lost tail: {ctx}");
        let visible = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        assert_eq!(visible(&stripped), visible(text), "content changed: {ctx}");
        chunks
    }

    #[test]
    fn measures_in_both_units() {
        let table: &[(&str, usize, usize)] =
            &[("", 0, 0), ("hello", 5, 5), ("漢字", 2, 2), ("👍🏽", 2, 4), ("👨‍👩‍👧‍👦", 7, 11), ("🇯🇵", 2, 4)];
        for &(text, chars, utf16) in table {
            assert_eq!(measure(text, Chars), chars, "{text:?}");
            assert_eq!(measure(text, Utf16), utf16, "{text:?}");
        }
    }

    #[test]
    fn splits_as_documented() {
        #[rustfmt::skip]
        let table: &[(&str, &str, usize, LengthUnit, &[&str])] = &[
            ("short text", "hello", 100, Chars, &["hello"]),
            ("empty", "", 10, Chars, &[]),
            ("whitespace only", " \n\t \n", 10, Chars, &[]),
            ("exact limit", "aaaaaaaaaa", 10, Chars, &["aaaaaaaaaa"]),
            ("one over", "aaaaaaaaaaa", 10, Chars, &["aaaaaaaaaa", "a"]),
            ("newline preferred", "aaaa bbbb\ncccc dddd", 15, Chars,
                &["aaaa bbbb", "cccc dddd"]),
            ("blank line preferred", "one two\nthree\n\nfour five", 20, Chars,
                &["one two\nthree", "four five"]),
            ("early blank line ignored", "a\n\nbbb ccc\nddd eee fff", 14, Chars,
                &["a\n\nbbb ccc", "ddd eee fff"]),
            ("space preferred", "alpha beta gamma delta", 12, Chars,
                &["alpha beta", "gamma delta"]),
            ("break at the space past the window", "alpha beta gamma", 10, Chars,
                &["alpha beta", "gamma"]),
            ("hard break", "abcdefghij", 4, Chars, &["abcd", "efgh", "ij"]),
            ("no-break space kept", "aaa\u{a0}bbb", 5, Chars, &["aaa\u{a0}b", "bb"]),
            ("skin tone kept whole", "👍🏽👍🏽👍🏽", 5, Utf16, &["👍🏽", "👍🏽", "👍🏽"]),
            ("family kept whole", "👨‍👩‍👧‍👦👨‍👩‍👧‍👦", 12, Utf16, &["👨‍👩‍👧‍👦", "👨‍👩‍👧‍👦"]),
            ("flags kept whole", "🇯🇵🇫🇷🇩🇪", 5, Chars, &["🇯🇵🇫🇷", "🇩🇪"]),
            ("cjk chars", "漢字かな交じり文です", 4, Chars, &["漢字かな", "交じり文", "です"]),
            ("cjk utf16", "漢字かな交じり文です", 4, Utf16, &["漢字かな", "交じり文", "です"]),
            ("oversized grapheme", "e\u{301}\u{301}\u{301}\u{301}", 2, Chars,
                &["e\u{301}", "\u{301}\u{301}", "\u{301}"]),
            ("opening fence line moves on", "Intro text.\n```rust\nlet a = 1;\nlet b = 2;\n```", 26,
                Chars, &["Intro text.", "```rust\nlet a = 1;\n```", "```rust\nlet b = 2;\n```"]),
            ("original closing fence kept", "Intro text.\n```\nlet a = 1;\n```\nafter it", 24,
                Chars, &["Intro text.", "```\nlet a = 1;\n```", "after it"]),
            ("long code line broken at a space", "```\nlet some_name = other_value;\n```", 24,
                Chars, &["```\nlet some_name =\n```", "```\nother_value;\n```"]),
            ("long code line hard-broken", "```\nabcdefghijklmnopqrstuvwxyz\n```", 20, Chars,
                &["```\nabcdefghijkl\n```", "```\nmnopqrstuvwx\n```", "```\nyz\n```"]),
            ("surrogate pair over limit one", "👍👍", 1, Utf16, &["👍", "👍"]),
        ];
        for &(name, text, limit, unit, want) in table {
            let got = check(text, limit, unit);
            assert_eq!(got, want, "row `{name}`");
        }
    }

    #[test]
    fn reopens_code_fence_with_its_language() {
        let code: String = (0..12).map(|i| format!("    let x{i} = {i};\n")).collect();
        let text = format!("Here is the fix:\n\n```rust\nfn main() {{\n{code}}}\n```\n\nDone.");
        let chunks = check(&text, 80, Chars);
        assert!(chunks.len() > 2, "{chunks:?}");
        for (i, chunk) in chunks.iter().enumerate() {
            let fences = chunk.lines().filter(|l| l.starts_with("```")).count();
            assert_eq!(fences % 2, 0, "chunk {i}: {chunk:?}");
            if i > 0 && i + 1 < chunks.len() {
                assert!(chunk.starts_with("```rust\n"), "chunk {i}: {chunk:?}");
            }
        }
        // Indentation inside the block survives the reopening.
        assert!(chunks[1].contains("\n    let x"), "{chunks:?}");
        // The intro is not left ending on an empty code block.
        assert!(!chunks[0].ends_with("```rust\n```"), "{chunks:?}");
    }

    #[test]
    fn long_emoji_reply_fits_telegram() {
        let unit = "Thanks 👍🏽 family 👨‍👩‍👧‍👦 flags 🇯🇵🇫🇷 漢字 ";
        let text: String = unit.chars().cycle().take(10_000).collect();
        let chunks = check(&text, 4096, Utf16);
        assert!(chunks.len() > 1);
        let count = |s: &str, needle: &str| s.matches(needle).count();
        let joined = chunks.concat();
        for needle in ["👍🏽", "👨‍👩‍👧‍👦", "🇯🇵🇫🇷"] {
            assert_eq!(count(&joined, needle), count(&text, needle), "{needle}");
        }
        assert!(chunks.iter().all(|c| measure(c, Utf16) <= 4096));
    }

    fn mixed_text() -> String {
        let mut text =
            String::from("# Report\n\nSome prose with a verylongwordthatkeepsgoingandgoingwithoutanybreak.\n");
        text.push_str("```python\ndef f(x):\n    return x * 2  # 👍🏽\n\n\n    pass\n```\n");
        text.push_str("漢字かな交じり文。 👨‍👩‍👧‍👦 🇯🇵🇫🇷 e\u{301}te\n\n");
        text.push_str("```\nplain block\n  indented line\n```\nTail words here and there.\n");
        text.repeat(3)
    }

    #[test]
    fn every_limit_in_sweep_holds() {
        let text = mixed_text();
        for limit in 1..=220 {
            check(&text, limit, Chars);
            check(&text, limit, Utf16);
        }
    }

    /// A tiny xorshift generator, so the fuzz test is deterministic without extra crates.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    #[test]
    fn fuzz_random_texts_and_limits() {
        // Tokens are '|'-separated; repeated ones are just more likely.
        const TOKENS: &str = concat!(
            "word| | |\n|\n\n|```rust\n|```\n|\n```\n|```|`|``|👍🏽|👨‍👩‍👧‍👦|🇯🇵|漢字|e\u{301}|\t|",
            "    |\r\n|x|a.b,c|supercalifragilisticexpialidocious|```ls -la```|\u{a0}|  ```py\n|",
            "\r| \u{301}|\u{200d}",
        );
        let tokens: Vec<&str> = TOKENS.split('|').collect();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2_000 {
            let len = rng.below(80);
            let text: String = (0..len).map(|_| tokens[rng.below(tokens.len())]).collect();
            let limit = 1 + rng.below(120);
            let unit = if rng.below(2) == 0 { Chars } else { Utf16 };
            check(&text, limit, unit);
        }
    }

    #[test]
    fn large_input_is_fast_enough() {
        let text: String = mixed_text().chars().cycle().take(100_000).collect();
        let started = std::time::Instant::now();
        let chunks = chunk(&text, 4096, Utf16);
        let elapsed = started.elapsed();
        println!("chunked {} bytes into {} chunks in {elapsed:?}", text.len(), chunks.len());
        // Generous for debug builds; a quadratic splitter blows far past it.
        assert!(elapsed < std::time::Duration::from_secs(2), "{elapsed:?}");
        check(&text, 4096, Utf16);
    }
}
