//! `hermesd mcp-shim` (hidden): the process between the daemon and one stdio MCP server.
//!
//! It starts a new session (no controlling terminal; the shim leads the session's process group),
//! sets its own parent-death signal, re-checks that its parent is still the daemon, applies the
//! sandbox, and runs the server inside its process group. When the daemon goes — a SIGTERM from the
//! daemon, the parent-death signal, or a changed parent pid — or the server exits, it kills the
//! whole group, including grandchildren that launchers such as `uvx` and `npx` start. It never
//! writes to stdout: that is the server's MCP channel.
//!
//! `confine` puts the shim (and so the server) in a Landlock domain unless the server says
//! `sandbox = "none"`: reads everywhere but the data dir, the credentials directory, the terminal's
//! private temp root, the files secrets were read from and `/dev`; writes only to its own temp dir,
//! the launchers' caches and the server's `write_paths`. MCP servers keep the host's network.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use rustix::process::{Pid, Signal};
use tokio::signal::unix::{SignalKind, signal};

use super::spawn::Confinement;

/// Exit code when the shim could not start the server.
const EXIT_SHIM_FAILED: u8 = 70;
/// How long the server's group gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(2);

/// Arguments of `hermesd mcp-shim`.
#[derive(Debug, Clone, clap::Args)]
pub struct ShimArgs {
    /// The server's name (for messages).
    #[arg(long)]
    pub server: String,
    /// The daemon's pid; the shim exits when its parent is no longer this process.
    #[arg(long)]
    pub parent: u32,
    /// Confine the server with the sandbox.
    #[arg(long)]
    pub sandbox: bool,
    /// A path the server must not read (repeatable).
    #[arg(long = "deny-read")]
    pub deny_read: Vec<PathBuf>,
    /// A path the server may write (repeatable).
    #[arg(long = "write")]
    pub write: Vec<PathBuf>,
    /// The server's program and arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// The sandbox seam: confine this process (and so the server it starts) to `confinement`.
///
/// This is the one place where the sandbox module is called for MCP servers: the shim confines
/// itself (reads everywhere but the data dir, the credentials directory and `/dev` beyond the
/// harmless devices; writes only to `write`), so the server and everything it starts inherit the
/// Landlock domain, while the shim can still signal its own process group.
fn confine(server: &str, confinement: &Confinement) -> Result<(), String> {
    if !confinement.enabled {
        return Ok(());
    }
    // Landlock rules name existing paths: the private temp dir is made here, other writable
    // paths (launcher caches, `write_paths`) count only when they exist.
    if let Some(tmp) = confinement.write.first() {
        std::fs::create_dir_all(tmp).map_err(|e| format!("mcp server {server}: create {}: {e}", tmp.display()))?;
    }
    let mut deny_read = confinement.deny_read.clone();
    deny_read.push(PathBuf::from("/dev"));
    let policy = crate::sandbox::Policy {
        read: vec![PathBuf::from("/")],
        deny_read,
        workdir: None,
        write: confinement.write.iter().filter(|p| p.exists()).cloned().collect(),
        tmp: None,
        // MCP servers keep the host's network (they are the operator's own, configured
        // services); only terminal commands get namespaces and the egress proxy.
        network: true,
        ..crate::sandbox::Policy::default()
    };
    crate::sandbox::confine_current_process(&policy).map_err(|e| {
        format!("mcp server {server}: sandbox: {e}; set sandbox = \"none\" for this server to run it unconfined")
    })
}

/// Run the shim; returns the server's exit code (or 70 when it could not start).
pub async fn run(args: ShimArgs) -> ExitCode {
    // First: the server must not inherit the daemon's terminal (a TIOCSTI on it would type into
    // the operator's shell), and the group the daemon kills is this session's.
    if let Err(e) = rustix::process::setsid() {
        eprintln!("mcp server {}: start a new session: {e}", args.server);
        return ExitCode::from(EXIT_SHIM_FAILED);
    }
    // The signal goes to this process when the daemon's spawning thread ends; set it first,
    // then check the parent, so a daemon that died in between is noticed too.
    if let Err(e) = rustix::process::set_parent_process_death_signal(Some(Signal::TERM)) {
        eprintln!("mcp server {}: set the parent-death signal: {e}", args.server);
        return ExitCode::from(EXIT_SHIM_FAILED);
    }
    if !parent_is(args.parent) {
        return ExitCode::from(EXIT_SHIM_FAILED);
    }
    let confinement =
        Confinement { enabled: args.sandbox, deny_read: args.deny_read.clone(), write: args.write.clone() };
    if let Err(e) = confine(&args.server, &confinement) {
        eprintln!("{e}");
        return ExitCode::from(EXIT_SHIM_FAILED);
    }
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()), signal(SignalKind::hangup()))
    else {
        eprintln!("mcp server {}: cannot install signal handlers", args.server);
        return ExitCode::from(EXIT_SHIM_FAILED);
    };
    let Some((program, rest)) = args.command.split_first() else { return ExitCode::from(EXIT_SHIM_FAILED) };
    let mut child = match tokio::process::Command::new(program).args(rest).spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("mcp server {}: start {program}: {e}", args.server);
            return ExitCode::from(EXIT_SHIM_FAILED);
        }
    };
    let mut check = tokio::time::interval(Duration::from_millis(500));
    let code = loop {
        tokio::select! {
            status = child.wait() => break status.ok().and_then(|s| s.code()).unwrap_or(1),
            _ = term.recv() => break 143,
            _ = int.recv() => break 130,
            _ = hup.recv() => break 129,
            _ = check.tick() => if !parent_is(args.parent) { break 143 },
        }
    };
    end_group(&mut child).await;
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

fn parent_is(parent: u32) -> bool {
    rustix::process::getppid().map(|p| p.as_raw_nonzero().get()) == i32::try_from(parent).ok()
}

/// Stop everything in this shim's group: SIGTERM (the shim ignores it: its handler is
/// installed), wait for the server up to the grace period, then SIGKILL the group — which also
/// ends the shim, last.
async fn end_group(child: &mut tokio::process::Child) {
    let group = rustix::process::getpgrp();
    let Some(own) = Pid::from_raw(rustix::process::getpid().as_raw_nonzero().get()) else { return };
    if group != own {
        // Not a group leader (run by hand): only the server can be stopped.
        let _ = child.start_kill();
        let _ = child.wait().await;
        return;
    }
    let _ = rustix::process::kill_process_group(group, Signal::TERM);
    let _ = tokio::time::timeout(GRACE, child.wait()).await;
    let _ = rustix::process::kill_process_group(group, Signal::KILL);
}
