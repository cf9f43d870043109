//! SIGHUP and `hermesd reload` on the real binary: an allowlist added to `$HERMESD_HOME/.env`
//! admits a stranger without a restart (same process), a turn running across the reload is
//! answered once, and a broken config is refused with the running one kept, as `/readyz` says.
#![cfg(feature = "telegram")]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::fake_telegram::{Chat, FakeTelegram, User};
use support::{FakeLlm, client, eventually, hermesd_cli, spawn_gateway_with_env, wait_ready};

const TOKEN: &str = "123:ABC";
const WAIT: Duration = Duration::from_secs(15);

async fn readyz(port: u16) -> Value {
    client().get(format!("http://127.0.0.1:{port}/readyz")).send().await.unwrap().json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowlist_change_takes_effect_on_sighup_and_a_broken_config_is_refused() {
    let llm = FakeLlm::builder().latency(Duration::from_millis(1500)).start().await;
    let tg = FakeTelegram::builder().token(TOKEN).start().await;
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[agent]\nbatch_window = \"0s\"\n\n[model]\nprovider = \"chat_completions\"\n\
         base_url = \"{}\"\nname = \"fake\"\n\n[platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\n",
        llm.base_url(),
        tg.base_url()
    );
    std::fs::write(home.path().join("config.toml"), &config).unwrap();
    std::fs::write(home.path().join(".env"), "TELEGRAM_ALLOWED_USERS=1001\n").unwrap();
    let mut child = spawn_gateway_with_env(home.path(), &[("TELEGRAM_BOT_TOKEN", TOKEN)]);
    wait_ready(port, home.path()).await;
    let pid = child.id();
    let (ann, bo) = (User::new(1001, "Ann"), User::new(1002, "Bo"));
    let (ann_chat, bo_chat) = (Chat::private(&ann), Chat::private(&bo));

    // Bo is a stranger: a pairing code, no turn.
    tg.push_message(&bo_chat, &bo, "hello?");
    assert!(eventually(WAIT, || tg.texts(bo_chat.id).iter().any(|t| t.contains("pairing code"))).await);
    assert_eq!(llm.count(), 0);

    // Ann's turn is running when the operator adds Bo and sends SIGHUP.
    tg.push_message(&ann_chat, &ann, "a long question");
    assert!(eventually(WAIT, || llm.count() == 1).await);
    std::fs::write(home.path().join(".env"), "TELEGRAM_ALLOWED_USERS=1001,1002\n").unwrap();
    rustix::process::kill_process(rustix::process::Pid::from_raw(pid as i32).unwrap(), rustix::process::Signal::HUP)
        .unwrap();
    let reloaded = || async { readyz(port).await["config"]["reloads"] == 1 };
    assert!(support::eventually_async(WAIT, reloaded).await, "{}", support::daemon_log(home.path()));
    assert!(
        eventually(WAIT, || tg.texts(ann_chat.id) == ["echo: a long question"]).await,
        "{:?}",
        tg.texts(ann_chat.id)
    );

    // Bo is admitted now, by the same process.
    tg.push_message(&bo_chat, &bo, "and now?");
    assert!(
        eventually(WAIT, || tg.texts(bo_chat.id).iter().any(|t| t == "echo: and now?")).await,
        "{:?}",
        tg.texts(bo_chat.id)
    );
    assert!(child.try_wait().unwrap().is_none(), "no restart: the same process {pid}");

    // A broken config is refused; the running one stays and /readyz says why.
    let broken = config.replace("batch_window = \"0s\"", "batch_window = \"0s\"\nmax_iterations = \"many\"");
    std::fs::write(home.path().join("config.toml"), broken).unwrap();
    let refused = hermesd_cli(home.path(), &["reload"]);
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(said.contains("refused") && said.contains("max_iterations"), "{said}");
    let live = readyz(port).await["config"].clone();
    assert_eq!(live["reloads"], 1, "{live}");
    assert!(live["refused"].as_str().is_some_and(|r| !r.is_empty()), "{live}");
    tg.push_message(&ann_chat, &ann, "still there?");
    assert!(eventually(WAIT, || tg.texts(ann_chat.id).len() == 2).await, "the running config still serves");

    // Fixed again: `hermesd reload` applies it and names what waits for a restart.
    std::fs::write(
        home.path().join("config.toml"),
        config.replace("batch_window = \"0s\"", "batch_window = \"0s\"\nmax_iterations = 7"),
    )
    .unwrap();
    let done = hermesd_cli(home.path(), &["reload"]);
    let said = String::from_utf8_lossy(&done.stdout).into_owned();
    assert_eq!(done.status.code(), Some(0), "{said}{}", String::from_utf8_lossy(&done.stderr));
    assert!(said.contains("allowlists") && said.contains("[agent]"), "{said}");
    assert!(readyz(port).await["config"]["refused"].is_null());
    let _ = child.kill();
    let _ = child.wait();
}

