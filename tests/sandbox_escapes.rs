//! Escapes from the tools' sandbox that go through the filesystem's indirections or the
//! daemon's terminal rather than through a plain path: a private temp dir or a workdir swapped
//! for a symlink (once, and in a rename race while commands start), the controlling terminal
//! (`/dev/tty`, TIOCSTI, `/dev/pts/*`), and secrets the daemon read from files. Every command
//! runs through the real terminal tool with every approval granted, so only the sandbox stands
//! in the way. CI runs it as root; nothing here depends on it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hermesd::agent::tools::terminal::TerminalTool;
use hermesd::agent::tools::{Approval, Human, Tool, ToolContext};
use hermesd::config::{Env, SandboxMode, TerminalConfig};
use hermesd::sandbox::Sandbox;
use hermesd::store::SqliteStore;
use hermesd_platform::{ChatRef, ChatType};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const MEMORY: &str = "someone-elses-memory-canary";
const SSH_KEY: &str = "ssh-key-canary";
const FILE_SECRET: &str = "file-secret-canary";

/// Says yes to everything, so the dangerous-command check never stops a command.
struct Yes;

#[async_trait]
impl Human for Yes {
    async fn approve(&self, _action: &str, _timeout: Duration) -> Approval {
        Approval::Approved
    }

    async fn clarify(&self, _question: &str, _choices: &[String], _timeout: Duration) -> Option<String> {
        None
    }
}

/// A data dir as the daemon lays it out (another person's memory in it), the tools' workdir
/// root inside it with this turn's thread folder, and a `dotssh` folder outside the data dir
/// standing for `~/.ssh` (denied the way the operator's home is).
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    ctx: ToolContext,
}

impl Fixture {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        let memory = home.join("memory/users/telegram/42");
        std::fs::create_dir_all(&memory).unwrap();
        std::fs::write(memory.join("MEMORY.md"), MEMORY).unwrap();
        std::fs::create_dir_all(root.join("dotssh")).unwrap();
        std::fs::write(root.join("dotssh/id_ed25519"), SSH_KEY).unwrap();
        let workdir = home.join("workspace/chats/slack/C1/T1");
        std::fs::create_dir_all(&workdir).unwrap();
        let store = SqliteStore::open(&home.join("state.db"), Duration::from_secs(1), 1).await.unwrap();
        let ctx = ToolContext {
            session_id: "s".into(),
            session_key: "agent:main:slack:thread:C1".into(),
            chat: ChatRef::new("slack", "C1", ChatType::Thread),
            user_id: "u".into(),
            workdir,
            data_dir: home.clone(),
            store: Arc::new(store),
            human: Arc::new(Yes),
            cancel: CancellationToken::new(),
            policy: hermesd::agent::tools::policy::ToolPolicy::new(["terminal", "files"]),
            admin: true,
        };
        Self { _dir: dir, root, home, ctx }
    }

    fn memory(&self) -> PathBuf {
        self.home.join("memory/users/telegram/42")
    }

    fn dotssh(&self) -> PathBuf {
        self.root.join("dotssh")
    }

    fn tool(&self, sandbox: Sandbox) -> TerminalTool {
        // `dotssh` is denied the way the operator's `$HOME` is (a test cannot set HOME without
        // `unsafe`); the policy's own handling of HOME has a unit test in `sandbox::policy`.
        let config = TerminalConfig { deny_read: vec![self.dotssh()], ..TerminalConfig::default() };
        TerminalTool::new(Duration::from_secs(5), Arc::new(sandbox))
            .confined_by(&config)
            .beneath_root(&self.home.join("workspace"))
    }

    async fn run(&self, tool: &TerminalTool, command: &str) -> String {
        match tool.call(&self.ctx, json!({ "command": command, "timeout": 60 })).await {
            Ok(out) => out,
            Err(e) => e.to_string(),
        }
    }

    /// What leaked into `output` or was planted in the targets.
    fn harm(&self, output: &str) -> Vec<String> {
        let mut harm: Vec<String> = [MEMORY, SSH_KEY, FILE_SECRET]
            .iter()
            .filter(|canary| output.contains(*canary))
            .map(|canary| format!("output shows {canary}"))
            .collect();
        for dir in [self.memory(), self.dotssh()] {
            if dir.join("planted").exists() {
                harm.push(format!("planted in {}", dir.display()));
            }
        }
        harm
    }

    /// Reads both targets by absolute path and through `$TMPDIR`, and plants a file in each.
    fn attack(&self) -> String {
        let (memory, ssh) = (self.memory().display().to_string(), self.dotssh().display().to_string());
        format!(
            "cat \"$TMPDIR/MEMORY.md\" \"$TMPDIR/id_ed25519\" {memory}/MEMORY.md {ssh}/id_ed25519; \
             echo x > \"$TMPDIR/planted\"; echo x > {memory}/planted; echo x > {ssh}/planted; \
             cat ./MEMORY.md ./id_ed25519; echo x > ./planted; true"
        )
    }
}

