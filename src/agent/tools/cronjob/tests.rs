//! Cronjob tool tests: who may see and change which jobs, and how far a job's toolsets reach.

use std::collections::HashMap;
use std::sync::Arc;

use hermesd_platform::{ChatRef, ChatType};
use serde_json::json;

use super::*;
use crate::agent::tools::test_support;
use crate::agent::tools::{Nobody, ToolPolicy};
use crate::config::Env;
use crate::outbox::PlatformRegistry;

async fn setup(dir: &tempfile::TempDir) -> (CronJobTool, ToolContext) {
    let ctx = test_support::context(dir.path(), dir.path().into(), dir.path().into(), Arc::new(Nobody)).await;
    let targets = Targets::new(ctx.store.clone(), PlatformRegistry::default(), &Env::from_map(HashMap::new()));
    let cron = CronConfig { default_deliver: "local".into(), ..CronConfig::default() };
    (CronJobTool::new(cron, targets, Vec::new()), ToolContext { user_id: "ann".into(), ..ctx })
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
