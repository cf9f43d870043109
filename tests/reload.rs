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
