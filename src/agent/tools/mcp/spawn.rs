//! Starting stdio MCP servers so they never outlive the daemon, without `unsafe`.
//!
//! Each server runs under a re-executed `hermesd mcp-shim` (see `shim.rs`) that starts a session
//! of its own (so it leads its process group and has no controlling terminal) and sets its own
//! parent-death signal. A parent-death signal fires when
//! the *thread* that spawned the child exits, so every shim is spawned from one long-lived
//! thread (`Spawner`). Each running group is recorded under `$HERMESD_HOME/mcp/run/` together
//! with the daemon's pid; `reap_stale` kills the groups a previous daemon left when it died.
//!
//! Only the server's configured `env`, plus `PASSED_ENV` (PATH, HOME, LANG) and its own TMPDIR,
//! reaches a stdio server; the shim starts with a cleared environment.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc as std_mpsc;

use rustix::process::{Pid, Signal};
use tokio::sync::oneshot;

use crate::config::{McpSandbox, McpServerConfig};

/// Variables of the daemon's environment that reach a stdio server besides its configured `env`.
pub const PASSED_ENV: &[&str] = &["PATH", "HOME", "LANG"];

use crate::sandbox::LAUNCHER_CACHES;

type SpawnRequest = (Command, oneshot::Sender<io::Result<Child>>);

/// The one thread every stdio server's shim is spawned from; it lives as long as this value
/// (dropping it ends the thread, and with it every shim it started).
pub struct Spawner {
    requests: std_mpsc::Sender<SpawnRequest>,
}

impl Spawner {
    /// Start the spawning thread.
    pub fn start() -> io::Result<Self> {
        let (requests, inbox) = std_mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new().name("mcp-spawner".into()).spawn(move || {
            for (mut command, reply) in inbox {
                let _ = reply.send(command.spawn());
            }
        })?;
        Ok(Self { requests })
    }

    /// Spawn `command` from the spawning thread.
    pub async fn spawn(&self, command: Command) -> io::Result<Child> {
        let (reply, answer) = oneshot::channel();
        self.requests.send((command, reply)).map_err(|_| io::Error::other("the spawner thread is gone"))?;
        answer.await.map_err(|_| io::Error::other("the spawner thread is gone"))?
    }
}

/// What the shim is told about confinement; the sandbox module turns it into its policy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Confinement {
    /// Apply the sandbox at all.
    pub enabled: bool,
    /// Paths the server must not read (the data dir, the credentials directory).
    pub deny_read: Vec<PathBuf>,
    /// Paths the server may write (its private temp dir, launcher caches, `write_paths`).
    pub write: Vec<PathBuf>,
}

/// Everything needed to start one stdio server.
#[derive(Debug, Clone)]
pub struct StdioPlan {
    /// The server's name.
    pub server: String,
    /// The `hermesd` binary that runs the shim.
    pub shim_exe: PathBuf,
    /// The server's program and arguments.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The complete environment it gets.
    pub env: BTreeMap<String, String>,
    /// Its working directory.
    pub cwd: PathBuf,
    /// How it is confined.
    pub confinement: Confinement,
    /// Where its group is recorded while it runs.
    pub record: PathBuf,
}

impl StdioPlan {
    /// Plan server `name`: only the listed environment (plus `PASSED_ENV` from `daemon_env`)
    /// reaches it, and `TMPDIR` points to its private temp dir.
    pub fn new(
        name: &str,
        config: &McpServerConfig,
        daemon_env: &dyn Fn(&str) -> Option<String>,
        home: &Path,
        workdir: &Path,
        shim_exe: PathBuf,
    ) -> Self {
        let mut env: BTreeMap<String, String> =
            PASSED_ENV.iter().filter_map(|k| daemon_env(k).map(|v| ((*k).to_owned(), v))).collect();
        let tmp = server_temp_dir(std::process::id(), name);
        env.insert("TMPDIR".into(), tmp.display().to_string());
        env.extend(config.env.clone());
        let mut write = vec![tmp];
        if let Some(user_home) = daemon_env("HOME") {
            write.extend(LAUNCHER_CACHES.iter().map(|c| Path::new(&user_home).join(c)));
        }
        write.extend(config.write_paths.iter().cloned());
        // The terminal's temp dirs hold what people's commands left there.
        let mut deny_read = vec![home.to_path_buf(), crate::sandbox::private_tmp_root()];
        if let Some(credentials) = daemon_env("CREDENTIALS_DIRECTORY") {
            deny_read.push(PathBuf::from(credentials));
        }
        let confinement = Confinement { enabled: config.sandbox == McpSandbox::Landlock, deny_read, write };
        Self {
            server: name.to_owned(),
            shim_exe,
            command: config.command.clone().unwrap_or_default(),
            args: config.args.clone(),
            env,
            cwd: config
                .cwd
                .clone()
                .map(|c| if c.is_absolute() { c } else { workdir.join(c) })
                .unwrap_or_else(|| workdir.to_path_buf()),
            confinement,
            // One record per start: a server restarted by a reload must not share the old
            // instance's record, which its close removes.
            record: run_dir(home).join(format!("{name}.{}.{}.group", std::process::id(), next_start())),
        }
    }

