//! Cron jobs and runs in SQLite. The claim runs in one `BEGIN IMMEDIATE` transaction, which
//! serialises it against every other writer of the file, daemons in other processes included;
//! and each job's advance is one compare-and-set statement on the occurrence it read, so a run
//! row is written only by the claim that moved `next_run_at` past it, whatever the isolation.
//!
//! A run's `(job_id, scheduled_at)` is unique besides (migration 0004).

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::{SqliteStore, from_json, retry_busy, to_json};
use crate::store::{
    ClaimDecision, CronJob, CronRun, CronStore, JobState, JobUpdate, NewJob, RunStatus, StoreError, StoreResult,
};

const JOB_COLUMNS: &str = "id, name, prompt, schedule, timezone, next_run_at, repeat, state, deliver, origin, \
     toolsets, model, created_by, profile, created_at, last_run_at, last_status, last_error, run_count";

fn job_from_row(row: &SqliteRow) -> StoreResult<CronJob> {
    let state: String = row.get("state");
    let origin: Option<String> = row.get("origin");
    let toolsets: Option<String> = row.get("toolsets");
    Ok(CronJob {
        id: row.get("id"),
        name: row.get("name"),
        prompt: row.get("prompt"),
        schedule: row.get("schedule"),
        timezone: row.get("timezone"),
        next_run_at: row.get("next_run_at"),
        repeat: row.get("repeat"),
        state: JobState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("cron_jobs.state {state:?}")))?,
        deliver: row.get("deliver"),
        origin: origin.map(|text| from_json(&text, "cron_jobs.origin")).transpose()?,
        toolsets: toolsets.map(|text| from_json(&text, "cron_jobs.toolsets")).transpose()?,
        model: row.get("model"),
        created_by: row.get("created_by"),
        profile: row.get("profile"),
        created_at: row.get("created_at"),
        last_run_at: row.get("last_run_at"),
        last_status: row.get("last_status"),
        last_error: row.get("last_error"),
        run_count: row.get("run_count"),
    })
}

impl SqliteStore {
    async fn read_job(&self, id: &str) -> StoreResult<Option<CronJob>> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM cron_jobs WHERE id = ?");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_optional(&mut *self.writer.get().await?).await?;
        row.as_ref().map(job_from_row).transpose()
    }
}

#[async_trait]
impl CronStore for SqliteStore {
    async fn create_job(&self, job: &NewJob, now: i64) -> StoreResult<CronJob> {
        let origin = job.origin.as_ref().map(to_json);
        let toolsets = job.toolsets.as_ref().map(to_json);
        retry_busy(|| {
            let (origin, toolsets) = (origin.clone(), toolsets.clone());
            async move {
                sqlx::query(
                    "INSERT INTO cron_jobs (id, name, prompt, schedule, timezone, next_run_at, repeat, deliver, origin, \
                     toolsets, model, created_by, profile, created_at, updated_at) \
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                )
                .bind(&job.id)
                .bind(&job.name)
                .bind(&job.prompt)
                .bind(&job.schedule)
                .bind(&job.timezone)
                .bind(job.next_run_at)
                .bind(job.repeat)
                .bind(&job.deliver)
                .bind(origin)
                .bind(toolsets)
                .bind(&job.model)
                .bind(&job.created_by)
                .bind(&job.profile)
                .bind(now)
                .bind(now)
                .execute(&mut *self.writer.get().await?)
                .await
                .map(drop)
            }
        })
        .await?;
        self.read_job(&job.id).await?.ok_or_else(|| StoreError::NotFound(format!("cron job {}", job.id)))
    }

    async fn list_jobs(&self) -> StoreResult<Vec<CronJob>> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM cron_jobs ORDER BY created_at, id");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_all(&mut *self.readers.get().await?).await?;
        rows.iter().map(job_from_row).collect()
    }

    async fn job(&self, id: &str) -> StoreResult<Option<CronJob>> {
        self.read_job(id).await
    }

