//! Cronjob tool tests: who may see and change which jobs, and how far a job's toolsets reach.

use std::collections::HashMap;
use std::sync::Arc;

use hermesd_platform::{ChatRef, ChatType};
use serde_json::json;

use super::*;
use crate::agent::tools::test_support;
use crate::agent::tools::{Approval, Nobody, ToolPolicy};
use crate::config::Env;
use crate::config::LimitsConfig;
use crate::outbox::PlatformRegistry;

async fn setup(dir: &tempfile::TempDir) -> (CronJobTool, ToolContext) {
    setup_with(dir, LimitsConfig::default(), Arc::new(Nobody)).await
}

/// The tool with `limits`, a `local` platform to deliver to, and `human` answering approvals.
async fn setup_with(
    dir: &tempfile::TempDir,
    limits: LimitsConfig,
    human: Arc<dyn crate::agent::tools::Human>,
) -> (CronJobTool, ToolContext) {
    let ctx = test_support::context(dir.path(), dir.path().into(), dir.path().into(), human).await;
    let mut platforms = PlatformRegistry::default();
    platforms.insert(Arc::new(crate::delivery::local::LocalPlatform::new(dir.path().join("deliveries"))));
    let targets = Targets::new(ctx.store.clone(), platforms, &Env::from_map(HashMap::new()));
    let cron = CronConfig { default_deliver: "local".into(), ..CronConfig::default() };
    let tool = CronJobTool::new(cron, targets, Vec::new(), limits, Duration::from_secs(5));
    (tool, ToolContext { user_id: "ann".into(), ..ctx })
}

fn as_user(ctx: &ToolContext, user: &str, chat: &str, admin: bool) -> ToolContext {
    ToolContext { user_id: user.into(), chat: ChatRef::new("api", chat, ChatType::Dm), admin, ..ctx.clone() }
}

async fn call(tool: &CronJobTool, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
    tool.call(ctx, args).await
}

fn job_id(created: &str) -> String {
    created.split_whitespace().nth(3).unwrap().to_owned()
}

#[tokio::test]
async fn a_non_admin_sees_this_chats_jobs_and_changes_only_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let (tool, ann) = setup(&dir).await;
    let created = call(&tool, &ann, json!({"action": "create", "schedule": "every 1h", "prompt": "water the plants"}))
        .await
        .unwrap();
    let id = job_id(&created);
    assert!(created.contains("water the plants"), "{created}");

    // Bob shares the chat: he sees the job but cannot touch it.
    let bob = as_user(&ann, "bob", "c", false);
    assert!(call(&tool, &bob, json!({"action": "list"})).await.unwrap().contains(&id));
    for action in ["pause", "resume", "run", "remove", "update"] {
        let refused = call(&tool, &bob, json!({"action": action, "job_id": id, "name": "mine"})).await;
        assert!(
            matches!(refused, Err(ToolError::Denied(ref e)) if e.contains("someone else")),
            "{action}: {refused:?}"
        );
    }
    // Eve, in another chat, does not even see it.
    let eve = as_user(&ann, "eve", "elsewhere", false);
    assert_eq!(call(&tool, &eve, json!({"action": "list"})).await.unwrap(), "No cron jobs from this chat.");
    assert!(matches!(call(&tool, &eve, json!({"action": "remove", "job_id": id})).await, Err(ToolError::Denied(_))));

    // An admin sees every job and may change it; the creator may change their own.
    let admin = as_user(&ann, "eve", "elsewhere", true);
    assert!(call(&tool, &admin, json!({"action": "list"})).await.unwrap().contains(&id));
    assert!(call(&tool, &admin, json!({"action": "pause", "job_id": id})).await.unwrap().starts_with("Paused"));
    assert!(call(&tool, &ann, json!({"action": "resume", "job_id": id})).await.unwrap().starts_with("Resumed"));
    assert!(call(&tool, &ann, json!({"action": "remove", "job_id": id})).await.unwrap().starts_with("Removed"));
}

