//! `OperatorStore` on SQLite: the troubled rows, and taking one again. Retrying and replaying
//! decode the stored payload before they change anything, so a row that still does not decode
//! stays as it was. Only a set-aside event is replayed: it never ran. A failed one was answered
//! (with its error), and its turn's replies are already stored under its id: running it again
//! would break "one answer per message".

use async_trait::async_trait;
use hermesd_platform::{InboundEvent, OutboundMessage};
use sqlx::Row;

use super::{SqliteStore, from_json, retry_busy};
use crate::store::{Again, DeliveryRow, EventRow, OperatorStore, PendingOutbound, StoreResult};

/// The states an operator takes again or drops.
const TROUBLED: &str = "('failed', 'quarantined')";

/// Whether a delivery in `state` is one an operator may take again or drop.
fn troubled(state: &str) -> bool {
    state == "failed" || state == "quarantined"
}

fn count(row: &sqlx::sqlite::SqliteRow, column: &str) -> u64 {
    u64::try_from(row.get::<i64, _>(column)).unwrap_or(0)
}

#[async_trait]
impl OperatorStore for SqliteStore {
    async fn list_deliveries(&self, troubled: bool, limit: u32) -> StoreResult<Vec<DeliveryRow>> {
        let filter = if troubled { format!("WHERE state IN {TROUBLED}") } else { String::new() };
        let sql = format!(
            "SELECT id, platform, turn_id, state, attempts, error, created_at FROM outbound_messages {filter} \
             ORDER BY id DESC LIMIT ?"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(i64::from(limit))
            .fetch_all(&mut *self.readers.get().await?)
            .await?;
        Ok(rows
            .iter()
            .map(|row| DeliveryRow {
                id: row.get("id"),
                platform: row.get("platform"),
                turn_id: row.get("turn_id"),
                state: row.get("state"),
                attempts: u32::try_from(row.get::<i64, _>("attempts")).unwrap_or(u32::MAX),
                error: row.get("error"),
                created_at: row.get("created_at"),
            })
            .collect())
    }

    async fn requeue_delivery(&self, id: i64) -> StoreResult<Again<PendingOutbound>> {
        let row = sqlx::query("SELECT turn_id, payload, state FROM outbound_messages WHERE id = ?")
            .bind(id)
            .fetch_optional(&mut *self.writer.get().await?)
            .await?;
        let Some(row) = row else { return Ok(Again::NotFound) };
        let state: String = row.get("state");
        if !troubled(&state) {
            return Ok(Again::Not(state));
        }
        let message: OutboundMessage = match from_json(row.get("payload"), "outbound_messages.payload") {
            Ok(message) => message,
            Err(e) => return Ok(Again::Unreadable(e.to_string())),
        };
        let changed = retry_busy(|| async {
            sqlx::query(
                "UPDATE outbound_messages SET state = 'pending', attempts = 0, error = NULL, delivery_status = NULL \
                 WHERE id = ? AND state IN ('failed', 'quarantined')",
            )
            .bind(id)
            .execute(&mut *self.writer.get().await?)
            .await
        })
        .await?
        .rows_affected();
        if changed == 0 {
            return Ok(Again::Not("taken meanwhile".into()));
        }
        Ok(Again::Ready(PendingOutbound { id, turn_id: row.get("turn_id"), message, attempts: 0 }))
    }

    async fn drop_delivery(&self, id: i64) -> StoreResult<Again<()>> {
        let state: Option<(String,)> = sqlx::query_as("SELECT state FROM outbound_messages WHERE id = ?")
            .bind(id)
            .fetch_optional(&mut *self.writer.get().await?)
            .await?;
        match state {
            None => Ok(Again::NotFound),
            Some((state,)) if !troubled(&state) => Ok(Again::Not(state)),
            Some(_) => {
                let removed = retry_busy(|| async {
                    sqlx::query("DELETE FROM outbound_messages WHERE id = ? AND state IN ('failed', 'quarantined')")
                        .bind(id)
                        .execute(&mut *self.writer.get().await?)
                        .await
                })
                .await?
                .rows_affected();
                Ok(if removed == 0 { Again::Not("taken meanwhile".into()) } else { Again::Ready(()) })
            }
        }
    }

    async fn list_events(&self, troubled: bool, limit: u32) -> StoreResult<Vec<EventRow>> {
        let filter = if troubled { format!("WHERE state IN {TROUBLED}") } else { String::new() };
        let sql = format!(
            "SELECT seq, platform, event_id, state, error, received_at FROM inbound_events {filter} \
             ORDER BY seq DESC LIMIT ?"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(i64::from(limit))
            .fetch_all(&mut *self.readers.get().await?)
            .await?;
        Ok(rows
            .iter()
            .map(|row| EventRow {
                seq: row.get("seq"),
                platform: row.get("platform"),
                event_id: row.get("event_id"),
                state: row.get("state"),
                error: row.get("error"),
                received_at: row.get("received_at"),
            })
            .collect())
    }

    async fn reopen_event(&self, seq: i64) -> StoreResult<Again<InboundEvent>> {
        let row = sqlx::query("SELECT payload, state FROM inbound_events WHERE seq = ?")
            .bind(seq)
            .fetch_optional(&mut *self.writer.get().await?)
            .await?;
        let Some(row) = row else { return Ok(Again::NotFound) };
        let state: String = row.get("state");
        if state != "quarantined" {
            return Ok(Again::Not(state));
        }
        let event: InboundEvent = match from_json(row.get("payload"), "inbound_events.payload") {
            Ok(event) => event,
            Err(e) => return Ok(Again::Unreadable(e.to_string())),
        };
        let changed = retry_busy(|| async {
            sqlx::query(
                "UPDATE inbound_events SET state = 'accepted', attempts = 0, error = NULL, finished_at = NULL \
                 WHERE seq = ? AND state = 'quarantined'",
            )
            .bind(seq)
            .execute(&mut *self.writer.get().await?)
            .await
        })
        .await?
        .rows_affected();
        if changed == 0 {
            return Ok(Again::Not("taken meanwhile".into()));
        }
        Ok(Again::Ready(event))
    }

    async fn trouble_counts(&self) -> StoreResult<(u64, u64, u64)> {
        // Each count names the partial index's own predicate, so SQLite reads only that index.
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM outbound_messages WHERE state IN ('failed', 'quarantined') \
                AND state = 'failed') AS failed, \
             (SELECT COUNT(*) FROM outbound_messages WHERE state IN ('failed', 'quarantined') \
                AND state = 'quarantined') AS set_aside, \
             (SELECT COUNT(*) FROM inbound_events WHERE state IN ('failed', 'quarantined') \
                AND state = 'quarantined') AS events",
        )
        .fetch_one(&mut *self.readers.get().await?)
        .await?;
        Ok((count(&row, "failed"), count(&row, "set_aside"), count(&row, "events")))
    }
}
