//! The tools' sandbox. Commands run through a re-executed `hermesd sandbox-exec` helper (the
//! running binary itself, through `/proc/self/exe`, so replacing the file under a running daemon
//! changes nothing: `own_executable`) that starts a new session, restricts itself with Landlock and then execs the real program, so the
//! restriction covers the whole command tree; file tools open paths beneath a workdir handle
//! (`beneath.rs`). It must never run a child unrestricted when a restriction was asked for: where
//! Landlock is missing the caller gets `SandboxError::Unavailable`, never a silent downgrade.
//!
//! What the restriction rests on (Linux Landlock, negotiated best effort up to ABI 7):
//! - Filesystem: reads only under `Policy::read` minus `Policy::deny_read` (the data dir, `/dev`
//!   but for a few harmless devices and no terminal, `$CREDENTIALS_DIRECTORY`, the operator's
//!   `$HOME` but for the launchers' caches, the files secrets were read from), granted as the
//!   siblings along the path down to each denied tree, never an ancestor of it; writes only
//!   under the workdir and its private temp dir (`private_dir.rs`: outside every write grant, so
//!   no command can swap it for a symlink). Root gets no exception: Landlock applies to root.
//! - Symlinks and renames: `Sandbox::command` resolves every path once (`Policy::resolve`) and
//!   the helper opens each one component at a time with `O_NOFOLLOW` (`rules.rs`), so a symlink
//!   swapped in afterwards fails the open instead of moving a grant; no writable tree but the
//!   turn's workdir and its own temp dir may lie inside a denied one (the folder of every turn's
//!   temp dir is denied, so no turn reads another's).
//! - The terminal: the helper's `setsid` leaves the child without a controlling terminal, and
//!   `/dev/tty`, `/dev/ptmx` and `/dev/pts` are not granted, so no TIOCSTI into the operator's
//!   shell.
//! - The daemon's own process, three layers, measured as root on Linux 6.18 (Landlock ABI 7):
//!   Landlock's ptrace restriction denies a sandboxed process `/proc/<daemon>/mem`, `cwd`, `fd/*`
//!   and ptrace itself, but on that kernel it let `/proc/<daemon>/environ` and `maps` open. So
//!   the helper also drops `CAP_SYS_PTRACE` and the other capabilities in `caps.rs` from every set
//!   (bounding included, so a root `exec` cannot refill them): the kernel's capability check then
//!   refuses a root child any process whose capabilities exceed its own (the daemon), and
//!   `harden_daemon` makes the daemon non-dumpable, which refuses a same-user child lacking
//!   `CAP_SYS_PTRACE` when the daemon is not root. ABI 6 adds the signal and abstract-unix-socket
//!   scopes (no killing the daemon). `/proc` stays readable for ordinary tools.
//! - Network: where user namespaces work, commands run in network and PID namespaces of their
//!   own (`netns.rs`), reaching no host address; with the network on, only the daemon's egress
//!   proxy (`proxy.rs`, web_fetch's address guard) through the helper's forwarder
//!   (`forward.rs`). This was chosen over Landlock port rules alone because Landlock ABI 4
//!   governs TCP ports, not addresses, and not UDP. Without namespaces, Landlock ABI 4 limits TCP
//!   connects to the forwarder's port (or denies TCP with the network off); UDP, ICMP and raw
//!   sockets are not covered then.
//!
//! What it cannot do: hide what stays readable (system files such as `/etc/shadow` to a root
//! child, other users' homes, `/proc` entries of processes the capability check lets through),
//! confine UDP or unix sockets named by path, cap CPU, memory or disk use (a fork bomb or a full
//! disk inside the workdir), or see a denied tree reached through a bind mount or a hard link
//! elsewhere. A root child keeps the capabilities not listed in `caps.rs` (e.g. `DAC_OVERRIDE`,
//! which Landlock still bounds to the granted trees).
//!
//! Running another child (e.g. an MCP stdio server) through the sandbox:
//! ```text
//! let policy = Policy::for_workdir(&workdir, &data_dir).with_network(true);
//! let mut cmd = sandbox.command(&policy, "uvx")?;    // a std Command running the helper
//! cmd.arg("mcp-server-time").env_clear().envs(allowed_env);
//! let child = tokio::process::Command::from(cmd).kill_on_drop(true).spawn()?;
//! ```
//! Arguments, environment, working directory and stdio set on the returned `Command` reach the
//! program unchanged (the helper execs it in place). Do not put it in a process group: the
//! helper's `setsid` makes it lead one, and a group leader cannot start a session.
//!
//! Entry points: `Sandbox::command` wraps any child (the terminal tool) and denies the files the
//! daemon read secrets from (`with_secrets`, `config::SecretTrail`); `confine_current_process`
//! applies the same rules to the calling process (the MCP shim, which must keep its children);
//! `harden_daemon` makes the daemon non-dumpable. `Policy::resolve` resolves a policy's paths once
//! (`policy.rs`); the helper (`helper.rs`) enters the namespaces, binds the forwarder, drops the
//! capabilities and applies Landlock (`rules.rs`, whose probe `hermesd check`, the start-up log and
//! `/readyz` report). Where Landlock is missing, commands are refused and those three say why;
//! where commands could reach the host's loopback (`reaches_loopback`: no namespaces and no
//! Landlock ABI 4) the daemon does not start with a keyless API. `[tools.terminal]` is
//! `config/terminal.rs`.

