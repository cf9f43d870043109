//! The store's operator commands on the real binary: `hermesd backup` while a daemon writes (the
//! copy is a valid database with the turns committed before it; an existing destination is
//! refused), `hermesd store vacuum` (an old database switched to incremental auto-vacuum), and
//! `hermesd sessions export | prune`.

mod support;

use std::path::Path;

use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use support::{FakeLlm, ask, config_for, start_daemon};

fn hermesd(home: &Path, args: &[&str]) -> std::process::Output {
    support::hermesd_cli(home, args)
}

/// `(quick_check verdict, inbound events, auto_vacuum mode)` of the database at `path`.
async fn inspect(path: &Path) -> (String, i64, i64) {
    let options = SqliteConnectOptions::new().filename(path).read_only(true);
    let pool = SqlitePoolOptions::new().max_connections(1).connect_with(options).await.unwrap();
    let (verdict,): (String,) = sqlx::query_as("PRAGMA quick_check").fetch_one(&pool).await.unwrap();
    let (events,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM inbound_events").fetch_one(&pool).await.unwrap();
    let (mode,): (i64,) = sqlx::query_as("PRAGMA auto_vacuum").fetch_one(&pool).await.unwrap();
    pool.close().await;
    (verdict, events, mode)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_the_daemon_writes_is_a_valid_database() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let daemon = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    for i in 0..5 {
        assert_eq!(ask(&daemon.base, Some(&format!("s{i}")), "before").await.0, 200);
    }

    // Turns keep writing while the copy is taken.
    let base = daemon.base.clone();
    let writer = tokio::spawn(async move {
        for i in 0..40 {
            assert_eq!(ask(&base, Some(&format!("w{}", i % 4)), &format!("during {i}")).await.0, 200);
        }
    });
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("copy.db");
    let home_path = home.path().to_path_buf();
    let dest_arg = dest.to_str().unwrap().to_owned();
    let output = tokio::task::spawn_blocking(move || hermesd(&home_path, &["backup", &dest_arg])).await.unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "backup failed: {}", String::from_utf8_lossy(&output.stderr));
    assert!(said.contains("integrity checked") && said.contains("schema version"), "{said}");
    writer.await.unwrap();

    let (verdict, events, mode) = inspect(&dest).await;
    assert_eq!(verdict, "ok");
    assert!(events >= 5, "the copy holds the turns committed before it: {events}");
    assert_eq!(mode, 2, "a copy of a new database keeps incremental auto-vacuum");
    assert!(!out.path().join("copy.db.part").exists(), "no partial file is left");

    // A second backup to the same path is refused and leaves the first intact.
    let home_path = home.path().to_path_buf();
    let dest_arg = dest.to_str().unwrap().to_owned();
    let again = tokio::task::spawn_blocking(move || hermesd(&home_path, &["backup", &dest_arg])).await.unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists already"));
    assert_eq!(inspect(&dest).await.0, "ok");
    daemon.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_vacuum_switches_an_old_database_to_incremental_auto_vacuum() {
    let home = tempfile::tempdir().unwrap();
    // A database made before incremental auto-vacuum: created with auto_vacuum off.
    let db = home.path().join("state.db");
    let options = SqliteConnectOptions::new().filename(&db).create_if_missing(true);
    let pool = SqlitePoolOptions::new().max_connections(1).connect_with(options).await.unwrap();
    sqlx::query("CREATE TABLE filler (x BLOB)").execute(&pool).await.unwrap();
    sqlx::query("INSERT INTO filler SELECT zeroblob(4096) FROM (WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 500) SELECT n FROM c)")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM filler").execute(&pool).await.unwrap();
    pool.close().await;
    let size_before = std::fs::metadata(&db).unwrap().len();

    let output = hermesd(home.path(), &["store", "vacuum"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let (verdict, _, mode) = inspect(&db).await;
    assert_eq!((verdict.as_str(), mode), ("ok", 2));
    let size_after = std::fs::metadata(&db).unwrap().len();
    assert!(size_after < size_before / 2, "freed pages returned: {size_before} → {size_after}");
    // Opening it migrated the schema (from none), and a database without a schema needs no snapshot.
    assert!(!home.path().join("backups").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_export_reproduces_every_message_and_prune_removes_only_old_sessions() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let daemon = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    for (session, text) in [("alpha", "first words"), ("alpha", "second words"), ("beta", "other words")] {
        assert_eq!(ask(&daemon.base, Some(session), text).await.0, 200);
    }
    daemon.daemon.stop().await;

    let export = hermesd(home.path(), &["sessions", "export", "--all"]);
    assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&export.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let texts: Vec<&str> = lines.iter().filter_map(|l| l["message"]["content"].as_str()).collect();
    for text in ["first words", "second words", "other words", "echo: first words", "echo: other words"] {
        assert!(texts.contains(&text), "{text} missing from {texts:?}");
    }
    assert_eq!(lines.iter().filter(|l| l["message"]["role"] == "user").count(), 3);
    let sessions: std::collections::BTreeSet<&str> = lines.iter().filter_map(|l| l["session_id"].as_str()).collect();
    assert_eq!(sessions.len(), 2);
    let beta = lines.iter().find(|l| l["message"]["content"] == "other words").unwrap()["session_id"].as_str().unwrap();

    let md = hermesd(home.path(), &["sessions", "export", beta, "--format", "md"]);
    let md = String::from_utf8_lossy(&md.stdout).into_owned();
    assert!(md.contains("other words") && md.contains("## user") && !md.contains("first words"), "{md}");
    assert!(!hermesd(home.path(), &["sessions", "export"]).status.success(), "an id or --all is required");

    // Nothing is older than a day yet.
    let none = hermesd(home.path(), &["sessions", "prune", "--older-than", "1d"]);
    assert!(String::from_utf8_lossy(&none.stdout).contains("deleted 0 sessions"), "{none:?}");
    // Age the beta session by 100 days; pruning at 90 days removes it and nothing else.
    let options = SqliteConnectOptions::new().filename(home.path().join("state.db"));
    let pool = SqlitePoolOptions::new().max_connections(1).connect_with(options).await.unwrap();
    sqlx::query("UPDATE sessions SET updated_at = updated_at - 100 * 86400000 WHERE id = ?")
        .bind(beta)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let pruned = hermesd(home.path(), &["sessions", "prune", "--older-than", "90d"]);
    assert!(String::from_utf8_lossy(&pruned.stdout).contains("deleted 1 sessions"), "{pruned:?}");
    let left = String::from_utf8_lossy(&hermesd(home.path(), &["sessions", "export", "--all"]).stdout).into_owned();
    assert!(left.contains("first words") && !left.contains("other words"), "{left}");
    assert!(!hermesd(home.path(), &["sessions", "prune", "--older-than", "soon"]).status.success());
}
