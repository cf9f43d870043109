//! The write lane: group commit, the WAL cut back after a burst, and which batches sync.

use super::*;

/// Group commit on the write lane: writes queued while the writer slot is taken commit in one
/// batch; a write that fails on its own (a constraint) fails alone and leaves no trace; a fault
/// in the middle of a batch rolls the whole batch back and fails every write in it.
#[tokio::test]
async fn writes_queued_behind_the_writer_commit_together_and_fail_alone_or_all_together() {
    use std::sync::Arc;

    use rusqlite::Connection;

    type Op = Arc<crate::store::sqlite::lane::LaneOp<()>>;
    fn insert(v: i64) -> Op {
        Arc::new(move |c: &Connection| c.execute("INSERT INTO lane_t (v) VALUES (?1)", [v]).map(drop))
    }
    async fn queue_behind_the_writer(store: &Arc<SqliteStore>, ops: Vec<Op>) -> Vec<Result<(), sqlx::Error>> {
        let slot = store.writer.get().await.unwrap();
        let (batches, _) = store.lane.counts();
        let mut waiting = Vec::new();
        for op in ops {
            let store = store.clone();
            waiting.push(tokio::spawn(async move { store.lane.write(&store.writer, op, false).await }));
        }
        let n = waiting.len();
        while store.lane.counts().1 < n {
            tokio::task::yield_now().await;
        }
        drop(slot);
        let mut results = Vec::new();
        for write in waiting {
            results.push(write.await.unwrap());
        }
        assert_eq!(store.lane.counts(), (batches + 1, 0), "the queued writes ran as one batch");
        results
    }
    let rows = |store: &SqliteStore| {
        store
            .read_lane
            .run(|c| {
                c.query_row("SELECT COUNT(*), COALESCE(SUM(v), 0) FROM lane_t", [], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
                })
            })
            .unwrap()
    };

    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(&dir).await);
    store.write_lane(|c| c.execute_batch("CREATE TABLE lane_t (v INTEGER UNIQUE)")).await.unwrap();

    // Twenty writes and a duplicate among them: one batch, the duplicate alone fails.
    let mut ops: Vec<Op> = (1..=20).map(insert).collect();
    ops.insert(10, insert(3));
    let results = queue_behind_the_writer(&store, ops).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 20);
    let Err(sqlx::Error::Database(unique)) = &results[10] else { panic!("the duplicate failed: {:?}", results[10]) };
    assert!(unique.is_unique_violation());
    assert_eq!(rows(&store), (20, 210));

    // A full disk in the third write: all six fail as a fault, none of them is kept.
    let mut ops: Vec<Op> = (100..105).map(insert).collect();
    ops.insert(2, Arc::new(|_: &Connection| Err(rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(13), None))));
    let results = queue_behind_the_writer(&store, ops).await;
    for result in &results {
        let error = result.as_ref().expect_err("every write of the batch fails");
        assert_eq!(
            crate::store::sqlite::health::classify(error),
            Some(crate::store::health::WriteFault::DiskFull),
            "{error}"
        );
    }
    assert_eq!(rows(&store), (20, 210), "nothing of the failed batch was kept");

    // The lane works on after both; a write alone (no savepoint) fails alone too.
    store.write_lane(|c| c.execute("INSERT INTO lane_t (v) VALUES (500)", []).map(drop)).await.unwrap();
    let duplicate = store.lane.write(&store.writer, insert(500), false).await.expect_err("a duplicate");
    assert!(matches!(&duplicate, sqlx::Error::Database(db) if db.is_unique_violation()), "{duplicate}");
    store.write_lane(|c| c.execute("INSERT INTO lane_t (v) VALUES (1000)", []).map(drop)).await.unwrap();
    assert_eq!(rows(&store), (22, 1710));
}