    /// The shim command: `hermesd mcp-shim --server NAME --parent PID [...] -- COMMAND ARGS`,
    /// stdin/stdout/stderr piped, with a clean environment. Not in a process group of its own:
    /// the shim calls `setsid`, which a group leader cannot.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.shim_exe);
        let mut args: Vec<OsString> = vec!["mcp-shim".into(), "--server".into(), self.server.clone().into()];
        args.extend(["--parent".into(), std::process::id().to_string().into()]);
        if self.confinement.enabled {
            args.push("--sandbox".into());
            for path in &self.confinement.deny_read {
                args.extend(["--deny-read".into(), path.clone().into_os_string()]);
            }
            for path in &self.confinement.write {
                args.extend(["--write".into(), path.clone().into_os_string()]);
            }
        }
        args.push("--".into());
        args.push(self.command.clone().into());
        args.extend(self.args.iter().map(OsString::from));
        command.args(args);
        command.env_clear().envs(&self.env).current_dir(&self.cwd);
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        command
    }
}

/// Where running groups are recorded.
pub fn run_dir(home: &Path) -> PathBuf {
    home.join("mcp").join("run")
}

/// A process's start time in clock ticks since boot (`/proc/<pid>/stat` field 22), which tells
/// a live process from a later one that reused its pid.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_field(&stat, 22)
}

/// Field `n` (1-based) of a `/proc/<pid>/stat` line; the command name may contain spaces and
/// parentheses, so fields are counted after its last `)`.
fn stat_field(stat: &str, n: usize) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n - 3)?.parse().ok()
}

/// Write the record for a started group (the shim's pid leads it).
pub fn record_group(path: &Path, leader: u32) -> io::Result<()> {
    let daemon = std::process::id();
    let line = format!("{leader} {} {daemon} {}\n", start_time(leader).unwrap_or(0), start_time(daemon).unwrap_or(0));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, line)
}

/// Kill the groups recorded by daemons that are gone and remove their records. Groups of a
/// daemon that still runs (another daemon on the same home) are left alone. Returns how many
/// groups were killed.
pub fn reap_stale(home: &Path) -> usize {
    let killed = reap_groups(home);
    remove_stale_temp_dirs();
    killed
}

/// A server's private temp dir, named after the daemon that started it.
fn server_temp_dir(daemon: u32, server: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{TEMP_PREFIX}{daemon}-{server}"))
}

const TEMP_PREFIX: &str = "hermesd-mcp-";

/// Remove the private temp dirs of daemons that are gone, so they do not pile up across
/// restarts. A dir whose daemon pid is alive (this one, or another daemon) is kept.
fn remove_stale_temp_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(TEMP_PREFIX)).and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if pid.parse::<u32>().is_ok_and(|pid| start_time(pid).is_none()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A number no other start of a server in this process had.
fn next_start() -> u64 {
    static STARTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn reap_groups(home: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(run_dir(home)) else { return 0 };
    let mut killed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let fields: Vec<u64> = text.split_whitespace().filter_map(|f| f.parse().ok()).collect();
        let [leader, leader_start, daemon, daemon_start] = fields[..] else {
            let _ = std::fs::remove_file(&path);
            continue;
        };
        let daemon_alive = u32::try_from(daemon).ok().and_then(start_time) == Some(daemon_start);
        if daemon_alive {
            continue;
        }
        if let Some(pgid) = u32::try_from(leader).ok()
            && group_alive(pgid, leader_start)
            && let Some(pid) = Pid::from_raw(pgid as i32)
            && rustix::process::kill_process_group(pid, Signal::KILL).is_ok()
        {
            tracing::warn!(record = %path.display(), pgid, "killed an MCP server group left by a previous run");
            killed += 1;
        }
        let _ = std::fs::remove_file(&path);
    }
    killed
}

/// Whether a process of group `pgid` started no earlier than its recorded leader (a group id is
/// not reused while any member lives, so such a member belongs to the recorded group).
fn group_alive(pgid: u32, leader_start: u64) -> bool {
    let Ok(procs) = std::fs::read_dir("/proc") else { return false };
    procs.flatten().filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok())).any(|pid| {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
        stat_field(&stat, 5) == Some(u64::from(pgid)) && stat_field(&stat, 22).is_some_and(|t| t >= leader_start)
    })
}

