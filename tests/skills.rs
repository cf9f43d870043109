//! Skills end to end: the index in a new session's system prompt, `skill_view` through the
//! agent, `/skills` and `/<skill-name> [args]` becoming the right user message while the system
//! prompt stays byte-identical, built-in commands winning over skills, per-platform limits, and
//! `hermesd skills install | list | show | remove` on the real binary.

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use hermesd::daemon::DaemonOptions;
use serde_json::Value;
use support::recording_platform::RecordingPlatform;
use support::{FakeLlm, TestDaemon, config_for, eventually, prompt, start_daemon_with};

const WAIT: Duration = Duration::from_secs(10);
const BIN: &str = env!("CARGO_BIN_EXE_hermesd");

const STANDUP: &str = "---\nname: standup\ndescription: >\n  Write the daily standup note\n  from the user's notes.\n\
                       license: MIT\nmetadata:\n  author: ops\n---\n# Standup\nList yesterday, today and blockers, \
                       three bullets each. Use templates/day.md.\n";

fn write_skill(skills: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(skills.join(name)).unwrap();
    std::fs::write(skills.join(name).join("SKILL.md"), text).unwrap();
}

async fn daemon(home: &Path, llm: &FakeLlm, platform: &Arc<RecordingPlatform>) -> TestDaemon {
    let options = DaemonOptions { extra_platforms: vec![platform.clone() as Arc<_>], ..Default::default() };
    let config = config_for(llm, "");
    let d = start_daemon_with(home, &config, &[("REC_ALLOWED_USERS", "ann")], options).await;
    assert!(eventually(Duration::from_secs(2), || platform.started()).await);
    d
}

/// Send `text` and return the next message sent.
async fn say(platform: &RecordingPlatform, id: &str, text: &str) -> String {
    let before = platform.sent().len();
    platform.inject(id, "ann", text).await;
    assert!(eventually(WAIT, || platform.sent().len() > before).await, "no answer to {text}: {:?}", platform.texts());
    platform.texts()[before].clone()
}

fn system(request: &Value) -> String {
    let messages = prompt(request);
    assert_eq!(messages[0].0, "system");
    messages[0].1.clone()
}

