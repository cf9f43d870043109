//! Inbound events and platform cursors in SQLite: the durable, deduplicated front door.

use async_trait::async_trait;
use hermesd_platform::{InboundEvent, OutboundMessage};
use sqlx::Row;

use super::outbox::insert_outbound_rows;
use super::{SqliteStore, from_json, retry_busy, to_json};
use crate::clock::now_ms;
use crate::store::{
    AcceptOutcome, EventState, Fence, InboundStore, Outlive, QuarantinedRow, StoreError, StoreResult, UnfinishedEvent,
    UnfinishedEvents,
};

impl SqliteStore {
    /// Set an undecodable inbound row aside: state `quarantined`, the reason in `error`.
    async fn quarantine_inbound(&self, seq: i64, reason: &str, now: i64) -> StoreResult<()> {
        retry_busy(|| async move {
            sqlx::query(
                "UPDATE inbound_events SET state = 'quarantined', error = ?, finished_at = ? \
                 WHERE seq = ? AND state IN ('accepted', 'running')",
            )
            .bind(reason)
            .bind(now)
            .bind(seq)
            .execute(&mut *self.writer.get().await?)
            .await
            .map(drop)
        })
        .await
    }

    /// Store a raw inbound row, payload unchecked, as no adapter ever would: for tests of a
    /// damaged or older database.
    #[doc(hidden)]
    pub async fn insert_raw_inbound(
        &self,
        platform: &str,
        event_id: &str,
        payload: &str,
        now: i64,
    ) -> StoreResult<i64> {
        let done =
            sqlx::query("INSERT INTO inbound_events (platform, event_id, payload, received_at) VALUES (?, ?, ?, ?)")
                .bind(platform)
                .bind(event_id)
                .bind(payload)
                .bind(now)
                .execute(&mut *self.writer.get().await?)
                .await?;
        Ok(done.last_insert_rowid())
    }

    /// The state and error text of inbound event `seq`, if it exists (inspection and tests).
    pub async fn inbound_state(&self, seq: i64) -> StoreResult<Option<(String, Option<String>)>> {
        let row: Option<(String, Option<String>)> =
            sqlx::query_as("SELECT state, error FROM inbound_events WHERE seq = ?")
                .bind(seq)
                .fetch_optional(&mut *self.readers.get().await?)
                .await?;
        Ok(row)
    }
}

#[async_trait]
impl InboundStore for SqliteStore {
    async fn ping(&self) -> StoreResult<()> {
        // Health checks poll this: no use that keeps the store from going quiet.
        let mut conn = self.readers.get_quietly().await?;
        sqlx::query("SELECT 1").execute(&mut *conn).await.map(drop).map_err(StoreError::from)
    }

    async fn accept_inbound(&self, event: &InboundEvent, now: i64, outlive: Outlive) -> StoreResult<AcceptOutcome> {
        let payload = to_json(event);
        let (platform, event_id) = (event.platform().to_owned(), event.event_id().to_owned());
        self.write_lane_durable(outlive, move |conn| {
            let changed = conn
                .prepare_cached(
                    "INSERT INTO inbound_events (platform, event_id, payload, received_at) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (platform, event_id) DO NOTHING",
                )?
                .execute(rusqlite::params![platform, event_id, payload, now])?;
            Ok(if changed == 0 {
                AcceptOutcome::Duplicate
            } else {
                AcceptOutcome::New { seq: conn.last_insert_rowid() }
            })
        })
        .await
    }

    async fn unfinished_events(&self) -> StoreResult<UnfinishedEvents> {
        let rows = sqlx::query(
            "SELECT seq, platform, payload, state, attempts, received_at, session_id FROM inbound_events \
             WHERE state IN ('accepted', 'running') ORDER BY seq",
        )
        .fetch_all(&mut *self.writer.get().await?)
        .await?;
        let mut found = UnfinishedEvents::default();
        for row in &rows {
            let seq: i64 = row.get("seq");
            let state: String = row.get("state");
            let decoded = from_json(row.get("payload"), "inbound_events.payload").and_then(|event| {
                let state = EventState::parse(&state)
                    .ok_or_else(|| StoreError::Corrupt(format!("inbound_events.state {state:?}")))?;
                Ok((event, state))
            });
            match decoded {
                Ok((event, state)) => found.events.push(UnfinishedEvent {
                    seq,
                    event,
                    state,
                    attempts: row.get::<i64, _>("attempts").try_into().unwrap_or(u32::MAX),
                    received_at: row.get("received_at"),
                    session_id: row.get("session_id"),
                }),
                Err(error) => found.quarantined.push(QuarantinedRow {
                    id: seq,
                    platform: row.get("platform"),
                    reason: error.to_string(),
                }),
            }
        }
        for row in &found.quarantined {
            self.quarantine_inbound(row.id, &row.reason, now_ms()).await?;
        }
        Ok(found)
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
        // Owned copies: the write may run in another task's batch.
        let (error, reply, turn_id) = (error.map(str::to_owned), reply.to_vec(), turn_id.to_owned());
        self.write_lane(move |conn| {
            conn.prepare_cached("UPDATE inbound_events SET state = ?1, error = ?2, finished_at = ?3 WHERE seq = ?4")?
                .execute(rusqlite::params![state.as_str(), error, now, seq])?;
            insert_outbound_rows(conn, &turn_id, &reply, now)?;
            Ok(())
        })
        .await
    }

    async fn requeue_event(&self, seq: i64) -> StoreResult<()> {
        self.write(|| async move {
            sqlx::query(
                "UPDATE inbound_events SET state = 'accepted', attempts = MAX(attempts - 1, 0) \
                 WHERE seq = ? AND state = 'running'",
            )
            .bind(seq)
            .execute(&mut *self.writer.get().await?)
            .await
            .map(drop)
        })
        .await
    }

    async fn load_cursor(&self, platform: &str) -> StoreResult<Option<String>> {
        let row: Option<(String,)> = sqlx::query_as("SELECT cursor FROM platform_cursors WHERE platform = ?")
            .bind(platform)
            .fetch_optional(&mut *self.writer.get().await?)
            .await?;
        Ok(row.map(|r| r.0))
    }

    async fn save_cursor(&self, platform: &str, cursor: &str, now: i64, fence: Option<&Fence>) -> StoreResult<bool> {
        let (lease, token) = fence.map_or((None, 0), |fence| (Some(fence.lease.as_str()), fence.token));
        self.write(|| async move {
            // One statement: the check of the lease and the write cannot be torn apart.
            sqlx::query(
                "INSERT INTO platform_cursors (platform, cursor, updated_at) SELECT ?1, ?2, ?3 \
                 WHERE ?4 IS NULL OR EXISTS (SELECT 1 FROM leases WHERE name = ?4 AND token = ?5) \
                 ON CONFLICT (platform) DO UPDATE SET cursor = excluded.cursor, updated_at = excluded.updated_at",
            )
            .bind(platform)
            .bind(cursor)
            .bind(now)
            .bind(lease)
            .bind(token)
            .execute(&mut *self.writer.get().await?)
            .await
            .map(|done| done.rows_affected() == 1)
        })
        .await
    }
}
