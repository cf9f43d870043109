//! The platform cursor: `<UIDVALIDITY>:<last accepted UID>:<its arrival, Unix seconds>`.
//!
//! A first start (no cursor) begins at UIDNEXT, so an old mailbox is never answered. When the
//! server's UIDVALIDITY differs from the cursor's, UIDs mean nothing any more: the adapter takes
//! the mail that arrived since the last accepted one (by date) and relies on the host's dedup by
//! Message-ID for anything it had already taken.

/// Where the receive loop stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cursor {
    /// The mailbox's UIDVALIDITY the UID belongs to.
    pub(crate) validity: u32,
    /// The last UID taken (accepted or skipped); the next search starts after it.
    pub(crate) uid: u32,
    /// When the last taken message arrived (server time, Unix seconds); 0 when unknown.
    pub(crate) since: i64,
}

/// What to do on connecting, given the stored cursor and the mailbox as selected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// Continue after the cursor's UID.
    Resume(Cursor),
    /// First start: begin at UIDNEXT, answering nothing already there.
    Fresh(Cursor),
    /// UIDVALIDITY changed: take mail that arrived since `since` (Unix seconds), deduplicated by
    /// Message-ID, then continue from the highest UID taken.
    Resync {
        /// The new UIDVALIDITY.
        validity: u32,
        /// Search SINCE this day.
        since: i64,
    },
}

impl Cursor {
    /// Parses a stored cursor; `None` for anything unreadable (treated as a first start).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let mut parts = text.trim().split(':');
        let validity = parts.next()?.parse().ok()?;
        let uid = parts.next()?.parse().ok()?;
        let since = match parts.next() {
            Some(since) => since.parse().ok()?,
            None => 0,
        };
        parts.next().is_none().then_some(Self { validity, uid, since })
    }

    /// The stored form.
    pub(crate) fn format(&self) -> String {
        format!("{}:{}:{}", self.validity, self.uid, self.since)
    }
}

/// Decides how to start from `stored`, the server's `validity` and `uid_next`; `now` (Unix
/// seconds) stamps a fresh cursor.
pub(crate) fn start(stored: Option<Cursor>, validity: u32, uid_next: u32, now: i64) -> Start {
    match stored {
        Some(cursor) if cursor.validity == validity => Start::Resume(cursor),
        Some(cursor) => Start::Resync { validity, since: if cursor.since > 0 { cursor.since } else { now } },
        None => Start::Fresh(Cursor { validity, uid: uid_next.saturating_sub(1), since: now }),
    }
}

/// An IMAP date (`1-Feb-2024`) for SEARCH SINCE, one day before `unix_secs` so time zones
/// cannot make the search miss the boundary day (the host's dedup drops what is taken twice).
pub(crate) fn imap_since(unix_secs: i64) -> String {
    let day = chrono::DateTime::from_timestamp(unix_secs.saturating_sub(86_400), 0).unwrap_or_default();
    day.format("%-d-%b-%Y").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_bad_ones_are_none() {
        let cursor = Cursor { validity: 7, uid: 42, since: 1_700_000_000 };
        assert_eq!(Cursor::parse(&cursor.format()), Some(cursor));
        assert_eq!(Cursor::parse("7:42"), Some(Cursor { validity: 7, uid: 42, since: 0 }));
        for bad in ["", "7", "x:1", "7:-1", "7:1:2:3", "7:1:z"] {
            assert_eq!(Cursor::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn first_start_begins_at_uidnext_and_a_new_validity_resyncs_by_date() {
        assert_eq!(start(None, 5, 101, 1000), Start::Fresh(Cursor { validity: 5, uid: 100, since: 1000 }));
        assert_eq!(start(None, 5, 0, 1000), Start::Fresh(Cursor { validity: 5, uid: 0, since: 1000 }));
        let stored = Cursor { validity: 5, uid: 100, since: 900 };
        assert_eq!(start(Some(stored), 5, 300, 1000), Start::Resume(stored));
        assert_eq!(start(Some(stored), 6, 3, 1000), Start::Resync { validity: 6, since: 900 });
        let undated = Cursor { since: 0, ..stored };
        assert_eq!(start(Some(undated), 6, 3, 1000), Start::Resync { validity: 6, since: 1000 });
    }

    #[test]
    fn since_dates_are_a_day_early() {
        assert_eq!(imap_since(1_706_745_600), "31-Jan-2024");
    }
}

#[cfg(test)]
mod props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn any_text_parses_or_is_none_and_formatted_cursors_round_trip(text in ".{0,40}", v: u32, u: u32, s in 0i64..4_000_000_000) {
            let _ = Cursor::parse(&text);
            let cursor = Cursor { validity: v, uid: u, since: s };
            prop_assert_eq!(Cursor::parse(&cursor.format()), Some(cursor));
        }
    }
}
