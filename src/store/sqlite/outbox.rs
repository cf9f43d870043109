//! The durable outbox in SQLite: reply chunks stored before they are sent, receipts after.

use async_trait::async_trait;
use hermesd_platform::OutboundMessage;
use sqlx::{Row, SqliteConnection};

use super::{SqliteStore, from_json, retry_busy, to_json};
use crate::store::{OutboxStore, Outlive, PendingOutbound, StoreResult};

/// Insert reply chunks inside a caller's transaction. A chunk already queued for the same turn
/// and index is kept as it is, so a retried write never queues a reply twice.
pub(super) async fn insert_outbound(
    conn: &mut SqliteConnection,
    turn_id: &str,
    messages: &[OutboundMessage],
    now: i64,
) -> Result<Vec<i64>, sqlx::Error> {
    let mut ids = Vec::with_capacity(messages.len());
    for message in messages {
        let row: Option<(i64,)> = sqlx::query_as(INSERT_OUTBOUND)
            .bind(turn_id)
            .bind(i64::from(message.chunk.0))
            .bind(&message.chat.platform)
            .bind(to_json(message))
            .bind(now)
            .fetch_optional(&mut *conn)
            .await?;
        ids.extend(row.map(|r| r.0));
    }
    Ok(ids)
}

/// `insert_outbound` on the write lane, in the lane's transaction.
pub(super) fn insert_outbound_rows(
    conn: &rusqlite::Connection,
    turn_id: &str,
    messages: &[OutboundMessage],
    now: i64,
) -> rusqlite::Result<Vec<i64>> {
    use rusqlite::OptionalExtension;
    let mut ids = Vec::with_capacity(messages.len());
    let mut insert = conn.prepare_cached(INSERT_OUTBOUND)?;
    for message in messages {
        let params =
            rusqlite::params![turn_id, i64::from(message.chunk.0), message.chat.platform, to_json(message), now];
        ids.extend(insert.query_row(params, |row| row.get::<_, i64>(0)).optional()?);
    }
    Ok(ids)
}

/// One reply chunk; an existing one for the same turn and index is kept (no id returned).
const INSERT_OUTBOUND: &str = "INSERT INTO outbound_messages (turn_id, chunk_index, platform, payload, created_at) \
     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (turn_id, chunk_index) DO NOTHING RETURNING id";

impl SqliteStore {
    /// Decode pending rows; a row whose payload no longer decodes is set aside as `quarantined`
    /// (logged once here: no caller can act on it) so the replies around it still go out.
    async fn pending_from_rows(&self, rows: &[sqlx::sqlite::SqliteRow]) -> StoreResult<Vec<PendingOutbound>> {
        let mut pending = Vec::with_capacity(rows.len());
        for row in rows {
            let id: i64 = row.get("id");
            match from_json(row.get("payload"), "outbound_messages.payload") {
                Ok(message) => pending.push(PendingOutbound {
                    id,
                    turn_id: row.get("turn_id"),
                    message,
                    attempts: row.get::<i64, _>("attempts").try_into().unwrap_or(u32::MAX),
                }),
                Err(error) => {
                    let reason = error.to_string();
                    tracing::warn!(id, error = %reason, "quarantined an undecodable outbound message; it will not be sent");
                    retry_busy(|| async {
                        sqlx::query(
                            "UPDATE outbound_messages SET state = 'quarantined', error = ? WHERE id = ? AND state = 'pending'",
                        )
                        .bind(&reason)
                        .bind(id)
                        .execute(&mut *self.writer.get().await?)
                        .await
                    })
                    .await?;
                }
            }
        }
        Ok(pending)
    }
}

#[async_trait]
impl OutboxStore for SqliteStore {
    async fn enqueue_outbound(&self, turn_id: &str, messages: &[OutboundMessage], now: i64) -> StoreResult<Vec<i64>> {
        self.write(|| async move {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            let ids = insert_outbound(&mut tx, turn_id, messages, now).await?;
            tx.commit().await?;
            Ok(ids)
        })
        .await
    }

    async fn pending_for_turn(&self, turn_id: &str) -> StoreResult<Vec<PendingOutbound>> {
        let rows = sqlx::query(
            "SELECT id, turn_id, payload, attempts FROM outbound_messages \
             WHERE turn_id = ? AND state = 'pending' ORDER BY chunk_index",
        )
        .bind(turn_id)
        .fetch_all(&mut *self.readers.get().await?)
        .await?;
        self.pending_from_rows(&rows).await
    }

    async fn pending_outbound(&self) -> StoreResult<Vec<PendingOutbound>> {
        let rows = sqlx::query(
            "SELECT id, turn_id, payload, attempts FROM outbound_messages WHERE state = 'pending' ORDER BY id",
        )
        .fetch_all(&mut *self.writer.get().await?)
        .await?;
        self.pending_from_rows(&rows).await
    }

    async fn pending_by_platform(&self) -> StoreResult<Vec<(String, u64)>> {
        // Only pending rows are read (the `outbound_pending` partial index).
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT platform, COUNT(*) FROM outbound_messages INDEXED BY outbound_pending \
             WHERE state = 'pending' GROUP BY platform",
        )
        // A look at a few index entries, polled by open status pages: no use that keeps the
        // store from going quiet.
        .fetch_all(&mut *self.readers.get_quietly().await?)
        .await?;
        Ok(rows.into_iter().map(|(platform, n)| (platform, u64::try_from(n).unwrap_or(0))).collect())
    }

    async fn mark_sent(&self, id: i64, platform_message_id: &str, now: i64, outlive: Outlive) -> StoreResult<()> {
        let platform_message_id = platform_message_id.to_owned();
        self.write_lane_durable(outlive, move |conn| {
            conn.prepare_cached(
                "UPDATE outbound_messages SET state = 'sent', platform_message_id = ?1, sent_at = ?2, \
                 attempts = attempts + 1 WHERE id = ?3",
            )?
            .execute(rusqlite::params![platform_message_id, now, id])
            .map(drop)
        })
        .await
    }

    async fn mark_attempt_failed(&self, id: i64, error: &str, give_up: bool) -> StoreResult<()> {
        let state = if give_up { "failed" } else { "pending" };
        self.write(|| async move {
            sqlx::query("UPDATE outbound_messages SET attempts = attempts + 1, error = ?, state = ? WHERE id = ?")
                .bind(error)
                .bind(state)
                .bind(id)
                .execute(&mut *self.writer.get().await?)
                .await
                .map(drop)
        })
        .await
    }
}
