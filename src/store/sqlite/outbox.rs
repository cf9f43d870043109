//! The durable outbox in SQLite: reply chunks stored before they are sent, receipts after.

use async_trait::async_trait;
use hermesd_platform::OutboundMessage;
use sqlx::{Row, SqliteConnection};

use super::{SqliteStore, from_json, retry_busy, to_json};
use crate::store::{OutboxStore, PendingOutbound, StoreResult};

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
        let row: Option<(i64,)> = sqlx::query_as(
            "INSERT INTO outbound_messages (turn_id, chunk_index, platform, payload, created_at) \
             VALUES (?, ?, ?, ?, ?) ON CONFLICT (turn_id, chunk_index) DO NOTHING RETURNING id",
        )
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

fn pending_from_rows(rows: &[sqlx::sqlite::SqliteRow]) -> StoreResult<Vec<PendingOutbound>> {
    rows.iter()
        .map(|row| {
            Ok(PendingOutbound {
                id: row.get("id"),
                turn_id: row.get("turn_id"),
                message: from_json(row.get("payload"), "outbound_messages.payload")?,
                attempts: row.get::<i64, _>("attempts").try_into().unwrap_or(u32::MAX),
            })
        })
        .collect()
}

#[async_trait]
impl OutboxStore for SqliteStore {
    async fn enqueue_outbound(&self, turn_id: &str, messages: &[OutboundMessage], now: i64) -> StoreResult<Vec<i64>> {
        retry_busy(|| async move {
            let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
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
        .fetch_all(&self.readers)
        .await?;
        pending_from_rows(&rows)
    }

    async fn pending_outbound(&self) -> StoreResult<Vec<PendingOutbound>> {
        let rows = sqlx::query(
            "SELECT id, turn_id, payload, attempts FROM outbound_messages WHERE state = 'pending' ORDER BY id",
        )
        .fetch_all(&self.writer)
        .await?;
        pending_from_rows(&rows)
    }

    async fn mark_sent(&self, id: i64, platform_message_id: &str, now: i64) -> StoreResult<()> {
        retry_busy(|| async move {
            sqlx::query(
                "UPDATE outbound_messages SET state = 'sent', platform_message_id = ?, sent_at = ?, \
                 attempts = attempts + 1 WHERE id = ?",
            )
            .bind(platform_message_id)
            .bind(now)
            .bind(id)
            .execute(&self.writer)
            .await
            .map(drop)
        })
        .await
    }

    async fn mark_attempt_failed(&self, id: i64, error: &str, give_up: bool) -> StoreResult<()> {
        let state = if give_up { "failed" } else { "pending" };
        retry_busy(|| async move {
            sqlx::query("UPDATE outbound_messages SET attempts = attempts + 1, error = ?, state = ? WHERE id = ?")
                .bind(error)
                .bind(state)
                .bind(id)
                .execute(&self.writer)
                .await
                .map(drop)
        })
        .await
    }
}