/// The stdio test MCP server, built by `cargo test` as an example next to this test's binary.
fn mcp_fixture() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let path = exe.parent().and_then(std::path::Path::parent).expect("target dir").join("examples").join("mcp_fixture");
    assert!(path.exists(), "{} is missing: run `cargo test` (or add `--example mcp_fixture`)", path.display());
    path
}

async fn offered_tools(port: u16, llm: &FakeLlm, text: &str) -> Vec<String> {
    let body = serde_json::json!({ "messages": [{ "role": "user", "content": text }] });
    let answer =
        client().post(format!("http://127.0.0.1:{port}/v1/chat/completions")).json(&body).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let request = llm.requests().into_iter().rev().find(|r| r.to_string().contains(text)).expect("the turn's request");
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

async fn connects(port: u16, server: &str) -> String {
    let metrics = client().get(format!("http://127.0.0.1:{port}/metrics")).send().await.unwrap().text().await.unwrap();
    let prefix = format!("hermesd_mcp_connects_total{{server=\"{server}\"}} ");
    metrics.lines().find_map(|l| l.strip_prefix(&prefix).map(str::to_owned)).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_servers_added_changed_and_removed_by_reload_leave_the_others_running() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[tools]\ntoolsets = [\"memory\", \"mcp\"]\n\n[model]\nprovider = \"chat_completions\"\n\
         base_url = \"{}\"\nname = \"fake\"\n",
        llm.base_url()
    );
    let server = |name: &str, extra: &str| {
        format!(
            "\n[mcp.servers.{name}]\ncommand = {:?}\nsandbox = \"none\"\n{extra}",
            mcp_fixture().display().to_string()
        )
    };
    std::fs::write(home.path().join("config.toml"), format!("{base}{}", server("one", ""))).unwrap();
    let mut child = spawn_gateway_with_env(home.path(), &[]);
    wait_ready(port, home.path()).await;
    let ready = |name: &'static str| async move {
        let live = readyz(port).await;
        live["mcp"].as_array().is_some_and(|s| s.iter().any(|s| s["name"] == name && s["state"] == "ready"))
    };
    assert!(support::eventually_async(WAIT, || ready("one")).await, "{}", readyz(port).await);
    let tools = offered_tools(port, &llm, "before").await;
    assert!(
        tools.contains(&"mcp_one_echo".to_owned()) && !tools.iter().any(|t| t.starts_with("mcp_two_")),
        "{tools:?}"
    );

    // A server added by reload is offered in the next turn; the running one is not restarted.
    std::fs::write(home.path().join("config.toml"), format!("{base}{}{}", server("one", ""), server("two", "")))
        .unwrap();
    let done = hermesd_cli(home.path(), &["reload"]);
    let said = String::from_utf8_lossy(&done.stdout).into_owned();
    assert_eq!(done.status.code(), Some(0), "{said}{}", String::from_utf8_lossy(&done.stderr));
    assert!(said.contains("mcp server two: started") && !said.contains("[mcp]"), "nothing waits for a restart: {said}");
    assert!(support::eventually_async(WAIT, || ready("two")).await, "{}", readyz(port).await);
    let tools = offered_tools(port, &llm, "after adding").await;
    assert!(tools.contains(&"mcp_two_echo".to_owned()) && tools.contains(&"mcp_one_echo".to_owned()), "{tools:?}");
    assert_eq!(connects(port, "one").await, "1", "the untouched server kept its connection");

    // Changed settings restart that server alone; a removed one stops and is no longer offered.
    let changed = server("two", "timeout = \"45s\"\n");
    std::fs::write(home.path().join("config.toml"), format!("{base}{changed}")).unwrap();
    let done = hermesd_cli(home.path(), &["reload"]);
    let said = String::from_utf8_lossy(&done.stdout).into_owned();
    assert!(said.contains("mcp server one: stopped") && said.contains("mcp server two: restarted"), "{said}");
    assert!(support::eventually_async(WAIT, || ready("two")).await, "{}", readyz(port).await);
    let tools = offered_tools(port, &llm, "after removing").await;
    assert!(
        !tools.iter().any(|t| t.starts_with("mcp_one_")) && tools.contains(&"mcp_two_echo".to_owned()),
        "{tools:?}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_and_profiles_change_on_reload_for_the_next_turn() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = |model: &str, soul: &str| {
        format!(
            "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"{model}\"\n\n\
             [profiles.helper]\nsoul = \"{soul}\"\n",
            llm.base_url()
        )
    };
    std::fs::write(home.path().join("config.toml"), config("first-model", "You are Helper One.")).unwrap();
    let mut child = spawn_gateway_with_env(home.path(), &[]);
    wait_ready(port, home.path()).await;
    let ask = |model: &'static str, text: &'static str| async move {
        let body = serde_json::json!({ "model": model, "messages": [{ "role": "user", "content": text }] });
        let answer =
            client().post(format!("http://127.0.0.1:{port}/v1/chat/completions")).json(&body).send().await.unwrap();
        assert_eq!(answer.status(), 200);
    };
    let sent = |text: &str| llm.requests().into_iter().rev().find(|r| r.to_string().contains(text)).expect("sent");
    ask("hermes-agent", "one").await;
    assert_eq!(sent("one")["model"], "first-model");
    ask("helper", "two").await;
    assert!(sent("two").to_string().contains("You are Helper One."));

    std::fs::write(home.path().join("config.toml"), config("second-model", "You are Helper Two.")).unwrap();
    let done = hermesd_cli(home.path(), &["reload"]);
    let said = String::from_utf8_lossy(&done.stdout).into_owned();
    assert_eq!(done.status.code(), Some(0), "{said}{}", String::from_utf8_lossy(&done.stderr));
    assert!(!said.contains("[model]") && !said.contains("[profiles]"), "nothing waits for a restart: {said}");
    ask("hermes-agent", "three").await;
    assert_eq!(sent("three")["model"], "second-model", "the next turn is on the new model");
    ask("helper", "four").await;
    let four = sent("four").to_string();
    assert!(four.contains("You are Helper Two.") && !four.contains("You are Helper One."), "the new persona: {four}");
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_toolsets_and_the_cron_time_zone_change_on_reload_and_the_rest_is_named() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = |toolsets: &str, extra: &str| {
        format!(
            "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"fake\"\n\n\
             [tools]\ntoolsets = [{toolsets}]\n{extra}",
            llm.base_url()
        )
    };
    std::fs::write(home.path().join("config.toml"), config("\"memory\"", "")).unwrap();
    let mut child = spawn_gateway_with_env(home.path(), &[]);
    wait_ready(port, home.path()).await;
    let sent = |text: &str| llm.requests().into_iter().rev().find(|r| r.to_string().contains(text)).expect("sent");
    let offered = offered_tools(port, &llm, "one").await;
    assert!(offered.contains(&"memory".to_owned()) && !offered.contains(&"todo".to_owned()), "{offered:?}");
    assert!(!sent("one").to_string().contains("Speak like a pirate."));

    // Toolsets, a route and the cron time zone change; the sandbox's network rule waits.
    let changed = config(
        "\"memory\", \"todo\"",
        "\n[tools.terminal]\ndeny_read = [\"/srv/nothing-here\"]\n\n[cron]\ntimezone = \"Europe/Berlin\"\n\n\
         [[routes]]\nplatform = \"api\"\nsystem_prompt = \"Speak like a pirate.\"\n",
    );
    std::fs::write(home.path().join("config.toml"), changed).unwrap();
    let done = hermesd_cli(home.path(), &["reload"]);
    let said = String::from_utf8_lossy(&done.stdout).into_owned();
    assert_eq!(done.status.code(), Some(0), "{said}{}", String::from_utf8_lossy(&done.stderr));
    assert!(said.contains("routes"), "{said}");
    assert!(said.contains("[tools] terminal"), "the sandbox waits for a restart: {said}");
    assert!(!said.contains("toolsets") || said.contains("toolsets per platform"), "{said}");
    assert!(!said.contains("[cron]") && !said.contains("[routes]"), "nothing else waits: {said}");
    let offered = offered_tools(port, &llm, "two").await;
    assert!(offered.contains(&"todo".to_owned()), "the new toolset is offered: {offered:?}");
    assert!(sent("two").to_string().contains("Speak like a pirate."), "the new route's prompt");
    let _ = child.kill();
    let _ = child.wait();
}
