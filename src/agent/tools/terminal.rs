//! The `terminal` tool: runs `sh -c <command>` in the turn's workdir with a timeout and capped
//! output. It must never hand the daemon's secrets to the child (the environment is scrubbed),
//! never run a dangerous command without a human's approval, and never leave the command's
//! process group running after a timeout or a stopped turn.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::files::{normalise, parse_args};
use super::{Approval, Tool, ToolContext, ToolError, ToolSpec};

/// How long a dangerous command waits for a human by default.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);
const DEFAULT_TIMEOUT_SECS: u64 = 60;
const MAX_TIMEOUT_SECS: u64 = 600;
/// Bytes kept from the start and from the end of each stream.
const KEEP_HEAD: usize = 5_000;
const KEEP_TAIL: usize = 5_000;
/// How long to keep reading after the command ends, for output still in the pipes.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// Variables never passed to a command, besides any matching `is_secret_var`'s patterns.
const SECRET_VARS: &[&str] = &[
    "API_SERVER_KEY",
    "TELEGRAM_BOT_TOKEN",
    "DISCORD_BOT_TOKEN",
    "SLACK_BOT_TOKEN",
    "SLACK_APP_TOKEN",
    "SLACK_SIGNING_SECRET",
];

/// Runs shell commands.
#[derive(Debug)]
pub struct TerminalTool {
    approval_timeout: Duration,
}

impl TerminalTool {
    /// A terminal tool that waits `approval_timeout` for a human before a dangerous command.
    pub fn new(approval_timeout: Duration) -> Self {
        Self { approval_timeout }
    }
}

impl Default for TerminalTool {
    fn default() -> Self {
        Self::new(DEFAULT_APPROVAL_TIMEOUT)
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
        let dir = normalise(&ctx.workdir.join(args.workdir.as_deref().unwrap_or(".")));
        if !dir.is_dir() {
            return Err(ToolError::InvalidArguments(format!("workdir {} is not an existing folder", dir.display())));
        }
        if let Some(reason) = dangerous_reason_in(command, Some(&ctx.workdir)) {
            self.approve(ctx, command, reason).await?;
        }
        run(ctx, command, &dir, Duration::from_secs(secs)).await
    }
}

