//! The benchmarked `hermesd` child process and what `/proc` says about it.
//!
//! Each daemon gets a fresh home (config, `state.db`, log) in a temp dir, listens on a loopback
//! port and points its model at the fake LLM. CPU comes from `/proc/<pid>/stat` (utime + stime),
//! memory from `/proc/<pid>/status`.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::fake_llm::FakeLlm;

const BIN: &str = env!("CARGO_BIN_EXE_hermesd");
const READY_POLL: Duration = Duration::from_millis(2);
const READY_TIMEOUT: Duration = Duration::from_secs(30);
const EXIT_TIMEOUT: Duration = Duration::from_secs(40);

/// A running `hermesd` child with its own home.
pub(crate) struct Daemon {
    child: Child,
    home: TempDir,
    /// `http://127.0.0.1:<port>`.
    pub(crate) base: String,
}

impl Daemon {
    /// Spawn on a fresh home and wait for `/readyz`; also returns the start-to-ready time.
    pub(crate) async fn start(client: &reqwest::Client, llm: &FakeLlm) -> (Self, Duration) {
        Self::start_with(client, llm, "").await
    }

    /// Like `start`, with `agent_extra` (TOML lines) added to the config's `[agent]` table.
    pub(crate) async fn start_with(client: &reqwest::Client, llm: &FakeLlm, agent_extra: &str) -> (Self, Duration) {
        Self::start_with_key(client, llm, agent_extra, None).await
    }

    /// Like `start_with`, the API keyed with `key` (`API_SERVER_KEY`) when given.
    pub(crate) async fn start_with_key(
        client: &reqwest::Client,
        llm: &FakeLlm,
        agent_extra: &str,
        key: Option<&str>,
    ) -> (Self, Duration) {
        let env: Vec<(String, String)> = key.map(|k| ("API_SERVER_KEY".to_owned(), k.to_owned())).into_iter().collect();
        Self::start_with_env(client, llm, agent_extra, &env).await
    }

    /// Like `start_with`, with `env` set for the daemon (tokens, keys).
    pub(crate) async fn start_with_env(
        client: &reqwest::Client,
        llm: &FakeLlm,
        agent_extra: &str,
        env: &[(String, String)],
    ) -> (Self, Duration) {
        let home = tempfile::tempdir().expect("create a daemon home");
        let port = free_port();
        write_config(home.path(), port, llm, agent_extra);
        let log = std::fs::File::create(home.path().join("hermesd.log")).expect("create the daemon log");
        let started = Instant::now();
        // `HERMESD_BENCH_BIN` runs another build of hermesd (e.g. an older one, to compare).
        let bin = std::env::var("HERMESD_BENCH_BIN").unwrap_or_else(|_| BIN.to_owned());
        let mut command = Command::new(bin);
        command.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let child = command
            .arg("--home")
            .arg(home.path())
            .arg("run")
            .env("HERMESD_LOG", "warn")
            .env("NO_PROXY", "127.0.0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn hermesd");
        let mut daemon = Self { child, home, base: format!("http://127.0.0.1:{port}") };
        daemon.wait_ready(client).await;
        (daemon, started.elapsed())
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn home(&self) -> &Path {
        self.home.path()
    }

    /// Poll `/readyz` every 2 ms; panic with the daemon's log if it never gets ready or exits.
    async fn wait_ready(&mut self, client: &reqwest::Client) {
        let url = format!("{}/readyz", self.base);
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(response) = client.get(&url).timeout(Duration::from_secs(1)).send().await
                && response.status() == 200
            {
                return;
            }
            if let Some(status) = self.child.try_wait().expect("poll the hermesd child") {
                panic!("hermesd exited before ready ({status}); its log:\n{}", self.log());
            }
            tokio::time::sleep(READY_POLL).await;
        }
        panic!("hermesd not ready within {READY_TIMEOUT:?}; its log:\n{}", self.log());
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.home().join("hermesd.log")).unwrap_or_default()
    }

    /// SIGTERM (through the `kill` command) and wait for the exit.
    pub(crate) async fn stop(mut self) -> (ExitStatus, String) {
        let status = Command::new("kill").args(["-TERM", &self.pid().to_string()]).status().expect("run kill -TERM");
        assert!(status.success(), "kill -TERM {} failed", self.pid());
        let deadline = Instant::now() + EXIT_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll the hermesd child") {
                return (status, self.log());
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let status = self.child.wait().expect("reap the killed hermesd");
                return (status, format!("did not exit within {EXIT_TIMEOUT:?}; killed\n{}", self.log()));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Daemon {
    /// A bench that panics midway must not leave its daemon running.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A port that was free a moment ago (bind :0, read it, release it).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a probe listener");
    listener.local_addr().expect("probe listener address").port()
}

fn write_config(home: &Path, port: u16, llm: &FakeLlm, agent_extra: &str) {
    let text = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n# The load comes from one address, far above any sane per-client limit.\nrate_limit_per_minute = 0\n\n\
         [model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"bench\"\n\n\
         [agent]\nmax_concurrent_turns = 64\nmax_queued_per_session = 64\n{agent_extra}",
        llm.base_url()
    );
    std::fs::write(home.join("config.toml"), text).expect("write the daemon config");
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in MB.
pub(crate) fn status_mb(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/<pid>/status");
    let kb: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    kb as f64 / 1024.0
}

/// utime + stime of a process (`pid`, or `"self"`), in clock ticks.
pub(crate) fn cpu_ticks(pid: impl std::fmt::Display) -> u64 {
    // Fields 14 and 15 of `/proc/<pid>/stat`.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/<pid>/stat");
    // The command name (field 2) may hold spaces; fields after its closing ')' start at field 3.
    let rest = stat.rsplit_once(')').map(|(_, rest)| rest).expect("a ')' in /proc/<pid>/stat");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> u64 { fields[n - 3].parse().expect("a numeric tick count in /proc/<pid>/stat") };
    field(14) + field(15)
}

/// CPU ticks of each live thread of `pid` by name (`/proc/<pid>/task/*/stat`), busiest first.
pub(crate) fn thread_ticks(pid: u32) -> Vec<(String, u64)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("list /proc/<pid>/task");
    let mut threads: Vec<(String, u64)> = tasks
        .filter_map(|task| {
            let task = task.ok()?.file_name().into_string().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{task}/stat")).ok()?;
            let name = stat.split_once('(')?.1.rsplit_once(')')?.0.to_owned();
            Some((name, cpu_ticks(format!("{pid}/task/{task}"))))
        })
        .collect();
    threads.sort_by_key(|thread| std::cmp::Reverse(thread.1));
    threads
}

/// `getconf CLK_TCK` (normally 100).
pub(crate) fn ticks_per_second() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().expect("run getconf CLK_TCK");
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("getconf CLK_TCK prints a number")
}

/// Bytes of `state.db` plus its WAL.
pub(crate) fn store_bytes(home: &Path) -> u64 {
    ["state.db", "state.db-wal"]
        .iter()
        .filter_map(|name| std::fs::metadata(home.join(name)).ok())
        .map(|m| m.len())
        .sum()
}