fn last_user(request: &Value) -> String {
    prompt(request).into_iter().rev().find(|(role, _)| role == "user").map(|(_, text)| text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_in_the_prompt_skill_view_and_skill_commands_keep_the_prompt_stable() {
    let home = tempfile::tempdir().unwrap();
    let skills = home.path().join("skills");
    write_skill(&skills, "standup", STANDUP);
    std::fs::create_dir_all(skills.join("standup/templates")).unwrap();
    std::fs::write(skills.join("standup/templates/day.md"), "## Yesterday\n## Today\n## Blockers\n").unwrap();
    write_skill(
        &skills,
        "tg-only",
        "---\nname: tg-only\ndescription: Telegram things.\nplatforms: [telegram]\n---\nx\n",
    );
    // A skill named like a built-in command never replaces it.
    write_skill(&skills, "help", "---\nname: help\ndescription: Shadowing help.\n---\nNever shown.\n");
    let llm = FakeLlm::builder()
        .tool_calls(&[
            ("skill_view", r#"{"name":"standup"}"#),
            ("skill_view", r#"{"name":"standup","file":"templates/day.md"}"#),
        ])
        .reply("loaded it")
        .start()
        .await;
    let platform = RecordingPlatform::new(4096);
    let d = daemon(home.path(), &llm, &platform).await;

    platform.inject("m1", "ann", "how do I write a standup?").await;
    assert!(eventually(WAIT, || platform.texts().iter().any(|t| t == "loaded it")).await, "{:?}", platform.texts());
    let first = system(&llm.requests()[0]);
    assert!(first.contains("# Skills\n"), "{first}");
    assert!(first.contains("- standup: Write the daily standup note from the user's notes."), "{first}");
    assert!(!first.contains("tg-only"), "a Telegram-only skill is not indexed on other platforms: {first}");
    let results: Vec<String> =
        prompt(&llm.requests()[1]).into_iter().filter(|(role, _)| role == "tool").map(|(_, text)| text).collect();
    assert!(results[0].contains("# Skill: standup") && results[0].contains("three bullets each"), "{results:?}");
    assert!(results[0].contains("templates/day.md") && !results[0].contains("license: MIT"), "{results:?}");
    assert_eq!(results[1], "## Yesterday\n## Today\n## Blockers\n");

    // A skill added now is listed and usable at once (read on demand)…
    write_skill(&skills, "later", "---\nname: later\ndescription: Added while running.\n---\nDo the later thing.\n");
    let list = say(&platform, "m2", "/skills").await;
    assert!(list.contains("/standup — Write the daily standup note") && list.contains("/later — Added while running."));
    assert!(!list.contains("tg-only"), "{list}");

    // …and `/standup args` is a user turn carrying the skill, with the system prompt unchanged.
    let echoed = say(&platform, "m3", "/standup for the platform team").await;
    let request = llm.requests().last().unwrap().clone();
    let user = last_user(&request);
    assert!(user.starts_with("[The user invoked the skill \"standup\" with /standup."), "{user}");
    assert!(user.contains(&skills.join("standup").display().to_string()), "the folder is given: {user}");
    assert!(user.contains("# Standup\nList yesterday, today and blockers") && !user.contains("description:"), "{user}");
    assert!(user.ends_with("[Arguments: for the platform team]"), "{user}");
    assert_eq!(echoed, format!("echo: {user}"));
    assert_eq!(system(&request), first, "the cached prefix stays byte-identical");
    assert!(!system(&request).contains("later"), "the index is frozen for the session");

    let later = say(&platform, "m4", "/later").await;
    assert!(later.contains("Do the later thing.") && later.ends_with("[No arguments were given.]"), "{later}");

    // Built-ins win; skills hidden here and unknown words go to the agent as typed.
    assert!(say(&platform, "m5", "/help").await.starts_with("Commands:"));
    assert_eq!(say(&platform, "m6", "/tg-only now").await, "echo: /tg-only now");
    assert_eq!(say(&platform, "m7", "/nothing-here").await, "echo: /nothing-here");
    assert_eq!(system(llm.requests().last().unwrap()), first);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_skills_are_hidden_everywhere() {
    let home = tempfile::tempdir().unwrap();
    let skills = home.path().join("skills");
    write_skill(&skills, "standup", STANDUP);
    write_skill(&skills, "secret-ops", "---\nname: secret-ops\ndescription: Off.\n---\nHidden.\n");
    let llm = FakeLlm::builder().tool_calls(&[("skill_view", r#"{"name":"secret-ops"}"#)]).reply("ok").start().await;
    let platform = RecordingPlatform::new(4096);
    let options = DaemonOptions { extra_platforms: vec![platform.clone() as Arc<_>], ..Default::default() };
    let config = config_for(&llm, "[skills]\ndisabled = [\"secret-ops\"]\n");
    let d = start_daemon_with(home.path(), &config, &[("REC_ALLOW_ALL_USERS", "true")], options).await;
    assert!(eventually(Duration::from_secs(2), || platform.started()).await);

    platform.inject("m1", "ann", "hi").await;
    assert!(eventually(WAIT, || platform.texts().iter().any(|t| t == "ok")).await, "{:?}", platform.texts());
    assert!(!system(&llm.requests()[0]).contains("secret-ops"));
    let result = prompt(&llm.requests()[1]).into_iter().find(|(role, _)| role == "tool").unwrap().1;
    assert!(result.contains("not available here") && !result.contains("Hidden."), "{result}");
    assert!(!say(&platform, "m2", "/skills").await.contains("secret-ops"));
    assert_eq!(say(&platform, "m3", "/secret-ops").await, "echo: /secret-ops");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_creates_a_skill_only_after_approval_and_new_sessions_see_it() {
    let home = tempfile::tempdir().unwrap();
    let content =
        "---\nname: weekly-report\ndescription: Write the weekly report.\n---\nCollect the week's merged work.\n";
    let args = serde_json::json!({ "action": "create", "name": "weekly-report", "content": content }).to_string();
    let patch = serde_json::json!({ "action": "patch", "name": "weekly-report", "old": "merged", "new": "shipped" });
    let llm = FakeLlm::builder()
        .tool_calls(&[("skill_manage", &args)])
        .reply("created it")
        .tool_calls(&[("skill_manage", &patch.to_string())])
        .reply("denied, fine")
        .start()
        .await;
    let platform = RecordingPlatform::new(4096);
    let d = daemon(home.path(), &llm, &platform).await;
    let texts = |needle: &str| platform.texts().iter().filter(|t| t.contains(needle)).count();

    platform.inject("m1", "ann", "make a skill for my weekly report").await;
    assert!(eventually(WAIT, || texts("Approval needed") == 1).await, "{:?}", platform.texts());
    let ask = platform.texts().into_iter().find(|t| t.contains("Approval needed")).unwrap();
    assert!(
        ask.contains("create the skill \"weekly-report\"") && ask.contains("Collect the week's merged work."),
        "{ask}"
    );
    assert!(!home.path().join("skills/weekly-report").exists(), "nothing is written before the answer");
    platform.inject("m2", "ann", "/approve").await;
    assert!(eventually(WAIT, || texts("Approved.") == 1).await, "{:?}", platform.texts());
    assert!(eventually(WAIT, || texts("created it") == 1).await, "{:?}", platform.texts());
    assert!(home.path().join("skills/weekly-report/SKILL.md").is_file());

    // The running session keeps its prompt; a new session's index has the new skill.
    assert!(say(&platform, "m3", "/new").await.starts_with("Started a new session"));
    platform.inject("m4", "ann", "say shipped instead").await;
    assert!(eventually(WAIT, || texts("Approval needed") == 2).await, "{:?}", platform.texts());
    platform.inject("m5", "ann", "/deny").await;
    assert!(eventually(WAIT, || texts("Denied.") == 1).await, "{:?}", platform.texts());
    assert!(eventually(WAIT, || texts("denied, fine") == 1).await, "{:?}", platform.texts());
    let requests = llm.requests();
    assert!(!system(&requests[0]).contains("weekly-report"));
    assert!(system(&requests[2]).contains("- weekly-report: Write the weekly report."), "{}", system(&requests[2]));
    let result = prompt(&requests[3]).into_iter().rev().find(|(role, _)| role == "tool").unwrap().1;
    assert!(result.contains("denied") && result.contains("nothing was written"), "{result}");
    let text = std::fs::read_to_string(home.path().join("skills/weekly-report/SKILL.md")).unwrap();
    assert_eq!(text, content, "a denied patch changes nothing");
    d.daemon.stop().await;
}

fn hermesd(home: &Path, args: &[&str]) -> Output {
    Command::new(BIN).args(["--home", home.to_str().unwrap()]).args(args).output().unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    assert!(!output.status.success(), "should fail: {}", String::from_utf8_lossy(&output.stdout));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn cli_installs_lists_shows_and_removes_skills() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let src = dir.path().join("src");
    write_skill(&src, "standup", STANDUP);
    std::fs::create_dir_all(src.join("standup/templates")).unwrap();
    std::fs::write(src.join("standup/templates/day.md"), "## Today\n").unwrap();
    write_skill(&src, "status", "---\nname: status\ndescription: Clashes with /status.\n---\nx\n");

    assert_eq!(
        stdout(&hermesd(&home, &["skills", "list"])).trim(),
        format!("no skills in {}", home.join("skills").display())
    );
    let installed = stdout(&hermesd(&home, &["skills", "install", src.join("standup").to_str().unwrap()]));
    assert!(installed.starts_with("installed standup (2 files)"), "{installed}");
    assert!(home.join("skills/standup/templates/day.md").is_file());
    let list = stdout(&hermesd(&home, &["skills", "list"]));
    assert_eq!(list.trim(), "standup — Write the daily standup note from the user's notes.");
    let shown = stdout(&hermesd(&home, &["skills", "show", "standup"]));
    assert!(shown.contains("three bullets each") && shown.contains("templates/day.md"), "{shown}");
    assert_eq!(stdout(&hermesd(&home, &["skills", "show", "standup", "templates/day.md"])), "## Today\n\n");

    assert!(stderr(&hermesd(&home, &["skills", "install", src.join("standup").to_str().unwrap()])).contains("exists"));
    assert!(
        stdout(&hermesd(&home, &["skills", "install", "--replace", src.join("standup").to_str().unwrap()]))
            .starts_with("installed standup")
    );
    let clash = stderr(&hermesd(&home, &["skills", "install", src.join("status").to_str().unwrap()]));
    assert!(clash.contains("built-in chat command"), "{clash}");
    assert!(!home.join("skills/status").exists());
    let bad =
        stderr(&hermesd(&home, &["skills", "install", "--name", "Bad_Name", src.join("standup").to_str().unwrap()]));
    assert!(bad.contains("invalid skill name"), "{bad}");

    // The example shipped in deploy/skills installs cleanly, with no warnings.
    let example = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("deploy/skills/release-notes");
    let installed = stdout(&hermesd(&home, &["skills", "install", example.to_str().unwrap()]));
    assert!(
        installed.starts_with("installed release-notes (2 files)") && !installed.contains("warning"),
        "{installed}"
    );
    assert!(stdout(&hermesd(&home, &["skills", "list"])).contains("release-notes — Draft release notes from the git"));

    assert!(stdout(&hermesd(&home, &["skills", "remove", "standup"])).starts_with("removed standup"));
    assert!(!home.join("skills/standup").exists());
    assert!(stderr(&hermesd(&home, &["skills", "remove", "standup"])).contains("no skill named"));
    assert!(stderr(&hermesd(&home, &["skills", "show", "../etc"])).contains("invalid skill name"));
}
