//! OpenClaw's cron jobs as hermesd's: from the state database (`cron_jobs.job_json`; the jobs
//! OpenClaw declares itself — heartbeat, memory upkeep — stay out) or the older `cron/jobs.json`.
//! A job asks the agent its message (an `agentTurn`) or text (a `systemEvent`), on a cron
//! expression, an interval or once, and delivers where it announced.

use serde_json::Value;

use crate::agent::tools::cronjob::jobs::JobSpec;
use crate::cli::import::{JobImport, Note, Plan};

/// The jobs of the state database (an opened copy), or `None` when it has no cron table.
pub(super) fn from_database(conn: &rusqlite::Connection) -> Option<Vec<Value>> {
    let mut query = conn
        .prepare("SELECT job_json FROM cron_jobs WHERE declaration_key IS NULL ORDER BY sort_order, updated_at")
        .ok()
        .or_else(
            // 2026.7 tables have no declaration_key; OpenClaw's own jobs carry one in their JSON.
            || conn.prepare("SELECT job_json FROM cron_jobs ORDER BY rowid").ok(),
        )?;
    let rows = query.query_map([], |r| r.get::<_, String>(0)).ok()?;
    Some(
        rows.flatten()
            .filter_map(|text| serde_json::from_str::<Value>(&text).ok())
            .filter(|job| job.get("declarationKey").is_none_or(Value::is_null))
            .collect(),
    )
}

/// The jobs of `cron/jobs.json`.
pub(super) fn from_file(path: &std::path::Path) -> Vec<Value> {
    let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => map.get("jobs").and_then(Value::as_array).cloned().unwrap_or_default(),
        Ok(Value::Array(jobs)) => jobs,
        _ => Vec::new(),
    }
}

/// Each job as a hermesd job, or a note saying why not; `tz` is hermesd's `cron.timezone`.
pub(super) fn jobs(plan: &mut Plan, jobs: Vec<Value>, tz: &str) {
    for job in jobs {
        let field = |path: &str| job.pointer(path).and_then(Value::as_str).map(str::to_owned);
        let Some(id) = field("/id") else { continue };
        let name = field("/name");
        let label = format!("cron job {}", name.as_deref().unwrap_or(&id));
        let prompt = match field("/payload/kind").as_deref() {
            Some("agentTurn") => field("/payload/message"),
            Some("systemEvent") => field("/payload/text"),
            other => {
                plan.notes.push(Note {
                    what: label,
                    why: format!(
                        "its payload ({}) is not a prompt for the agent; hermesd's jobs ask the agent",
                        other.unwrap_or("none")
                    ),
                });
                continue;
            }
        };
        let Some(prompt) = prompt.filter(|p| !p.trim().is_empty()) else {
            plan.notes.push(Note { what: label, why: "no message to ask".into() });
            continue;
        };
        let schedule = match field("/schedule/kind").as_deref() {
            Some("cron") => field("/schedule/expr"),
            Some("every") => job
                .pointer("/schedule/everyMs")
                .and_then(Value::as_u64)
                .map(|ms| format!("every {}m", (ms / 60_000).max(1))),
            Some("at") => field("/schedule/at"),
            _ => None,
        };
        let Some(schedule) = schedule else {
            plan.notes.push(Note { what: label, why: "a schedule this importer cannot read".into() });
            continue;
        };
        if let Some(zone) = field("/schedule/tz").filter(|zone| zone != tz) {
            plan.notes.push(Note {
                what: label.clone(),
                why: format!("runs in {zone} in OpenClaw; hermesd reads every cron expression in cron.timezone ({tz})"),
            });
        }
        let deliver = match field("/delivery/mode").as_deref() {
            Some("announce") => match (field("/delivery/channel"), field("/delivery/to")) {
                (Some(channel), Some(to)) => {
                    let to = to.strip_prefix(&format!("{channel}:")).unwrap_or(&to).to_owned();
                    let platform = match field("/delivery/accountId").filter(|a| a != "default") {
                        Some(account) => format!("{channel}@{account}"),
                        None => channel,
                    };
                    Some(match field("/delivery/threadId") {
                        Some(thread) => format!("{platform}:{to}:{thread}"),
                        None => format!("{platform}:{to}"),
                    })
                }
                _ => None,
            },
            _ => None,
        };
        if deliver.is_none() {
            plan.notes.push(Note {
                what: label.clone(),
                why: "OpenClaw put its answer in the agent's main session; hermesd delivers it to cron.default_deliver"
                    .into(),
            });
        }
        if field("/payload/model").is_some() {
            plan.notes.push(Note {
                what: label.clone(),
                why: "its model stays out: it runs on the default model chain".into(),
            });
        }
        plan.jobs.push(JobImport {
            id: id.clone(),
            source: format!("openclaw:cron:{id}"),
            label,
            paused: job.get("enabled").and_then(Value::as_bool) == Some(false),
            spec: JobSpec {
                schedule,
                prompt,
                name,
                deliver,
                repeat: None,
                toolsets: None,
                model: None,
                origin: None,
                created_by: None,
                profile: None,
            },
        });
    }
}