#[tokio::test]
async fn a_job_made_by_the_operator_needs_an_admin() {
    let dir = tempfile::tempdir().unwrap();
    let (tool, ann) = setup(&dir).await;
    // A CLI job: no origin, no creator.
    let spec = JobSpec { schedule: "every 1h".into(), prompt: "report".into(), ..JobSpec::default() };
    let ok = |_: &Target| Ok(());
    let rules = JobRules { tz: Tz::UTC, default_deliver: "local", models: &[], check_target: &ok };
    let job = prepare(spec, &rules, Utc::now()).unwrap();
    let job = ann.store.create_job(&job, now_ms()).await.unwrap();
    assert_eq!(job.created_by, None);
    let refused = call(&tool, &ann, json!({"action": "remove", "job_id": job.id})).await;
    assert!(matches!(refused, Err(ToolError::Denied(_))), "{refused:?}");
    assert_eq!(call(&tool, &ann, json!({"action": "list"})).await.unwrap(), "No cron jobs from this chat.");
    let admin = ToolContext { admin: true, ..ann.clone() };
    assert!(call(&tool, &admin, json!({"action": "remove", "job_id": job.id})).await.is_ok());
}

#[tokio::test]
async fn a_job_gets_at_most_the_creating_chats_toolsets() {
    let dir = tempfile::tempdir().unwrap();
    let (tool, ann) = setup(&dir).await;
    let narrow = ToolContext { policy: ToolPolicy::new(["cron", "memory"]), ..ann };
    let wide =
        json!({"action": "create", "schedule": "every 1h", "prompt": "tidy up", "toolsets": ["memory", "terminal"]});
    let refused = call(&tool, &narrow, wide).await;
    assert!(matches!(refused, Err(ToolError::Denied(ref e)) if e.contains("terminal")), "{refused:?}");
    assert!(narrow.store.list_jobs().await.unwrap().is_empty(), "nothing stored");
    let fits = json!({"action": "create", "schedule": "every 1h", "prompt": "tidy up", "toolsets": ["memory"]});
    call(&tool, &narrow, fits).await.unwrap();
    let jobs = narrow.store.list_jobs().await.unwrap();
    assert_eq!(jobs[0].toolsets.as_deref(), Some(&["memory".to_owned()][..]));
    assert_eq!(jobs[0].created_by.as_deref(), Some("ann"));
}

#[tokio::test]
async fn a_job_posting_to_another_chat_needs_an_admin_or_the_users_approval() {
    // Where nobody can approve (a webhook's or cron run's turn), it is refused; nothing stored.
    let dir = tempfile::tempdir().unwrap();
    let (tool, ann) = setup(&dir).await;
    // Ann writes from a chat the tool can deliver to.
    let ann = ToolContext { chat: ChatRef::new("local", "home", ChatType::Dm), ..ann };
    let create = json!({"action": "create", "schedule": "every 1h", "prompt": "post the news", "deliver": "local:ops"});
    let refused = call(&tool, &ann, create.clone()).await;
    assert!(matches!(refused, Err(ToolError::Denied(ref e)) if e.contains("nobody can approve")), "{refused:?}");
    assert!(ann.store.list_jobs().await.unwrap().is_empty());
    // This chat and the operator's local file need nothing; an admin needs nothing either.
    for here in ["origin", "local:home", "local"] {
        let job = json!({"action": "create", "schedule": "every 1h", "prompt": "remind me", "deliver": here});
        assert!(call(&tool, &ann, job).await.is_ok(), "{here}");
    }
    let admin = ToolContext { admin: true, ..ann.clone() };
    let created = call(&tool, &admin, create.clone()).await.unwrap();
    // Retargeting an existing job elsewhere follows the same rule.
    let mine = call(&tool, &ann, json!({"action": "create", "schedule": "every 1h", "prompt": "x"})).await.unwrap();
    let retarget = json!({"action": "update", "job_id": job_id(&mine), "deliver": "local:ops"});
    assert!(matches!(call(&tool, &ann, retarget).await, Err(ToolError::Denied(_))));
    assert!(created.contains("local:ops"), "{created}");

    // A person who can answer is asked, naming the target and the prompt.
    let dir = tempfile::tempdir().unwrap();
    let human = Arc::new(test_support::FixedHuman { answer: Approval::Approved, asked: Default::default() });
    let (tool, ann) = setup_with(&dir, LimitsConfig::default(), human.clone()).await;
    let ann = ToolContext { chat: ChatRef::new("local", "home", ChatType::Dm), ..ann };
    assert!(call(&tool, &ann, create).await.is_ok());
    let asked = human.asked.lock().unwrap().clone();
    assert!(asked.len() == 1 && asked[0].contains("local:ops") && asked[0].contains("post the news"), "{asked:?}");
}