impl TerminalTool {
    async fn approve(&self, ctx: &ToolContext, command: &str, reason: &str) -> Result<(), ToolError> {
        let secs = self.approval_timeout.as_secs();
        let why = match ctx.human.approve(&format!("run `{command}` ({reason})"), self.approval_timeout).await {
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
/// `_SECRET` or `_PASSWORD`, names containing `API_KEY` (any case), and the daemon's own
/// credentials.
pub fn is_secret_var(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    ["_KEY", "_TOKEN", "_SECRET", "_PASSWORD"].iter().any(|s| name.ends_with(s))
        || name.contains("API_KEY")
        || SECRET_VARS.contains(&name.as_str())
}

/// `vars` without the secret ones (see `is_secret_var`); a name that is not UTF-8 is judged by
/// its lossy form.
pub fn scrub_env(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Vec<(OsString, OsString)> {
    vars.into_iter().filter(|(name, _)| !is_secret_var(&name.to_string_lossy())).collect()
}

/// How the command ended.
enum End {
    Exited(std::io::Result<std::process::ExitStatus>),
    TimedOut,
    Cancelled,
}

async fn run(ctx: &ToolContext, command: &str, dir: &Path, timeout: Duration) -> Result<String, ToolError> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .env_clear()
        .envs(scrub_env(std::env::vars_os()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own process group, so a timeout kills the command's children too, not just `sh`.
        .process_group(0)
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

const RECURSIVE_DELETE: &str = "recursively deletes a root, home, wildcard, parent or absolute path";
const DEVICE_WRITE: &str = "writes to a device";
const OUTSIDE_WRITE: &str = "writes to a path outside the workdir";
const PIPE_TO_SHELL: &str = "pipes a download straight into a shell";
const POWER: &str = "shuts down or reboots the machine";
/// Device files a command may write to freely.
const SAFE_DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "stdout", "stderr", "tty"];
/// Programs that, given no script, run what arrives on stdin.
const INTERPRETERS: &[&str] =
    &["sh", "bash", "zsh", "dash", "ksh", "fish", "python", "python3", "perl", "ruby", "node"];
/// Words that run the next word as the command.
const WRAPPERS: &[&str] = &[
    "nohup", "exec", "time", "command", "builtin", "nice", "env", "timeout", "xargs", "{", "!", "if", "then", "do",
    "else", "while", "until",
];

/// Why `command` needs a human's approval, or `None` when it looks harmless: recursive deletes of
/// roots, home, wildcards or absolute paths; sudo/su; formatting disks and writing devices;
/// `chmod -R 777`, `chown -R`; fork bombs; downloads piped into a shell; shutdown and reboot;
/// mass kills; force pushes, hard resets, `git clean -f`; SQL `DROP TABLE`/`DROP DATABASE`;
/// writes and redirects to absolute paths other than `/tmp`. A heuristic that reads the command
/// roughly as the shell would (quotes, pipes, `;`, `&&`, redirects, `sh -c` scripts).
pub fn dangerous_reason(command: &str) -> Option<&'static str> {
    dangerous_reason_in(command, None)
}

/// As `dangerous_reason`, with writes under `workdir` counted as harmless.
fn dangerous_reason_in(command: &str, workdir: Option<&Path>) -> Option<&'static str> {
    let squashed = command.to_ascii_lowercase().split_whitespace().collect::<Vec<_>>().join(" ");
    if squashed.contains("drop table") || squashed.contains("drop database") {
        return Some("drops a database table or a database");
    }
    if is_fork_bomb(&squashed.replace(' ', "")) {
        return Some("is a fork bomb");
    }
    let parsed = parse(command);
    let commands: Vec<Cmd<'_>> = parsed.segments.iter().map(|s| command_of(&s.words)).collect();
    for (i, cmd) in commands.iter().enumerate() {
        if let Some(reason) = command_reason(cmd, workdir) {
            return Some(reason);
        }
        let piped_into_interpreter = || {
            parsed.segments[i + 1..]
                .iter()
                .zip(&commands[i + 1..])
                .take_while(|(s, _)| s.piped)
                .any(|(_, c)| c.reads_stdin())
        };
        if matches!(cmd.name, "curl" | "wget") && piped_into_interpreter() {
            return Some(PIPE_TO_SHELL);
        }
    }
    let substituted = ["$(curl", "<(curl", "`curl", "$(wget", "<(wget", "`wget"].iter().any(|s| squashed.contains(s));
    if substituted && commands.iter().any(|c| INTERPRETERS.contains(&c.name)) {
        return Some(PIPE_TO_SHELL);
    }
    parsed.redirects.iter().find_map(|target| write_reason(target, workdir))
}

fn command_reason(cmd: &Cmd<'_>, workdir: Option<&Path>) -> Option<&'static str> {
    if cmd.elevated {
        return Some("runs a command as root (sudo)");
    }
    let args = cmd.args;
    let short_flag = |c: char| args.iter().any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains(c));
    let has = |word: &str| args.iter().any(|a| a == word);
    let mut operands = args.iter().filter(|a| !a.starts_with('-'));
    let recursive = short_flag('r') || short_flag('R') || has("--recursive");
    match cmd.name {
        "rm" if recursive && operands.any(|t| risky_delete(t)) => Some(RECURSIVE_DELETE),
        "find" if has("-delete") && args.first().is_some_and(|t| risky_delete(t)) => Some(RECURSIVE_DELETE),
        "su" => Some("switches to another user (su)"),
        name if name.starts_with("mkfs") || name == "wipefs" => Some("formats or wipes a disk"),
        "dd" if args.iter().any(|a| a.strip_prefix("of=/dev/").is_some_and(|d| !SAFE_DEVICES.contains(&d))) => {
            Some(DEVICE_WRITE)
        }
        "chmod" if recursive && (has("777") || has("a+rwx")) => Some("makes files world-writable recursively"),
        "chown" | "chgrp" if recursive => Some("changes file ownership recursively"),
        "shutdown" | "reboot" | "halt" | "poweroff" => Some(POWER),
        "systemctl" | "init" | "telinit" if ["reboot", "poweroff", "halt", "0", "6"].iter().any(|w| has(w)) => {
            Some(POWER)
        }
        "kill" if args.iter().skip(1).any(|a| a == "-1") => Some("kills every process (kill -1)"),
        "killall" | "pkill" => Some("kills processes by name"),
        "git" => git_reason(args),
        "tee" => operands.find_map(|t| write_reason(t, workdir)),
        "eval" => dangerous_reason_in(&args.join(" "), workdir),
        name if INTERPRETERS.contains(&name) => {
            let script = args.iter().position(|a| a == "-c").and_then(|at| args.get(at + 1));
            script.and_then(|script| dangerous_reason_in(script, workdir))
        }
        _ => None,
    }
}

fn risky_delete(target: &str) -> bool {
    target.starts_with(['/', '~', '*', '$']) || target.starts_with("../") || matches!(target, "." | ".." | "./" | "./*")
}

fn git_reason(args: &[String]) -> Option<&'static str> {
    let mut words = args.iter().map(String::as_str);
    let sub = loop {
        match words.next()? {
            "-C" | "-c" => {
                words.next();
            }
            flag if flag.starts_with('-') => {}
            sub => break sub,
        }
    };
    let rest: Vec<&str> = words.collect();
    let force = rest.iter().any(|a| {
        *a == "--force" || a.starts_with("--force-") || (a.starts_with('-') && !a.starts_with("--") && a.contains('f'))
    });
    match sub {
        "push" if force || rest.iter().any(|a| a.starts_with('+')) => {
            Some("force-pushes, rewriting the remote's history")
        }
        "reset" if rest.contains(&"--hard") => Some("discards uncommitted work (git reset --hard)"),
        "clean" if force => Some("deletes untracked files (git clean -f)"),
        _ => None,
    }
}

/// Writing to `target` is risky when it is a device, or an absolute or home path outside `/tmp`
/// and the workdir.
fn write_reason(target: &str, workdir: Option<&Path>) -> Option<&'static str> {
    if let Some(device) = target.strip_prefix("/dev/") {
        return (!SAFE_DEVICES.contains(&device) && !device.starts_with("fd/")).then_some(DEVICE_WRITE);
    }
    if target.starts_with('~') || target.starts_with("$HOME") || target.starts_with("../") {
        return Some(OUTSIDE_WRITE);
    }
    if !target.starts_with('/') {
        return None;
    }
    let path = normalise(Path::new(target));
    let harmless = path.starts_with("/tmp") || workdir.is_some_and(|w| path.starts_with(normalise(w)));
    (!harmless).then_some(OUTSIDE_WRITE)
}

/// `name(){ name|name& }` with whitespace removed, for any function name (`:` classically).
fn is_fork_bomb(compact: &str) -> bool {
    compact.match_indices("(){").any(|(at, _)| {
        let name = compact[..at].rsplit([';', '&', '|', '{', '}', '(', ')']).next().unwrap_or_default();
        !name.is_empty() && compact[at..].contains(&format!("{name}|{name}&"))
    })
}

/// A command line split into simple commands, plus every redirect target.
#[derive(Default)]
struct Parsed {
    segments: Vec<Segment>,
    redirects: Vec<String>,
}

#[derive(Default)]
struct Segment {
    words: Vec<String>,
    /// Its stdin is the previous segment's stdout.
    piped: bool,
}

/// A segment's command word (its base name), the words after it, and whether sudo runs it.
struct Cmd<'a> {
    name: &'a str,
    args: &'a [String],
    elevated: bool,
}

