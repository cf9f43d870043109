//! `hermesd doctor`'s look at the store: SQLite's `quick_check`, and the rows of the last day
//! that need an operator (turns that ended in an error, deliveries that failed, rows set aside
//! because they no longer decode). Read only, on the reader pool.

use sqlx::Row;

use super::SqliteStore;
use crate::store::StoreResult;

/// What `checkup` found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Checkup {
    /// `PRAGMA quick_check`'s verdict: `ok`, or its first problems.
    pub integrity: String,
    /// Inbound events that ended in an error reply since the cut-off.
    pub failed_turns: u64,
    /// Inbound events set aside (undecodable) since the cut-off.
    pub quarantined_events: u64,
    /// Outbound chunks that failed since the cut-off.
    pub failed_deliveries: u64,
    /// Outbound chunks set aside (undecodable), written since the cut-off.
    pub quarantined_deliveries: u64,
    /// Transcript messages set aside since the cut-off.
    pub quarantined_messages: u64,
}

const COUNTS: &str = "SELECT \
     (SELECT COUNT(*) FROM inbound_events WHERE state = 'failed' AND finished_at >= ?1) AS failed_turns, \
     (SELECT COUNT(*) FROM inbound_events WHERE state = 'quarantined' AND COALESCE(finished_at, received_at) >= ?1) \
       AS quarantined_events, \
     (SELECT COUNT(*) FROM outbound_messages WHERE state = 'failed' AND created_at >= ?1) AS failed_deliveries, \
     (SELECT COUNT(*) FROM outbound_messages WHERE state = 'quarantined' AND created_at >= ?1) \
       AS quarantined_deliveries, \
     (SELECT COUNT(*) FROM quarantined_messages WHERE quarantined_at >= ?1) AS quarantined_messages";

impl SqliteStore {
    /// The store's integrity and the rows since `since_ms` (Unix ms) an operator should see.
    pub async fn checkup(&self, since_ms: i64) -> StoreResult<Checkup> {
        let mut conn = self.readers.get().await?;
        let verdicts: Vec<(String,)> = sqlx::query_as("PRAGMA quick_check(5)").fetch_all(&mut *conn).await?;
        let integrity = verdicts.into_iter().map(|(v,)| v).collect::<Vec<_>>().join("; ");
        let row = sqlx::query(COUNTS).bind(since_ms).fetch_one(&mut *conn).await?;
        let count = |column: &str| u64::try_from(row.get::<i64, _>(column)).unwrap_or(0);
        Ok(Checkup {
            integrity,
            failed_turns: count("failed_turns"),
            quarantined_events: count("quarantined_events"),
            failed_deliveries: count("failed_deliveries"),
            quarantined_deliveries: count("quarantined_deliveries"),
            quarantined_messages: count("quarantined_messages"),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_fresh_store_is_intact_and_counts_the_days_trouble() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
        assert_eq!(store.checkup(0).await.unwrap(), Checkup { integrity: "ok".into(), ..Checkup::default() });
        let mut conn = store.writer.get().await.unwrap();
        for (state, at) in [("failed", 5_000), ("failed", 10), ("quarantined", 6_000), ("done", 7_000)] {
            sqlx::query(
                "INSERT INTO inbound_events (platform, event_id, payload, state, received_at, finished_at) \
                 VALUES ('telegram', ?1, '{}', ?2, ?3, ?3)",
            )
            .bind(format!("{state}-{at}"))
            .bind(state)
            .bind(at)
            .execute(&mut *conn)
            .await
            .unwrap();
        }
        sqlx::query(
            "INSERT INTO outbound_messages (turn_id, chunk_index, platform, payload, state, created_at) \
             VALUES ('t', 0, 'telegram', '{}', 'failed', 5000)",
        )
        .execute(&mut *conn)
        .await
        .unwrap();
        drop(conn);
        let found = store.checkup(1_000).await.unwrap();
        assert_eq!(
            (found.failed_turns, found.quarantined_events, found.failed_deliveries),
            (1, 1, 1),
            "only the day's rows count: {found:?}"
        );
    }
}
