//! The live transcripts of recently used sessions, kept decoded between turns.
//!
//! Why: every turn reads its session's live transcript, and a chat's transcript grows with every
//! turn until compaction; reading and JSON-decoding all of it again each turn made a turn's cost
//! grow with the chat's length (a 400-message session spent more on that read than on the rest of
//! the turn's store work). Messages are only ever appended to a live transcript, or leave it
//! (archived by compaction or `/undo`, deleted by retention or `sessions delete`), so a kept copy
//! is brought up to date by reading just the rows after the newest one it holds.
//!
//! The kept copy is checked against the database on every use, in one read transaction: the live
//! rows' count must equal the copy's plus the rows read after it, and those must sort after it.
//! Anything else (a row archived or deleted, by this process or by another one such as
//! `hermesd sessions delete`, or a summary sorted in by compaction) reads the whole transcript
//! again. Compaction, `/undo`, pruned sessions and a person's deletion in this process also drop
//! every copy as they commit, so deleted text does not stay in memory either.
//!
//! Bounded: at most `MAX_SESSIONS` (256) sessions and about `MAX_BYTES` (16 MiB) of message text;
//! the least recently used go first.
//!
//! Invariant: a kept transcript is never used unchecked, so a row archived or deleted by anyone
//! never reaches a model from a kept copy.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::store::StoredMessage;

/// Sessions whose transcripts are kept.
const MAX_SESSIONS: usize = 256;
/// Text (content, tool calls, reasoning) kept in all, roughly, in bytes.
const MAX_BYTES: usize = 16 << 20;
/// A transcript larger than this is not kept (it would push out many smaller ones).
const MAX_ONE: usize = MAX_BYTES / 4;

/// A session's kept transcript.
struct Kept {
    messages: Vec<StoredMessage>,
    bytes: usize,
    /// When it was last used (`Inner::clock`).
    used: u64,
}

#[derive(Default)]
struct Inner {
    kept: HashMap<String, Kept>,
    bytes: usize,
    clock: u64,
}

/// The kept transcripts (see the module's doc).
#[derive(Default)]
pub(super) struct Transcripts {
    inner: Mutex<Inner>,
}

impl Transcripts {
    /// Take `session`'s kept transcript out, if any; `put` hands it back once brought up to date.
    pub(super) fn take(&self, session: &str) -> Option<Vec<StoredMessage>> {
        let mut inner = self.lock();
        let kept = inner.kept.remove(session)?;
        inner.bytes -= kept.bytes;
        Some(kept.messages)
    }

    /// Keep `messages` as `session`'s live transcript, read at or after everything kept before.
    pub(super) fn put(&self, session: &str, messages: Vec<StoredMessage>) {
        let bytes = messages.iter().map(size_of_message).sum::<usize>();
        if bytes > MAX_ONE {
            return;
        }
        let mut inner = self.lock();
        inner.clock += 1;
        let used = inner.clock;
        if let Some(old) = inner.kept.insert(session.to_owned(), Kept { messages, bytes, used }) {
            inner.bytes -= old.bytes;
        }
        inner.bytes += bytes;
        while inner.kept.len() > MAX_SESSIONS || inner.bytes > MAX_BYTES {
            let Some(oldest) = inner.kept.iter().min_by_key(|(_, kept)| kept.used).map(|(key, _)| key.clone()) else {
                break;
            };
            if let Some(gone) = inner.kept.remove(&oldest) {
                inner.bytes -= gone.bytes;
            }
        }
        if inner.kept.capacity() > 4 * inner.kept.len().max(16) {
            inner.kept.shrink_to_fit();
        }
    }

    /// Drop every kept transcript (messages were archived or deleted).
    pub(super) fn clear(&self) {
        let mut inner = self.lock();
        inner.kept = HashMap::new();
        inner.bytes = 0;
    }

    /// Sessions kept now.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().kept.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether `newer` (rows read after the newest kept one, in transcript order) extends `kept`,
/// given that the session has `live` live rows now: nothing kept left the transcript, and
/// nothing new sorts before the end of it.
pub(super) fn extends(kept: &[StoredMessage], newer: &[StoredMessage], live: i64) -> bool {
    let count_holds = i64::try_from(kept.len() + newer.len()).is_ok_and(|n| n == live);
    let after = match (kept.last(), newer.first()) {
        (Some(last), Some(first)) => first.position > last.position,
        _ => true,
    };
    count_holds && after
}

/// The newest row id kept (0 for none).
pub(super) fn newest_id(kept: &[StoredMessage]) -> i64 {
    kept.iter().map(|m| m.id).max().unwrap_or(0)
}

/// Roughly what one message holds, for the byte bound.
fn size_of_message(stored: &StoredMessage) -> usize {
    let message = &stored.message;
    let calls: usize =
        message.tool_calls.iter().map(|call| call.name.len() + call.arguments.len() + call.id.len()).sum();
    // Reasoning items (provider state, often encrypted) are counted at a kilobyte each.
    let reasoning = message.reasoning.as_ref().map_or(0, |r| r.text.len() + r.items.len() * 1024);
    std::mem::size_of::<StoredMessage>()
        + message.content.as_ref().map_or(0, String::len)
        + calls
        + reasoning
        + message.images.len() * 128
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::message::{Message, Role};

    fn stored(id: i64, position: f64, text: &str) -> StoredMessage {
        StoredMessage {
            id,
            position,
            message: Message::text(Role::User, text.to_owned()),
            created_at: 0,
            archived: false,
        }
    }

    #[test]
    fn only_rows_appended_after_the_kept_ones_extend_them() {
        let kept = vec![stored(1, 1.0, "a"), stored(2, 2.0, "b")];
        assert!(extends(&kept, &[stored(5, 5.0, "c")], 3));
        assert!(extends(&kept, &[], 2), "nothing new");
        assert!(!extends(&kept, &[], 1), "a kept row was archived or deleted");
        assert!(!extends(&kept, &[stored(5, 5.0, "c")], 2), "one left and one came");
        assert!(!extends(&kept, &[stored(5, 1.5, "summary")], 3), "a summary sorted in among them");
        assert!(extends(&[], &[stored(1, 1.0, "a")], 1));
        assert_eq!(newest_id(&kept), 2);
        assert_eq!(newest_id(&[]), 0);
    }

    #[test]
    fn the_least_recently_used_go_first_and_bytes_are_bounded() {
        let kept = Transcripts::default();
        for i in 0..MAX_SESSIONS + 10 {
            kept.put(&format!("s{i}"), vec![stored(1, 1.0, "x")]);
        }
        assert_eq!(kept.len(), MAX_SESSIONS);
        assert!(kept.take("s0").is_none(), "the oldest went");
        assert!(kept.take(&format!("s{}", MAX_SESSIONS + 9)).is_some());
        let big = "y".repeat(MAX_ONE / 2);
        for i in 0..8 {
            kept.put(&format!("big{i}"), vec![stored(1, 1.0, &big)]);
        }
        assert!(kept.lock().bytes <= MAX_BYTES);
        kept.put("huge", vec![stored(1, 1.0, &"z".repeat(MAX_ONE + 1))]);
        assert!(kept.take("huge").is_none(), "too large to keep");
        kept.clear();
        assert_eq!((kept.len(), kept.lock().bytes), (0, 0));
    }
}