    async fn update_job(&self, id: &str, update: &JobUpdate, now: i64) -> StoreResult<Option<CronJob>> {
        let changed = retry_busy(|| async move {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            let exists: Option<(i64,)> =
                sqlx::query_as("SELECT 1 FROM cron_jobs WHERE id = ?").bind(id).fetch_optional(&mut *tx).await?;
            if exists.is_none() {
                return Ok(false);
            }
            let set = |column: &'static str| format!("UPDATE cron_jobs SET {column} = ?, updated_at = ? WHERE id = ?");
            if let Some(name) = &update.name {
                sqlx::query(sqlx::AssertSqlSafe(set("name"))).bind(name).bind(now).bind(id).execute(&mut *tx).await?;
            }
            if let Some(prompt) = &update.prompt {
                sqlx::query(sqlx::AssertSqlSafe(set("prompt"))).bind(prompt).bind(now).bind(id).execute(&mut *tx).await?;
            }
            if let Some(deliver) = &update.deliver {
                sqlx::query(sqlx::AssertSqlSafe(set("deliver")))
                    .bind(deliver)
                    .bind(now)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            if let Some((schedule, next)) = &update.schedule {
                sqlx::query(
                    "UPDATE cron_jobs SET schedule = ?, next_run_at = ?, updated_at = ?, \
                     state = CASE WHEN state = 'done' THEN 'active' ELSE state END WHERE id = ?",
                )
                .bind(schedule)
                .bind(next)
                .bind(now)
                .bind(id)
                .execute(&mut *tx)
                .await?;
            }
            if let Some((state, next)) = update.state {
                sqlx::query(
                    "UPDATE cron_jobs SET state = ?, next_run_at = COALESCE(?, next_run_at), updated_at = ? WHERE id = ?",
                )
                .bind(state.as_str())
                .bind(next)
                .bind(now)
                .bind(id)
                .execute(&mut *tx)
                .await?;
            }
            if let Some(at) = update.due_now {
                sqlx::query("UPDATE cron_jobs SET next_run_at = ?, state = 'active', updated_at = ? WHERE id = ?")
                    .bind(at)
                    .bind(now)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(true)
        })
        .await?;
        if changed { self.read_job(id).await } else { Ok(None) }
    }

    async fn remove_job(&self, id: &str) -> StoreResult<bool> {
        retry_busy(|| async move {
            sqlx::query("DELETE FROM cron_jobs WHERE id = ?")
                .bind(id)
                .execute(&mut *self.writer.get().await?)
                .await
                .map(|r| r.rows_affected() > 0)
        })
        .await
    }

    async fn claim_due_jobs(
        &self,
        now: i64,
        decide: &(dyn for<'j> Fn(&'j CronJob, i64) -> ClaimDecision + Send + Sync),
    ) -> StoreResult<Vec<CronRun>> {
        let claimed = retry_busy(|| async move {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            let sql = format!(
                "SELECT {JOB_COLUMNS} FROM cron_jobs WHERE state = 'active' AND next_run_at IS NOT NULL \
                 AND next_run_at <= ? ORDER BY next_run_at, id"
            );
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(now).fetch_all(&mut *tx).await?;
            let mut runs = Vec::new();
            for row in &rows {
                let job = match job_from_row(row) {
                    Ok(job) => job,
                    Err(e) => {
                        tracing::error!(error = %e, "unreadable cron job skipped");
                        continue;
                    }
                };
                let Some(due) = job.next_run_at else { continue };
                let decision = decide(&job, now);
                let runs_left = match (decision.run, job.repeat) {
                    (true, Some(left)) => Some(left - 1),
                    (_, left) => left,
                };
                let spent = decision.next.is_none() || runs_left.is_some_and(|left| left <= 0);
                let state = if spent { JobState::Done } else { JobState::Active };
                let next = if spent { None } else { decision.next };
                let status = if decision.run { "running" } else { "skipped" };
                let advanced = sqlx::query(
                    "UPDATE cron_jobs SET next_run_at = ?, repeat = ?, state = ?, updated_at = ?, \
                     last_run_at = CASE WHEN ? THEN ? ELSE last_run_at END, \
                     last_status = CASE WHEN ? THEN last_status ELSE 'skipped' END, \
                     run_count = run_count + ? \
                     WHERE id = ? AND state = 'active' AND next_run_at = ?",
                )
                .bind(next)
                .bind(runs_left)
                .bind(state.as_str())
                .bind(now)
                .bind(decision.run)
                .bind(now)
                .bind(decision.run)
                .bind(i64::from(decision.run))
                .bind(&job.id)
                .bind(due)
                .execute(&mut *tx)
                .await?;
                if advanced.rows_affected() != 1 {
                    // Another claim moved this job on since it was read: the occurrence is theirs.
                    continue;
                }
                let inserted = sqlx::query(
                    "INSERT OR IGNORE INTO cron_runs (job_id, scheduled_at, started_at, status) VALUES (?, ?, ?, ?)",
                )
                .bind(&job.id)
                .bind(due)
                .bind(now)
                .bind(status)
                .execute(&mut *tx)
                .await?;
                if decision.run && inserted.rows_affected() == 1 {
                    runs.push(CronRun { run_id: inserted.last_insert_rowid(), job, scheduled_at: due });
                }
            }
            tx.commit().await?;
            Ok(runs)
        })
        .await?;
        Ok(claimed)
    }

    async fn finish_run(
        &self,
        run_id: i64,
        status: RunStatus,
        output_path: Option<&str>,
        error: Option<&str>,
        now: i64,
    ) -> StoreResult<()> {
        retry_busy(|| async move {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            sqlx::query("UPDATE cron_runs SET status = ?, output_path = ?, error = ?, finished_at = ? WHERE id = ?")
                .bind(status.as_str())
                .bind(output_path)
                .bind(error)
                .bind(now)
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
            sqlx::query(
                "UPDATE cron_jobs SET last_status = ?, last_error = ?, updated_at = ? \
                 WHERE id = (SELECT job_id FROM cron_runs WHERE id = ?)",
            )
            .bind(status.as_str())
            .bind(error)
            .bind(now)
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
            tx.commit().await
        })
        .await
    }

    async fn run(&self, run_id: i64) -> StoreResult<Option<CronRun>> {
        let row: Option<(String, i64)> = sqlx::query_as("SELECT job_id, scheduled_at FROM cron_runs WHERE id = ?")
            .bind(run_id)
            .fetch_optional(&mut *self.writer.get().await?)
            .await?;
        let Some((job_id, scheduled_at)) = row else { return Ok(None) };
        Ok(self.read_job(&job_id).await?.map(|job| CronRun { run_id, job, scheduled_at }))
    }

    async fn job_runs(&self, job_id: &str, limit: u32) -> StoreResult<Vec<(i64, i64, String, Option<String>)>> {
        let rows = sqlx::query(
            "SELECT id, scheduled_at, status, error FROM cron_runs WHERE job_id = ? ORDER BY id DESC LIMIT ?",
        )
        .bind(job_id)
        .bind(i64::from(limit))
        .fetch_all(&mut *self.readers.get().await?)
        .await?;
        Ok(rows.iter().map(|r| (r.get("id"), r.get("scheduled_at"), r.get("status"), r.get("error"))).collect())
    }
}

#[cfg(test)]
mod tests;