impl Cmd<'_> {
    /// An interpreter given no script, so it runs its stdin.
    fn reads_stdin(&self) -> bool {
        INTERPRETERS.contains(&self.name)
            && self.args.first().is_none_or(|a| a.starts_with('-') && a != "-c" && a != "-m")
    }
}

fn command_of(words: &[String]) -> Cmd<'_> {
    let mut elevated = false;
    for (i, word) in words.iter().enumerate() {
        let name = word.rsplit('/').next().unwrap_or(word);
        let prefix_noise = i > 0 && (word.starts_with('-') || word.parse::<u32>().is_ok());
        if is_assignment(word) || prefix_noise || WRAPPERS.contains(&name) {
            continue;
        }
        if matches!(name, "sudo" | "doas") {
            elevated = true;
            continue;
        }
        return Cmd { name, args: &words[i + 1..], elevated };
    }
    Cmd { name: "", args: &[], elevated }
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// Builds a `Parsed` one character at a time.
#[derive(Default)]
struct Parser {
    parsed: Parsed,
    segment: Segment,
    word: String,
    in_word: bool,
    redirect: bool,
}

impl Parser {
    fn end_word(&mut self) {
        if std::mem::take(&mut self.in_word) {
            let word = std::mem::take(&mut self.word);
            if std::mem::take(&mut self.redirect) {
                self.parsed.redirects.push(word);
            } else {
                self.segment.words.push(word);
            }
        }
    }

