//! The `cronjob` tool: create, list, update, pause, resume, run and remove scheduled prompts
//! from a chat. A job created here remembers the chat as its origin (so `origin` delivers back
//! to it) and who created it. Prompts are scanned and targets checked before anything is stored.
//!
//! Limits: a job's toolsets stay within the creating turn's policy (its runs are narrowed to the
//! origin platform's again at run time); a non-admin lists only this chat's jobs and changes only
//! jobs they created. A job that delivers to any chat but this one follows `send_message`'s rule
//! (an admin's turn, else the user approves when the job is made or retargeted), so content the
//! model read cannot set up posts elsewhere; each user has at most `limits.cron_jobs_per_user`
//! jobs, and a non-admin's recurring job runs at most every `limits.cron_min_interval`.

pub mod jobs;

use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use chrono_tz::Tz;
use serde::Deserialize;
use serde_json::{Value, json};

use super::files::parse_args;
use super::send_message::{authorise_elsewhere, preview};
use super::{Tool, ToolContext, ToolError, ToolSpec};
use crate::clock::now_ms;
use crate::config::{CronConfig, LimitsConfig};
use crate::delivery::Targets;
use crate::store::{CronJob, JobState, JobUpdate};
use crate::vocab::scan::scan_prompt;
use crate::vocab::schedule::Schedule;
use crate::vocab::target::Target;
use jobs::{JobRules, JobSpec, describe, next_from_now, prepare};

/// How many of the next occurrences of a recurring schedule are checked against the shortest
/// interval (a cron expression's gaps differ: `0,1 9 * * *`).
const INTERVAL_SAMPLES: usize = 16;

/// Manages cron jobs.
pub struct CronJobTool {
    cron: CronConfig,
    targets: Targets,
    models: Vec<String>,
    limits: LimitsConfig,
    approval_timeout: Duration,
}

impl CronJobTool {
    /// A tool creating jobs in `cron.timezone`, checking targets against `targets` and models
    /// against the configured `models`, within `limits`, waiting `approval_timeout` for a user's
    /// approval of a job that posts elsewhere.
    pub fn new(
        cron: CronConfig,
        targets: Targets,
        models: Vec<String>,
        limits: LimitsConfig,
        approval_timeout: Duration,
    ) -> Self {
        Self { cron, targets, models, limits, approval_timeout }
    }

    /// A job delivering to `deliver` (as the model wrote it) may be made or retargeted: into this
    /// chat or `local` freely, elsewhere by an admin or with the user's approval.
    async fn authorise_target(&self, ctx: &ToolContext, deliver: &str, prompt: &str) -> Result<(), ToolError> {
        let target = Target::parse(deliver).map_err(|e| invalid(e.to_string()))?;
        let action = format!("schedule a job that posts to {target}: \"{}\"", preview(prompt));
        authorise_elsewhere(&self.targets, ctx, &target, &action, self.approval_timeout)
            .await
            .map_err(|refusal| ToolError::Denied(refusal.for_what(&format!("a job posting to {target}"))))
    }

    /// A non-admin's recurring schedule runs no more often than `limits.cron_min_interval`.
    fn check_interval(&self, ctx: &ToolContext, schedule: &str, now: chrono::DateTime<Utc>) -> Result<(), ToolError> {
        let min = self.limits.cron_min_interval.get();
        if ctx.admin || min.is_zero() {
            return Ok(());
        }
        let schedule = Schedule::parse(schedule, now, self.tz()).map_err(|e| invalid(e.to_string()))?;
        if !schedule.is_recurring() {
            return Ok(());
        }
        let mut at = now;
        let mut runs = Vec::with_capacity(INTERVAL_SAMPLES);
        while runs.len() < INTERVAL_SAMPLES {
            let Some(next) = schedule.next_after(at) else { break };
            runs.push(next);
            at = next;
        }
        let shortest = runs.windows(2).filter_map(|w| (w[1] - w[0]).to_std().ok()).min();
        match shortest {
            Some(gap) if gap < min => Err(ToolError::Denied(format!(
                "this schedule runs every {}s; jobs from chat may run at most every {}s (limits.cron_min_interval)",
                gap.as_secs(),
                min.as_secs()
            ))),
            _ => Ok(()),
        }
    }

    /// The caller has fewer jobs than `limits.cron_jobs_per_user`.
    async fn check_count(&self, ctx: &ToolContext) -> Result<(), ToolError> {
        let cap = self.limits.cron_jobs_per_user;
        if cap == 0 {
            return Ok(());
        }
        let jobs = ctx.store.list_jobs().await.map_err(failed)?;
        let mine = jobs.iter().filter(|job| created_by_caller(job, ctx)).count();
        if mine >= usize::try_from(cap).unwrap_or(usize::MAX) {
            return Err(ToolError::Denied(format!(
                "you have {mine} cron jobs, the most one person may have (limits.cron_jobs_per_user); remove one first"
            )));
        }
        Ok(())
    }