pub mod beneath;
mod caps;
mod forward;
mod helper;
mod netns;
mod policy;
pub mod proxy;
mod rules;

mod private_dir;

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use crate::config::SandboxMode;
use crate::config::{SecretTrail, TerminalConfig};
pub use beneath::{BeneathError, Workdir};
pub use helper::{SandboxExecArgs, exec_main};
pub use policy::{LAUNCHER_CACHES, PRIVATE_TMP, Policy, private_tmp, private_tmp_root};
pub use proxy::EgressProxy;

/// The hidden subcommand the helper runs as.
pub const HELPER_SUBCOMMAND: &str = "sandbox-exec";

/// This program, to run again as the sandbox helper or the MCP shim: `/proc/self/exe`, which the
/// child resolves to the very binary the daemon runs, even after that file was replaced or
/// removed (an upgrade under a running daemon); its path only where `/proc` is not mounted.
pub fn own_executable() -> std::io::Result<PathBuf> {
    let link = Path::new("/proc/self/exe");
    if link.exists() { Ok(link.to_path_buf()) } else { std::env::current_exe() }
}

/// Why a child cannot be sandboxed as asked.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel enforces no Landlock restriction.
    #[error(
        "the tools' sandbox is unavailable: {0}; commands are refused until it works or \
         tools.terminal.sandbox = \"none\" is set explicitly"
    )]
    Unavailable(String),
    /// The policy would defeat itself.
    #[error("sandbox policy: {0}")]
    Policy(String),
    /// The helper binary cannot be found.
    #[error("sandbox helper: {0}")]
    Helper(String),
    /// Landlock refused a ruleset operation.
    #[error("landlock: {0}")]
    Landlock(#[from] landlock::RulesetError),
}

/// What Landlock offers on this kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Landlock works.
    Available {
        /// The kernel's Landlock ABI version.
        abi: i32,
        /// What the restrictions cover, in words.
        enforced: String,
        /// Some requested restriction is beyond this kernel's ABI.
        partial: bool,
    },
    /// Landlock does not work here, and why.
    Unavailable(String),
}

/// The sandbox as configured: the mode, the helper to re-execute, and what the kernel offers.
#[derive(Debug, Clone)]
pub struct Sandbox {
    mode: SandboxMode,
    helper: Option<PathBuf>,
    support: Support,
    secrets: SecretTrail,
    /// `Ok` when commands get user, network and PID namespaces of their own; why not otherwise.
    namespaces: Result<(), String>,
    proxy: Option<EgressProxy>,
}

impl Sandbox {
    /// A sandbox in `mode`, running `helper` (default: this executable), with the kernel probed.
    pub fn new(mode: SandboxMode, helper: Option<PathBuf>) -> Self {
        let (support, namespaces) = match mode {
            SandboxMode::Landlock => (rules::probe(), probe_namespaces(helper.as_deref())),
            SandboxMode::None => (
                Support::Unavailable("disabled by tools.terminal.sandbox = \"none\"".into()),
                Err("the sandbox is off".into()),
            ),
        };
        let (support, namespaces) = lesser_kernel(support, namespaces);
        Self { mode, helper, support, secrets: SecretTrail::default(), namespaces, proxy: None }
    }

