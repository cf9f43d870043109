//! The real `hermesd` binary: exit codes, signals, `kill -9` mid-turn under load, the terminal
//! channel and the sessions CLI.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hermesd::store::{OutboxStore, SessionStore, SqliteStore};
use hermesd::vocab::message::Role;
use support::{FakeLlm, answer, ask, client, eventually};

const BIN: &str = env!("CARGO_BIN_EXE_hermesd");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn write_config(home: &Path, port: u16, llm: Option<&FakeLlm>) {
    let mut text = format!("[http]\nlisten = \"127.0.0.1:{port}\"\n\n[agent]\ndrain_timeout = \"2s\"\n");
    if let Some(llm) = llm {
        text.push_str(&format!(
            "\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"fake\"\n",
            llm.base_url()
        ));
    }
    std::fs::write(home.join("config.toml"), text).unwrap();
}

/// The daemon's log, appended across restarts and printed when a test fails.
fn log_file(home: &Path) -> std::fs::File {
    std::fs::OpenOptions::new().create(true).append(true).open(home.join("hermesd.log")).unwrap()
}

fn spawn(home: &Path) -> Child {
    Command::new(BIN)
        .args(["--home", home.to_str().unwrap(), "run"])
        .env("HERMESD_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log_file(home))
        .spawn()
        .expect("spawn hermesd")
}

async fn wait_ready(port: u16, home: &Path) {
    let url = format!("http://127.0.0.1:{port}/readyz");
    for _ in 0..1500 {
        if let Ok(r) = client().get(&url).send().await
            && r.status() == 200
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let log = std::fs::read_to_string(home.join("hermesd.log")).unwrap_or_default();
    panic!("hermesd did not become ready on port {port}; its log:\n{log}");
}

fn sigterm(child: &Child) {
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
}

async fn wait_exit(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(std::time::Instant::now() < deadline, "hermesd did not exit within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn check_lists_every_problem_and_exits_78() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[http]\nlisten = \"nowhere\"\n[agent]\nmax_concurrent_turns = 0\n[compression]\nthreshold = 7.0\n",
    )
    .unwrap();
    let out = Command::new(BIN).args(["--home", home.path().to_str().unwrap(), "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in ["http.listen", "agent.max_concurrent_turns", "compression.threshold"] {
        assert!(stderr.contains(needle), "{needle} missing from:\n{stderr}");
    }

    // A syntax error or unknown key is a configuration error too, and so is `run` on it.
    std::fs::write(home.path().join("config.toml"), "[agent]\nmax_iteratons = 3\n").unwrap();
    for command in ["check", "run"] {
        let out = Command::new(BIN).args(["--home", home.path().to_str().unwrap(), command]).output().unwrap();
        assert_eq!(out.status.code(), Some(78), "{command}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("max_iteratons"));
    }

    // The API refuses to serve beyond loopback without a key.
    std::fs::write(home.path().join("config.toml"), "[http]\nlisten = \"0.0.0.0:0\"\n").unwrap();
    let out = Command::new(BIN).args(["--home", home.path().to_str().unwrap(), "run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("API_SERVER_KEY"));

    // Embedded defaults are valid.
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(BIN).args(["--home", empty.path().to_str().unwrap(), "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    // `check` names the admins of every platform.
    let out = Command::new(BIN)
        .args(["--home", empty.path().to_str().unwrap(), "check"])
        .env("GATEWAY_ADMIN_USERS", "7,3")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("admins api: 3, 7 (from API_ADMIN_USERS / GATEWAY_ADMIN_USERS)"), "{stdout}");
    assert!(stdout.contains("admins terminal: the terminal user"), "{stdout}");
}

#[test]
fn check_says_what_to_set_when_a_proxy_meets_empty_allowed_hosts() {
    let home = tempfile::tempdir().unwrap();
    let routes = "[[webhooks]]\nroute = \"gh\"\nsecret_env = \"GH_SECRET\"\nprompt = \"x\"\ndeliver = \"local\"\n";
    std::fs::write(home.path().join("config.toml"), routes).unwrap();
    let check = |extra: &[(&str, &str)]| {
        let mut command = Command::new(BIN);
        command.args(["--home", home.path().to_str().unwrap(), "check"]).env("GH_SECRET", "hook-secret-1");
        command.env_remove("API_SERVER_KEY").envs(extra.iter().copied());
        command.output().unwrap()
    };
    let out = check(&[]);
    assert_eq!(out.status.code(), Some(0), "advice never fails the check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("note:") && stdout.contains("http.allowed_hosts"), "{stdout}");
    let public = format!("[http]\nlisten = \"0.0.0.0:8642\"\n{routes}");
    std::fs::write(home.path().join("config.toml"), public).unwrap();
    let out = check(&[("API_SERVER_KEY", "a-long-key")]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("0.0.0.0:8642 is not loopback"));
    let quiet = "[http]\nallowed_hosts = [\"hermes.example.com\"]\n".to_owned() + routes;
    std::fs::write(home.path().join("config.toml"), quiet).unwrap();
    assert!(!String::from_utf8_lossy(&check(&[]).stdout).contains("note:"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_and_exits_zero() {
    let llm = FakeLlm::builder().latency(Duration::from_millis(500)).start().await;
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    write_config(home.path(), port, Some(&llm));
    let mut child = spawn(home.path());
    wait_ready(port, home.path()).await;
    let health = || {
        let home = home.path().to_owned();
        tokio::task::spawn_blocking(move || {
            Command::new(BIN).args(["--home", home.to_str().unwrap(), "health"]).output().unwrap().status.code()
        })
    };
    assert_eq!(health().await.unwrap(), Some(0), "the container's health check passes while it serves");
    let base = format!("http://127.0.0.1:{port}");
    let in_flight = tokio::spawn({
        let base = base.clone();
        async move { ask(&base, Some("t"), "finish me").await }
    });
    assert!(eventually(Duration::from_secs(5), || llm.count() == 1).await);
    sigterm(&child);
    // The running turn finishes within the drain deadline and is answered before exit.
    let (status, body) = in_flight.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(answer(&body), "echo: finish me");
    assert_eq!(wait_exit(&mut child, Duration::from_secs(10)).await.code(), Some(0));
    assert_eq!(health().await.unwrap(), Some(1), "and fails once it is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_turn_under_load_answers_each_message_exactly_once() {
    const SESSIONS: usize = 5;
    let llm = FakeLlm::builder().latency(Duration::from_millis(1500)).start().await;
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    write_config(home.path(), port, Some(&llm));
    let mut child = spawn(home.path());
    wait_ready(port, home.path()).await;
    let base = format!("http://127.0.0.1:{port}");
    for i in 0..SESSIONS {
        let base = base.clone();
        // The connection dies with the process; the messages were accepted before that.
        tokio::spawn(async move { ask(&base, Some(&format!("crash-{i}")), &format!("message {i}")).await });
    }
    assert!(eventually(Duration::from_secs(10), || llm.count() == SESSIONS).await, "all turns started");
    child.kill().unwrap();
    child.wait().unwrap();

    let mut child = spawn(home.path());
    wait_ready(port, home.path()).await;
    assert!(
        eventually(Duration::from_secs(20), || llm.count() == 2 * SESSIONS).await,
        "every interrupted turn ran once more, got {} calls",
        llm.count()
    );
    // Give a would-be duplicate time to show up, then stop cleanly and read the store.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(llm.count(), 2 * SESSIONS, "no turn ran a third time");
    sigterm(&child);
    assert_eq!(wait_exit(&mut child, Duration::from_secs(10)).await.code(), Some(0));

    let store = SqliteStore::open(&home.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
    let sessions = store.list_sessions(100).await.unwrap();
    assert_eq!(sessions.len(), SESSIONS);
    for session in sessions {
        let transcript = store.load_transcript(&session.id).await.unwrap();
        let roles: Vec<Role> = transcript.iter().map(|m| m.message.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant], "session {}: {transcript:?}", session.key);
        assert_eq!(session.restart_count, 0, "a successful turn resets the crash counter");
    }
    assert!(store.pending_outbound().await.unwrap().is_empty(), "every reply was delivered");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_talks_through_the_same_pipeline_and_sessions_cli_reads_it() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), free_port(), Some(&llm));
    let home_arg = home.path().to_str().unwrap().to_owned();
    let output = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = Command::new(BIN)
            .args(["--home", &home_arg, "chat"])
            .env("HERMESD_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all("hello terminal\nquokka facts please\n".as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(stdout.lines().collect::<Vec<_>>(), ["echo: hello terminal", "echo: quokka facts please"]);

    let run = |args: &[&str]| {
        let out =
            Command::new(BIN).args(["--home", home.path().to_str().unwrap(), "sessions"]).args(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let list = run(&["list"]);
    assert!(list.contains("agent:main:terminal:dm:local"), "{list}");
    let id = list.split_whitespace().next().unwrap().to_owned();
    let show = run(&["show", &id]);
    assert!(show.contains("user: hello terminal") && show.contains("assistant: echo: quokka facts please"), "{show}");
    let search = run(&["search", "quokka"]);
    assert_eq!(search.lines().count(), 2, "user and assistant message match: {search}");
    assert!(search.contains("[quokka]"), "{search}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_hears_ready_watchdog_and_stopping() {
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    write_config(home.path(), port, None);
    let socket_path = home.path().join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&socket_path).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut child = Command::new(BIN)
        .args(["--home", home.path().to_str().unwrap(), "run"])
        .env("NOTIFY_SOCKET", &socket_path)
        .env("WATCHDOG_USEC", "200000")
        .stdout(Stdio::null())
        .stderr(log_file(home.path()))
        .spawn()
        .unwrap();
    let received = tokio::task::spawn_blocking(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 1024];
        while let Ok(n) = socket.recv(&mut buf) {
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            let stop = text.contains("STOPPING=1");
            seen.push(text);
            if stop {
                break;
            }
        }
        seen
    });
    wait_ready(port, home.path()).await;
    // Several watchdog periods pass while it serves.
    tokio::time::sleep(Duration::from_millis(500)).await;
    sigterm(&child);
    assert_eq!(wait_exit(&mut child, Duration::from_secs(10)).await.code(), Some(0));
    let seen = received.await.unwrap();
    assert!(seen.first().is_some_and(|m| m.contains("READY=1")), "{seen:?}");
    assert!(seen.iter().filter(|m| m.contains("WATCHDOG=1")).count() >= 2, "{seen:?}");
    assert!(seen.last().is_some_and(|m| m.contains("STOPPING=1")), "{seen:?}");
}
