//! Transcript rows that no longer decode, set aside so their session goes on.
//!
//! A message row can be damaged on disk or by hand (a JSON column that no longer parses, a role
//! this binary does not know). Failing the read would fail every turn of that session for good,
//! so a read keeps what still decodes (`sessions::RawMessage::decode`), and a turn's read then
//! sets the damage aside: the original row is copied to `quarantined_messages` with why, the
//! columns that no longer decode are cleared in `messages` (a row with an unknown role is
//! removed), and it is logged and counted (`hermesd_quarantined_rows_total{table="messages"}`).
//! The next read finds a clean row; a tool result left without its call is dropped by the
//! transcript sanitiser before the model sees it.
//!
//! The set-aside is one attempt on the write lane, in one transaction, and acts only on a row
//! that still holds exactly the values the read saw (a row changed or gone since is left to the
//! next read). If it fails, the read is not kept (`load_transcript`), so the next turn's read
//! finds the damage again and tries again; the turn itself goes on with what decoded.
//!
//! Invariant: a stored row that no longer decodes never stops the daemon or a session.

use std::sync::Arc;

use super::SqliteStore;
use super::lane::LaneOp;
use crate::metrics::{Metrics, QUARANTINED_TOTAL};

/// What was wrong with one message row, and the values the read saw.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Damage {
    pub(super) id: i64,
    /// Why, a part per column (`messages.tool_calls: expected value at line 1 column 1`).
    pub(super) reason: String,
    /// The JSON columns to clear (names from a fixed set, never input).
    pub(super) columns: Vec<&'static str>,
    /// The role is unknown: the row cannot stay in `messages` at all.
    pub(super) drop_row: bool,
    /// `role`, `tool_calls`, `reasoning`, `images` as read: the set-aside acts only on a row
    /// that still holds them.
    pub(super) seen: [Option<String>; 4],
}

impl SqliteStore {
    /// Count set-aside rows into `metrics` from now on (the daemon wires its registry here).
    pub fn count_into(&self, metrics: Arc<Metrics>) {
        let _ = self.metrics.set(metrics);
    }