    fn tz(&self) -> Tz {
        self.cron.timezone.parse().unwrap_or(Tz::UTC)
    }

    fn check(&self, ctx: &ToolContext, target: &Target) -> Result<(), String> {
        match target {
            Target::Origin => self.targets.check(&ctx.chat.platform).map(drop).map_err(|_| {
                format!("this chat ({}) cannot receive deliveries; name a target such as local", ctx.chat.platform)
            }),
            other => self.targets.check(&other.to_string()).map(drop).map_err(|e| e.to_string()),
        }
    }
}

/// Whether `ctx`'s user created `job` from a chat of the same platform.
fn created_by_caller(job: &CronJob, ctx: &ToolContext) -> bool {
    job.origin.as_ref().is_some_and(|o| o.platform == ctx.chat.platform)
        && job.created_by.as_deref() == Some(ctx.user_id.as_str())
        && of_callers_profile(job, ctx)
}

/// Whether `job` was made from the chat `ctx` answers, by the same profile (a route may give one
/// chat's threads, or one API user's requests, to several agents, each with its own jobs).
fn from_this_chat(job: &CronJob, ctx: &ToolContext) -> bool {
    job.origin.as_ref().is_some_and(|o| o.platform == ctx.chat.platform && o.chat_id == ctx.chat.chat_id)
        && of_callers_profile(job, ctx)
}

/// Whether `job` runs in the profile of the caller's session.
fn of_callers_profile(job: &CronJob, ctx: &ToolContext) -> bool {
    let caller = crate::config::profile_of_session_key(&ctx.session_key);
    job.profile.as_deref().unwrap_or(crate::config::DEFAULT_PROFILE) == caller
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    action: String,
    job_id: Option<String>,
    schedule: Option<String>,
    prompt: Option<String>,
    name: Option<String>,
    deliver: Option<String>,
    repeat: Option<i64>,
    model: Option<String>,
    toolsets: Option<Vec<String>>,
}

fn invalid(text: impl Into<String>) -> ToolError {
    ToolError::InvalidArguments(text.into())
}

fn failed(e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(e.to_string())
}

impl CronJobTool {
    /// `create`: a job for this chat, within its toolsets, the caller's job count and the
    /// recurring interval; its target approved unless it is this chat or the default.
    async fn create(&self, ctx: &ToolContext, args: &Args, now: chrono::DateTime<Utc>) -> Result<String, ToolError> {
        // A job's runs never get more than the chat creating it may use.
        let refused = args.toolsets.as_deref().map(|sets| ctx.policy.refused(sets)).unwrap_or_default();
        if !refused.is_empty() {
            return Err(ToolError::Denied(format!(
                "this chat may not use {}; a job gets at most this chat's toolsets ({})",
                refused.join(", "),
                ctx.policy
            )));
        }
        let schedule = args.schedule.clone().ok_or_else(|| invalid("create needs schedule"))?;
        let prompt = args.prompt.clone().ok_or_else(|| invalid("create needs prompt"))?;
        self.check_count(ctx).await?;
        self.check_interval(ctx, &schedule, now)?;
        let spec = JobSpec {
            schedule,
            prompt,
            name: args.name.clone(),
            deliver: args.deliver.clone(),
            repeat: args.repeat,
            origin: Some(ctx.chat.clone()),
            model: args.model.clone(),
            toolsets: args.toolsets.clone(),
            created_by: Some(ctx.user_id.clone()),
            // Its runs are the creating chat's profile's, with that profile's models.
            profile: Some(crate::config::profile_of_session_key(&ctx.session_key))
                .filter(|p| *p != crate::config::DEFAULT_PROFILE)
                .map(str::to_owned),
        };
        // The rules borrow a non-Send closure: keep them out of the awaits below.
        let job = {
            let check = |t: &Target| self.check(ctx, t);
            let rules = JobRules {
                tz: self.tz(),
                default_deliver: &self.cron.default_deliver,
                models: &self.models,
                check_target: &check,
            };
            prepare(spec, &rules, now).map_err(ToolError::InvalidArguments)?
        };
        // The operator's `cron.default_deliver` needs no approval; a target the model
        // named does, unless it is this chat.
        if let Some(deliver) = &args.deliver {
            self.authorise_target(ctx, deliver, &job.prompt).await?;
        }
        let job = ctx.store.create_job(&job, now_ms()).await.map_err(failed)?;
        Ok(format!("Created cron job {}", describe(&job, self.tz())))
    }
}

