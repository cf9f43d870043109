//! Shared helpers for integration tests: the scripted fake LLM, daemon start-up and an HTTP
//! client. Everything binds to 127.0.0.1:0.
#![allow(dead_code, unreachable_pub)]

#[cfg(feature = "email")]
pub mod dovecot;
#[cfg(feature = "discord")]
pub mod fake_discord;
#[cfg(feature = "homeassistant")]
pub mod fake_hass;
pub mod fake_llm;
pub mod fake_search;
#[cfg(feature = "signal")]
pub mod fake_signal;
#[cfg(feature = "slack")]
pub mod fake_slack;
#[cfg(feature = "email")]
pub mod fake_smtp;
pub mod fake_telegram;
#[cfg(feature = "whatsapp")]
pub mod fake_whatsapp;
pub mod import;
pub mod mcp_server;
pub mod recording_platform;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use hermesd::config::{Config, Env, Paths};
use hermesd::daemon::{Daemon, DaemonOptions};
use serde_json::{Value, json};

pub use fake_llm::FakeLlm;

/// A daemon started in-process for a test.
pub struct TestDaemon {
    /// The daemon.
    pub daemon: Daemon,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
}

/// Config text pointing the model at `llm`, listening on an ephemeral port, plus `extra` TOML.
pub fn config_for(llm: &FakeLlm, extra: &str) -> String {
    format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"fake-model\"\ntimeout = \"30s\"\n\n{extra}\n",
        llm.base_url()
    )
}

/// Start a daemon with `config` in `home` and `env` as its whole environment.
pub async fn start_daemon(home: &Path, config: &str, env: &[(&str, &str)]) -> TestDaemon {
    start_daemon_with(home, config, env, DaemonOptions::default()).await
}

/// Start a daemon with extra options (platforms of the test's own).
pub async fn start_daemon_with(home: &Path, config: &str, env: &[(&str, &str)], options: DaemonOptions) -> TestDaemon {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = Config::parse(config).expect("test config parses");
    // The daemon runs inside the test binary, so terminal commands need the real binary as the
    // sandbox helper.
    config.tools.terminal.helper.get_or_insert_with(|| env!("CARGO_BIN_EXE_hermesd").into());
    let paths = Paths { home: home.to_path_buf(), config: home.join("config.toml") };
    let env = Env::from_map(env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<HashMap<_, _>>());
    let daemon = Daemon::start(config, paths, env, options).await.expect("daemon starts");
    let base = format!("http://{}", daemon.addr.expect("http bound"));
    TestDaemon { daemon, base }
}

/// The bearer key local clients of the daemon of `home` present on `/admin/*` (what
/// `hermesd send` sends).
pub fn local_key(home: &Path) -> String {
    hermesd::access::PairingKey::load_or_create(home).expect("the home's pairing key").local_api_key()
}

/// A plain HTTP client.
pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("client builds")
}

/// POST a one-message chat completion; `session` goes in `X-Hermes-Session-Id`.
pub async fn ask(base: &str, session: Option<&str>, text: &str) -> (u16, Value) {
    let mut request = client()
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({ "model": "hermes-agent", "messages": [{ "role": "user", "content": text }] }));
    if let Some(session) = session {
        request = request.header("X-Hermes-Session-Id", session);
    }
    let response = request.send().await.expect("request sent");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The assistant text of a completion response.
pub fn answer(body: &Value) -> &str {
    body["choices"][0]["message"]["content"].as_str().unwrap_or_else(|| panic!("no answer in {body}"))
}

/// (role, content) of every message of a recorded LLM request.
pub fn prompt(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .expect("messages array")
        .iter()
        .map(|m| (m["role"].as_str().unwrap_or("").to_owned(), m["content"].as_str().unwrap_or("").to_owned()))
        .collect()
}

/// Poll `check` every 20 ms until it holds or `timeout` passes.
pub async fn eventually<F: FnMut() -> bool>(timeout: Duration, mut check: F) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}

/// `eventually` for an async check (an HTTP probe, a query).
pub async fn eventually_async<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check().await
}

/// The real binary running as a Telegram gateway in `home` (its config already written), with
/// `token` and `allowed_users` as its environment, logging to `hermesd.log` there.
pub fn spawn_telegram_gateway(home: &Path, token: &str, allowed_users: &str) -> std::process::Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(home.join("hermesd.log")).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["--home", home.to_str().unwrap(), "run"])
        .env("HERMESD_LOG", "info")
        .env("TELEGRAM_BOT_TOKEN", token)
        .env("TELEGRAM_ALLOWED_USERS", allowed_users)
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn hermesd")
}

/// One `hermesd --home <home> <args>` command run to its end (without `API_SERVER_KEY` from the
/// test's own environment).
pub fn hermesd_cli(home: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["--home", home.to_str().unwrap()])
        .args(args)
        .env_remove("API_SERVER_KEY")
        .output()
        .expect("run hermesd")
}

/// The real binary running in `home` (its config already written) with `env` as its
/// environment, logging to `hermesd.log` there.
pub fn spawn_gateway_with_env(home: &Path, env: &[(&str, &str)]) -> std::process::Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(home.join("hermesd.log")).unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_hermesd"));
    command.args(["--home", home.to_str().unwrap(), "run"]).env("HERMESD_LOG", "info");
    for (key, value) in env {
        command.env(key, value);
    }
    command.stdout(std::process::Stdio::null()).stderr(log).spawn().expect("spawn hermesd")
}

/// What a daemon started by `spawn_telegram_gateway` logged so far.
pub fn daemon_log(home: &Path) -> String {
    std::fs::read_to_string(home.join("hermesd.log")).unwrap_or_default()
}

/// Wait until the daemon on `port` answers `/readyz` with 200; panics with its log after 15 s.
pub async fn wait_ready(port: u16, home: &Path) {
    let url = format!("http://127.0.0.1:{port}/readyz");
    for _ in 0..1500 {
        if client().get(&url).send().await.is_ok_and(|r| r.status() == 200) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("hermesd did not become ready on port {port}; its log:\n{}", daemon_log(home));
}