    /// Set `damaged` rows aside (see the module docs); whether that is settled (nothing left
    /// to do now). A failure is logged and left for the next read.
    pub(super) async fn set_aside(&self, damaged: Vec<Damage>) -> bool {
        if damaged.is_empty() {
            return true;
        }
        let now = crate::clock::now_ms();
        let rows = damaged.clone();
        let op: Arc<LaneOp<Vec<usize>>> = Arc::new(move |conn| {
            let mut moved = Vec::new();
            for (at, row) in rows.iter().enumerate() {
                let [role, tool_calls, reasoning, images] = &row.seen;
                let copied = conn
                    .prepare_cached(
                        "INSERT INTO quarantined_messages (message_id, session_id, role, content, tool_calls, \
                         tool_call_id, reasoning, images, event_seq, created_at, reason, quarantined_at) \
                         SELECT id, session_id, role, content, tool_calls, tool_call_id, reasoning, images, \
                         event_seq, created_at, ?2, ?3 FROM messages \
                         WHERE id = ?1 AND role IS ?4 AND tool_calls IS ?5 AND reasoning IS ?6 AND images IS ?7",
                    )?
                    .execute(rusqlite::params![row.id, row.reason, now, role, tool_calls, reasoning, images])?;
                if copied == 0 {
                    continue; // changed or gone since the read
                }
                if row.drop_row {
                    conn.prepare_cached("DELETE FROM messages WHERE id = ?1")?.execute([row.id])?;
                }
                for column in &row.columns {
                    let sql = match *column {
                        "tool_calls" => "UPDATE messages SET tool_calls = NULL WHERE id = ?1",
                        "reasoning" => "UPDATE messages SET reasoning = NULL WHERE id = ?1",
                        "images" => "UPDATE messages SET images = NULL WHERE id = ?1",
                        _ => continue,
                    };
                    conn.prepare_cached(sql)?.execute([row.id])?;
                }
                moved.push(at);
            }
            Ok(moved)
        });
        match self.lane.write(&self.writer, op, false).await {
            Ok(moved) => {
                for row in moved.into_iter().map(|at| &damaged[at]) {
                    tracing::warn!(
                        message_id = row.id,
                        reason = %row.reason,
                        removed = row.drop_row,
                        "set aside a transcript row that no longer decodes (kept in quarantined_messages); the session goes on"
                    );
                    if let Some(metrics) = self.metrics.get() {
                        metrics.inc(QUARANTINED_TOTAL, &[("table", "messages")]);
                    }
                }
                true
            }
            Err(e) => {
                tracing::warn!(
                    rows = damaged.len(),
                    error = %e,
                    "transcript rows that no longer decode could not be set aside yet; the next read tries again"
                );
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SessionStore;
    use crate::store::sqlite::tests::{add_user_message, key, open};

    /// A transcript row damaged on disk (a JSON column that no longer parses, an unknown role) no
    /// longer fails its session's reads: what decodes is returned, the original row is kept in
    /// `quarantined_messages` with why, the row in `messages` is cleaned, and it is counted once.
    #[tokio::test]
    async fn damaged_transcript_rows_are_set_aside_and_the_session_reads_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        let metrics = std::sync::Arc::new(Metrics::default());
        store.count_into(metrics.clone());
        let session = store.start_session(&key(), 1).await.unwrap();
        let add = async |store: &SqliteStore, text: &str| add_user_message(store, &session.id, text).await;
        for text in ["one", "two", "three", "four"] {
            add(&store, text).await;
        }
        // Kept decoded between turns, as in a running daemon.
        assert_eq!(store.load_transcript(&session.id).await.unwrap().len(), 4);

        let outside = rusqlite::Connection::open(dir.path().join("state.db")).unwrap();
        let ids: Vec<i64> = outside
            .prepare("SELECT id FROM messages WHERE session_id = ?1 ORDER BY id")
            .unwrap()
            .query_map([&session.id], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        outside.execute("UPDATE messages SET tool_calls = '[{\"id\": \"c1\", oops' WHERE id = ?1", [ids[0]]).unwrap();
        outside.execute("UPDATE messages SET images = 'not json', reasoning = '{' WHERE id = ?1", [ids[1]]).unwrap();
        outside.execute("UPDATE messages SET role = 'wizard' WHERE id = ?1", [ids[2]]).unwrap();
        // The kept copy still holds those rows as they were written; a restart reads them from disk.
        store.transcripts.clear();
        // `hermesd sessions show`/`export` read the full history: what decodes, nothing written.
        let texts = |rows: Vec<crate::store::StoredMessage>| -> Vec<String> {
            rows.into_iter().filter_map(|m| m.message.content).collect()
        };
        assert_eq!(texts(store.full_history(&session.id).await.unwrap()), ["one", "two", "four"]);
        let copies =
            || -> i64 { outside.query_row("SELECT count(*) FROM quarantined_messages", [], |r| r.get(0)).unwrap() };
        assert_eq!((copies(), metrics.counter(QUARANTINED_TOTAL, "table=\"messages\"")), (0, 0));
        add(&store, "five").await;

        let loaded = store.load_transcript(&session.id).await.unwrap();
        assert!(loaded.iter().all(|m| m.message.tool_calls.is_empty() && m.message.images.is_empty()), "{loaded:?}");
        assert_eq!(texts(loaded), ["one", "two", "four", "five"]);
        assert_eq!(metrics.counter(QUARANTINED_TOTAL, "table=\"messages\""), 3);

        // The originals are kept, with why; the rows left in `messages` decode cleanly now.
        let kept: Vec<(i64, String, Option<String>, String)> = outside
            .prepare("SELECT message_id, role, tool_calls, reason FROM quarantined_messages ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(kept.iter().map(|k| k.0).collect::<Vec<_>>(), &ids[..3]);
        assert_eq!(kept[0].2.as_deref(), Some("[{\"id\": \"c1\", oops"));
        assert!(kept[0].3.starts_with("messages.tool_calls: "), "{kept:?}");
        assert!(kept[1].3.contains("messages.reasoning: ") && kept[1].3.contains("messages.images: "), "{kept:?}");
        assert_eq!((kept[2].1.as_str(), kept[2].3.as_str()), ("wizard", "messages.role: unknown role \"wizard\""));
        let left: i64 = outside
            .query_row(
                "SELECT count(*) FROM messages WHERE id IN (?1, ?2) AND tool_calls IS NULL AND images IS NULL AND reasoning IS NULL",
                [ids[0], ids[1]],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(left, 2);
        let gone: i64 =
            outside.query_row("SELECT count(*) FROM messages WHERE id = ?1", [ids[2]], |r| r.get(0)).unwrap();
        assert_eq!(gone, 0);

        // A damaged row among those a kept copy is brought up to date with.
        add(&store, "six").await;
        outside
            .execute(
                "UPDATE messages SET tool_calls = 'x' WHERE id = (SELECT max(id) FROM messages WHERE session_id = ?1)",
                [&session.id],
            )
            .unwrap();
        assert_eq!(texts(store.load_transcript(&session.id).await.unwrap()), ["one", "two", "four", "five", "six"]);
        assert_eq!(metrics.counter(QUARANTINED_TOTAL, "table=\"messages\""), 4);

        // Set aside once: later reads (kept or fresh, and the full history) find nothing new.
        store.transcripts.clear();
        assert_eq!(texts(store.load_transcript(&session.id).await.unwrap()), ["one", "two", "four", "five", "six"]);
        assert_eq!(store.full_history(&session.id).await.unwrap().len(), 5);
        assert_eq!((copies(), metrics.counter(QUARANTINED_TOTAL, "table=\"messages\"")), (4, 4));

        // A row that changed since the read that found it damaged is left alone (the guard).
        let stale = Damage {
            id: ids[3],
            reason: "messages.role: unknown role \"wizard\"".into(),
            columns: vec![],
            drop_row: true,
            seen: [Some("wizard".into()), None, None, None],
        };
        assert!(store.set_aside(vec![stale]).await);
        assert_eq!((copies(), metrics.counter(QUARANTINED_TOTAL, "table=\"messages\"")), (4, 4));
        assert_eq!(texts(store.full_history(&session.id).await.unwrap()), ["one", "two", "four", "five", "six"]);
    }
}
