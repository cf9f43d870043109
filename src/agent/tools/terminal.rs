//! The `terminal` tool: runs `sh -c <command>` in the turn's workdir, inside the tools' sandbox
//! (`crate::sandbox`), with a timeout and capped output. It must never run a command unconfined
//! unless `tools.terminal.sandbox = "none"` says so, never hand the daemon's secrets to the child
//! (the environment is scrubbed), never run a dangerous command without a human's approval (the
//! UX on top of the sandbox, `danger.rs`), and never leave the command's process group running
//! after a timeout or a stopped turn.
//!
//! A command may write only in the turn's own folder; the rest of the workdir root (other people's
//! and chats' folders) is unreadable to it (`beneath_root`). The process group is killed on a
//! timeout or a stop.
//!
//! The scrubbed environment has no secret variable, no `_FILE` twin of one, no name the config gave
//! a secret, no `HERMESD_*` and no `CREDENTIALS_DIRECTORY`; `HOME` is the turn's workdir. The
//! command runs in a session of its own (no controlling terminal).

mod danger;

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::files::{ensure_workdir, normalise, parse_args};
use super::{Approval, Tool, ToolContext, ToolError, ToolSpec};
use crate::config::{SecretTrail, TerminalConfig};
use crate::sandbox::{Policy, Sandbox, SandboxMode};
#[cfg(test)]
use danger::OUTSIDE_WRITE;
pub use danger::dangerous_reason;
use danger::dangerous_reason_in;

/// How long a dangerous command waits for a human by default.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);
const DEFAULT_TIMEOUT_SECS: u64 = 60;
const MAX_TIMEOUT_SECS: u64 = 600;
/// Bytes kept from the start and from the end of each stream.
const KEEP_HEAD: usize = 5_000;
const KEEP_TAIL: usize = 5_000;
/// How long to keep reading after the command ends, for output still in the pipes.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// Variables never passed to a command, besides any matching `is_secret_var`'s patterns: the
/// daemon's credentials, and the paths to its data and credentials.
const SECRET_VARS: &[&str] = &[
    "API_SERVER_KEY",
    "TELEGRAM_BOT_TOKEN",
    "DISCORD_BOT_TOKEN",
    "SLACK_BOT_TOKEN",
    "SLACK_APP_TOKEN",
    "SLACK_SIGNING_SECRET",
    "CREDENTIALS_DIRECTORY",
];

/// Runs shell commands in the sandbox.
#[derive(Debug)]
pub struct TerminalTool {
    approval_timeout: Duration,
    sandbox: Arc<Sandbox>,
    deny_network: bool,
    deny_read: Vec<PathBuf>,
    /// The tools' workdir root: every turn works in its own folder beneath it, and the rest of
    /// it (other people's and chats' folders) stays unreadable.
    root: Option<PathBuf>,
}

impl TerminalTool {
    /// A terminal tool that runs commands in `sandbox` and waits `approval_timeout` for a human
    /// before a dangerous command.
    pub fn new(approval_timeout: Duration, sandbox: Arc<Sandbox>) -> Self {
        Self { approval_timeout, sandbox, deny_network: false, deny_read: Vec::new(), root: None }
    }

    /// This tool with the tools' workdir `root`, unreadable to a command but for the turn's
    /// own folder beneath it.
    pub fn beneath_root(mut self, root: &Path) -> Self {
        self.root = Some(root.to_path_buf());
        self
    }

    /// This tool with `[tools.terminal]`'s network switch and extra unreadable trees.
    pub fn confined_by(mut self, config: &TerminalConfig) -> Self {
        self.deny_network = config.deny_network;
        self.deny_read = config.deny_read.clone();
        self
    }