    /// This sandbox giving commands with network the egress proxy `proxy` as their only way out.
    pub fn with_proxy(mut self, proxy: EgressProxy) -> Self {
        self.proxy = Some(proxy);
        self
    }

    /// `Ok` when commands run in namespaces of their own (no host address reachable), else why
    /// not.
    pub fn namespaces(&self) -> Result<(), &str> {
        self.namespaces.as_ref().map(|_| ()).map_err(String::as_str)
    }

    /// Why a command could reach the host's loopback services (a keyless API on 127.0.0.1),
    /// when it could: Landlock works, but commands get no network namespace and this Landlock
    /// cannot restrict TCP (ABI 4). The daemon then refuses to start with a keyless API. With
    /// the sandbox off the operator chose this; without Landlock no command runs at all.
    pub fn reaches_loopback(&self) -> Option<String> {
        match (&self.mode, &self.support, &self.namespaces) {
            (SandboxMode::Landlock, Support::Available { abi, .. }, Err(why)) if *abi < 4 => Some(format!(
                "commands get no network namespace here ({why}) and Landlock ABI {abi} cannot restrict TCP (it \
                 needs ABI 4, Linux 6.7)"
            )),
            _ => None,
        }
    }

    /// What this kernel lacks of what the sandbox uses, for `hermesd check`: namespaces for
    /// commands, Landlock ABI 4 (TCP), 5 (device ioctls) and 6 (signals, abstract sockets).
    pub fn kernel_warnings(&self) -> Vec<String> {
        let abi = match (&self.mode, &self.support) {
            (SandboxMode::Landlock, Support::Available { abi, .. }) => *abi,
            _ => return Vec::new(),
        };
        let mut warnings = Vec::new();
        if let Err(why) = &self.namespaces {
            warnings.push(format!(
                "commands get no user, network and pid namespaces ({why}): host loopback services stay \
                 reachable over UDP, and over TCP unless Landlock ABI 4 holds connects to the egress proxy"
            ));
        }
        for (level, what) in
            [(4, "TCP bind and connect"), (5, "device ioctls"), (6, "signals and abstract unix sockets")]
        {
            if abi < level {
                warnings
                    .push(format!("Landlock ABI {abi} here: commands' {what} are not restricted (needs ABI {level})"));
            }
        }
        warnings
    }

    /// Variables the helper itself needs (the proxy token), to add to a command's environment
    /// after clearing it; the helper takes them out before the program starts.
    pub fn helper_env(&self) -> Vec<(OsString, OsString)> {
        match (&self.mode, &self.proxy) {
            (SandboxMode::Landlock, Some(proxy)) => vec![(helper::PROXY_TOKEN_VAR.into(), proxy.token().into())],
            _ => Vec::new(),
        }
    }

    /// This sandbox denying every file the daemon read a secret from (`NAME_FILE`, the
    /// credentials directory, `.env`), as recorded in `secrets` now and later.
    pub fn with_secrets(mut self, secrets: SecretTrail) -> Self {
        self.secrets = secrets;
        self
    }

    /// Where the daemon's secrets came from: their variables must not reach a child either.
    pub fn secrets(&self) -> &SecretTrail {
        &self.secrets
    }

    /// The sandbox `[tools.terminal]` asks for, reported in the log: at INFO when it works, as
    /// a WARN when switched off, as an ERROR when Landlock is missing (commands are refused).
    pub fn start(config: &TerminalConfig) -> Self {
        let sandbox = Self::new(config.sandbox, config.helper.clone());
        let line = sandbox.describe();
        match (sandbox.mode, sandbox.problem()) {
            (_, Some(_)) => tracing::error!("{line}"),
            (SandboxMode::None, None) => tracing::warn!("{line}"),
            (SandboxMode::Landlock, None) => tracing::info!("{line}"),
        }
        sandbox
    }

    /// No sandbox at all (tests of unrelated behaviour, and `sandbox = "none"`).
    pub fn disabled() -> Self {
        Self::new(SandboxMode::None, None)
    }

    /// The configured mode.
    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    /// What the kernel offers (probed only in `landlock` mode).
    pub fn support(&self) -> &Support {
        &self.support
    }

