//! kill -9 of the real binary while Home Assistant requests are mid-turn: after the restart
//! each request is answered exactly once, with its own request id.

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use crate::support::fake_hass::FakeHass;
use crate::support::{FakeLlm, daemon_log, eventually, wait_ready};
use crate::{ANN, TOKEN};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

fn spawn(home: &Path) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(home.join("hermesd.log")).expect("log");
    Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["--home", home.to_str().expect("utf-8 home"), "run"])
        .env("HERMESD_LOG", "info")
        .env("HASS_TOKEN", TOKEN)
        .env("HASS_ALLOWED_USERS", ANN)
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn hermesd")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_turn_answers_each_home_assistant_request_exactly_once() {
    let llm = FakeLlm::builder().latency(Duration::from_millis(1500)).start().await;
    let hass = FakeHass::start(TOKEN).await;
    let home = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[agent]\ndrain_timeout = \"2s\"\nbatch_window = \"0s\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"fake\"\n\n[platforms.homeassistant]\nenabled = true\nurl = \"{}\"\n",
        llm.base_url(),
        hass.url()
    );
    std::fs::write(home.path().join("config.toml"), config).expect("config");
    let mut child = spawn(home.path());
    wait_ready(port, home.path()).await;
    let ids: Vec<String> =
        (1..=3).map(|n| hass.request(&format!("crash test {n}"), Some(&format!("conv-{n}")), Some(ANN))).collect();
    assert!(
        eventually(Duration::from_secs(15), || llm.count() == 3).await,
        "turns started; log:\n{}",
        daemon_log(home.path())
    );
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
    assert!(hass.responses().is_empty(), "nothing was answered before the kill: {:?}", hass.responses());

    let mut child = spawn(home.path());
    wait_ready(port, home.path()).await;
    let answered = hass.wait_until(Duration::from_secs(20), |h| h.responses().len() >= 3).await;
    assert!(answered, "{:?}\nlog:\n{}", hass.responses(), daemon_log(home.path()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let responses = hass.responses();
    assert_eq!(responses.len(), 3, "each request answered once: {responses:?}");
    for (n, id) in (1..=3).zip(&ids) {
        let one: Vec<_> = responses.iter().filter(|r| r["request_id"] == id.as_str()).collect();
        assert_eq!(one.len(), 1, "request {n}: {responses:?}");
        assert_eq!(one[0]["text"], format!("echo: crash test {n}"));
        assert_eq!(one[0]["conversation_id"], format!("conv-{n}"));
    }
    assert_eq!(llm.count(), 6, "each interrupted turn ran once more, and only once");
    let term = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill -TERM");
    assert!(term.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while child.try_wait().expect("try_wait").is_none() {
        assert!(std::time::Instant::now() < deadline, "hermesd did not exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
