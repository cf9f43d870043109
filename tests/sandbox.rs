//! The bypass corpus: commands that walk past the dangerous-command heuristic (or that a granted
//! approval lets through), run through the real terminal tool with every approval granted, so
//! only the sandbox stands between them and the data dir, the credentials, the daemon's process
//! and files outside the workdir. CI runs it as root. The control runs the same corpus with
//! `sandbox = "none"` and requires the harm to happen, so these tests can fail.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hermesd::agent::tools::terminal::TerminalTool;
use hermesd::agent::tools::{Approval, Human, Tool, ToolContext};
use hermesd::config::{SandboxMode, TerminalConfig};
use hermesd::sandbox::{Sandbox, Support};
use hermesd::store::SqliteStore;
use hermesd_platform::{ChatRef, ChatType};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const SECRET: &str = "hunter2-env-canary";
const MEMORY: &str = "memory-canary";
const CREDENTIAL: &str = "credential-canary";
const OUTSIDE: &str = "outside-canary";

/// Says yes to everything, so the heuristic never stops a command.
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

/// A data dir as the daemon lays it out, plus a credentials dir and a file outside both.
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
        std::fs::create_dir_all(home.join("workspace/sub")).unwrap();
        std::fs::create_dir_all(home.join("memory")).unwrap();
        std::fs::create_dir_all(root.join("credentials")).unwrap();
        std::fs::write(home.join(".env"), format!("TELEGRAM_BOT_TOKEN={SECRET}\n")).unwrap();
        std::fs::write(home.join("memory/MEMORY.md"), MEMORY).unwrap();
        std::fs::write(root.join("credentials/token"), CREDENTIAL).unwrap();
        std::fs::write(root.join("outside.txt"), OUTSIDE).unwrap();
        let store = SqliteStore::open(&home.join("state.db"), Duration::from_secs(1), 1).await.unwrap();
        let ctx = ToolContext {
            session_id: "s".into(),
            session_key: "agent:main:api:dm:c".into(),
            chat: ChatRef::new("api", "c", ChatType::Dm),
            user_id: "u".into(),
            workdir: home.join("workspace"),
            data_dir: home.clone(),
            store: Arc::new(store),
            human: Arc::new(Yes),
            cancel: CancellationToken::new(),
            policy: hermesd::agent::tools::policy::ToolPolicy::new(["terminal", "files"]),
            admin: true,
        };
        Self { _dir: dir, root, home, ctx }
    }

    /// Every file the corpus attacks, with its content (`None` once gone).
    fn snapshot(&self) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        [".env", "state.db", "memory/MEMORY.md"]
            .iter()
            .map(|p| self.home.join(p))
            .chain([self.root.join("credentials/token"), self.root.join("outside.txt")])
            .map(|p| {
                let bytes = std::fs::read(&p).ok();
                (p, bytes)
            })
            .collect()
    }

    fn expand(&self, command: &str) -> String {
        command.replace("{root}", &self.root.display().to_string())
    }
}

fn tool(mode: SandboxMode, config: &TerminalConfig) -> TerminalTool {
    let sandbox = Sandbox::new(mode, Some(PathBuf::from(env!("CARGO_BIN_EXE_hermesd"))));
    TerminalTool::new(Duration::from_secs(5), Arc::new(sandbox)).confined_by(config)
}

fn config(root: &Path) -> TerminalConfig {
    // Stands in for $CREDENTIALS_DIRECTORY, which a test cannot set without `unsafe`.
    TerminalConfig { deny_read: vec![root.join("credentials")], ..TerminalConfig::default() }
}

/// The corpus. `{root}` is the fixture's root (the data dir is `{root}/home`, the workdir
/// `{root}/home/workspace`, the credentials `{root}/credentials`).
const CORPUS: &[&str] = &[
    "cat ../.env",
    "cat /proc/$PPID/environ",
    "python3 -c 'print(open(\"../.env\").read())'",
    "perl -e 'open(F, \"../.env\"); print <F>'",
    "find .. -name .env -exec cat {} \\;",
    "c=cat; $c ../.env",
    "sqlite3 ../state.db .tables",
    "cat ../memory/MEMORY.md",
    "cat {root}/credentials/token",
    "ln -s ../.env leak && cat leak",
    "ln -s {root}/home escape && cat escape/memory/MEMORY.md",
    "c=rm; $c -rf ../memory",
    "mkdir -p foo && rm -rf foo/../../memory",
    "truncate -s 0 ../state.db",
    "sqlite3 ../state.db 'drop table sessions'",
    "python3 -c 'import os; os.remove(\"../.env\")'",
    "find .. -name MEMORY.md -delete",
    "echo pwned > {root}/outside.txt",
    "mv ../.env ./stolen.env && cat ./stolen.env",
    "cp ../.env ./copy.env; cat ./copy.env",
];