/// Ask group `pgid` to stop (SIGTERM), then kill it (SIGKILL) after `grace`. A shim that has
/// not called `setsid` yet leads no group: it is sent the SIGTERM itself, which ends it before
/// it starts the server.
pub async fn stop_group(pgid: u32, grace: std::time::Duration) {
    let Some(pid) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else { return };
    if rustix::process::kill_process_group(pid, Signal::TERM).is_err() {
        let _ = rustix::process::kill_process(pid, Signal::TERM);
        return;
    }
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline {
        if rustix::process::test_kill_process_group(pid).is_err() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let _ = rustix::process::kill_process_group(pid, Signal::KILL);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat = "4242 (odd) name) S 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        assert_eq!(stat_field(stat, 4), Some(1));
        assert_eq!(stat_field(stat, 5), Some(4242));
        assert_eq!(stat_field(stat, 22), Some(987654));
    }

    #[test]
    fn only_the_listed_environment_reaches_the_server() {
        let config: McpServerConfig =
            toml::from_str("command = \"srv\"\nenv = { TZ = \"UTC\" }\nwrite_paths = [\"/srv/out\"]").expect("toml");
        let daemon_env = |k: &str| match k {
            "PATH" => Some("/bin".to_owned()),
            "HOME" => Some("/home/u".to_owned()),
            "OPENAI_API_KEY" => Some("sk-secret".to_owned()),
            _ => None,
        };
        let plan =
            StdioPlan::new("time", &config, &daemon_env, Path::new("/data"), Path::new("/work"), "/bin/hermesd".into());
        let keys: Vec<&str> = plan.env.keys().map(String::as_str).collect();
        assert_eq!(keys, ["HOME", "PATH", "TMPDIR", "TZ"]);
        assert!(plan.confinement.enabled);
        assert_eq!(plan.confinement.deny_read, [PathBuf::from("/data"), crate::sandbox::private_tmp_root()]);
        assert!(plan.confinement.write.contains(&PathBuf::from("/srv/out")));
        assert!(plan.confinement.write.contains(&PathBuf::from("/home/u/.cache")));
        assert_eq!(plan.cwd, PathBuf::from("/work"));
        let args: Vec<String> = plan.command().get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args[..3], ["mcp-shim", "--server", "time"]);
        assert_eq!(args[args.len() - 2..], ["--", "srv"]);
    }

    #[test]
    fn records_of_a_live_daemon_are_kept() {
        let home = tempfile::tempdir().expect("tempdir");
        let record = run_dir(home.path()).join("x.group");
        record_group(&record, std::process::id()).expect("record");
        assert_eq!(reap_stale(home.path()), 0);
        assert!(record.exists(), "this daemon still runs: its record stays");
        std::fs::write(&record, "999999 1 999998 1\n").expect("write");
        let (dead, live) = (server_temp_dir(999_998, "fix"), server_temp_dir(std::process::id(), "fix"));
        std::fs::create_dir_all(dead.join("sub")).expect("dead daemon's temp dir");
        std::fs::create_dir_all(&live).expect("this daemon's temp dir");
        assert_eq!(reap_stale(home.path()), 0);
        assert!(!record.exists(), "a dead daemon's record is removed");
        assert!(!dead.exists(), "a dead daemon's temp dir is removed");
        assert!(live.exists(), "this daemon's temp dir stays");
        let _ = std::fs::remove_dir_all(live);
    }
}
