//! Store faults against the real binary under a multi-chat Telegram load: a full disk
//! (`PRAGMA max_page_count` on the writer, armed at run time), I/O errors on commit (the
//! `store.write` failpoint), the write lock held by another connection, and damaged rows. In
//! each case the daemon does not acknowledge what it could not store, says why in `/readyz`,
//! and once the fault is gone answers everything exactly once, in order, by itself.

#[path = "support/checker.rs"]
mod checker;
#[path = "support/gateway_run.rs"]
mod gateway_run;
mod support;

use std::time::Duration;

use gateway_run::{Gateway, stop};
use sqlx::Connection;
use support::{eventually, wait_ready};

/// Poll `/readyz` until its body contains `needle` (with a 503), or `timeout` passes.
async fn readyz_says(run: &Gateway, needle: &str, timeout: Duration) -> (u16, String) {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let (status, body) = run.readyz().await;
        if (status == 503 && body.contains(needle)) || tokio::time::Instant::now() > deadline {
            return (status, body);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// After the fault: everything answered, exactly once and in order, and ready again.
async fn recovers(run: &Gateway, child: std::process::Child) {
    assert!(
        eventually(Duration::from_secs(40), || run.all_answered()).await,
        "{:#?}\nlog:\n{}",
        run.delivered(),
        run.log()
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (status, body) = loop {
        let (status, body) = run.readyz().await;
        if status == 200 || tokio::time::Instant::now() > deadline {
            break (status, body);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status, 200, "ready again once the fault is gone: {body}");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop(child).await;
    let report = run.check().await;
    assert!(report.is_exactly_once(), "{report:#?}\nlog:\n{}", run.log());
    assert!(report.window_duplicates().is_empty(), "{report:#?}");
}

/// While the fault holds, nothing was answered and the platform still holds unconfirmed updates.
fn nothing_acknowledged(run: &Gateway) {
    assert!(run.tg.pending() > 0, "updates stay unconfirmed at the platform while they cannot be stored");
    assert!(!run.all_answered());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_holds_the_acks_says_so_and_loses_nothing() {
    let mut run = Gateway::new(3).await;
    let child = run.spawn("");
    wait_ready(run.port, run.path()).await;
    run.arm("store.max_page_count", "value(1)").await;
    // Rows of ~3.5 kB: every event needs a page of its own.
    for round in 0..2 {
        run.push_round(round, 3500);
    }
    let (status, body) = readyz_says(&run, "disk full", Duration::from_secs(15)).await;
    assert_eq!(status, 503, "{body}\nlog:\n{}", run.log());
    assert!(body.contains("store: disk full for"), "{body}");
    nothing_acknowledged(&run);
    run.arm("store.max_page_count", "off").await;
    recovers(&run, child).await;
    assert!(run.log().contains("store writes go through again"), "the recovery is logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn io_errors_on_commit_are_retried_reported_and_lose_nothing() {
    let mut run = Gateway::new(3).await;
    let child = run.spawn("");
    wait_ready(run.port, run.path()).await;
    // Eight failed commits in a row: about five seconds of backoff.
    run.arm("store.write", "error*8").await;
    for round in 0..2 {
        run.push_round(round, 0);
    }
    let (status, body) = readyz_says(&run, "I/O error on commit", Duration::from_secs(10)).await;
    assert_eq!(status, 503, "{body}\nlog:\n{}", run.log());
    nothing_acknowledged(&run);
    recovers(&run, child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_by_another_process_is_waited_out_and_reported() {
    let mut run = Gateway::new(3).await;
    let child = run.spawn("");
    wait_ready(run.port, run.path()).await;
    // Another program (an operator's sqlite3 shell, a backup) takes the write lock and keeps it.
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(run.db());
    let mut other = sqlx::SqliteConnection::connect_with(&options).await.unwrap();
    sqlx::query("BEGIN EXCLUSIVE").execute(&mut other).await.unwrap();
    for round in 0..2 {
        run.push_round(round, 0);
    }
    // The writer's busy timeout (5 s) passes before the first attempt gives up and says so.
    let (status, body) = readyz_says(&run, "locked by another process", Duration::from_secs(15)).await;
    assert_eq!(status, 503, "{body}\nlog:\n{}", run.log());
    nothing_acknowledged(&run);
    tokio::time::sleep(Duration::from_secs(3)).await;
    nothing_acknowledged(&run);
    sqlx::query("COMMIT").execute(&mut other).await.unwrap();
    other.close().await.unwrap();
    recovers(&run, child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_rows_are_set_aside_and_everything_else_goes_on() {
    let mut run = Gateway::new(3).await;
    for round in 0..2 {
        run.push_round(round, 0);
    }
    // First life: everything accepted, the first turn dies before it starts; the rest waits.
    let mut child = run.spawn("turn.start=abort@1");
    let died = eventually(Duration::from_secs(30), || child.try_wait().unwrap().is_some()).await;
    assert!(died, "log:\n{}", run.log());
    // Damage the newest event it accepted and never finished.
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(run.db());
    let mut db = sqlx::SqliteConnection::connect_with(&options).await.unwrap();
    let (seq, payload): (i64, String) = sqlx::query_as(
        "SELECT seq, payload FROM inbound_events WHERE state IN ('accepted', 'running') ORDER BY seq DESC LIMIT 1",
    )
    .fetch_one(&mut db)
    .await
    .unwrap();
    sqlx::query("UPDATE inbound_events SET payload = '{\"kind\": \"message\", \"oops' WHERE seq = ?")
        .bind(seq)
        .execute(&mut db)
        .await
        .unwrap();
    db.close().await.unwrap();
    // The damaged event can never be answered (the platform took its ack): the checker must not
    // expect it, and would report it as unexpected if it came.
    let token = run.sent.values().flatten().find(|t| payload.contains(&format!("\"{t}\""))).cloned().unwrap();
    for tokens in run.sent.values_mut() {
        tokens.retain(|t| t != &token);
    }

    let child = run.spawn("");
    wait_ready(run.port, run.path()).await;
    assert!(eventually(Duration::from_secs(30), || run.all_answered()).await, "{:#?}", run.delivered());

    run.push_round(2, 0);
    let metrics = support::client().get(format!("{}/metrics", run.base())).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("hermesd_quarantined_rows_total{table=\"inbound_events\"} 1"), "{metrics}");
    recovers(&run, child).await;
    let log = run.log();
    assert!(log.contains("quarantined an undecodable inbound event"), "{log}");

    // A third life with a transcript row of every chat damaged on disk: each chat is answered
    // all the same, the rows are set aside once and counted.
    let mut db = sqlx::SqliteConnection::connect_with(&options).await.unwrap();
    let damaged = sqlx::query(
        "UPDATE messages SET tool_calls = '[{\"oops' WHERE id IN \
         (SELECT max(id) FROM messages WHERE role = 'user' GROUP BY session_id)",
    )
    .execute(&mut db)
    .await
    .unwrap()
    .rows_affected();
    db.close().await.unwrap();
    assert_eq!(damaged, 3);
    run.push_round(3, 0);
    let child = run.spawn("");
    wait_ready(run.port, run.path()).await;
    assert!(eventually(Duration::from_secs(30), || run.all_answered()).await, "{:#?}", run.delivered());
    let metrics = support::client().get(format!("{}/metrics", run.base())).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("hermesd_quarantined_rows_total{table=\"messages\"} 3"), "{metrics}");
    recovers(&run, child).await;
    let log = run.log();
    assert!(log.contains("set aside a transcript row that no longer decodes"), "{log}");
}
