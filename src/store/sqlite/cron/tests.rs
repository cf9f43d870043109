//! The cron claim against two stores on one database file, as two daemons sharing a home
//! would have: every due occurrence is claimed exactly once, however the claims interleave.

use std::sync::Arc;
use std::time::Duration;

use super::super::SqliteStore;
use crate::store::{ClaimDecision, CronJob, CronStore, NewJob};

const MINUTE: i64 = 60_000;

fn job(id: &str, next_run_at: i64) -> NewJob {
    NewJob {
        id: id.into(),
        name: id.into(),
        prompt: "p".into(),
        schedule: "every 1m".into(),
        timezone: "UTC".into(),
        next_run_at,
        repeat: None,
        deliver: "local".into(),
        origin: None,
        toolsets: None,
        model: None,
        created_by: None,
        profile: None,
    }
}

fn every_minute(job: &CronJob, _now: i64) -> ClaimDecision {
    ClaimDecision { run: true, next: job.next_run_at.map(|at| at + MINUTE) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_never_claim_one_occurrence_twice() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("state.db");
    let a = Arc::new(SqliteStore::open(&path, Duration::from_secs(30), 1).await.expect("open a"));
    let b = Arc::new(SqliteStore::open(&path, Duration::from_secs(30), 1).await.expect("open b"));
    let start = 1_000_000;
    for i in 0..10 {
        a.create_job(&job(&format!("j{i}"), start), start).await.expect("create");
    }
    // Every round, both daemons claim at the same instant, several times over.
    let mut claimed = Vec::new();
    for round in 0..5 {
        let now = start + round * MINUTE;
        let mut claims = Vec::new();
        for store in [&a, &b, &a, &b] {
            let store = Arc::clone(store);
            claims.push(tokio::spawn(async move { store.claim_due_jobs(now, &every_minute).await }));
        }
        for claim in claims {
            let runs = claim.await.expect("claim task").expect("claim");
            claimed.extend(runs.into_iter().map(|run| (run.job.id, run.scheduled_at)));
        }
    }
    let total = claimed.len();
    claimed.sort();
    claimed.dedup();
    assert_eq!(claimed.len(), total, "an occurrence was claimed twice");
    assert_eq!(total, 10 * 5, "every due occurrence is claimed once");
}
