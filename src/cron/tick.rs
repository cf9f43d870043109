//! The scheduler tick (DESIGN.md §8): every `cron.tick`, under a non-blocking exclusive lock on
//! `$HERMESD_HOME/cron/tick.lock` (skipped when another process holds it), due jobs are claimed
//! and their `next_run_at` advanced in one transaction, then each run enters through the ingress
//! as an event of the `cron` pseudo-platform: stored, deduplicated, and run as a fresh turn.
//!
//! Never runs a job twice for one occurrence, and never fires a backlog: a missed run within its
//! grace window fires once, otherwise it is skipped to the next occurrence.
//!
//! `Scheduler` is the tick: `File::try_lock` on the lock file, then `claim_due_jobs`; each run is
//! one session.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, Ingress, Sender};
use tokio_util::sync::CancellationToken;

use crate::clock::now_ms;
use crate::store::{ClaimDecision, CronJob, CronRun, RunStatus, Store, StoreError};
use crate::vocab::origin::Origin;
use crate::vocab::scan::scan_prompt;
use crate::vocab::schedule::{CatchUp, Schedule};

/// Runs due jobs.
pub struct Scheduler {
    store: Arc<dyn Store>,
    ingress: Arc<dyn Ingress>,
    lock_path: PathBuf,
    tick: Duration,
}

/// What one tick did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TickReport {
    /// Whether another process held the lock, so nothing was looked at.
    pub skipped: bool,
    /// Runs handed to the ingress.
    pub started: usize,
    /// Runs refused by the prompt scanner or the ingress.
    pub refused: usize,
}

impl Scheduler {
    /// A scheduler for the jobs in `store`, locking `home/cron/tick.lock`.
    pub fn new(store: Arc<dyn Store>, ingress: Arc<dyn Ingress>, home: &std::path::Path, tick: Duration) -> Self {
        Self { store, ingress, lock_path: home.join("cron").join("tick.lock"), tick }
    }

    /// Tick until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        let mut interval = tokio::time::interval(self.tick);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = interval.tick() => {
                    match self.tick_once().await {
                        Ok(report) if report.started + report.refused > 0 => tracing::info!(?report, "cron tick"),
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "cron tick failed; retrying at the next tick"),
                    }
                }
            }
        }
    }

    /// One tick.
    pub async fn tick_once(&self) -> Result<TickReport, StoreError> {
        let Some(_lock) = self.try_lock() else { return Ok(TickReport { skipped: true, ..TickReport::default() }) };
        let runs = self.store.claim_due_jobs(now_ms(), &decide).await?;
        let mut report = TickReport::default();
        for run in runs {
            let refusal = match scan_prompt(&run.job.prompt) {
                Err(refusal) => Some(format!("refused at run time: {refusal}")),
                Ok(()) => match self.ingress.accept(event(&run)).await {
                    Ok(_) => None,
                    Err(e) => Some(format!("not started: {e}")),
                },
            };
            match refusal {
                None => report.started += 1,
                Some(reason) => {
                    report.refused += 1;
                    tracing::warn!(job = %run.job.id, reason, "cron run refused");
                    self.store.finish_run(run.run_id, RunStatus::Failed, None, Some(&reason), now_ms()).await?;
                }
            }
        }
        Ok(report)
    }

    /// The tick lock, or `None` when another process holds it (or it cannot be opened, which
    /// is logged: skipping is safer than ticking unguarded).
    fn try_lock(&self) -> Option<File> {
        let open = || -> std::io::Result<File> {
            if let Some(dir) = self.lock_path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            OpenOptions::new().create(true).truncate(false).write(true).open(&self.lock_path)
        };
        let file = match open() {
            Ok(file) => file,
            Err(e) => {
                tracing::warn!(error = %e, path = %self.lock_path.display(), "cron lock file unusable; tick skipped");
                return None;
            }
        };
        match file.try_lock() {
            Ok(()) => Some(file),
            Err(TryLockError::WouldBlock) => {
                tracing::debug!("another hermesd holds the cron lock; tick skipped");
                None
            }
            Err(TryLockError::Error(e)) => {
                tracing::warn!(error = %e, "cron lock failed; tick skipped");
                None
            }
        }
    }
}

/// Inside the claim transaction: run this occurrence or skip it, and which comes next.
fn decide(job: &CronJob, now: i64) -> ClaimDecision {
    let spent = ClaimDecision { run: false, next: None };
    let (Some(due), Some(now)) = (job.next_run_at.and_then(from_ms), from_ms(now)) else { return spent };
    let tz: Tz = job.timezone.parse().unwrap_or(Tz::UTC);
    let schedule = match Schedule::from_canonical(&job.schedule, tz) {
        Ok(schedule) => schedule,
        Err(e) => {
            tracing::error!(job = %job.id, error = %e, "stored schedule unreadable; job retired");
            return spent;
        }
    };
    let catch_up = schedule.catch_up(due, now);
    let next = catch_up.next().map(|t| t.timestamp_millis());
    match catch_up {
        CatchUp::RunOnce { .. } => ClaimDecision { run: true, next },
        CatchUp::Skip { .. } => {
            tracing::info!(job = %job.id, "missed run outside its grace window skipped");
            ClaimDecision { run: false, next }
        }
    }
}

fn from_ms(ms: i64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms)
}

/// The event a run enters as: one session per run (the run id is the thread).
fn event(run: &CronRun) -> InboundEvent {
    let mut chat = ChatRef::new(Origin::CRON, run.job.id.clone(), ChatType::Dm);
    chat.thread_id = Some(run.run_id.to_string());
    InboundEvent::Message {
        event_id: format!("{}:{}", run.job.id, run.scheduled_at),
        message: InboundMessage {
            profile: run.job.profile.clone(),
            message_id: format!("run-{}", run.run_id),
            chat,
            sender: Sender {
                id: Origin::CRON.into(),
                name: Some(run.job.name.clone()),
                is_bot: false,
                roles: Vec::new(),
            },
            text: run.job.prompt.clone(),
            attachments: Vec::new(),
            reply_to: None,
            addressed: true,
            timestamp_ms: run.scheduled_at,
            history: Vec::new(),
            chat_title: None,
            client: None,
        },
    }
}