    /// Why sandboxed tools cannot run, when they cannot: Landlock asked for but unavailable.
    pub fn problem(&self) -> Option<String> {
        match (&self.mode, &self.support) {
            (SandboxMode::Landlock, Support::Unavailable(why)) => {
                Some(SandboxError::Unavailable(why.clone()).to_string())
            }
            _ => None,
        }
    }

    /// One line for `hermesd check`, the start-up log and `/readyz`.
    pub fn describe(&self) -> String {
        match (&self.mode, &self.support) {
            (SandboxMode::None, _) => {
                "tools sandbox: OFF (tools.terminal.sandbox = \"none\"): commands run with the daemon's rights".into()
            }
            (SandboxMode::Landlock, Support::Available { abi, enforced, partial }) => {
                let partial = if *partial { " (partially: this kernel predates some restrictions)" } else { "" };
                let ns = match &self.namespaces {
                    Ok(()) => "; commands run in user, network and pid namespaces of their own (no host address \
                               reachable; egress only through the daemon's proxy)"
                        .to_string(),
                    Err(why) => format!("; WARNING: no namespaces for commands ({why})"),
                };
                format!("tools sandbox: landlock ABI {abi}{partial}; enforces {enforced}{ns}")
            }
            (SandboxMode::Landlock, Support::Unavailable(why)) => {
                format!("tools sandbox: UNAVAILABLE: {why}; terminal commands are refused")
            }
        }
    }

    /// A `Command` that runs `program` under `policy`: the helper with the policy's arguments
    /// (every path resolved once, here, plus the secret files denied), then `-- program`. Add
    /// arguments, environment, cwd and stdio to it as to any command. The child leads a process
    /// group of its own (the helper's new session; in `none` mode, `program` itself in a new
    /// group), so the caller can kill everything it starts.
    pub fn command(&self, policy: &Policy, program: impl AsRef<OsStr>) -> Result<Command, SandboxError> {
        if self.mode == SandboxMode::None {
            let mut command = Command::new(program);
            command.process_group(0);
            return Ok(command);
        }
        if let Some(problem) = self.problem() {
            return Err(SandboxError::Unavailable(problem));
        }
        let mut policy = policy.clone();
        policy.deny_read.extend(self.secrets.files());
        policy.isolate = self.namespaces.is_ok();
        policy.proxy = self.proxy.as_ref().filter(|_| policy.network).map(|p| p.socket().to_path_buf());
        if let Some(tmp) = &policy.tmp {
            private_dir::create(tmp)?;
        }
        let policy = policy.resolve()?;
        let helper = match &self.helper {
            Some(helper) => helper.clone(),
            None => own_executable().map_err(|e| SandboxError::Helper(format!("find this executable: {e}")))?,
        };
        let mut command = Command::new(helper);
        command.arg(HELPER_SUBCOMMAND).args(policy.to_args()).arg("--").arg(program);
        Ok(command)
    }
}

/// Test builds: the probes' findings as an older kernel would give them, so the daemon's and
/// `hermesd check`'s answers to a kernel without namespaces (`sandbox.namespaces=error`) or with
/// an older Landlock (`sandbox.landlock_abi=value(N)`) can be tested on this one. What the helper
/// enforces is not changed.
#[cfg(feature = "failpoints")]
fn lesser_kernel(mut support: Support, namespaces: Result<(), String>) -> (Support, Result<(), String>) {
    if let (Support::Available { abi, .. }, Some(cap)) =
        (&mut support, crate::failpoint::value("sandbox.landlock_abi").and_then(|v| v.parse::<i32>().ok()))
    {
        *abi = (*abi).min(cap);
    }
    let namespaces = match namespaces {
        Ok(()) if crate::failpoint::fire("sandbox.namespaces") => {
            Err("user namespaces are off (failpoint sandbox.namespaces)".to_string())
        }
        other => other,
    };
    (support, namespaces)
}

#[cfg(not(feature = "failpoints"))]
fn lesser_kernel(support: Support, namespaces: Result<(), String>) -> (Support, Result<(), String>) {
    (support, namespaces)
}