#[async_trait]
impl Tool for CronJobTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "cronjob".into(),
            description: "Schedule prompts that run later as fresh agent turns, with their output delivered to a \
                          target. Actions: create (schedule + prompt, optional name, deliver, repeat), list, update \
                          (job_id + fields to change), pause, resume, run (now), remove. Schedules: '30m' (once, \
                          after a delay), 'every 2h', a cron expression like '0 9 * * 1-5', or an ISO time. \
                          deliver: 'origin' (this chat, the default), 'local', '<platform>' (its home channel) or \
                          '<platform>:<chat_id>[:<thread_id>]'. A run that answers exactly [SILENT] delivers nothing."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["create", "list", "update", "pause", "resume", "run", "remove"]},
                    "job_id": {"type": "string", "description": "The job, for every action but create and list"},
                    "schedule": {"type": "string"},
                    "prompt": {"type": "string", "description": "Self-contained instructions for the run"},
                    "name": {"type": "string"},
                    "deliver": {"type": "string"},
                    "repeat": {"type": "integer", "minimum": 1, "description": "Stop after this many runs"},
                    "model": {"type": "string", "description": "A configured model to run on (default: the primary)"},
                    "toolsets": {"type": "array", "items": {"type": "string"}, "description": "Toolsets the runs get"}
                },
                "required": ["action"],
                "additionalProperties": false
            }),
            toolset: "cron".into(),
            parallel_safe: false,
            max_result_chars: 20_000,
            timeout: Duration::from_secs(30),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let store = &ctx.store;
        let now = Utc::now();
        let job_id = || args.job_id.as_deref().ok_or_else(|| invalid(format!("{} needs job_id", args.action)));
        let missing = |id: &str| ToolError::Failed(format!("no cron job {id}; use action list to see the jobs"));
        // Every action on an existing job: it must exist, and be the caller's unless an admin asks.
        let owned = |id: &str| {
            let id = id.to_owned();
            async move {
                let job = store.job(&id).await.map_err(failed)?.ok_or_else(|| missing(&id))?;
                if !ctx.admin && !created_by_caller(&job, ctx) {
                    return Err(ToolError::Denied(format!(
                        "cron job {id} was created by someone else; only an admin can change or remove it"
                    )));
                }
                Ok(job)
            }
        };
        let update = |update: JobUpdate| async move {
            let id = job_id()?;
            owned(id).await?;
            store.update_job(id, &update, now_ms()).await.map_err(failed)?.ok_or_else(|| missing(id))
        };
        match args.action.as_str() {
            "create" => self.create(ctx, &args, now).await,
            "list" => {
                let mut jobs = store.list_jobs().await.map_err(failed)?;
                if !ctx.admin {
                    jobs.retain(|job| from_this_chat(job, ctx));
                }
                if jobs.is_empty() {
                    return Ok(if ctx.admin { "No cron jobs." } else { "No cron jobs from this chat." }.into());
                }
                Ok(jobs.iter().map(|j| describe(j, self.tz())).collect::<Vec<_>>().join("\n"))
            }
            "update" => {
                let mut change = JobUpdate { name: args.name.clone(), ..JobUpdate::default() };
                if let Some(prompt) = &args.prompt {
                    scan_prompt(prompt).map_err(|e| invalid(format!("refused: {e}")))?;
                    change.prompt = Some(prompt.trim().to_owned());
                }
                if let Some(deliver) = &args.deliver {
                    let target = Target::parse(deliver).map_err(|e| invalid(e.to_string()))?;
                    self.check(ctx, &target).map_err(invalid)?;
                    let job = owned(job_id()?).await?;
                    let prompt = args.prompt.as_deref().unwrap_or(&job.prompt);
                    self.authorise_target(ctx, deliver, prompt).await?;
                    change.deliver = Some(target.to_string());
                }
                if let Some(text) = &args.schedule {
                    self.check_interval(ctx, text, now)?;
                    let schedule = Schedule::parse(text, now, self.tz()).map_err(|e| invalid(e.to_string()))?;
                    let next =
                        schedule.next_after(now).ok_or_else(|| invalid("the schedule has no future occurrence"))?;
                    change.schedule = Some((schedule.canonical(), next.timestamp_millis()));
                }
                let job = update(change).await?;
                Ok(format!("Updated {}", describe(&job, self.tz())))
            }
            "pause" => {
                let job = update(JobUpdate { state: Some((JobState::Paused, None)), ..JobUpdate::default() }).await?;
                Ok(format!("Paused {}", describe(&job, self.tz())))
            }
            "resume" => {
                let job = owned(job_id()?).await?;
                let next = next_from_now(&job.schedule, &job.timezone, now).map_err(failed)?;
                let Some(next) = next else {
                    return Err(failed("the schedule is spent; update it with a new schedule"));
                };
                let job =
                    update(JobUpdate { state: Some((JobState::Active, Some(next))), ..JobUpdate::default() }).await?;
                Ok(format!("Resumed {}", describe(&job, self.tz())))
            }
            "run" => {
                let job = update(JobUpdate { due_now: Some(now_ms()), ..JobUpdate::default() }).await?;
                Ok(format!("Job {} will run at the next scheduler tick", job.id))
            }
            "remove" => {
                let id = job_id()?;
                owned(id).await?;
                if store.remove_job(id).await.map_err(failed)? {
                    Ok(format!("Removed cron job {id}"))
                } else {
                    Err(missing(id))
                }
            }
            other => Err(invalid(format!("unknown action {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests;