    fn end_segment(&mut self, piped_next: bool) {
        self.end_word();
        let segment = std::mem::replace(&mut self.segment, Segment { words: Vec::new(), piped: piped_next });
        if !segment.words.is_empty() {
            self.parsed.segments.push(segment);
        }
    }
}

/// Split `command` roughly as sh would: quotes and backslashes, `|`, `||`, `&&`, `&`, `;`,
/// newlines, subshells and substitutions as separators, and `>`/`>>`/`&>` redirects.
fn parse(command: &str) -> Parsed {
    let mut p = Parser::default();
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                p.in_word = true;
                p.word.extend(chars.by_ref().take_while(|&q| q != '\''));
            }
            '"' => {
                p.in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => p.word.extend(chars.next()),
                        q => p.word.push(q),
                    }
                }
            }
            '\\' => {
                p.in_word = true;
                p.word.extend(chars.next());
            }
            '|' => {
                let or = chars.next_if_eq(&'|').is_some();
                chars.next_if_eq(&'&');
                p.end_segment(!or);
            }
            '&' if chars.next_if_eq(&'>').is_some() => {
                chars.next_if_eq(&'>');
                p.end_word();
                p.redirect = true;
            }
            '&' => {
                chars.next_if_eq(&'&');
                p.end_segment(false);
            }
            ';' | '\n' | '(' | ')' | '`' => p.end_segment(false),
            '$' if chars.next_if_eq(&'(').is_some() => p.end_segment(false),
            '>' => {
                // A number right before `>` names a descriptor, not a word.
                if p.word.chars().all(|d| d.is_ascii_digit()) {
                    p.word.clear();
                    p.in_word = false;
                }
                p.end_word();
                chars.next_if_eq(&'>');
                chars.next_if_eq(&'|');
                if chars.next_if_eq(&'&').is_some() {
                    while chars.next_if(|d| d.is_ascii_digit() || *d == '-').is_some() {}
                } else {
                    p.redirect = true;
                }
            }
            '<' if chars.next_if_eq(&'(').is_some() => p.end_segment(false),
            c if c.is_whitespace() || c == '<' => p.end_word(),
            c => {
                p.in_word = true;
                p.word.push(c);
            }
        }
    }
    p.end_segment(false);
    p.parsed
}

#[cfg(test)]
mod tests;
