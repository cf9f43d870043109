//! `RetentionStore` on SQLite: batched deletes in primary-key order (oldest first), so each batch
//! touches few rows and the writer is released between batches.

use async_trait::async_trait;

use super::{SqliteStore, retry_busy};
use crate::store::{RetentionStore, StoreResult};

/// Pages of full-text index merged per step of `reclaim_space`.
const FTS_MERGE_PAGES: u32 = 250;
/// Steps per full-text table per `reclaim_space` call.
const FTS_MERGE_STEPS: u32 = 8;

/// Run one batched `DELETE` whose statement takes the age bound as `?1` and the batch size as
/// `?2`; returns the rows deleted.
async fn delete_batch(store: &SqliteStore, sql: &'static str, before: i64, limit: u32) -> StoreResult<u64> {
    retry_busy(|| async {
        sqlx::query(sql)
            .bind(before)
            .bind(i64::from(limit))
            .execute(&mut *store.writer.get().await.unwrap())
            .await
            .map(|r| r.rows_affected())
    })
    .await
}

#[async_trait]
impl RetentionStore for SqliteStore {
    async fn prune_inbound(&self, before: i64, limit: u32) -> StoreResult<u64> {
        let sql = "DELETE FROM inbound_events WHERE seq IN (SELECT seq FROM inbound_events \
                   WHERE state NOT IN ('accepted', 'running') AND received_at < ?1 ORDER BY seq LIMIT ?2)";
        let events = delete_batch(self, sql, before, limit).await?;
        // A webhook delivery's replay record (the hash of what it signed; scope `WEBHOOK_SCOPE`)
        // is as much its deduplication record as its event: same age, and kept while it runs.
        let sql = "DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys \
                   WHERE created_at < ?1 AND scope LIKE 'webhook:%' AND request_id NOT IN \
                   (SELECT event_id FROM inbound_events WHERE state IN ('accepted', 'running')) \
                   ORDER BY created_at LIMIT ?2)";
        Ok(events + delete_batch(self, sql, before, limit).await?)
    }

    async fn prune_outbound(&self, before: i64, limit: u32) -> StoreResult<u64> {
        let sql = "DELETE FROM outbound_messages WHERE id IN (SELECT id FROM outbound_messages \
                   WHERE state <> 'pending' AND created_at < ?1 ORDER BY id LIMIT ?2)";
        delete_batch(self, sql, before, limit).await
    }

    async fn prune_archived_messages(&self, before: i64, limit: u32) -> StoreResult<u64> {
        let sql = "DELETE FROM messages WHERE id IN (SELECT id FROM messages INDEXED BY messages_archived_by_age \
                   WHERE archived = 1 AND created_at < ?1 ORDER BY created_at LIMIT ?2)";
        let archived = delete_batch(self, sql, before, limit).await?;
        // Copies of transcript rows set aside (`damaged`) keep the same age, counted alike.
        let sql = "DELETE FROM quarantined_messages WHERE id IN (SELECT id FROM quarantined_messages \
                   WHERE quarantined_at < ?1 ORDER BY quarantined_at LIMIT ?2)";
        Ok(archived + delete_batch(self, sql, before, limit).await?)
    }

    async fn prune_sessions(&self, before: i64, limit: u32) -> StoreResult<u64> {
        retry_busy(|| async {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            let ids: Vec<(String,)> = sqlx::query_as(
                "SELECT id FROM sessions WHERE updated_at < ?1 AND id NOT IN \
                 (SELECT session_id FROM inbound_events WHERE state IN ('accepted', 'running') AND session_id IS NOT NULL) \
                 ORDER BY updated_at LIMIT ?2",
            )
            .bind(before)
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await?;
            for (id,) in &ids {
                sqlx::query("DELETE FROM messages WHERE session_id = ?1").bind(id).execute(&mut *tx).await?;
                sqlx::query("DELETE FROM quarantined_messages WHERE session_id = ?1").bind(id).execute(&mut *tx).await?;
                sqlx::query("DELETE FROM session_routes WHERE session_id = ?1").bind(id).execute(&mut *tx).await?;
                sqlx::query("DELETE FROM sessions WHERE id = ?1").bind(id).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(ids.len() as u64)
        })
        .await
        .inspect(|&pruned| {
            if pruned > 0 {
                self.transcripts.clear();
            }
        })
    }

    async fn reclaim_space(&self, pages: u32) -> StoreResult<()> {
        // FTS5 records a deletion as a marker and drops the entry only when the segments holding
        // both are merged; under steady retention the big old segments are never merged by
        // themselves, so the index would grow with every message ever deleted. A bounded share
        // of an incremental optimize each round (resumed by the next) keeps it near its live
        // size; each step is its own short write, so the writer is released between steps.
        for table in ["messages_fts", "messages_fts_trigram"] {
            let sql = format!("INSERT INTO {table} ({table}, rank) VALUES ('merge', -{FTS_MERGE_PAGES})");
            for _ in 0..FTS_MERGE_STEPS {
                let done = retry_busy(|| async {
                    let mut conn = self.writer.get().await?;
                    let (before,): (i64,) = sqlx::query_as("SELECT total_changes()").fetch_one(&mut *conn).await?;
                    sqlx::query(sqlx::AssertSqlSafe(sql.clone())).execute(&mut *conn).await?;
                    let (after,): (i64,) = sqlx::query_as("SELECT total_changes()").fetch_one(&mut *conn).await?;
                    Ok::<_, sqlx::Error>(after - before < 2)
                })
                .await?;
                tokio::task::yield_now().await;
                if done {
                    break;
                }
            }
        }
        self.incremental_vacuum(pages).await
    }
}