    /// The policy a command of `ctx`'s turn runs under.
    fn policy(&self, ctx: &ToolContext) -> Policy {
        let mut policy = Policy::for_workdir(&ctx.workdir, &ctx.data_dir).with_network(!self.deny_network);
        if let Some(root) = self.root.as_ref().filter(|root| ctx.workdir.starts_with(root) && ctx.workdir != **root) {
            policy = policy.deny(root);
        }
        self.deny_read.iter().fold(policy, |policy, path| policy.deny(path))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    command: String,
    timeout: Option<u64>,
    workdir: Option<String>,
}

#[async_trait]
impl Tool for TerminalTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "terminal".into(),
            description: "Run a shell command (sh -c) in the workdir and get its exit code, stdout and stderr. \
                          No stdin: commands must not wait for input. Default timeout 60 s, at most 600 s. \
                          Destructive or system-wide commands (rm -rf on absolute paths, sudo, force pushes, \
                          writes outside the workdir…) need the user's approval."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The shell command"},
                    "timeout": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_SECS, "description": "Seconds before it is killed (default 60)"},
                    "workdir": {"type": "string", "description": "Folder to run in, relative to the workdir"}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
            toolset: "terminal".into(),
            parallel_safe: false,
            max_result_chars: 2 * (KEEP_HEAD + KEEP_TAIL) + 2_000,
            // The tool enforces the command's own timeout; this only bounds a stuck tool.
            timeout: self.approval_timeout + Duration::from_secs(MAX_TIMEOUT_SECS + 60),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let command = args.command.trim();
        if command.is_empty() {
            return Err(ToolError::InvalidArguments("`command` is empty".into()));
        }
        let secs = args.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS).clamp(1, MAX_TIMEOUT_SECS);
        ensure_workdir(ctx)?;
        let dir = normalise(&ctx.workdir.join(args.workdir.as_deref().unwrap_or(".")));
        if !dir.starts_with(normalise(&ctx.workdir)) {
            return Err(ToolError::InvalidArguments(format!(
                "workdir {} is outside the tools' workdir; give a folder inside it",
                dir.display()
            )));
        }
        if !dir.is_dir() {
            return Err(ToolError::InvalidArguments(format!("workdir {} is not an existing folder", dir.display())));
        }
        if let Some(problem) = self.sandbox.problem() {
            return Err(ToolError::Failed(format!("not run: {problem}")));
        }
        if let Some(reason) = dangerous_reason_in(command, Some(&ctx.workdir)) {
            self.approve(ctx, command, reason).await?;
        }
        let shell =
            self.sandbox.command(&self.policy(ctx), "sh").map_err(|e| ToolError::Failed(format!("not run: {e}")))?;
        let mut env = scrub_env(std::env::vars_os(), self.sandbox.secrets());
        if self.sandbox.mode() == SandboxMode::Landlock {
            // The operator's home is unreadable to a confined command, so `~` is the turn's
            // folder: git and friends read their `~/.gitconfig` there instead of failing on it.
            env.retain(|(name, _)| name != "HOME");
            env.push(("HOME".into(), ctx.workdir.clone().into_os_string()));
        }
        // The helper's own variables (the proxy token), which it removes before the shell starts.
        env.extend(self.sandbox.helper_env());
        run(ctx, shell, command, &dir, env, Duration::from_secs(secs)).await
    }
}

impl TerminalTool {
    async fn approve(&self, ctx: &ToolContext, command: &str, reason: &str) -> Result<(), ToolError> {
        let secs = self.approval_timeout.as_secs();
        let action = format!("run `{command}` ({reason})");
        let why = match ctx.human.approve_command(&action, command, self.approval_timeout).await {
            Approval::Approved => return Ok(()),
            Approval::Denied => {
                format!("the user denied this command ({reason}); not run; do not retry it, ask or find another way")
            }
            Approval::TimedOut => {
                format!("this command needs approval ({reason}); no answer within {secs} s; not run (fail closed)")
            }
            Approval::Unavailable => {
                format!("this command needs approval ({reason}), and nobody can approve here; not run")
            }
        };
        Err(ToolError::Denied(why))
    }
}

/// Whether a variable of this name must not reach a command: names ending in `_KEY`, `_TOKEN`,
/// `_SECRET` or `_PASSWORD`, names containing `API_KEY` (any case), the `_FILE` twin of any of
/// them, the daemon's own credentials and `HERMESD_*` (its home and other paths).
pub fn is_secret_var(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    let stem = name.strip_suffix("_FILE").unwrap_or(&name);
    ["_KEY", "_TOKEN", "_SECRET", "_PASSWORD"].iter().any(|s| stem.ends_with(s))
        || stem.contains("API_KEY")
        || SECRET_VARS.contains(&stem)
        || name.starts_with("HERMESD_")
}

/// `vars` without the secret ones: those `is_secret_var` names, and every secret the daemon
/// asked `Env` for (whatever the config named it) with its `_FILE` twin. A name that is not
/// UTF-8 is judged by its lossy form.
pub fn scrub_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    secrets: &SecretTrail,
) -> Vec<(OsString, OsString)> {
    vars.into_iter()
        .filter(|(name, _)| {
            let name = name.to_string_lossy();
            !is_secret_var(&name) && !secrets.names_secret(&name)
        })
        .collect()
}