/// After a burst grew the WAL far beyond its usual size, the next writer to start it over (the
/// write lane, then the sqlx writer) cuts the file back to `WAL_SIZE_LIMIT`.
#[tokio::test]
async fn the_wal_goes_back_to_its_limit_after_a_burst() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let wal = dir.path().join("state.db-wal");
    let wal_len = || std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    let burst = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2500) \
                 INSERT INTO scratch SELECT randomblob(8000) FROM n";
    {
        let mut conn = store.writer.get().await.unwrap();
        sqlx::query("CREATE TABLE scratch (x BLOB)").execute(&mut *conn).await.unwrap();
    }
    for round in 0..2 {
        {
            // One transaction: the writer's own automatic checkpoint after it must not be
            // followed by a write of its own before the one under test.
            let mut conn = store.writer.get().await.unwrap();
            let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
            sqlx::query(burst).execute(&mut *tx).await.unwrap();
            sqlx::query("DELETE FROM scratch").execute(&mut *tx).await.unwrap();
            tx.commit().await.unwrap();
            sqlx::query("PRAGMA wal_checkpoint(PASSIVE)").execute(&mut *conn).await.unwrap();
        }
        assert!(
            wal_len() > 2 * crate::store::sqlite::WAL_SIZE_LIMIT,
            "round {round}: the burst grew the WAL to {}",
            wal_len()
        );
        if round == 0 {
            store.write_lane(|conn| conn.execute("INSERT INTO scratch VALUES (x'00')", [])).await.unwrap();
        } else {
            let mut conn = store.writer.get().await.unwrap();
            sqlx::query("INSERT INTO scratch VALUES (x'00')").execute(&mut *conn).await.unwrap();
        }
        assert!(
            wal_len() <= crate::store::sqlite::WAL_SIZE_LIMIT,
            "round {round}: the WAL is still {} bytes",
            wal_len()
        );
    }
}

/// Accepted events and send receipts that must outlive a power cut commit synced to disk
/// (`synchronous = FULL`, 2); those of platforms answering per request and the other writes of
/// the lane keep NORMAL (1), switched back between batches.
#[tokio::test]
async fn durable_lane_writes_commit_with_synchronous_full() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let mode = |c: &rusqlite::Connection| c.query_row("PRAGMA synchronous", [], |row| row.get::<_, i64>(0));
    assert_eq!(store.write_lane_durable(Outlive::PowerCut, mode).await.unwrap(), 2);
    assert_eq!(store.write_lane(mode).await.unwrap(), 1);
    assert_eq!(store.write_lane_durable(Outlive::PowerCut, mode).await.unwrap(), 2);
    assert_eq!(store.write_lane_durable(Outlive::Crash, mode).await.unwrap(), 1);
}

/// Every write that takes an event or records a receipt commits synced when asked to outlive a
/// power cut, and unsynced when a crash is all it must outlive: the plain accept, the accept
/// claiming an Idempotency-Key (webhooks, API retries), the receipt, and the receipt of a reply
/// that filled a stream preview.
#[tokio::test]
async fn every_accept_and_receipt_commits_as_synced_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let claim = |key: &'static str| crate::store::IdempotencyClaim {
        scope: "webhook:github",
        key,
        fingerprint: "f",
        request_id: key,
        expires_before: 0,
    };
    let chunks = [reply("a", 0, 4), reply("b", 1, 4), reply("c", 2, 4), reply("d", 3, 4)];
    let ids = store.enqueue_outbound("t1", &chunks, 1).await.unwrap();
    for (outlive, synced) in [(Outlive::PowerCut, true), (Outlive::Crash, false)] {
        let n = usize::from(synced);
        store.accept_inbound(&event(&format!("plain{n}"), "hi"), 1, outlive).await.unwrap();
        assert_eq!(store.lane.last_batch_synced(), synced, "accept_inbound {outlive:?}");
        store.write_lane(|_| Ok(())).await.unwrap();
        let key = if synced { "k1" } else { "k2" };
        store.accept_idempotent(&event(&format!("claimed{n}"), "hi"), &claim(key), 1, outlive).await.unwrap();
        assert_eq!(store.lane.last_batch_synced(), synced, "accept_idempotent {outlive:?}");
        store.write_lane(|_| Ok(())).await.unwrap();
        store.mark_sent(ids[2 * n], "m", 2, outlive).await.unwrap();
        assert_eq!(store.lane.last_batch_synced(), synced, "mark_sent {outlive:?}");
        store.write_lane(|_| Ok(())).await.unwrap();
        store.settle_preview(ids[2 * n + 1], "t1", "p", 2, outlive).await.unwrap();
        assert_eq!(store.lane.last_batch_synced(), synced, "settle_preview {outlive:?}");
    }
}
