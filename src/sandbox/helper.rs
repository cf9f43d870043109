//! `hermesd sandbox-exec`: the helper the daemon re-executes for every sandboxed child. It
//! starts a new session (no controlling terminal, and a process group of its own the daemon can
//! kill), restricts itself with Landlock, then execs the program in place, so every process the
//! program starts inherits the restriction. It must never exec the program when the session or
//! the restriction failed.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

use super::forward::Forwarder;
use super::{Policy, caps, netns, rules};

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
    /// Run the program in new user, network and PID namespaces (refuse to run it otherwise).
    #[arg(long)]
    isolate: bool,
    /// The daemon's egress proxy socket, offered to the program as `HTTPS_PROXY` through a
    /// forwarder on 127.0.0.1 (the token comes in `HERMESD_PROXY_TOKEN`).
    #[arg(long, value_name = "SOCKET")]
    proxy: Option<PathBuf>,
    /// Only try the namespaces and say whether they work.
    #[arg(long)]
    probe_namespaces: bool,
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
            isolate: self.isolate,
            proxy: self.proxy.clone(),
        }
    }
}

/// Where the daemon hands the helper its egress proxy token (never passed on to the program).
pub(super) const PROXY_TOKEN_VAR: &str = "HERMESD_PROXY_TOKEN";

/// Restrict this process and run the program: exec'd in place, or, with namespaces or a proxy
/// forwarder to keep alive, spawned and waited for (its exit status passed on); returns only
/// once the program is done or failed to start.
pub fn exec_main(args: SandboxExecArgs) -> ExitCode {
    let not_run = |what: &str, e: &dyn std::fmt::Display| {
        eprintln!("hermesd sandbox-exec: {what}{e}; not run");
        ExitCode::from(EXIT_SANDBOX)
    };
    // Before anything else: a new session drops the controlling terminal, so neither `/dev/tty`
    // nor TIOCSTI reaches the daemon's terminal. It fails only for a process group leader, which
    // the daemon never spawns this helper as.
    if let Err(e) = rustix::process::setsid() {
        return not_run("start a new session: ", &e);
    }
    if args.probe_namespaces {
        return match netns::enter().and_then(|()| netns::enter_pid()) {
            Ok(()) => {
                println!("{}", netns::PROBE_OK);
                ExitCode::SUCCESS
            }
            Err(e) => not_run("", &e),
        };
    }
    let token = std::env::var(PROXY_TOKEN_VAR).unwrap_or_default();
    let policy = args.policy();
    if let Err(e) = policy.check() {
        return not_run("", &e);
    }
    if policy.isolate
        && let Err(e) = netns::enter()
    {
        return not_run("", &e);
    }
    // Non-dumpable (after the id maps, which a non-dumpable process cannot write): the program
    // (same uid, same Landlock domain) cannot read the token from this process's environment or
    // memory.
    if let Err(e) = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable) {
        return not_run("become non-dumpable: ", &e);
    }
    // Bound before Landlock (which may deny binding) and inside the new network namespace.
    let forwarder = match (&policy.proxy, policy.network) {
        (Some(socket), true) => match Forwarder::bind(socket.clone(), token) {
            Ok(forwarder) => Some(forwarder),
            Err(e) => return not_run("bind the proxy forwarder: ", &e),
        },
        _ => None,
    };
    let port = match forwarder.as_ref().map(Forwarder::port).transpose() {
        Ok(port) => port,
        Err(e) => return not_run("the proxy forwarder: ", &e),
    };
    // The forwarder's threads start before the PID namespace, which forbids new threads.
    if let Some(forwarder) = forwarder {
        forwarder.serve();
    }
    if policy.isolate
        && let Err(e) = netns::enter_pid()
    {
        return not_run("", &e);
    }
    if let Err(e) = caps::drop_capabilities() {
        return not_run("drop capabilities: ", &e);
    }
    let tcp = match (policy.network, policy.isolate, port) {
        (false, _, _) => rules::Tcp::Denied,
        (true, true, _) => rules::Tcp::Free,
        (true, false, Some(port)) => rules::Tcp::OnlyTo(port),
        (true, false, None) => rules::Tcp::Denied,
    };
    if let Err(e) = rules::restrict(&policy, tcp) {
        return not_run("", &e);
    }
    let Some((program, rest)) = args.command.split_first() else {
        eprintln!("hermesd sandbox-exec: no program given");
        return ExitCode::from(EXIT_SANDBOX);
    };
    let mut command = std::process::Command::new(program);
    command.args(rest).env_remove(PROXY_TOKEN_VAR);
    if let Some(tmp) = &policy.tmp {
        command.env("TMPDIR", tmp);
    }
    if let Some(port) = port {
        let url = format!("http://127.0.0.1:{port}");
        for name in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
            command.env(name, &url);
        }
        command.env_remove("NO_PROXY").env_remove("no_proxy");
    }
    let cannot_run = |e: std::io::Error| {
        eprintln!("hermesd sandbox-exec: cannot run {}: {e}", program.to_string_lossy());
        ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound { EXIT_NOT_FOUND } else { EXIT_SANDBOX })
    };
    if !policy.isolate && port.is_none() {
        return cannot_run(command.exec());
    }
    // Only children enter the new PID namespace, and the forwarder lives in this process.
    match command.status() {
        Ok(status) => ExitCode::from(exit_code(status)),
        Err(e) => cannot_run(e),
    }
}

/// The program's exit status as this helper's exit code, a signal as 128 + its number (as a
/// shell reports it).
fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(signal)) => 128u8.saturating_add(signal as u8),
        (None, None) => EXIT_SANDBOX,
    }
}
