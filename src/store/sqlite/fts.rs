//! Full-text indexing off the write path (schema 19). Inserting a message only queues its id in
//! `messages_fts_pending`; `index_batch` moves a batch of queued messages into both FTS5 tables
//! in one write. FTS5 flushes a new index segment per write transaction, so indexing each
//! message in the turn's own transactions cost several times the rest of the turn's writes;
//! batched, a segment holds hundreds of messages.
//!
//! The delete and update triggers (migrations/0019) keep the external-content tables exact for
//! rows still queued. Every search drains the queue first, so nothing written before a search is
//! missing from it.
//!
//! Invariant: a search sees every message written before it. A queued row is never removed from the
//! FTS tables (it was never added), and FTS5's `integrity-check` against the messages table holds
//! whenever the queue is empty. Pruned messages leave the index too; the retention round's
//! incremental FTS5 optimize merges their delete markers away.

use super::SqliteStore;
use crate::store::StoreResult;

/// `?1` the highest queued id of the batch: both tables get exactly the queued rows up to it,
/// and those leave the queue, in one command inside the caller's transaction.
const INDEX_BATCH_SQL: &str = "\
    INSERT INTO messages_fts (rowid, content) \
      SELECT m.id, m.content FROM messages_fts_pending p JOIN messages m ON m.id = p.id \
      WHERE p.id <= ?1 AND m.content IS NOT NULL; \
    INSERT INTO messages_fts_trigram (rowid, content) \
      SELECT m.id, m.content FROM messages_fts_pending p JOIN messages m ON m.id = p.id \
      WHERE p.id <= ?1 AND m.content IS NOT NULL; \
    DELETE FROM messages_fts_pending WHERE id <= ?1";

/// Batches a search drains before giving up and answering from what is indexed (a backlog that
/// large means the background task is failing; the search still answers).
const DRAIN_BATCHES: u32 = 8;

impl SqliteStore {
    /// Index up to `max` queued messages in one write; how many left the queue.
    pub(super) async fn index_batch(&self, max: u32) -> StoreResult<u64> {
        // Most rounds find nothing: ask a reader, and take the write lock only for work.
        let (any,): (bool,) = sqlx::query_as("SELECT EXISTS (SELECT 1 FROM messages_fts_pending)")
            .fetch_one(&mut *self.readers.get_quietly().await?)
            .await?;
        if !any {
            // A quiet round: checkpoint what the write lane (which never does) left in the WAL,
            // on the writer's thread; after a longer quiet spell, hand the page caches back.
            if self.lane.take_dirty() {
                self.quiet.busy();
                if let Err(e) =
                    sqlx::query("PRAGMA wal_checkpoint(PASSIVE)").execute(&mut *self.writer.get().await?).await
                {
                    tracing::debug!(error = %e, "checkpointing the WAL");
                }
            } else {
                self.quiet_round().await;
            }
            return Ok(0);
        }
        self.write(|| async move {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            let (queued, bound): (i64, Option<i64>) = sqlx::query_as(
                "SELECT COUNT(*), MAX(id) FROM (SELECT id FROM messages_fts_pending ORDER BY id LIMIT ?1)",
            )
            .bind(i64::from(max))
            .fetch_one(&mut *tx)
            .await?;
            let Some(bound) = bound else { return Ok(0) };
            sqlx::query(INDEX_BATCH_SQL).bind(bound).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(queued.unsigned_abs())
        })
        .await
    }

    /// Index everything queued (bounded), so a search sees every message written before it. A
    /// failure is logged, not returned: the search answers from what is already indexed.
    pub(super) async fn drain_index(&self) {
        for _ in 0..DRAIN_BATCHES {
            match self.index_batch(crate::store::search::INDEX_BATCH).await {
                Ok(n) if n < u64::from(crate::store::search::INDEX_BATCH) => return,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "could not index new messages before a search");
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use hermesd_platform::ChatType;

    use super::SqliteStore;
    use crate::store::{SessionKey, SessionStore};

    async fn exec(store: &SqliteStore, sql: &str) {
        sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut *store.writer.get().await.unwrap())
            .await
            .unwrap();
    }

    async fn count(store: &SqliteStore, sql: &str) -> i64 {
        let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(&mut *store.writer.get().await.unwrap())
            .await
            .unwrap();
        n
    }

    /// FTS5's own check of both indexes against the messages table (`rank` 1: compare with the
    /// external content, which only holds once the queue is empty); fails the test on any
    /// difference.
    async fn assert_exact(store: &SqliteStore) {
        for table in ["messages_fts", "messages_fts_trigram"] {
            exec(store, &format!("INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")).await;
        }
    }

    async fn hits(store: &SqliteStore, word: &str) -> Vec<i64> {
        store.search(word, None, 50).await.unwrap().into_iter().map(|hit| hit.message_id).collect()
    }

    #[tokio::test]
    async fn queued_and_indexed_rows_stay_exact_through_edits_and_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("state.db"), Duration::from_secs(5), 2).await.unwrap();
        let key = SessionKey {
            key: "agent:main:telegram:dm:1".into(),
            platform: "telegram".into(),
            chat_id: "1".into(),
            chat_type: ChatType::Dm,
            thread_id: None,
            user_id: None,
        };
        let session = store.start_session(&key, 1).await.unwrap();
        let insert = |id: i64, text: &str| {
            format!(
                "INSERT INTO messages (id, session_id, role, content, created_at) VALUES ({id}, '{}', 'user', '{text}', 1)",
                session.id
            )
        };
        exec(&store, &insert(1, "alpha apple")).await;
        exec(&store, &insert(2, "bravo banana")).await;
        assert_eq!(count(&store, "SELECT COUNT(*) FROM messages_fts_pending").await, 2, "an insert only queues");
        assert_eq!(store.index_batch(1).await.unwrap(), 1, "a batch takes at most its size");
        assert_eq!(store.index_batch(10).await.unwrap(), 1);
        assert_eq!(store.index_batch(10).await.unwrap(), 0);
        assert_exact(&store).await;
        // Now 1 and 2 are indexed; 3 and 4 stay queued while all four change.
        exec(&store, &insert(3, "charlie cherry")).await;
        exec(&store, &insert(4, "delta date")).await;
        exec(&store, "UPDATE messages SET content = 'alpha avocado' WHERE id = 1").await;
        exec(&store, "UPDATE messages SET content = 'charlie citron' WHERE id = 3").await;
        exec(&store, "DELETE FROM messages WHERE id IN (2, 4)").await;
        // The largest id deleted and written again: a new row must be indexed, never mistaken
        // for the old one.
        exec(&store, &insert(4, "echo elderberry")).await;
        exec(&store, "UPDATE messages SET content = NULL WHERE id = 1").await;
        exec(&store, "UPDATE messages SET content = 'alpha again' WHERE id = 1").await;
        // A search drains the queue first: everything written before it is found.
        assert_eq!(hits(&store, "citron").await, vec![3]);
        assert_eq!(hits(&store, "elderberry").await, vec![4]);
        assert_eq!(hits(&store, "again").await, vec![1]);
        for gone in ["apple", "avocado", "banana", "cherry", "date", "delta", "bravo"] {
            assert!(hits(&store, gone).await.is_empty(), "{gone} was replaced or deleted");
        }
        assert_eq!(count(&store, "SELECT COUNT(*) FROM messages_fts_pending").await, 0);
        assert_exact(&store).await;
        exec(&store, "DELETE FROM messages").await;
        assert_exact(&store).await;
        assert!(hits(&store, "alpha").await.is_empty());
    }
}
