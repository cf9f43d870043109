//! Memory and files per person, end to end through the daemon against the fake Bot API, the
//! fake LLM and the API: a fact one person saves never reaches another person's model request,
//! a group's prompt carries only the operator's shared file, one person's files are invisible to
//! another's tools (file tools and the sandboxed terminal), API requests get personal memory only
//! with `user`, and `hermesd sessions delete --user` leaves nothing of that person and everything
//! of the others.

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::fake_llm::Step;
use support::fake_telegram::{Chat, FakeTelegram, User};
use support::{FakeLlm, client, config_for, eventually, start_daemon};

const TOKEN: &str = "123:ABC";
const WAIT: Duration = Duration::from_secs(15);
const FACT: &str = "LOCKER-4711";
const PLAN: &str = "ANN-SECRET-PLAN";
const SHARED: &str = "Office closes at 18:00.";

fn tool_calls(calls: &[(&str, Value)]) -> Step {
    Step::ToolCalls(calls.iter().map(|(name, args)| ((*name).to_owned(), args.to_string())).collect())
}

/// The system prompt of a recorded request.
fn system(request: &Value) -> String {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "system")
        .map_or_else(String::new, |m| m["content"].as_str().unwrap_or_default().to_owned())
}

/// The contents of a request's tool results, in order.
fn tool_results(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Push `message` from `user` in `chat` and wait until the model was called `calls` times and
/// the chat got `replies` messages.
async fn turn(tg: &FakeTelegram, llm: &FakeLlm, chat: &Chat, user: &User, text: &str, calls: usize, replies: usize) {
    tg.push_message(chat, user, text);
    assert!(eventually(WAIT, || llm.count() >= calls).await, "model calls: {}", llm.count());
    assert!(eventually(WAIT, || tg.sent_to(chat.id).len() >= replies).await, "{:?}", tg.texts(chat.id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_people_and_a_group_never_see_each_others_memory_or_files() {
    let llm = FakeLlm::echo().await;
    let tg = FakeTelegram::builder().token(TOKEN).bot("hermes_bot", 42).start().await;
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("memory")).unwrap();
    std::fs::write(home.path().join("memory/MEMORY.md"), format!("{SHARED}\n")).unwrap();
    let table = format!(
        "[agent]\nprogress = false\n\n[platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\n",
        tg.base_url()
    );
    let env = [("TELEGRAM_BOT_TOKEN", TOKEN), ("TELEGRAM_ALLOWED_USERS", "1001,1002")];
    let d = start_daemon(home.path(), &config_for(&llm, &table), &env).await;
    let (ann, bob) = (User::new(1001, "Ann"), User::new(1002, "Bob"));
    let (ann_dm, bob_dm, group) = (Chat::private(&ann), Chat::private(&bob), Chat::supergroup(-100_555, "Team"));
    let ann_dir = home.path().join("workspace/users/telegram/1001");

    // Ann saves a fact and writes a file in her DM.
    llm.push(
        Duration::ZERO,
        tool_calls(&[
            ("memory", json!({"action": "add", "target": "user", "content": format!("Ann's locker: {FACT}")})),
            ("write_file", json!({"path": "plan.txt", "content": PLAN})),
        ]),
    );
    llm.push(Duration::ZERO, Step::Reply("noted".into()));
    turn(&tg, &llm, &ann_dm, &ann, "remember my locker and keep my plan", 2, 1).await;
    assert_eq!(std::fs::read_to_string(ann_dir.join("plan.txt")).unwrap(), PLAN, "in Ann's own folder");
    let ann_memory = home.path().join("memory/users/telegram/1001/USER.md");
    assert!(std::fs::read_to_string(&ann_memory).unwrap().contains(FACT));

    // Bob's tools look for Ann's file every way they can.
    let absolute = ann_dir.join("plan.txt").display().to_string();
    llm.push(
        Duration::ZERO,
        tool_calls(&[
            ("read_file", json!({"path": absolute})),
            ("read_file", json!({"path": "../1001/plan.txt"})),
            ("search_files", json!({"pattern": PLAN, "path": "/"})),
            ("search_files", json!({"pattern": PLAN})),
            ("terminal", json!({"command": format!("cat {absolute}; cat ../1001/plan.txt; grep -r {PLAN} ../..")})),
            ("memory", json!({"action": "read", "target": "user"})),
        ]),
    );
    llm.push(Duration::ZERO, Step::Reply("nothing found".into()));
    turn(&tg, &llm, &bob_dm, &bob, "what is in Ann's plan?", 4, 1).await;
    let bob_requests = &llm.requests()[2..4];
    let results = tool_results(&bob_requests[1]);
    assert_eq!(results.len(), 6, "{results:#?}");
    for result in &results {
        assert!(!result.contains(PLAN), "Ann's file reached Bob: {result}");
        assert!(!result.contains(FACT), "Ann's memory reached Bob: {result}");
    }
    assert!(results[0].contains("outside the workdir"), "{}", results[0]);
    assert!(results[4].contains("plan.txt: Permission denied"), "the sandbox, not luck: {}", results[4]);
    assert!(results[5].contains("USER.md is empty"), "Bob reads only his own file: {}", results[5]);
    for request in bob_requests {
        let text = request.to_string();
        assert!(!text.contains(FACT), "Ann's fact in Bob's request: {text}");
        assert!(system(request).contains(SHARED), "the shared file is in every prompt");
    }

    // In the group, Ann's turn carries only the shared file, and her memory stays closed.
    llm.push(Duration::ZERO, tool_calls(&[("memory", json!({"action": "read", "target": "user"}))]));
    llm.push(Duration::ZERO, Step::Reply("I keep no personal notes here".into()));
    turn(&tg, &llm, &group, &ann, "@hermes_bot what do you know about me?", 6, 1).await;
    let group_requests = &llm.requests()[4..6];
    for request in group_requests {
        let prompt = system(request);
        assert!(prompt.contains(SHARED) && prompt.contains("read-only"), "{prompt}");
        assert!(!request.to_string().contains(FACT), "Ann's fact in the group: {request}");
        assert!(!prompt.contains("## About the user"), "{prompt}");
    }
    let refused = tool_results(&group_requests[1]);
    assert!(refused[0].contains("only in direct conversations"), "{refused:?}");

    // A fresh session of Ann's carries her fact in its prompt; Bob's never does.
    turn(&tg, &llm, &ann_dm, &ann, "/new", 6, 2).await;
    let before = llm.count();
    turn(&tg, &llm, &ann_dm, &ann, "hello again", before + 1, 3).await;
    let ann_prompt = system(llm.requests().last().unwrap());
    assert!(ann_prompt.contains(&format!("## About the user\nAnn's locker: {FACT}")), "{ann_prompt}");
    turn(&tg, &llm, &bob_dm, &bob, "/new", before + 1, 2).await;
    turn(&tg, &llm, &bob_dm, &bob, "hello", before + 2, 3).await;
    let bob_prompt = system(llm.requests().last().unwrap());
    assert!(!bob_prompt.contains(FACT) && bob_prompt.contains(SHARED), "{bob_prompt}");

    // Erasing Ann while the daemon runs leaves nothing of her and everything of Bob.
    std::fs::create_dir_all(home.path().join("media/telegram/1001")).unwrap();
    std::fs::write(home.path().join("media/telegram/1001/1_photo.jpg"), "jpeg").unwrap();
    std::fs::create_dir_all(home.path().join("workspace/users/telegram/1002")).unwrap();
    std::fs::write(home.path().join("workspace/users/telegram/1002/bob.txt"), "bob's").unwrap();
    let out = hermesd(home.path(), &["sessions", "delete", "--user", "telegram:1001"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("telegram:1001: deleted 3 sessions ("), "{stdout}");
    for gone in ["memory/users/telegram/1001", "workspace/users/telegram/1001", "media/telegram/1001"] {
        assert!(stdout.contains(&format!("removed {}", home.path().join(gone).display())), "{stdout}");
        assert!(!home.path().join(gone).exists(), "{gone} still there");
    }
    let search = hermesd(home.path(), &["sessions", "search", "locker"]);
    let hits = String::from_utf8_lossy(&search.stdout);
    assert!(!hits.contains("remember my locker"), "Ann's messages are gone from search: {hits}");
    let list = String::from_utf8_lossy(&hermesd(home.path(), &["sessions", "list"]).stdout).into_owned();
    // Ann's two DM sessions and her own session in the group (groups are isolated per user).
    assert!(!list.contains("telegram:dm:1001") && !list.contains("-100555:1001"), "{list}");
    assert!(list.contains("telegram:dm:1002"), "{list}");
    assert!(home.path().join("workspace/users/telegram/1002/bob.txt").exists(), "Bob's files stay");
    assert_eq!(std::fs::read_to_string(home.path().join("memory/MEMORY.md")).unwrap(), format!("{SHARED}\n"));

    // Ann writes again: a fresh start, with none of her old memory.
    let before = llm.count();
    turn(&tg, &llm, &ann_dm, &ann, "hi, who am I?", before + 1, 4).await;
    let fresh = llm.requests().last().unwrap().to_string();
    assert!(!fresh.contains(FACT) && !fresh.contains("remember my locker"), "{fresh}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_requests_get_personal_memory_only_with_user() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let http = client();
    let ask = |body: Value| {
        let http = http.clone();
        let url = format!("{}/v1/chat/completions", d.base);
        async move {
            let response = http.post(url).json(&body).send().await.unwrap();
            assert_eq!(response.status(), 200);
            response.json::<Value>().await.unwrap()
        }
    };
    let hello = |text: &str| json!([{"role": "user", "content": text}]);
    let ann_dir = home.path().join("memory/users/api/ann");
    std::fs::create_dir_all(&ann_dir).unwrap();
    std::fs::write(ann_dir.join("USER.md"), format!("Ann: {FACT}\n")).unwrap();

    // With `user`, the session's prompt carries that person's files, and the tool edits them.
    llm.push(
        Duration::ZERO,
        tool_calls(&[("memory", json!({"action": "add", "target": "memory", "content": "prefers metric units"}))]),
    );
    llm.push(Duration::ZERO, Step::Reply("saved".into()));
    ask(json!({"model": "m", "user": "ann", "messages": hello("remember: metric units")})).await;
    assert!(system(&llm.requests()[0]).contains(&format!("## About the user\nAnn: {FACT}")));
    assert_eq!(std::fs::read_to_string(ann_dir.join("MEMORY.md")).unwrap(), "prefers metric units\n");

    // Without `user`, nothing personal: not in the prompt, and the tool refuses.
    llm.push(Duration::ZERO, tool_calls(&[("memory", json!({"action": "read", "target": "user"}))]));
    llm.push(Duration::ZERO, Step::Reply("nothing".into()));
    ask(json!({"model": "m", "messages": hello("what do you remember?")})).await;
    let requests = llm.requests();
    assert_eq!(requests.len(), 4);
    for request in &requests[2..] {
        assert!(!request.to_string().contains(FACT), "{request}");
    }
    let refused = tool_results(&requests[3]);
    assert!(refused[0].contains("without `user`"), "{refused:?}");

    // Another user, and a session header naming Ann's user: neither carries her memory.
    ask(json!({"model": "m", "user": "bob", "messages": hello("hi")})).await;
    assert!(!llm.requests()[4].to_string().contains(FACT));
    let response = http
        .post(format!("{}/v1/chat/completions", d.base))
        .header("X-Hermes-Session-Id", "shared-by-anyone")
        .json(&json!({"model": "m", "user": "ann", "messages": hello("hi")}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(!llm.requests()[5].to_string().contains(FACT), "a session header can be shared");
    assert!(!home.path().join("memory/users/api/bob").exists(), "nothing saved for Bob");
    d.daemon.stop().await;
}

#[test]
fn a_malformed_user_is_refused_clearly() {
    let home = tempfile::tempdir().unwrap();
    for (arg, expected) in [
        ("1001", "expected PLATFORM:ID"),
        ("telegram:", "the id after telegram: is empty"),
        ("Tele gram:1", "is not a platform name"),
    ] {
        let out = hermesd(home.path(), &["sessions", "delete", "--user", arg]);
        assert_eq!(out.status.code(), Some(2), "{arg}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{arg}: {stderr}");
    }
    assert!(!home.path().join("state.db").exists(), "nothing opened for a malformed argument");
}

#[test]
fn check_tells_an_upgrading_operator_what_became_of_the_old_files() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("memory")).unwrap();
    std::fs::create_dir_all(home.path().join("workspace")).unwrap();
    std::fs::write(home.path().join("memory/MEMORY.md"), "Deploys go through CI.\n").unwrap();
    std::fs::write(home.path().join("memory/USER.md"), "Name: Ann\n").unwrap();
    std::fs::write(home.path().join("workspace/notes.txt"), "old").unwrap();
    let out = hermesd(home.path(), &["check"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let notes: Vec<&str> = stdout.lines().filter(|line| line.starts_with("note: ")).collect();
    assert!(
        notes.iter().any(|n| n.contains("memory/USER.md is the old daemon-wide USER.md and is no longer read")),
        "{stdout}"
    );
    assert!(notes.iter().any(|n| n.contains("memory/MEMORY.md is now the shared memory file")), "{stdout}");
    assert!(notes.iter().any(|n| n.contains("e.g. notes.txt")), "{stdout}");
    std::fs::write(home.path().join("config.toml"), "[memory]\nscope = \"shared\"\n").unwrap();
    std::fs::remove_file(home.path().join("workspace/notes.txt")).unwrap();
    let shared = hermesd(home.path(), &["check"]);
    let stdout = String::from_utf8_lossy(&shared.stdout);
    assert!(!stdout.contains("note: "), "shared scope reads both files as before: {stdout}");
}

fn hermesd(home: &Path, args: &[&str]) -> std::process::Output {
    support::hermesd_cli(home, args)
}