fn landlock() -> Sandbox {
    Sandbox::new(SandboxMode::Landlock, Some(PathBuf::from(env!("CARGO_BIN_EXE_hermesd"))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temp_dir_or_workdir_swapped_for_a_symlink_grants_nothing() {
    hermesd::sandbox::harden_daemon();
    for target in ["memory", "dotssh"] {
        let f = Fixture::new().await;
        let tool = f.tool(landlock());
        let target = if target == "memory" { f.memory() } else { f.dotssh() };
        // The first command replaces the private temp dir (where it used to live) with a symlink.
        let swap = format!(
            "rm -rf .hermesd-tmp \"$TMPDIR\" 2>/dev/null; ln -s {t} .hermesd-tmp; ln -s {t} \"$TMPDIR\"; true",
            t = target.display()
        );
        let out = f.run(&tool, &swap).await;
        assert!(out.starts_with("exit code:"), "{out}");
        let out = f.run(&tool, &f.attack()).await;
        assert!(out.starts_with("exit code:"), "the command ran confined: {out}");
        assert!(f.harm(&out).is_empty(), "{}: {:?}\n{out}", target.display(), f.harm(&out));

        // The turn's workdir itself replaced by a symlink (a thread folder lies inside its
        // chat's folder, which that chat's commands may change).
        std::fs::remove_dir_all(&f.ctx.workdir).unwrap();
        std::os::unix::fs::symlink(&target, &f.ctx.workdir).unwrap();
        let out = f.run(&tool, &f.attack()).await;
        assert!(f.harm(&out).is_empty(), "{}: {:?}\n{out}", target.display(), f.harm(&out));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_turns_temp_dir_is_unreadable() {
    let f = Fixture::new().await;
    let tool = f.tool(landlock());
    let other = f.home.join("workspace/users/telegram/42");
    let other_tmp = hermesd::sandbox::private_tmp(&other);
    std::fs::create_dir_all(&other_tmp).unwrap();
    std::fs::write(other_tmp.join("scratch"), MEMORY).unwrap();
    let out =
        f.run(&tool, &format!("cat {}/scratch; touch \"$TMPDIR/mine\" && echo own-tmp-ok", other_tmp.display())).await;
    let _ = std::fs::remove_dir_all(&other_tmp);
    assert!(out.contains("own-tmp-ok") && f.harm(&out).is_empty(), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_race_on_the_workdir_grants_nothing() {
    hermesd::sandbox::harden_daemon();
    let f = Fixture::new().await;
    let tool = f.tool(landlock());
    let (workdir, memory, ssh) = (f.ctx.workdir.clone(), f.memory(), f.dotssh());
    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let stop = stop.clone();
        std::thread::spawn(move || race(&workdir, &[memory, ssh], &stop))
    };
    // Commands started for 2.5 s while the racer swaps, at most 400 of them (a refused one
    // returns at once, a confined one takes a few tens of milliseconds).
    let started = Instant::now();
    let mut outputs = Vec::new();
    while started.elapsed() < Duration::from_millis(2_500) && outputs.len() < 400 {
        outputs.push(f.run(&tool, &f.attack()).await);
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = racer.join().unwrap();
    let ran = outputs.iter().filter(|out| out.starts_with("exit code:")).count();
    eprintln!("{swaps} swaps, {} commands, {ran} ran confined, the rest refused", outputs.len());
    assert!(swaps > 0 && ran > 0, "the race did not run: {outputs:?}");
    for out in &outputs {
        assert!(f.harm(out).is_empty(), "{:?}\n{out}", f.harm(out));
    }
}

/// Swap `workdir` between a real folder and a symlink to each target until `stop`; returns the
/// number of swaps.
fn race(workdir: &Path, targets: &[PathBuf], stop: &AtomicBool) -> usize {
    let aside = workdir.with_extension("real");
    let link = workdir.with_extension("link");
    let mut swaps = 0;
    while !stop.load(Ordering::Relaxed) {
        for target in targets {
            let _ = std::fs::remove_file(&link);
            let _ = std::os::unix::fs::symlink(target, &link);
            let _ = std::fs::rename(workdir, &aside);
            let _ = std::fs::rename(&link, workdir);
            std::thread::sleep(Duration::from_millis(1));
            let _ = std::fs::remove_file(workdir);
            let _ = std::fs::rename(&aside, workdir);
            let _ = std::fs::create_dir_all(workdir);
            swaps += 1;
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    swaps
}

/// Set by the outer run of the terminal test for the inner one it starts under a pty.
const UNDER_PTY: &str = "HERMESD_TEST_UNDER_PTY";
const INNER_OK: &str = "inner-terminal-test-passed";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_cannot_reach_the_daemons_terminal() {
    if std::env::var_os(UNDER_PTY).is_some() {
        return inner_terminal_test().await;
    }
    // Run this same test again under `script`, whose pty is then the test process's controlling
    // terminal, the way an operator's terminal is a foreground daemon's.
    let exe = std::env::current_exe().unwrap();
    let inner =
        format!("{} commands_cannot_reach_the_daemons_terminal --exact --nocapture --test-threads=1", exe.display());
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("script")
            .args(["-qec", &inner, "/dev/null"])
            .env(UNDER_PTY, "1")
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .expect("the inner test finishes")
    .expect("util-linux `script` runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains(INNER_OK), "{text}");
}

async fn inner_terminal_test() {
    hermesd::sandbox::harden_daemon();
    let tty = std::fs::OpenOptions::new().write(true).open("/dev/tty");
    assert!(tty.is_ok(), "the inner test has no controlling terminal: {tty:?}");
    let f = Fixture::new().await;
    let tool = f.tool(landlock());
    let tiocsti = "import fcntl, termios; fcntl.ioctl(open('/dev/tty', 'wb'), termios.TIOCSTI, b'x')";
    let command = format!(
        "printf X > /dev/tty && echo wrote-tty; \
         /usr/bin/python3 -c \"{tiocsti}\" && echo injected; \
         for p in /dev/pts/[0-9]*; do printf X > \"$p\" && echo wrote-pts; done; \
         echo done"
    );
    let out = f.run(&tool, &command).await;
    assert!(out.contains("done"), "{out}");
    for sign in ["wrote-tty", "injected", "wrote-pts"] {
        assert!(!out.contains(sign), "{sign}: {out}");
    }
    println!("{INNER_OK}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_read_from_files_are_denied_to_commands() {
    hermesd::sandbox::harden_daemon();
    let f = Fixture::new().await;
    let secrets = f.root.join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("app-token"), FILE_SECRET).unwrap();
    let vars = std::collections::HashMap::from([(
        "SLACK_APP_TOKEN_FILE".to_owned(),
        secrets.join("app-token").display().to_string(),
    )]);
    let env = Env::from_map(vars);
    assert_eq!(env.secret("SLACK_APP_TOKEN").unwrap().unwrap().expose(), FILE_SECRET);
    let tool = f.tool(landlock().with_secrets(env.trail()));
    let out = f.run(&tool, &format!("cat {}/app-token; ls {}", secrets.display(), secrets.display())).await;
    assert!(out.starts_with("exit code:") && f.harm(&out).is_empty(), "{out}");
    // The operator's home is unreadable to commands: `~` is the turn's folder.
    let out = f.run(&tool, "echo \"home=$HOME\"").await;
    assert!(out.contains(&format!("home={}", f.ctx.workdir.display())), "{out}");
}
