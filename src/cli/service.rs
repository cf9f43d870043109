//! `hermesd service install [--user] | status [--user]`: hermesd as a systemd service without
//! hand work.
//!
//! The system install lays out what `systemd/hermesd.service` describes at its top: the binary at
//! `/usr/local/bin/hermesd`, the unit (the shipped file itself, with all its hardening), the
//! sysusers and tmpfiles snippets, `/etc/hermesd/config.toml` (this config, `0640 root:hermesd`)
//! and `/etc/hermesd/env` (this home's `.env`, `0600 root:root`); then it creates the user, and
//! enables and starts the unit. The state of the service lives in `/var/lib/hermesd`.
//!
//! The user install writes `~/.config/systemd/user/hermesd.service` for this binary, this home and
//! this config, with the hardening a user manager can apply without a user namespace of its own
//! (the tools' sandbox makes its own), and enables it; `loginctl enable-linger` keeps it running
//! without a login session.
//!
//! `--root DIR` writes the files under DIR and runs nothing (packaging, tests); `--no-enable`
//! writes them and creates the user but leaves systemctl alone. `status` reads `systemctl show`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::Subcommand;

use super::Loaded;

/// The shipped unit: the system install writes it as it is.
const SYSTEM_UNIT: &str = include_str!("../../systemd/hermesd.service");
const SYSUSERS: &str = include_str!("../../systemd/hermesd.sysusers");
const TMPFILES: &str = include_str!("../../systemd/hermesd.tmpfiles");
/// Where the system unit runs the binary from.
const SYSTEM_BIN: &str = "usr/local/bin/hermesd";
const UNIT_NAME: &str = "hermesd.service";

/// `hermesd service …`.
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write, enable and start the systemd unit (the system's, as root; or `--user`).
    Install {
        /// A unit of your own user manager, for this binary, home and config.
        #[arg(long)]
        user: bool,
        /// Write the files under this directory instead of `/` and run nothing.
        #[arg(long, value_name = "DIR", conflicts_with = "user")]
        root: Option<PathBuf>,
        /// Write the files (and create the system user) but do not run systemctl.
        #[arg(long)]
        no_enable: bool,
    },
    /// Show the unit's state as systemd sees it, and whether it is this binary's.
    Status {
        /// The unit of your own user manager.
        #[arg(long)]
        user: bool,
    },
}

pub(super) fn run(loaded: &Loaded, command: ServiceCommand) -> ExitCode {
    let result = match command {
        ServiceCommand::Install { user: true, no_enable, .. } => install_user(loaded, no_enable),
        ServiceCommand::Install { user: false, root, no_enable } => install_system(loaded, root, no_enable),
        ServiceCommand::Status { user } => return status(loaded, user),
    };
    super::report_outcome(result)
}

/// The running binary's own file (the one `install` copies; `/proc/self/exe` survives a rename
/// over its path).
fn own_binary() -> Result<PathBuf, String> {
    std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))
}