/// How the command ended.
enum End {
    Exited(std::io::Result<std::process::ExitStatus>),
    TimedOut,
    Cancelled,
}

/// Run `command` with `shell` (`sh`, or the sandbox helper that execs it) and only `env`. The
/// shell leads its own process group (`Sandbox::command` sees to it), so a timeout kills the
/// command's children too, not just `sh`.
async fn run(
    ctx: &ToolContext,
    mut shell: std::process::Command,
    command: &str,
    dir: &Path,
    env: Vec<(OsString, OsString)>,
    timeout: Duration,
) -> Result<String, ToolError> {
    shell
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = tokio::process::Command::from(shell)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ToolError::Failed(format!("cannot start sh: {e}")))?;
    let mut group = ProcessGroup(child.id());
    let (mut out, mut err) = (Capture::default(), Capture::default());
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let mut still_open = false;
    let end = {
        let reading = async { tokio::join!(drain(stdout, &mut out), drain(stderr, &mut err)) };
        tokio::pin!(reading);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut read_all = false;
        let end = loop {
            tokio::select! {
                _ = &mut reading, if !read_all => read_all = true,
                status = child.wait() => break End::Exited(status),
                _ = &mut deadline => break End::TimedOut,
                _ = ctx.cancel.cancelled() => break End::Cancelled,
            }
        };
        if matches!(end, End::Exited(_)) {
            // Background jobs the command started may go on; only a timeout or a stop kills them.
            group.0 = None;
        } else {
            group.kill();
            let _ = child.kill().await;
        }
        if !read_all && tokio::time::timeout(DRAIN_GRACE, &mut reading).await.is_err() {
            still_open = true;
        }
        end
    };
    let mut output = String::new();
    for (name, capture) in [("stdout", &out), ("stderr", &err)] {
        if capture.total > 0 {
            output.push_str(&format!("{name}:\n{}\n", capture.render().trim_end()));
        }
    }
    if output.is_empty() {
        output.push_str("(no output)\n");
    }
    if still_open {
        output.push_str("[a background process still holds the output; stopped reading]\n");
    }
    let secs = timeout.as_secs();
    match end {
        End::Exited(Ok(status)) => {
            let code = match (status.code(), status.signal()) {
                (Some(code), _) => code.to_string(),
                (None, Some(signal)) => format!("none (killed by signal {signal})"),
                (None, None) => "unknown".into(),
            };
            Ok(format!("exit code: {code}\n{}", output.trim_end()))
        }
        End::Exited(Err(e)) => Err(ToolError::Failed(format!("lost track of the command: {e}"))),
        End::TimedOut => Err(ToolError::Failed(format!(
            "the command did not finish within {secs} s and was killed; raise `timeout` (at most \
             {MAX_TIMEOUT_SECS}) or run less at once\n{}",
            output.trim_end()
        ))),
        End::Cancelled => Err(ToolError::Failed("the command was killed because the turn was stopped".into())),
    }
}

/// Kills a command's whole process group when dropped (the turn was aborted) or asked to.
struct ProcessGroup(Option<u32>);

impl ProcessGroup {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // std has no killpg and `unsafe` is forbidden, so the shell's kill builtin does it.
            let _ = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("kill -KILL -{pgid} 2>/dev/null"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The first `KEEP_HEAD` and last `KEEP_TAIL` bytes of a stream, and its length.
#[derive(Default)]
struct Capture {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total: usize,
}

impl Capture {
    fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len();
        let room = KEEP_HEAD.saturating_sub(self.head.len()).min(bytes.len());
        self.head.extend_from_slice(&bytes[..room]);
        self.tail.extend(&bytes[room..]);
        let excess = self.tail.len().saturating_sub(KEEP_TAIL);
        self.tail.drain(..excess);
    }

    fn render(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        let omitted = self.total - self.head.len() - self.tail.len();
        if omitted > 0 {
            text.push_str(&format!("\n[… {omitted} bytes omitted …]\n"));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        text.push_str(&String::from_utf8_lossy(&tail));
        text
    }
}

async fn drain(reader: Option<impl AsyncRead + Unpin>, capture: &mut Capture) {
    let Some(mut reader) = reader else { return };
    let mut buf = [0u8; 8192];
    while let Ok(n @ 1..) = reader.read(&mut buf).await {
        capture.push(&buf[..n]);
    }
}

#[cfg(test)]
mod tests;
