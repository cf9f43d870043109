//! Hermes' cron jobs (`cron/jobs.json`) as hermesd jobs, each delivering where it did.

use std::collections::BTreeMap;

use hermesd_platform::{ChatRef, ChatType};
use serde_json::Value;

use super::Home;
use super::sessions::{guess_chat_type, parse_chat_type};
use crate::agent::tools::cronjob::jobs::JobSpec;
use crate::cli::import::yaml::text;
use crate::cli::import::{JobImport, Note, Plan};
use crate::config::DEFAULT_KEY;

/// `cron/jobs.json`.
pub(super) fn cron(
    plan: &mut Plan,
    home: &Home,
    adapters: &BTreeMap<(String, String), String>,
    chat_types: &BTreeMap<(String, String), ChatType>,
) {
    let path = home.dir.join("cron/jobs.json");
    let Ok(raw) = std::fs::read_to_string(&path) else { return };
    let jobs = match serde_json::from_str::<Value>(&raw) {
        Ok(Value::Object(map)) => map.get("jobs").and_then(Value::as_array).cloned().unwrap_or_default(),
        Ok(Value::Array(jobs)) => jobs,
        _ => {
            plan.notes.push(Note { what: path.display().to_string(), why: "not the JSON Hermes writes".into() });
            return;
        }
    };
    for job in jobs {
        let field = |key: &str| job.get(key).and_then(text);
        let (Some(id), Some(prompt)) = (field("id"), field("prompt")) else { continue };
        let label = format!("cron job {id} ({})", field("name").unwrap_or_else(|| prompt.chars().take(30).collect()));
        let schedule = job.get("schedule");
        let kind = schedule.and_then(|s| s.get("kind")).and_then(text);
        let schedule = match kind.as_deref() {
            Some("cron") => schedule.and_then(|s| s.get("expr")).and_then(text),
            Some("interval") => {
                schedule.and_then(|s| s.get("minutes")).and_then(Value::as_u64).map(|m| format!("every {m}m"))
            }
            Some("once") => schedule.and_then(|s| s.get("run_at")).and_then(text),
            _ => None,
        };
        let Some(schedule) = schedule else {
            plan.notes.push(Note { what: label, why: "a schedule this importer cannot read".into() });
            continue;
        };
        if job.get("state").and_then(text).as_deref() == Some("completed")
            || job.get("no_agent").and_then(Value::as_bool) == Some(true)
            || field("script").is_some()
        {
            plan.notes.push(Note {
                what: label,
                why: "finished, or runs a script instead of asking the agent; hermesd's jobs ask the agent".into(),
            });
            continue;
        }
        let origin = job.get("origin").filter(|o| o.is_object()).and_then(|o| {
            let platform = o.get("platform").and_then(text)?;
            let chat = o.get("chat_id").and_then(text)?;
            let adapter = adapters.get(&(home.profile.clone(), platform.clone())).cloned().unwrap_or(platform);
            let chat_type = o
                .get("chat_type")
                .and_then(text)
                .and_then(|t| parse_chat_type(&t))
                .or_else(|| chat_types.get(&(adapter.clone(), chat.clone())).copied())
                .unwrap_or_else(|| guess_chat_type(&adapter, &chat));
            let mut chat = ChatRef::new(adapter, chat, chat_type);
            chat.thread_id = o.get("thread_id").and_then(text);
            Some(chat)
        });
        let created_by = job.get("origin").and_then(|o| o.get("user_id")).and_then(text);
        let deliver = field("deliver").map(|d| {
            let first = d.split(',').next().unwrap_or_default().trim().to_owned();
            if d.contains(',') {
                plan.notes.push(Note {
                    what: label.clone(),
                    why: format!("delivers to {d}; hermesd delivers a job to one target: {first}"),
                });
            }
            first
        });
        let repeat = job.get("repeat").and_then(|r| {
            let times = r.get("times").and_then(Value::as_i64)?;
            Some((times - r.get("completed").and_then(Value::as_i64).unwrap_or(0)).max(1))
        });
        if job.get("skills").and_then(Value::as_array).is_some_and(|s| !s.is_empty()) || field("skill").is_some() {
            plan.notes.push(Note {
                what: label.clone(),
                why: "its skills are not attached: hermesd's jobs load skills as the agent decides".into(),
            });
        }
        let paused = job.get("enabled").and_then(Value::as_bool) == Some(false)
            || job.get("state").and_then(text).as_deref() == Some("paused");
        let toolsets = job
            .get("enabled_toolsets")
            .and_then(Value::as_array)
            .map(|sets| sets.iter().filter_map(text).filter_map(|s| config_toolset(&s)).collect::<Vec<_>>());
        let profile = (home.profile != DEFAULT_KEY).then(|| home.profile.clone());
        // A profile's job keeps its id under the profile's name, so it cannot meet the main home's.
        let source = format!("hermes:{}:cron:{id}", home.profile);
        let id = match &profile {
            Some(name) => format!("{name}-{id}"),
            None => id,
        };
        // A target on a platform where the profile has its own bot goes out from that bot.
        let deliver = deliver.map(|target| match target.split_once(':') {
            Some((platform, rest)) => match adapters.get(&(home.profile.clone(), platform.to_owned())) {
                Some(adapter) => format!("{adapter}:{rest}"),
                None => target,
            },
            None => target,
        });
        plan.jobs.push(JobImport {
            id,
            source,
            label,
            paused,
            spec: JobSpec {
                schedule,
                prompt,
                name: field("name"),
                deliver,
                repeat,
                toolsets,
                model: field("model"),
                origin,
                created_by,
                profile,
            },
        });
    }
}

fn config_toolset(name: &str) -> Option<String> {
    let mapped = match name {
        "file" => "files",
        "cronjob" => "cron",
        "delegation" => "delegate",
        other => other,
    };
    crate::config::is_known_toolset(mapped).then(|| mapped.to_owned())
}