fn install_system(loaded: &Loaded, root: Option<PathBuf>, no_enable: bool) -> Result<String, String> {
    let live = root.is_none();
    if live && !rustix::process::geteuid().is_root() {
        return Err("the system service is installed as root (sudo hermesd service install), or use --user".into());
    }
    let root = root.unwrap_or_else(|| PathBuf::from("/"));
    let mut done = String::new();
    let bin = root.join(SYSTEM_BIN);
    let exe = own_binary()?;
    if !same_file(&exe, &bin) {
        write_atomically(&bin, &std::fs::read(&exe).map_err(|e| format!("read {}: {e}", exe.display()))?, 0o755)?;
        let _ = writeln!(done, "installed {} → {}", exe.display(), bin.display());
    }
    for (path, text) in [
        ("etc/systemd/system/hermesd.service", SYSTEM_UNIT),
        ("etc/sysusers.d/hermesd.conf", SYSUSERS),
        ("etc/tmpfiles.d/hermesd.conf", TMPFILES),
    ] {
        let path = root.join(path);
        write_atomically(&path, text.as_bytes(), 0o644)?;
        let _ = writeln!(done, "wrote {}", path.display());
    }
    let config = root.join("etc/hermesd/config.toml");
    let env = root.join("etc/hermesd/env");
    // An existing service config or secrets file is the operator's: never overwritten.
    if !config.exists() {
        match std::fs::read(&loaded.paths.config) {
            Ok(text) => {
                write_atomically(&config, &text, 0o640)?;
                let _ = writeln!(done, "copied {} → {}", loaded.paths.config.display(), config.display());
            }
            Err(_) => {
                let _ =
                    writeln!(done, "no config at {}: the service runs on the defaults", loaded.paths.config.display());
            }
        }
    } else {
        let _ = writeln!(done, "kept {}", config.display());
    }
    if !env.exists() {
        let dotenv = loaded.paths.home.join(".env");
        let secrets = match std::fs::read_to_string(&dotenv) {
            Ok(text) => environment_file(&text).map_err(|e| format!("{}: {e}", dotenv.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(format!("read {}: {e}", dotenv.display())),
        };
        write_atomically(&env, secrets.as_bytes(), 0o600)?;
        let from = if secrets.is_empty() { String::new() } else { format!(" from {}", dotenv.display()) };
        let _ = writeln!(done, "wrote {} (0600){from}", env.display());
    } else {
        let _ = writeln!(done, "kept {}", env.display());
    }
    if !live {
        let _ = write!(
            done,
            "files written under {}; on the target run: systemd-sysusers && systemd-tmpfiles --create \
             /etc/tmpfiles.d/hermesd.conf && chgrp hermesd /etc/hermesd/config.toml && systemctl daemon-reload \
             && systemctl enable --now hermesd",
            root.display()
        );
        return Ok(done);
    }
    run_tool("systemd-sysusers", &["/etc/sysusers.d/hermesd.conf"])?;
    run_tool("systemd-tmpfiles", &["--create", "/etc/tmpfiles.d/hermesd.conf"])?;
    if config.exists() {
        let gid = group_id(&root.join("etc/group"), "hermesd")?;
        std::os::unix::fs::chown(&config, Some(0), Some(gid))
            .map_err(|e| format!("chown {}: {e}", config.display()))?;
    }
    let _ = writeln!(done, "created the hermesd user and /etc/hermesd");
    if no_enable {
        let _ = write!(done, "not enabled (--no-enable): systemctl daemon-reload && systemctl enable --now hermesd");
        return Ok(done);
    }
    enable_and_restart(&[])?;
    let _ = write!(
        done,
        "enabled and (re)started hermesd.service (state in /var/lib/hermesd; hermesd service status, journalctl -u hermesd)"
    );
    Ok(done)
}

fn install_user(loaded: &Loaded, no_enable: bool) -> Result<String, String> {
    let exe = own_binary()?;
    let unit = user_unit(&exe, &absolute(&loaded.paths.home)?, &absolute(&loaded.paths.config)?);
    let path = user_unit_path()?;
    write_atomically(&path, unit.as_bytes(), 0o644)?;
    let mut done = format!("wrote {}\n", path.display());
    if no_enable {
        let _ = write!(
            done,
            "not enabled (--no-enable): systemctl --user daemon-reload && systemctl --user enable --now hermesd"
        );
        return Ok(done);
    }
    enable_and_restart(&["--user"])?;
    let _ = write!(
        done,
        "enabled and (re)started hermesd.service for this user (hermesd service status --user, journalctl --user -u \
         hermesd); to keep it running while you are logged out: loginctl enable-linger"
    );
    Ok(done)
}

/// `systemctl [scope] daemon-reload`, `enable`, then `restart`: a unit already running (an
/// upgrade) moves onto the new binary and unit, a stopped one starts.
fn enable_and_restart(scope: &[&str]) -> Result<(), String> {
    for action in [&["daemon-reload"][..], &["enable", UNIT_NAME], &["restart", UNIT_NAME]] {
        let args: Vec<&str> = scope.iter().chain(action).copied().collect();
        run_tool("systemctl", &args)?;
    }
    Ok(())
}

/// The home's `.env` as a systemd `EnvironmentFile`: hermesd's reading of it (`export`, quotes,
/// comments), written back as `KEY="value"` lines with systemd's escapes, so the service sees the
/// same values as `hermesd run` did.
fn environment_file(dotenv: &str) -> Result<String, String> {
    let mut vars: Vec<(String, String)> = crate::config::parse_dotenv(dotenv)?.into_iter().collect();
    vars.sort();
    Ok(vars
        .iter()
        .map(|(key, value)| format!("{key}=\"{}\"\n", value.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect())
}

/// `path` made absolute against the working directory (a unit runs from `/`).
fn absolute(path: &Path) -> Result<PathBuf, String> {
    std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// `$XDG_CONFIG_HOME/systemd/user/hermesd.service`, else under `~/.config`.
fn user_unit_path() -> Result<PathBuf, String> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))
        .ok_or("neither XDG_CONFIG_HOME nor HOME is set")?;
    Ok(config.join("systemd/user").join(UNIT_NAME))
}

/// A systemd argument: quoted when it has a space or a quote (systemd.syntax(7)); `%` doubled.
fn quoted(path: &Path) -> String {
    let text = path.display().to_string().replace('%', "%%");
    if text.contains([' ', '"', '\'', '\\']) {
        format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        text
    }
}

/// The user unit for `exe` with `home` and `config`: the system unit's start, stop, restart and
/// watchdog settings, and of its hardening what a user manager applies without a namespace of
/// its own (the file system options need one, and would keep the tools' sandbox from making its
/// own user namespace).
fn user_unit(exe: &Path, home: &Path, config: &Path) -> String {
    let (exe, home, config) = (quoted(exe), quoted(home), quoted(config));
    format!(
        "# hermesd for one user, written by `hermesd service install --user`; run it again after\n\
         # moving the binary, the home or the config. Local changes belong in a drop-in\n\
         # (systemctl --user edit hermesd).\n\
         [Unit]\n\
         Description=hermesd messaging gateway\n\
         Wants=network-online.target\n\
         After=network-online.target\n\
         \n\
         [Service]\n\
         Type=notify\n\
         NotifyAccess=main\n\
         WatchdogSec=60\n\
         ExecStartPre={exe} --home {home} --config {config} check\n\
         ExecStart={exe} --home {home} --config {config} run\n\
         ExecReload=/bin/kill -HUP $MAINPID\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         RestartPreventExitStatus=78\n\
         TimeoutStopSec=45\n\
         UMask=0077\n\
         NoNewPrivileges=yes\n\
         RestrictRealtime=yes\n\
         RestrictSUIDSGID=yes\n\
         LockPersonality=yes\n\
         MemoryDenyWriteExecute=yes\n\
         RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK\n\
         SystemCallArchitectures=native\n\
         SystemCallFilter=@system-service\n\
         SystemCallFilter=landlock_create_ruleset landlock_add_rule landlock_restrict_self\n\
         SystemCallFilter=~@privileged @resources\n\
         SystemCallErrorNumber=EPERM\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n"
    )
}

/// Whether `a` and `b` are the same file (a missing one is not).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Writes `bytes` to `path` (creating its folder) through a temporary file renamed over it, so a
/// running service never reads half a file, with `mode`.
fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let folder = path.parent().ok_or_else(|| format!("{}: no parent folder", path.display()))?;
    // Folders it creates are 0755 whatever the umask (hermesd's is 077): the service user must
    // reach its binary and unit, and a `--root` tree carries its modes onto the target.
    let missing: Vec<&Path> = folder.ancestors().take_while(|p| !p.exists()).collect();
    for dir in missing.into_iter().rev() {
        std::fs::create_dir(dir)
            .and_then(|()| std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)))
            .map_err(|e| format!("create {}: {e}", dir.display()))?;
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let temp = folder.join(format!(".{name}.new-{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&temp)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| file.sync_all()))
        .and_then(|()| std::fs::set_permissions(&temp, std::os::unix::fs::PermissionsExt::from_mode(mode)))
        .and_then(|()| std::fs::rename(&temp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        format!("write {}: {e}", path.display())
    })
}

/// Runs `program args`, its output shown only when it fails.
fn run_tool(program: &str, args: &[&str]) -> Result<(), String> {
    let output = Command::new(program).args(args).output().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{program} not found: is this a systemd system?"),
        _ => format!("{program}: {e}"),
    })?;
    if output.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    Err(format!("{program} {} failed ({}): {}", args.join(" "), output.status, said.trim()))
}

