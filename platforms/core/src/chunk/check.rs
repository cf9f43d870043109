//! The chunker's contract as one check over any input, for the fuzz target (tests/fuzz) and the
//! tests: every chunk fits, no text is lost or reordered, fences stay balanced. It only reads.

use super::{MIN_FENCE_LIMIT, chunk, measure, plan, scan_fences};
use crate::LengthUnit;

/// Checks [`chunk`] on `text` at `limit` in `unit`; `Err` says which promise was broken.
pub(crate) fn check(text: &str, limit: usize, unit: LengthUnit) -> Result<(), String> {
    let chunks = chunk(text, limit, unit);
    for piece in &chunks {
        // A single character wider than the limit (a surrogate pair at 1) is emitted alone.
        if measure(piece, unit) > limit.max(1) && piece.chars().count() != 1 {
            return Err(format!("chunk of {} > {limit}: {piece:?}", measure(piece, unit)));
        }
    }
    let pieces = plan(text, limit, unit);
    if pieces.len() != chunks.len() {
        return Err(format!("{} pieces planned, {} chunks rendered", pieces.len(), chunks.len()));
    }
    let mut at = 0;
    for (piece, rendered) in pieces.iter().zip(&chunks) {
        let skipped = text.get(at..piece.start).ok_or_else(|| format!("piece {piece:?} before {at}"))?;
        if !skipped.trim().is_empty() {
            return Err(format!("dropped {skipped:?}"));
        }
        let body = text.get(piece.start..piece.end).ok_or_else(|| format!("piece {piece:?} off the text"))?;
        if !rendered.contains(body) {
            return Err(format!("chunk {rendered:?} lost its body {body:?}"));
        }
        at = piece.end;
    }
    if !text[at..].trim().is_empty() {
        return Err(format!("dropped the tail {:?}", &text[at..]));
    }
    if text.trim().is_empty() != chunks.is_empty() {
        return Err(format!("{} chunks of a text blank: {}", chunks.len(), text.trim().is_empty()));
    }
    if measure(text, unit) <= limit && !chunks.is_empty() && chunks != [text] {
        return Err(format!("a text that fits was changed: {chunks:?}"));
    }
    if limit >= MIN_FENCE_LIMIT
        && let Some((last, rest)) = chunks.split_last()
    {
        if let Some(open) = rest.iter().find(|piece| scan_fences(None, piece).open.is_some()) {
            return Err(format!("chunk left a code block open: {open:?}"));
        }
        if scan_fences(None, last).open.is_some() && scan_fences(None, text).open.is_none() {
            return Err(format!("the last chunk opened a block the text closed: {last:?}"));
        }
    }
    Ok(())
}
