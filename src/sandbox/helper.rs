//! `hermesd sandbox-exec`: the helper the daemon re-executes for every sandboxed child. It
//! starts a new session (no controlling terminal, and a process group of its own the daemon can
//! kill), restricts itself with Landlock, then execs the program in place, so every process the
//! program starts inherits the restriction. It must never exec the program when the session or
//! the restriction failed.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{Policy, caps, rules};

/// Exit code when the sandbox could not be set up (the program never ran).
const EXIT_SANDBOX: u8 = 126;
/// Exit code when the program could not be found.
const EXIT_NOT_FOUND: u8 = 127;

/// Arguments of `hermesd sandbox-exec` (built by `Policy`; not meant to be typed by hand).
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxExecArgs {
    /// A tree the program may read (repeatable).
    #[arg(long = "read", value_name = "DIR")]
    read: Vec<PathBuf>,
    /// A tree the program must not read, carved out of the readable ones (repeatable).
    #[arg(long = "deny-read", value_name = "DIR")]
    deny_read: Vec<PathBuf>,
    /// The turn's workdir (readable and writable; may lie inside a denied tree).
    #[arg(long, value_name = "DIR")]
    workdir: Option<PathBuf>,
    /// A tree the program may read and write (repeatable).
    #[arg(long = "write", value_name = "DIR")]
    write: Vec<PathBuf>,
    /// The private temp dir (writable; becomes TMPDIR).
    #[arg(long, value_name = "DIR")]
    tmp: Option<PathBuf>,
    /// Deny TCP bind and connect.
    #[arg(long)]
    no_network: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    command: Vec<OsString>,
}

impl SandboxExecArgs {
    fn policy(&self) -> Policy {
        Policy {
            read: self.read.clone(),
            deny_read: self.deny_read.clone(),
            workdir: self.workdir.clone(),
            write: self.write.clone(),
            tmp: self.tmp.clone(),
            network: !self.no_network,
        }
    }
}

/// Restrict this process and exec the program; returns only on failure.
pub fn exec_main(args: SandboxExecArgs) -> ExitCode {
    // Before anything else: a new session drops the controlling terminal, so neither `/dev/tty`
    // nor TIOCSTI reaches the daemon's terminal. It fails only for a process group leader, which
    // the daemon never spawns this helper as.
    if let Err(e) = rustix::process::setsid() {
        eprintln!("hermesd sandbox-exec: start a new session: {e}; not run");
        return ExitCode::from(EXIT_SANDBOX);
    }
    let policy = args.policy();
    if let Err(e) = policy.check() {
        eprintln!("hermesd sandbox-exec: {e}; not run");
        return ExitCode::from(EXIT_SANDBOX);
    }
    if let Err(e) = caps::drop_capabilities() {
        eprintln!("hermesd sandbox-exec: drop capabilities: {e}; not run");
        return ExitCode::from(EXIT_SANDBOX);
    }
    if let Err(e) = rules::restrict(&policy) {
        eprintln!("hermesd sandbox-exec: {e}; not run");
        return ExitCode::from(EXIT_SANDBOX);
    }
    let Some((program, rest)) = args.command.split_first() else {
        eprintln!("hermesd sandbox-exec: no program given");
        return ExitCode::from(EXIT_SANDBOX);
    };
    let mut command = std::process::Command::new(program);
    command.args(rest);
    if let Some(tmp) = &policy.tmp {
        command.env("TMPDIR", tmp);
    }
    let e = command.exec();
    eprintln!("hermesd sandbox-exec: cannot run {}: {e}", program.to_string_lossy());
    ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound { EXIT_NOT_FOUND } else { EXIT_SANDBOX })
}
