//! Transcript rows that no longer decode, set aside so their session goes on.
//!
//! A message row can be damaged on disk or by hand (a JSON column that no longer parses, a role
//! this binary does not know). Failing the read would fail every turn of that session for good,
//! so a read keeps what still decodes (`sessions::RawMessage::decode`) and the store then sets the
//! damage aside: the original row is copied to `quarantined_messages` with why, the columns that
//! no longer decode are cleared in `messages` (a row with an unknown role is removed), and it is
//! logged and counted (`hermesd_quarantined_rows_total{table="messages"}`). The next read finds a
//! clean row; a tool result left without its call is dropped by the transcript sanitiser before
//! the model sees it.

use std::sync::Arc;

use super::SqliteStore;
use crate::metrics::{Metrics, QUARANTINED_TOTAL};

/// What was wrong with one message row.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Damage {
    pub(super) id: i64,
    /// Why, a line per column (`messages.tool_calls: expected value at line 1 column 1`).
    pub(super) reasons: Vec<String>,
    /// The JSON columns to clear (from a fixed set of names, never input).
    pub(super) columns: Vec<&'static str>,
    /// The role is unknown: the row cannot stay in `messages` at all.
    pub(super) drop_row: bool,
}

impl SqliteStore {
    /// Count set-aside rows into `metrics` from now on (the daemon wires its registry here).
    pub fn count_into(&self, metrics: Arc<Metrics>) {
        let _ = self.metrics.set(metrics);
    }

    /// Set `damaged` rows aside (see the module docs). A failure is logged and left for the next
    /// read of the session, which finds the same damage and tries again; the read that found it
    /// still returns what decoded.
    pub(super) async fn set_aside(&self, damaged: Vec<Damage>) {
        if damaged.is_empty() {
            return;
        }
        let now = crate::clock::now_ms();
        let rows = damaged.clone();
        let result = self
            .retry_lane(move |conn| {
                let mut moved = 0_usize;
                for row in &rows {
                    let reason = row.reasons.join("; ");
                    moved += conn
                        .prepare_cached(
                            "INSERT OR IGNORE INTO quarantined_messages (id, session_id, role, content, tool_calls, \
                             tool_call_id, reasoning, images, event_seq, created_at, reason, quarantined_at) \
                             SELECT id, session_id, role, content, tool_calls, tool_call_id, reasoning, images, \
                             event_seq, created_at, ?2, ?3 FROM messages WHERE id = ?1",
                        )?
                        .execute(rusqlite::params![row.id, reason, now])?;
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
                }
                Ok(moved)
            })
            .await;
        match result {
            Ok(_) => {
                for row in &damaged {
                    tracing::warn!(
                        message_id = row.id,
                        reason = %row.reasons.join("; "),
                        removed = row.drop_row,
                        "set aside a transcript row that no longer decodes (kept in quarantined_messages); the session goes on"
                    );
                    if let Some(metrics) = self.metrics.get() {
                        metrics.inc(QUARANTINED_TOTAL, &[("table", "messages")]);
                    }
                }
            }
            Err(e) => tracing::warn!(
                rows = damaged.len(),
                error = %e,
                "transcript rows that no longer decode could not be set aside yet; left out of this read"
            ),
        }
    }
}