/// What leaked into the output or changed on disk.
fn harm(output: &str, before: &[(PathBuf, Option<Vec<u8>>)], after: &[(PathBuf, Option<Vec<u8>>)]) -> Vec<String> {
    let mut harm: Vec<String> = [SECRET, MEMORY, CREDENTIAL, "PATH=", "sessions"]
        .iter()
        .filter(|canary| output.contains(*canary))
        .map(|canary| format!("output shows {canary}"))
        .collect();
    for ((path, old), (_, new)) in before.iter().zip(after) {
        if old != new {
            harm.push(format!("{} changed", path.display()));
        }
    }
    harm
}

async fn run_corpus(mode: SandboxMode) -> Vec<(String, Vec<String>, String)> {
    hermesd::sandbox::harden_daemon();
    let mut results = Vec::new();
    for command in CORPUS {
        let f = Fixture::new().await;
        let command = f.expand(command);
        let before = f.snapshot();
        let output = match tool(mode, &config(&f.root)).call(&f.ctx, json!({ "command": command })).await {
            Ok(out) => out,
            Err(e) => e.to_string(),
        };
        let harm = harm(&output, &before, &f.snapshot());
        eprintln!("[{mode:?}] `{command}` -> {harm:?}");
        results.push((command, harm, output));
    }
    results
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_stops_every_command_of_the_bypass_corpus() {
    let sandbox = Sandbox::new(SandboxMode::Landlock, None);
    assert!(matches!(sandbox.support(), Support::Available { .. }), "{}", sandbox.describe());
    eprintln!("{}", sandbox.describe());
    let results = run_corpus(SandboxMode::Landlock).await;
    // Each command ran (the helper exec'd the shell) and was stopped by the kernel, not skipped.
    for (command, _, output) in &results {
        let ran = output.starts_with("exit code:") && !output.contains("hermesd sandbox-exec:");
        assert!(ran, "`{command}` did not run in the sandbox:\n{output}");
    }
    let harmful: Vec<String> = results
        .into_iter()
        .filter(|(_, harm, _)| !harm.is_empty())
        .map(|(command, harm, output)| format!("`{command}`: {harm:?}\n{output}"))
        .collect();
    assert!(harmful.is_empty(), "the sandbox let through:\n{}", harmful.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_sandbox_the_corpus_does_harm() {
    let results = run_corpus(SandboxMode::None).await;
    let harmless: Vec<&str> =
        results.iter().filter(|(_, harm, _)| harm.is_empty()).map(|(command, _, _)| command.as_str()).collect();
    // The corpus is real: unconfined, nearly every command leaks or destroys something.
    // (`rm -rf foo/../..`-style paths are refused by rm itself, so a few may be harmless.)
    assert!(harmless.len() <= 3, "harmless without a sandbox: {harmless:?}");
    for must_leak in ["cat ../.env", "cat /proc/$PPID/environ", "sqlite3 ../state.db .tables"] {
        let (_, harm, output) = results.iter().find(|(c, _, _)| c == must_leak).unwrap();
        assert!(!harm.is_empty(), "`{must_leak}` did no harm unconfined:\n{output}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordinary_work_inside_the_workdir_still_runs() {
    let f = Fixture::new().await;
    let command = "echo hi > a.txt && cat a.txt && mkdir -p d/e && mv a.txt d/e/b.txt && rm -r d \
                   && touch \"$TMPDIR/t\" && ls /usr >/dev/null && python3 -c 'print(6*7)' && echo ok";
    let out = tool(SandboxMode::Landlock, &config(&f.root)).call(&f.ctx, json!({ "command": command })).await.unwrap();
    assert!(out.starts_with("exit code: 0") && out.contains("hi") && out.contains("42"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_cannot_be_signalled_nor_reached_on_loopback() {
    let f = Fixture::new().await;
    let mut sleeper = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let kill = format!("kill -TERM {}", sleeper.id());
    let out = tool(SandboxMode::Landlock, &config(&f.root)).call(&f.ctx, json!({ "command": kill })).await.unwrap();
    assert!(!out.starts_with("exit code: 0"), "{out}");
    assert!(sleeper.try_wait().unwrap().is_none(), "the sandboxed command killed an outside process");
    sleeper.kill().unwrap();
    let _ = sleeper.wait();

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!(
        "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 5); print(\"connected\")'"
    );
    let open = tool(SandboxMode::Landlock, &config(&f.root));
    let out = open.call(&f.ctx, json!({ "command": connect })).await.unwrap();
    // Network on means the egress proxy only: the host's loopback stays out of reach.
    assert!(!out.contains("connected") && out.starts_with("exit code: 1"), "{out}");
    let closed = TerminalConfig { deny_network: true, ..config(&f.root) };
    let out = tool(SandboxMode::Landlock, &closed).call(&f.ctx, json!({ "command": connect })).await.unwrap();
    assert!(!out.contains("connected") && out.contains("ermission"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_tools_cannot_reach_outside_the_workdir() {
    use hermesd::agent::tools::files::{PatchTool, ReadFileTool, SearchFilesTool, WriteFileTool};
    let f = Fixture::new().await;
    let work = f.ctx.workdir.clone();
    std::os::unix::fs::symlink("../.env", work.join("leak")).unwrap();
    std::os::unix::fs::symlink("../memory", work.join("mem")).unwrap();
    let env_abs = f.home.join(".env").display().to_string();
    let before = f.snapshot();
    let write = WriteFileTool::new(Duration::from_secs(1));
    let patch = PatchTool::new(Duration::from_secs(1));
    let calls: Vec<(&dyn Tool, serde_json::Value)> = vec![
        (&ReadFileTool, json!({"path": "../.env"})),
        (&ReadFileTool, json!({"path": env_abs})),
        (&ReadFileTool, json!({"path": "sub/../../.env"})),
        (&ReadFileTool, json!({"path": "leak"})),
        (&ReadFileTool, json!({"path": "mem/MEMORY.md"})),
        (&SearchFilesTool, json!({"pattern": "canary", "path": ".."})),
        (&SearchFilesTool, json!({"pattern": "canary", "path": "mem"})),
        (&write, json!({"path": "../memory/MEMORY.md", "content": "pwned"})),
        (&write, json!({"path": "mem/MEMORY.md", "content": "pwned"})),
        (&patch, json!({"path": "mem/MEMORY.md", "old": "memory", "new": "pwned"})),
        (&patch, json!({"path": "../state.db", "old": "SQLite", "new": "pwned"})),
    ];
    for (tool, args) in calls {
        let out = tool.call(&f.ctx, args.clone()).await;
        let text = match &out {
            Ok(text) => text.clone(),
            Err(e) => e.to_string(),
        };
        assert!(out.is_err(), "{args}: {text}");
        assert!(text.contains("outside the workdir") || text.contains("secret"), "{args}: {text}");
        assert!(harm(&text, &before, &f.snapshot()).is_empty(), "{args}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_and_readyz_report_the_sandbox() {
    let bin = env!("CARGO_BIN_EXE_hermesd");
    let home = tempfile::tempdir().unwrap();
    let check = || std::process::Command::new(bin).args(["--home", home.path().to_str().unwrap(), "check"]).output();
    let out = check().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("tools sandbox: landlock ABI"), "{stdout}");
    std::fs::write(home.path().join("config.toml"), "[tools.terminal]\nsandbox = \"none\"\n").unwrap();
    let stdout = String::from_utf8_lossy(&check().unwrap().stdout).into_owned();
    assert!(stdout.contains("tools sandbox: OFF"), "{stdout}");

    let llm = support::FakeLlm::builder().start().await;
    let home = tempfile::tempdir().unwrap();
    let d = support::start_daemon(home.path(), &support::config_for(&llm, ""), &[]).await;
    let ready: serde_json::Value =
        support::client().get(format!("{}/readyz", d.base)).send().await.unwrap().json().await.unwrap();
    assert!(ready["sandbox"].as_str().unwrap_or_default().contains("landlock ABI"), "{ready}");
    d.daemon.stop().await;
}
