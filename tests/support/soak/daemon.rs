//! The soaked `hermesd` child: its home and config, the operator's CLI calls (`cron add`,
//! `sessions prune`), and what `/proc` and the home say about it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_hermesd");
/// The fake Bot API's token.
pub const TOKEN: &str = "123:ABC";
/// The webhook route's secret (`SOAK_WEBHOOK_SECRET`).
pub const WEBHOOK_SECRET: &str = "soak-webhook-secret";
/// How long an idle session actor lives (`agent.session_idle`): short, so actors come and go.
pub const SESSION_IDLE: Duration = Duration::from_secs(10);
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const EXIT_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `hermesd` with its own home; killed if dropped while running.
pub struct Daemon {
    child: Child,
    home: TempDir,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
}

/// Where the daemon finds its fakes and which Telegram chat a webhook's reply goes to.
pub struct Wiring<'a> {
    /// The model's base URL (`…/v1`, through the LLM's gate).
    pub llm_url: &'a str,
    /// The Bot API URL (through Telegram's gate).
    pub telegram_url: &'a str,
    /// `telegram:<chat>` target of the webhook route.
    pub webhook_chat: i64,
}

impl Daemon {
    /// Write the config to a fresh home and spawn the binary; returns once `/readyz` is 200.
    pub async fn start(client: &reqwest::Client, wiring: &Wiring<'_>) -> Self {
        let home = tempfile::tempdir().expect("create a daemon home");
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("probe").local_addr().expect("probe").port();
        std::fs::write(home.path().join("config.toml"), config(port, wiring)).expect("write the config");
        let log = std::fs::File::create(home.path().join("hermesd.log")).expect("create the daemon log");
        let child = command(home.path())
            .arg("run")
            .env("HERMESD_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn hermesd");
        let mut daemon = Self { child, home, base: format!("http://127.0.0.1:{port}") };
        daemon.wait_ready(client).await;
        daemon
    }

    async fn wait_ready(&mut self, client: &reqwest::Client) {
        let url = format!("{}/readyz", self.base);
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(response) = client.get(&url).timeout(Duration::from_secs(2)).send().await
                && response.status() == 200
            {
                return;
            }
            if let Some(status) = self.exited() {
                panic!("hermesd exited before ready ({status}); its log:\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("hermesd not ready within {READY_TIMEOUT:?}; its log:\n{}", self.log());
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `HERMESD_HOME`.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// The exit status, once it exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("poll the hermesd child")
    }

    /// What the daemon logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.home().join("hermesd.log")).unwrap_or_default()
    }

    /// Run `hermesd <args>` on the same home (the operator's CLI, while the daemon runs);
    /// returns whether it succeeded and what it printed.
    pub async fn cli(&self, args: &[&str]) -> (bool, String) {
        let mut command = tokio::process::Command::from(command(self.home()));
        let output = command.args(args).stdin(Stdio::null()).output().await.expect("run the hermesd CLI");
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        (output.status.success(), text)
    }

    /// SIGTERM (through the `kill` command) and wait; returns the status and how long it took.
    pub async fn stop(&mut self) -> (Option<ExitStatus>, Duration) {
        let started = Instant::now();
        if let Some(status) = self.exited() {
            return (Some(status), Duration::ZERO);
        }
        let _ = Command::new("kill").args(["-TERM", &self.pid().to_string()]).status();
        while started.elapsed() < EXIT_TIMEOUT {
            if let Some(status) = self.exited() {
                return (Some(status), started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        (None, started.elapsed())
    }
}

impl Drop for Daemon {
    /// A soak that panics midway must not leave its daemon running.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `hermesd --home HOME` with the soak's environment (and nothing from the caller's proxies).
fn command(home: &Path) -> Command {
    let mut command = Command::new(BIN);
    command
        .arg("--home")
        .arg(home)
        .env("NO_PROXY", "127.0.0.1")
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_ALLOW_ALL_USERS", "true")
        .env("SOAK_WEBHOOK_SECRET", WEBHOOK_SECRET)
        .env_remove("TELEGRAM_ALLOWED_USERS")
        .env_remove("API_SERVER_KEY")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY");
    command
}

/// The soak's configuration: API, Telegram polling, one webhook route, cron ticking every 5 s,
/// short-lived actors, retries that outlast a fake's outage, retention every minute at the
/// shortest ages allowed (1 h).
fn config(port: u16, wiring: &Wiring<'_>) -> String {
    format!(
        r#"[http]
listen = "127.0.0.1:{port}"
# All load comes from one address.
rate_limit_per_minute = 0

[model]
provider = "chat_completions"
base_url = "{llm}"
name = "soak"
timeout = "30s"

[agent]
max_concurrent_turns = 32
max_queued_per_session = 32
session_idle = "{idle}s"
# Six attempts back off for 15-31 s in all: longer than a fake's 10 s outage.
retry_attempts = 6
progress = false

[platforms.telegram]
enabled = true
api_url = "{telegram}"
mode = "polling"
poll_timeout = "1s"

[[webhooks]]
route = "soak"
secret_env = "SOAK_WEBHOOK_SECRET"
prompt = "soak webhook {{token}}"
deliver = "telegram:{webhook_chat}"
rate_limit_per_minute = 6000

[cron]
tick = "5s"

[retention]
interval = "1m"
inbound_events = "1h"
outbound = "1h"
archived_messages = "1h"
media = "1h"
cron_output = "1h"
idempotency = "1h"
"#,
        llm = wiring.llm_url,
        telegram = wiring.telegram_url,
        webhook_chat = wiring.webhook_chat,
        idle = SESSION_IDLE.as_secs(),
    )
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`) in MB, or a plain count (`Threads`).
pub fn status_field(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let value: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(if field.starts_with("Vm") { value / 1024.0 } else { value })
}

/// Open file descriptors of `pid` (entries of `/proc/<pid>/fd`).
pub fn open_fds(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// Size of a file under the home in bytes (0 when absent).
pub fn file_bytes(home: &Path, name: &str) -> u64 {
    std::fs::metadata(home.join(name)).map(|m| m.len()).unwrap_or(0)
}

/// Lines of the daemon's log at ERROR level.
pub fn error_lines(log: &str) -> Vec<String> {
    log.lines().filter(|line| line.contains(" ERROR ")).map(str::to_owned).collect()
}

/// Where the CSV goes: `$HERMESD_SOAK_CSV`, else `target/soak.csv` beside the binary's target dir.
pub fn csv_path() -> PathBuf {
    if let Ok(path) = std::env::var("HERMESD_SOAK_CSV") {
        return PathBuf::from(path);
    }
    // CARGO_BIN_EXE_hermesd is <target>/<profile>/hermesd.
    Path::new(BIN)
        .parent()
        .and_then(Path::parent)
        .map_or_else(|| PathBuf::from("soak.csv"), |target| target.join("soak.csv"))
}
