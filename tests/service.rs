//! `hermesd service install | status`: the real binary writes the units and calls systemctl as
//! an operator would (a recording `systemctl` first on PATH stands in for the manager, which does
//! not run in a test), and `systemd-analyze verify` reads what it wrote.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_hermesd");

/// A folder with a `systemctl` that appends its arguments to `calls` and prints `show` (a file
/// the test writes) for `systemctl show`.
struct FakeSystemctl {
    dir: tempfile::TempDir,
}

impl FakeSystemctl {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let script = format!(
            "#!/bin/sh\necho \"$*\" >> '{0}/calls'\ncase \"$*\" in *show*) cat '{0}/show' ;; esac\nexit 0\n",
            dir.path().display()
        );
        let path = dir.path().join("systemctl");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { dir }
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls")).unwrap_or_default().lines().map(str::to_owned).collect()
    }

    fn shows(&self, properties: &str) {
        std::fs::write(self.dir.path().join("show"), properties).unwrap();
    }

    fn path(&self) -> String {
        format!("{}:{}", self.dir.path().display(), std::env::var("PATH").unwrap_or_default())
    }
}

fn hermesd(home: &Path, config_home: &Path, systemctl: &FakeSystemctl, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(["--home", home.to_str().unwrap()])
        .args(args)
        .env("XDG_CONFIG_HOME", config_home)
        .env("PATH", systemctl.path())
        .env_remove("API_SERVER_KEY")
        .output()
        .unwrap()
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// `systemd-analyze verify` of `unit` (the test dependencies install systemd); every line it
/// prints is a problem, except that the test's binary path is not `/usr/local/bin`.
fn verify(unit: &Path, user: bool) {
    let mut command = Command::new("systemd-analyze");
    let runtime = tempfile::tempdir().unwrap();
    if user {
        // A user manager's checks need a runtime folder, which a test has no login for.
        command.arg("--user").env("XDG_RUNTIME_DIR", runtime.path());
    }
    let output =
        command.args(["verify", "--man=no"]).arg(unit).output().expect("systemd-analyze (scripts/test-deps.sh)");
    let said = text(&output);
    let absent = "Command /usr/local/bin/hermesd is not executable";
    let problems: Vec<&str> = said.lines().filter(|l| !l.trim().is_empty() && !l.contains(absent)).collect();
    assert!(problems.is_empty(), "{}: {said}", unit.display());
}

#[test]
fn a_user_install_writes_this_binarys_unit_and_enables_it() {
    let (home, config_home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let systemctl = FakeSystemctl::new();
    let out = hermesd(home.path(), config_home.path(), &systemctl, &["service", "install", "--user", "--no-enable"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(systemctl.calls().is_empty(), "--no-enable runs no systemctl");
    let unit_path = config_home.path().join("systemd/user/hermesd.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    let home_arg = home.path().display();
    assert!(unit.contains(&format!("ExecStart={BIN} --home {home_arg} --config {home_arg}/config.toml run")), "{unit}");
    assert!(unit.contains("Type=notify") && unit.contains("WatchdogSec=60"), "{unit}");
    verify(&unit_path, true);

    let out = hermesd(home.path(), config_home.path(), &systemctl, &["service", "install", "--user"]);
    assert!(out.status.success(), "{}", text(&out));
    let calls = ["--user daemon-reload", "--user enable hermesd.service", "--user restart hermesd.service"];
    assert_eq!(systemctl.calls(), calls, "a unit already running moves onto the new binary");
    assert!(text(&out).contains("loginctl enable-linger"), "{}", text(&out));

    // status reads what systemd says and compares the unit on disk with this binary's.
    let shown = |state: &str| {
        format!(
            "LoadState=loaded\nUnitFileState=enabled\nActiveState={state}\nSubState=running\nMainPID=4242\n\
             ActiveEnterTimestamp=Sat 2026-11-28 19:00:00 UTC\nNRestarts=0\nFragmentPath={}\nExecMainStatus=0\n",
            unit_path.display()
        )
    };
    systemctl.shows(&shown("active"));
    let out = hermesd(home.path(), config_home.path(), &systemctl, &["service", "status", "--user"]);
    assert!(out.status.success(), "{}", text(&out));
    for line in ["hermesd.service (user): active (running), enabled", "main pid: 4242", "the unit is this hermesd's"] {
        assert!(text(&out).contains(line), "{line} missing in {}", text(&out));
    }
    std::fs::write(&unit_path, unit.replace("WatchdogSec=60", "WatchdogSec=5")).unwrap();
    systemctl.shows(&shown("failed"));
    let out = hermesd(home.path(), config_home.path(), &systemctl, &["service", "status", "--user"]);
    assert_eq!(out.status.code(), Some(3), "not active: {}", text(&out));
    assert!(text(&out).contains("the unit differs from this hermesd's"), "{}", text(&out));
    systemctl.shows("LoadState=not-found\nActiveState=inactive\n");
    let out = hermesd(home.path(), config_home.path(), &systemctl, &["service", "status", "--user"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out).contains("not installed"), "{}", text(&out));
}

#[test]
fn a_system_install_under_a_root_lays_out_the_shipped_unit_config_and_secrets() {
    let (home, config_home, root) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(home.path().join("config.toml"), "[agent]\nmax_iterations = 7\n").unwrap();
    std::fs::write(home.path().join(".env"), "# bot\nexport TELEGRAM_BOT_TOKEN=1:abc\nAPI_SERVER_KEY='k\"ey'\n")
        .unwrap();
    let systemctl = FakeSystemctl::new();
    let root_arg = root.path().to_str().unwrap();
    let out = hermesd(home.path(), config_home.path(), &systemctl, &["service", "install", "--root", root_arg]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(systemctl.calls().is_empty(), "--root runs nothing");
    let at = |path: &str| -> PathBuf { root.path().join(path) };
    let shipped =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/hermesd.service")).unwrap();
    assert_eq!(std::fs::read_to_string(at("etc/systemd/system/hermesd.service")).unwrap(), shipped);
    assert!(at("etc/sysusers.d/hermesd.conf").exists() && at("etc/tmpfiles.d/hermesd.conf").exists());
    assert_eq!(std::fs::read_to_string(at("etc/hermesd/config.toml")).unwrap(), "[agent]\nmax_iterations = 7\n");
    assert_eq!(mode(&at("etc/hermesd/config.toml")), 0o640);
    let env_file = std::fs::read_to_string(at("etc/hermesd/env")).unwrap();
    assert_eq!(env_file, "API_SERVER_KEY=\"k\\\"ey\"\nTELEGRAM_BOT_TOKEN=\"1:abc\"\n", "systemd's form, no export");
    for dir in ["usr/local/bin", "etc/systemd/system", "etc/sysusers.d", "etc/tmpfiles.d"] {
        assert_eq!(mode(&at(dir)), 0o755, "{dir}");
    }
    assert_eq!(mode(&at("etc/hermesd/env")), 0o600, "secrets readable by root only");
    let bin = at("usr/local/bin/hermesd");
    assert_eq!(mode(&bin), 0o755);
    let version = Command::new(&bin).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("hermesd "), "the copy runs");
    verify(&at("etc/systemd/system/hermesd.service"), false);

    // A second install keeps the operator's config and secrets.
    std::fs::write(at("etc/hermesd/env"), "TELEGRAM_BOT_TOKEN=edited\n").unwrap();
    let out = hermesd(home.path(), config_home.path(), &systemctl, &["service", "install", "--root", root_arg]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(at("etc/hermesd/env")).unwrap(), "TELEGRAM_BOT_TOKEN=edited\n");
    assert!(text(&out).contains("kept"), "{}", text(&out));
}

#[test]
fn a_system_install_by_an_unprivileged_user_is_refused_before_it_writes() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
    // The binary where the unprivileged user can run it.
    let bin = root.join("hermesd");
    if std::fs::hard_link(BIN, &bin).is_err() {
        std::fs::copy(BIN, &bin).unwrap();
    }
    let home = root.join("home");
    let mut command = if rustix::process::geteuid().is_root() {
        let mut setpriv = Command::new("setpriv");
        setpriv.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]).arg(&bin);
        setpriv
    } else {
        Command::new(&bin)
    };
    let out = command
        .arg("--home")
        .arg(&home)
        .args(["service", "install"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("installed as root"), "{}", text(&out));
    assert!(!home.exists(), "refused before anything was written, even its own home");
}
