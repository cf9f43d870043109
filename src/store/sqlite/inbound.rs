//! Inbound events and platform cursors in SQLite: the durable, deduplicated front door.

use async_trait::async_trait;
use hermesd_platform::{InboundEvent, OutboundMessage};
use sqlx::Row;

use super::outbox::insert_outbound;
use super::{SqliteStore, from_json, retry_busy, to_json};
use crate::store::{AcceptOutcome, EventState, InboundStore, StoreError, StoreResult, UnfinishedEvent};

#[async_trait]
impl InboundStore for SqliteStore {
    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.readers).await.map(drop).map_err(StoreError::from)
    }

    async fn accept_inbound(&self, event: &InboundEvent, now: i64) -> StoreResult<AcceptOutcome> {
        let payload = &to_json(event);
        let (platform, event_id) = (event.platform(), event.event_id());
        retry_busy(|| async move {
            let done = sqlx::query(
                "INSERT INTO inbound_events (platform, event_id, payload, received_at) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (platform, event_id) DO NOTHING",
            )
            .bind(platform)
            .bind(event_id)
            .bind(payload)
            .bind(now)
            .execute(&self.writer)
            .await?;
            Ok(if done.rows_affected() == 0 {
                AcceptOutcome::Duplicate
            } else {
                AcceptOutcome::New { seq: done.last_insert_rowid() }
            })
        })
        .await
    }

    async fn unfinished_events(&self) -> StoreResult<Vec<UnfinishedEvent>> {
        let rows = sqlx::query(
            "SELECT seq, payload, state, attempts, received_at, session_id FROM inbound_events \
             WHERE state IN ('accepted', 'running') ORDER BY seq",
        )
        .fetch_all(&self.writer)
        .await?;
        rows.iter()
            .map(|row| {
                let state: String = row.get("state");
                Ok(UnfinishedEvent {
                    seq: row.get("seq"),
                    event: from_json(row.get("payload"), "inbound_events.payload")?,
                    state: EventState::parse(&state)
                        .ok_or_else(|| StoreError::Corrupt(format!("inbound_events.state {state:?}")))?,
                    attempts: row.get::<i64, _>("attempts").try_into().unwrap_or(u32::MAX),
                    received_at: row.get("received_at"),
                    session_id: row.get("session_id"),
                })
            })
            .collect()
    }

    async fn close_event(
        &self,
        seq: i64,
        state: EventState,
        error: Option<&str>,
        reply: &[OutboundMessage],
        turn_id: &str,
        now: i64,
    ) -> StoreResult<()> {
        retry_busy(|| async move {
            let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
            sqlx::query("UPDATE inbound_events SET state = ?, error = ?, finished_at = ? WHERE seq = ?")
                .bind(state.as_str())
                .bind(error)
                .bind(now)
                .bind(seq)
                .execute(&mut *tx)
                .await?;
            insert_outbound(&mut tx, turn_id, reply, now).await?;
            tx.commit().await
        })
        .await
    }

    async fn requeue_event(&self, seq: i64) -> StoreResult<()> {
        retry_busy(|| async move {
            sqlx::query(
                "UPDATE inbound_events SET state = 'accepted', attempts = MAX(attempts - 1, 0) \
                 WHERE seq = ? AND state = 'running'",
            )
            .bind(seq)
            .execute(&self.writer)
            .await
            .map(drop)
        })
        .await
    }

    async fn load_cursor(&self, platform: &str) -> StoreResult<Option<String>> {
        let row: Option<(String,)> = sqlx::query_as("SELECT cursor FROM platform_cursors WHERE platform = ?")
            .bind(platform)
            .fetch_optional(&self.writer)
            .await?;
        Ok(row.map(|r| r.0))
    }

    async fn save_cursor(&self, platform: &str, cursor: &str, now: i64) -> StoreResult<()> {
        retry_busy(|| async move {
            sqlx::query(
                "INSERT INTO platform_cursors (platform, cursor, updated_at) VALUES (?, ?, ?) \
                 ON CONFLICT (platform) DO UPDATE SET cursor = excluded.cursor, updated_at = excluded.updated_at",
            )
            .bind(platform)
            .bind(cursor)
            .bind(now)
            .execute(&self.writer)
            .await
            .map(drop)
        })
        .await
    }
}
