//! The cron part of the `Store` boundary: scheduled prompts and their runs, in domain words.
//!
//! The claim is the one subtle operation: due jobs are selected, their next run decided by the
//! caller's pure schedule arithmetic, and `next_run_at` advanced in the same transaction, so an
//! occurrence is claimed at most once however many daemons share the database.

use async_trait::async_trait;
use hermesd_platform::ChatRef;
use serde::Serialize;

use super::StoreResult;

/// Whether a job is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Fires when due.
    Active,
    /// Kept, but does not fire until resumed.
    Paused,
    /// Its schedule is spent (a one-shot that ran, or no runs left).
    Done,
}

impl JobState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Active => "active",
            JobState::Paused => "paused",
            JobState::Done => "done",
        }
    }

    /// Parse a stored name.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "active" => JobState::Active,
            "paused" => JobState::Paused,
            "done" => JobState::Done,
            _ => return None,
        })
    }
}

/// A scheduled prompt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CronJob {
    /// Short stable id.
    pub id: String,
    /// A name for people (defaults to the prompt's start).
    pub name: String,
    /// What the agent is asked at each run.
    pub prompt: String,
    /// Canonical schedule text (`Schedule::canonical`).
    pub schedule: String,
    /// The zone the schedule is read in.
    pub timezone: String,
    /// Next occurrence, Unix ms; `None` when spent.
    pub next_run_at: Option<i64>,
    /// Runs left; `None`: unlimited.
    pub repeat: Option<i64>,
    /// Whether it fires.
    pub state: JobState,
    /// Delivery target (`origin`, `local`, `<platform>`, `<platform>:<chat>[:<thread>]`).
    pub deliver: String,
    /// The chat it was created from, for `origin`.
    pub origin: Option<ChatRef>,
    /// Toolsets of its runs; `None`: the `cron` platform's.
    pub toolsets: Option<Vec<String>>,
    /// A model of the configured chain to start on; `None`: the primary.
    pub model: Option<String>,
    /// The user id (on the origin's platform) who created it from a chat; `None`: the operator
    /// (CLI) or a job older than this field.
    pub created_by: Option<String>,
    /// The profile its runs belong to; `None`: the default profile.
    pub profile: Option<String>,
    /// Created, Unix ms.
    pub created_at: i64,
    /// Last run's start, Unix ms.
    pub last_run_at: Option<i64>,
    /// Last run's status (`ok`, `silent`, `failed`, `skipped`).
    pub last_status: Option<String>,
    /// Last run's error.
    pub last_error: Option<String>,
    /// Runs so far.
    pub run_count: i64,
}

/// What `create_job` needs.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// Id (the caller makes it, so it can name it in answers).
    pub id: String,
    /// Name.
    pub name: String,
    /// Prompt, already scanned.
    pub prompt: String,
    /// Canonical schedule.
    pub schedule: String,
    /// Zone.
    pub timezone: String,
    /// First occurrence, Unix ms.
    pub next_run_at: i64,
    /// Runs allowed; `None`: unlimited.
    pub repeat: Option<i64>,
    /// Delivery target.
    pub deliver: String,
    /// Creating chat.
    pub origin: Option<ChatRef>,
    /// Toolsets.
    pub toolsets: Option<Vec<String>>,
    /// Model.
    pub model: Option<String>,
    /// Creating user's id (on the origin's platform); `None` for the operator's CLI.
    pub created_by: Option<String>,
    /// The profile its runs belong to; `None`: the default profile.
    pub profile: Option<String>,
}

/// A change to a job; `None` fields stay as they are.
#[derive(Debug, Clone, Default)]
pub struct JobUpdate {
    /// New name.
    pub name: Option<String>,
    /// New prompt, already scanned.
    pub prompt: Option<String>,
    /// New canonical schedule with its next occurrence.
    pub schedule: Option<(String, i64)>,
    /// New delivery target.
    pub deliver: Option<String>,
    /// New state; resuming passes the next occurrence to use.
    pub state: Option<(JobState, Option<i64>)>,
    /// Make the job due now (`run`).
    pub due_now: Option<i64>,
}

/// What the scheduler decided for one due job inside the claim transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimDecision {
    /// Run this occurrence (false: it was missed beyond its grace window and is skipped).
    pub run: bool,
    /// The occurrence after it, Unix ms; `None` when the schedule is spent.
    pub next: Option<i64>,
}

/// A claimed occurrence, ready to run.
#[derive(Debug, Clone)]
pub struct CronRun {
    /// The run's id (also the run's session thread).
    pub run_id: i64,
    /// The job as it was when claimed.
    pub job: CronJob,
    /// The occurrence, Unix ms.
    pub scheduled_at: i64,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Output delivered (or queued for delivery).
    Ok,
    /// The agent answered `[SILENT]`: nothing delivered.
    Silent,
    /// The run failed; the error says why.
    Failed,
}

impl RunStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Silent => "silent",
            RunStatus::Failed => "failed",
        }
    }
}

/// Scheduled prompts and their runs.
#[async_trait]
pub trait CronStore: Send + Sync {
    /// Store a new job.
    async fn create_job(&self, job: &NewJob, now: i64) -> StoreResult<CronJob>;
    /// Every job, oldest first.
    async fn list_jobs(&self) -> StoreResult<Vec<CronJob>>;
    /// One job by id.
    async fn job(&self, id: &str) -> StoreResult<Option<CronJob>>;
    /// Change a job; `None` when there is no such job.
    async fn update_job(&self, id: &str, update: &JobUpdate, now: i64) -> StoreResult<Option<CronJob>>;
    /// Delete a job (its runs stay as history); false when there was none.
    async fn remove_job(&self, id: &str) -> StoreResult<bool>;
    /// Claim every active job due at `now`: for each, `decide` says whether this occurrence runs
    /// and which comes next; `next_run_at`, `repeat` and `state` are updated and a run row is
    /// written, all in one transaction. Returns the occurrences to run.
    async fn claim_due_jobs(
        &self,
        now: i64,
        decide: &(dyn for<'j> Fn(&'j CronJob, i64) -> ClaimDecision + Send + Sync),
    ) -> StoreResult<Vec<CronRun>>;
    /// Record how a run ended, on the run and on its job.
    async fn finish_run(
        &self,
        run_id: i64,
        status: RunStatus,
        output_path: Option<&str>,
        error: Option<&str>,
        now: i64,
    ) -> StoreResult<()>;
    /// The job and occurrence of a run.
    async fn run(&self, run_id: i64) -> StoreResult<Option<CronRun>>;
    /// The last `limit` runs of a job, newest first: (run id, scheduled at, status, error).
    async fn job_runs(&self, job_id: &str, limit: u32) -> StoreResult<Vec<(i64, i64, String, Option<String>)>>;
}
