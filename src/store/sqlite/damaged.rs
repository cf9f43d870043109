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
        match self.lane.write(&self.writer, op).await {
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