/// Whether the helper can give commands namespaces of their own, learnt by running it once with
/// `--probe-namespaces` (a multi-threaded daemon cannot create a user namespace itself).
fn probe_namespaces(helper: Option<&std::path::Path>) -> Result<(), String> {
    let helper = match helper {
        Some(helper) => helper.to_path_buf(),
        None => own_executable().map_err(|e| format!("find this executable: {e}"))?,
    };
    let output = Command::new(&helper)
        .args([HELPER_SUBCOMMAND, "--probe-namespaces", "--", "true"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("run {}: {e}", helper.display()))?;
    if String::from_utf8_lossy(&output.stdout).contains(netns::PROBE_OK) {
        return Ok(());
    }
    let why = String::from_utf8_lossy(&output.stderr);
    let why = why.lines().find(|l| l.contains("hermesd sandbox-exec")).unwrap_or("the probe failed");
    Err(why.trim_start_matches("hermesd sandbox-exec: ").trim_end_matches("; not run").to_string())
}

/// Restrict this very process, and everything it starts from now on, with `policy`: drop ptrace
/// and admin capabilities, then apply the Landlock rules. For a launcher that must stay in
/// control of its children instead of exec'ing through the helper (the MCP shim kills its whole
/// process group when the daemon goes). Irreversible; the caller must not run the child when it
/// fails.
pub fn confine_current_process(policy: &Policy) -> Result<(), SandboxError> {
    let policy = &policy.resolve()?;
    caps::drop_capabilities().map_err(|e| SandboxError::Helper(format!("drop capabilities: {e}")))?;
    rules::restrict(policy, if policy.network { rules::Tcp::Free } else { rules::Tcp::Denied })?;
    Ok(())
}

/// Make the daemon non-dumpable: its `/proc/<pid>/environ` and `mem` become root-owned and
/// ptrace-checked, so same-user processes cannot read its secrets (Landlock covers root, see the
/// module doc). Also disables core dumps, which would hold the same secrets.
pub fn harden_daemon() {
    if let Err(e) = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable) {
        tracing::warn!(error = %e, "cannot make the daemon non-dumpable");
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn without_landlock_commands_are_refused_not_run_unconfined() {
        let sandbox = Sandbox {
            mode: SandboxMode::Landlock,
            helper: None,
            support: Support::Unavailable("this kernel has no Landlock".into()),
            secrets: SecretTrail::default(),
            namespaces: Err("not probed".into()),
            proxy: None,
        };
        let problem = sandbox.problem().expect("a problem is reported");
        assert!(problem.contains("no Landlock") && problem.contains("sandbox = \"none\""), "{problem}");
        assert!(sandbox.describe().contains("UNAVAILABLE"), "{}", sandbox.describe());
        let policy = Policy::for_workdir(Path::new("/srv/h/workspace"), Path::new("/srv/h"));
        assert!(matches!(sandbox.command(&policy, "sh"), Err(SandboxError::Unavailable(_))));
    }

    #[test]
    fn none_runs_the_program_itself_and_says_so() {
        let sandbox = Sandbox::disabled();
        assert_eq!(sandbox.problem(), None);
        assert!(sandbox.describe().contains("OFF"));
        let policy = Policy::for_workdir(Path::new("/srv/h/workspace"), Path::new("/srv/h"));
        let command = sandbox.command(&policy, "sh").unwrap();
        assert_eq!(command.get_program(), "sh");
        assert_eq!(command.get_args().count(), 0);
    }

    #[test]
    fn landlock_wraps_the_program_in_the_helper() {
        let dir = tempfile::tempdir().unwrap();
        let (home, work) = (dir.path().join("home"), dir.path().join("home/workspace"));
        std::fs::create_dir_all(&work).unwrap();
        let sandbox = Sandbox {
            mode: SandboxMode::Landlock,
            helper: Some(PathBuf::from("/usr/bin/hermesd")),
            support: Support::Available { abi: 7, enforced: String::new(), partial: false },
            secrets: SecretTrail::default(),
            namespaces: Err("not probed".into()),
            proxy: None,
        };
        let command = sandbox.command(&Policy::for_workdir(&work, &home), "sh").unwrap();
        assert_eq!(command.get_program(), "/usr/bin/hermesd");
        let args: Vec<_> = command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args.first().map(String::as_str), Some(HELPER_SUBCOMMAND));
        assert_eq!(&args[args.len() - 2..], ["--", "sh"]);
        assert!(args.windows(2).any(|w| w[0] == "--workdir" && w[1].ends_with("home/workspace")), "{args:?}");
        let tmp = private_tmp(&work);
        assert!(tmp.is_dir() && !tmp.starts_with(&home), "the private temp dir is made, outside the workdir");
    }
}