#[tokio::test]
async fn jobs_per_person_are_capped_and_non_admins_schedule_no_faster_than_the_minimum() {
    let dir = tempfile::tempdir().unwrap();
    let limits = LimitsConfig { cron_jobs_per_user: 2, ..LimitsConfig::default() };
    let (tool, ann) = setup_with(&dir, limits, Arc::new(Nobody)).await;
    for schedule in ["every 1m", "* * * * *", "0,1 9 * * *"] {
        let refused = call(&tool, &ann, json!({"action": "create", "schedule": schedule, "prompt": "ping"})).await;
        assert!(
            matches!(refused, Err(ToolError::Denied(ref e)) if e.contains("cron_min_interval")),
            "{schedule}: {refused:?}"
        );
    }
    let admin = ToolContext { admin: true, user_id: "root".into(), ..ann.clone() };
    assert!(call(&tool, &admin, json!({"action": "create", "schedule": "every 1m", "prompt": "ping"})).await.is_ok());
    // A one-shot delay is not recurring; every 10 minutes is slow enough.
    assert!(call(&tool, &ann, json!({"action": "create", "schedule": "1m", "prompt": "tea"})).await.is_ok());
    let slow = call(&tool, &ann, json!({"action": "create", "schedule": "every 10m", "prompt": "x"})).await.unwrap();
    let third = call(&tool, &ann, json!({"action": "create", "schedule": "every 1h", "prompt": "y"})).await;
    assert!(matches!(third, Err(ToolError::Denied(ref e)) if e.contains("cron_jobs_per_user")), "{third:?}");
    // Speeding a job up is held to the same minimum.
    let faster = call(&tool, &ann, json!({"action": "update", "job_id": job_id(&slow), "schedule": "every 30s"})).await;
    assert!(matches!(faster, Err(ToolError::Denied(_))), "{faster:?}");
}

#[tokio::test]
async fn a_job_runs_in_the_profile_of_the_chat_that_made_it() {
    let dir = tempfile::tempdir().unwrap();
    let (tool, ann) = setup(&dir).await;
    let at_work = ToolContext { session_key: "agent:work:telegram@work:dm:7".into(), ..ann.clone() };
    let at_home = ToolContext { session_key: "agent:main:telegram:dm:7".into(), ..ann.clone() };
    for (ctx, prompt) in [(&at_work, "file the report"), (&at_home, "water the plants")] {
        call(&tool, ctx, json!({"action": "create", "schedule": "every 1h", "prompt": prompt})).await.unwrap();
    }
    let jobs = ann.store.list_jobs().await.unwrap();
    let profile_of = |prompt: &str| jobs.iter().find(|j| j.prompt == prompt).unwrap().profile.clone();
    assert_eq!(profile_of("file the report").as_deref(), Some("work"));
    assert_eq!(profile_of("water the plants"), None, "the default profile's job names none");
    // One chat, two profiles (a route gives its thread to another agent): each sees and changes
    // only its own jobs.
    let listed = call(&tool, &at_work, json!({"action": "list"})).await.unwrap();
    assert!(listed.contains("file the report") && !listed.contains("water the plants"), "{listed}");
    let home_job = jobs.iter().find(|j| j.prompt == "water the plants").unwrap().id.clone();
    let removed = call(&tool, &at_work, json!({"action": "remove", "job_id": home_job})).await;
    assert!(matches!(removed, Err(ToolError::Denied(_))), "{removed:?}");
    let listed = call(&tool, &at_home, json!({"action": "list"})).await.unwrap();
    assert!(listed.contains("water the plants") && !listed.contains("file the report"), "{listed}");
}