/// The id of `group` in the group file at `path`.
fn group_id(path: &Path, group: &str) -> Result<u32, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(':');
            (fields.next() == Some(group)).then(|| fields.nth(1).and_then(|gid| gid.parse().ok()))?
        })
        .next()
        .ok_or_else(|| format!("no group {group} in {} (did systemd-sysusers run?)", path.display()))
}

/// The properties `status` reads.
const PROPERTIES: &str =
    "LoadState,UnitFileState,ActiveState,SubState,MainPID,ActiveEnterTimestamp,NRestarts,FragmentPath,ExecMainStatus";

fn status(loaded: &Loaded, user: bool) -> ExitCode {
    let mut args = vec!["show", UNIT_NAME, "--property", PROPERTIES];
    if user {
        args.insert(0, "--user");
    }
    let output = match Command::new("systemctl").args(&args).output() {
        Ok(output) if output.status.success() => output,
        Ok(output) => {
            eprintln!("hermesd: systemctl show failed: {}", String::from_utf8_lossy(&output.stderr).trim());
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("hermesd: systemctl: {e} (is this a systemd system?)");
            return ExitCode::FAILURE;
        }
    };
    let shown = String::from_utf8_lossy(&output.stdout);
    let property =
        |name: &str| shown.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix('=')).unwrap_or("").to_owned();
    let scope = if user { "user" } else { "system" };
    if property("LoadState") == "not-found" {
        let how = if user { "hermesd service install --user" } else { "sudo hermesd service install" };
        println!("hermesd.service ({scope}): not installed; install it with `{how}`");
        return ExitCode::from(3);
    }
    let fragment = property("FragmentPath");
    println!(
        "hermesd.service ({scope}): {} ({}), {}",
        property("ActiveState"),
        property("SubState"),
        property("UnitFileState")
    );
    println!("unit: {fragment}");
    let pid = property("MainPID");
    if pid != "0" && !pid.is_empty() {
        println!("main pid: {pid}, since {}", property("ActiveEnterTimestamp"));
    }
    println!("restarts: {}", property("NRestarts"));
    match std::fs::read_to_string(&fragment) {
        Ok(on_disk) => {
            let expected = if user {
                let paths = (absolute(&loaded.paths.home), absolute(&loaded.paths.config), own_binary());
                match paths {
                    (Ok(home), Ok(config), Ok(exe)) => Some(user_unit(&exe, &home, &config)),
                    _ => None,
                }
            } else {
                Some(SYSTEM_UNIT.to_owned())
            };
            match expected {
                Some(expected) if expected == on_disk => println!("the unit is this hermesd's"),
                Some(_) => println!("the unit differs from this hermesd's: `hermesd service install` writes it anew"),
                None => {}
            }
        }
        Err(e) => println!("cannot read the unit: {e}"),
    }
    if property("ActiveState") == "active" { ExitCode::SUCCESS } else { ExitCode::from(3) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_unit_quotes_paths_and_keeps_what_a_user_manager_can_apply() {
        let unit =
            user_unit(Path::new("/opt/my bin/hermesd"), Path::new("/home/ann/.hermesd"), Path::new("/c/50%.toml"));
        assert!(
            unit.contains("ExecStart=\"/opt/my bin/hermesd\" --home /home/ann/.hermesd --config /c/50%%.toml run\n")
        );
        assert!(
            unit.contains(
                "ExecStartPre=\"/opt/my bin/hermesd\" --home /home/ann/.hermesd --config /c/50%%.toml check\n"
            )
        );
        assert!(unit.contains("Type=notify\n") && unit.contains("RestartPreventExitStatus=78\n"));
        assert!(unit.contains("WantedBy=default.target\n"));
        for system_only in ["User=", "ProtectSystem", "PrivateTmp", "RestrictNamespaces", "StateDirectory"] {
            assert!(!unit.contains(system_only), "{system_only} needs the system manager");
        }
    }

    #[test]
    fn group_ids_are_read_from_the_group_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("group");
        std::fs::write(&file, "root:x:0:\nhermesdx:x:5:\nhermesd:x:998:\n").unwrap();
        assert_eq!(group_id(&file, "hermesd"), Ok(998));
        assert!(group_id(&file, "nobody").unwrap_err().contains("no group nobody"));
    }
}
