//! `hermesd cron list | add | remove | pause | resume | run`: the operator's side of scheduled
//! prompts, straight on the store. A running daemon picks changes up at its next tick.

use std::process::ExitCode;

use chrono::Utc;
use chrono_tz::Tz;
use clap::Subcommand;

use super::{EXIT_CONFIG, Loaded};
use crate::agent::tools::cronjob::jobs::{JobRules, JobSpec, describe, next_from_now, prepare};
use crate::clock::now_ms;
use crate::store::{CronStore, JobState, JobUpdate};
use crate::vocab::target::Target;

/// `hermesd cron …`.
#[derive(Debug, Subcommand)]
pub enum CronCommand {
    /// Every job with its schedule, next run and last result.
    List,
    /// Schedule a prompt: `30m`, `every 2h`, a cron expression (`"0 9 * * 1-5"`) or an ISO time.
    Add {
        /// When it runs.
        schedule: String,
        /// What the agent is asked.
        prompt: String,
        /// A name for the job.
        #[arg(long)]
        name: Option<String>,
        /// Where the output goes: local, <platform>, <platform>:<chat_id>[:<thread_id>].
        #[arg(long)]
        deliver: Option<String>,
        /// Stop after this many runs.
        #[arg(long)]
        repeat: Option<i64>,
        /// A configured model the runs start on (default: the primary).
        #[arg(long)]
        model: Option<String>,
        /// Toolsets the runs get, comma-separated (default: those of the `cron` platform).
        #[arg(long, value_delimiter = ',')]
        toolsets: Option<Vec<String>>,
        /// The profile the runs belong to (its model, persona and memory; default: `default`).
        #[arg(long)]
        profile: Option<String>,
    },
    /// Delete a job (its run history stays).
    Remove {
        /// The job id.
        id: String,
    },
    /// Stop a job from firing until resumed.
    Pause {
        /// The job id.
        id: String,
    },
    /// Let a paused job fire again, from its next occurrence.
    Resume {
        /// The job id.
        id: String,
    },
    /// Run a job at the daemon's next tick.
    Run {
        /// The job id.
        id: String,
    },
}

pub(super) async fn run(loaded: Loaded, command: CronCommand) -> ExitCode {
    let tz: Tz = match loaded.config.cron.timezone.parse() {
        Ok(tz) => tz,
        Err(_) => {
            eprintln!("hermesd: cron.timezone {:?} is not a time zone", loaded.config.cron.timezone);
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let store = match super::open_store(&loaded).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let now = Utc::now();
    let result = match command {
        CronCommand::List => store.list_jobs().await.map_err(|e| e.to_string()).map(|jobs| {
            if jobs.is_empty() {
                "no cron jobs".to_owned()
            } else {
                jobs.iter().map(|j| describe(j, tz)).collect::<Vec<_>>().join("\n")
            }
        }),
        CronCommand::Add { schedule, prompt, name, deliver, repeat, model, toolsets, profile } => {
            let profile = profile.filter(|p| p != crate::config::DEFAULT_PROFILE);
            let Some(resolved) =
                loaded.config.profile(profile.as_deref().unwrap_or(crate::config::DEFAULT_PROFILE), &loaded.paths)
            else {
                eprintln!(
                    "hermesd: no profile {:?} (profiles: {})",
                    profile.unwrap_or_default(),
                    loaded.config.profile_names().join(", ")
                );
                return ExitCode::from(EXIT_CONFIG);
            };
            let models: Vec<String> = resolved.models.iter().map(|m| m.name.clone()).collect();
            // There is no originating chat on the command line: `origin` means `local` here.
            let default = match loaded.config.cron.default_deliver.as_str() {
                "origin" => "local",
                other => other,
            };
            let spec = JobSpec {
                schedule,
                prompt,
                name,
                deliver,
                repeat,
                model,
                toolsets,
                origin: None,
                created_by: None,
                profile,
            };
            let check = |target: &Target| loaded.config.check_target(&target.to_string(), false);
            let rules = JobRules { tz, default_deliver: default, models: &models, check_target: &check };
            match prepare(spec, &rules, now) {
                Ok(job) => store
                    .create_job(&job, now_ms())
                    .await
                    .map(|j| format!("created {}", describe(&j, tz)))
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e),
            }
        }
        CronCommand::Remove { id } => match store.remove_job(&id).await {
            Ok(true) => Ok(format!("removed {id}")),
            Ok(false) => Err(format!("no cron job {id}")),
            Err(e) => Err(e.to_string()),
        },
        CronCommand::Pause { id } => {
            change(&store, &id, JobUpdate { state: Some((JobState::Paused, None)), ..JobUpdate::default() }, tz).await
        }
        CronCommand::Resume { id } => match store.job(&id).await {
            Ok(Some(job)) => match next_from_now(&job.schedule, &job.timezone, now) {
                Ok(Some(next)) => {
                    let update = JobUpdate { state: Some((JobState::Active, Some(next))), ..JobUpdate::default() };
                    change(&store, &id, update, tz).await
                }
                Ok(None) => Err(format!("{id}: its schedule has no future occurrence")),
                Err(e) => Err(e),
            },
            Ok(None) => Err(format!("no cron job {id}")),
            Err(e) => Err(e.to_string()),
        },
        CronCommand::Run { id } => {
            change(&store, &id, JobUpdate { due_now: Some(now_ms()), ..JobUpdate::default() }, tz)
                .await
                .map(|line| format!("{line}\n(the running daemon runs it at its next tick)"))
        }
    };
    store.close().await;
    super::report_outcome(result)
}

async fn change(store: &dyn CronStore, id: &str, update: JobUpdate, tz: Tz) -> Result<String, String> {
    match store.update_job(id, &update, now_ms()).await {
        Ok(Some(job)) => Ok(describe(&job, tz)),
        Ok(None) => Err(format!("no cron job {id}")),
        Err(e) => Err(e.to_string()),
    }
}
