//! Properties of the chunker over generated replies: every chunk fits, no text is lost or
//! reordered, and fences stay balanced in every chunk of a split reply.

use proptest::prelude::*;

use super::*;

/// Replies built from the pieces that make chunking hard: words, spaces, line breaks, blank
/// lines, fence lines, wide and combining characters, emoji with modifiers.
fn reply() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-zA-Z0-9]{1,12}",
        2 => Just(" ".to_owned()),
        2 => Just("\n".to_owned()),
        1 => Just("\n\n".to_owned()),
        1 => Just("\n```rust\n".to_owned()),
        1 => Just("\n```\n".to_owned()),
        1 => prop::sample::select(vec!["é", "e\u{301}", "😀", "👍🏽", "🇫🇷", "漢字", "\t", "  "]).prop_map(str::to_owned),
    ];
    prop::collection::vec(piece, 0..120).prop_map(|pieces| pieces.concat())
}

fn unit() -> impl Strategy<Value = LengthUnit> {
    prop_oneof![Just(LengthUnit::Chars), Just(LengthUnit::Utf16)]
}

/// Whether `text` leaves a code block open (fences read as the chunker reads them).
fn leaves_open(text: &str) -> bool {
    scan_fences(None, text).open.is_some()
}

proptest! {
    #[test]
    fn every_chunk_fits_its_limit(text in reply(), limit in 1usize..200, unit in unit()) {
        for piece in chunk(&text, limit, unit) {
            let single = piece.chars().count() == 1;
            prop_assert!(measure(&piece, unit) <= limit || single, "{} > {limit}: {piece:?}", measure(&piece, unit));
        }
    }

    #[test]
    fn no_text_is_lost_or_reordered(text in reply(), limit in 1usize..200, unit in unit()) {
        let pieces = plan(&text, limit, unit);
        // The bodies are the input in order; only whitespace lies between them.
        let mut at = 0;
        for piece in &pieces {
            prop_assert!(piece.start >= at, "{pieces:?}");
            prop_assert!(text[at..piece.start].trim().is_empty(), "dropped {:?}", &text[at..piece.start]);
            at = piece.end;
        }
        prop_assert!(text[at..].trim().is_empty(), "dropped the tail {:?}", &text[at..]);
        if text.trim().is_empty() {
            prop_assert!(pieces.is_empty());
        } else if measure(&text, unit) <= limit {
            prop_assert_eq!(chunk(&text, limit, unit), vec![text.clone()]);
        }
        // Only fence markers are added around the bodies.
        for piece in &pieces {
            let rendered = piece.render(&text);
            let body = &text[piece.start..piece.end];
            prop_assert!(rendered.contains(body));
            prop_assert!(piece.reopen.is_none() || limit >= MIN_FENCE_LIMIT);
        }
    }

    #[test]
    fn fences_are_balanced_in_every_chunk(text in reply(), limit in MIN_FENCE_LIMIT..200, unit in unit()) {
        let chunks = chunk(&text, limit, unit);
        if let Some((last, rest)) = chunks.split_last() {
            for piece in rest {
                prop_assert!(!leaves_open(piece), "chunk left a block open: {piece:?} of {chunks:?}");
            }
            // The last chunk leaves a block open only when the reply itself did.
            prop_assert!(!leaves_open(last) || leaves_open(&text), "last of {:?}", chunks);
        }
    }
}
