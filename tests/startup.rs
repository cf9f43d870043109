//! Start-up on the real binary: every configuration problem in one run (exit 78), state that is
//! private on disk, and a stored row that no longer decodes quarantined instead of stopping the
//! daemon.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use hermesd::store::SqliteStore;
use support::client;

const BIN: &str = env!("CARGO_BIN_EXE_hermesd");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Run hermesd under a permissive umask (022), as a login shell would hand it over, so the
/// modes it produces are its own doing.
fn hermesd(home: &Path, config: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("sh");
    command
        .args(["-c", "umask 022; exec \"$0\" \"$@\"", BIN, "--home", home.to_str().unwrap()])
        .args(["--config", config.to_str().unwrap()])
        .args(args)
        .env("HERMESD_LOG", "info");
    command
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

fn spawn(home: &Path, config: &Path, log: &Path) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    hermesd(home, config, &["run"]).stdout(Stdio::null()).stderr(log).spawn().expect("spawn hermesd")
}

async fn wait_ready(port: u16, log: &Path) {
    for _ in 0..1500 {
        if let Ok(r) = client().get(format!("http://127.0.0.1:{port}/readyz")).send().await
            && r.status() == 200
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("hermesd did not become ready; its log:\n{}", std::fs::read_to_string(log).unwrap_or_default());
}

async fn stop(mut child: Child) {
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    for _ in 0..500 {
        if let Some(status) = child.try_wait().unwrap() {
            assert_eq!(status.code(), Some(0));
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("hermesd did not exit after SIGTERM");
}

#[test]
fn check_and_run_list_every_config_problem_with_its_line_and_exit_78() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[agent]\nbusy_plicy = \"steer\"\nmax_iterations = \"many\"\n\
         [platforms.telegram]\nmode = \"pollling\"\n\
         [compression]\nthreshold = 7.0\n\
         [cron]\ncolour = \"red\"\n",
    )
    .unwrap();
    let at = |line: u32| format!("{}:{line}: ", config.display());
    let expected = [
        format!("{}agent.busy_plicy: unknown key (did you mean `busy_policy`?)", at(2)),
        format!("{}agent.max_iterations: invalid type: string \"many\", expected u32", at(3)),
        format!("{}platforms.telegram.mode: unknown value \"pollling\" (did you mean `polling`?)", at(5)),
        format!("{}cron.colour: unknown key", at(9)),
        // The pure validation of what could be read comes in the same run.
        format!("{}compression.threshold: 7 is not between 0.1 and 0.99", at(7)),
    ];
    for command in ["check", "run"] {
        let out = hermesd(&home, &config, &[command]).output().unwrap();
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(78), "{command}: {text}");
        for line in &expected {
            assert!(text.contains(line), "{command}: {line:?} missing from:\n{text}");
        }
        assert!(text.contains("5 problems"), "{command}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_is_private_on_disk_and_check_warns_when_it_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let config = dir.path().join("config.toml");
    let log = dir.path().join("hermesd.log");
    let port = free_port();
    std::fs::write(&config, format!("[http]\nlisten = \"127.0.0.1:{port}\"\n")).unwrap();
    let child = spawn(&home, &config, &log);
    wait_ready(port, &log).await;
    assert_eq!(mode(&home), 0o700, "HERMESD_HOME");
    for file in ["state.db", "state.db-wal", "state.db-shm"] {
        assert_eq!(mode(&home.join(file)), 0o600, "{file}");
    }
    stop(child).await;

    let out = hermesd(&home, &config, &["check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));

    // A home made before (or by hand) with the usual 0755 is reported with its fix.
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(home.join("state.db"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = hermesd(&home, &config, &["check"]).output().unwrap();
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let home_text = home.display().to_string();
    assert!(
        text.contains(&format!(
            "warning: {home_text} is open to other users (mode 0755); run: chmod -R go-rwx {home_text}"
        )),
        "{text}"
    );
    assert!(text.contains(&format!("warning: {home_text}/state.db is open to other users (mode 0644)")), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_stored_event_is_quarantined_and_the_daemon_serves() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let config = dir.path().join("config.toml");
    let log = dir.path().join("hermesd.log");
    let port = free_port();
    std::fs::write(&config, format!("[http]\nlisten = \"127.0.0.1:{port}\"\n")).unwrap();
    let db = home.join("state.db");
    let store = SqliteStore::open(&db, Duration::from_secs(5), 1).await.unwrap();
    let seq = store.insert_raw_inbound("api", "broken-1", "{\"kind\": \"message\", \"oops", 1).await.unwrap();
    store.close().await;

    let child = spawn(&home, &config, &log);
    wait_ready(port, &log).await;
    let metrics = client().get(format!("http://127.0.0.1:{port}/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("hermesd_quarantined_rows_total{table=\"inbound_events\"} 1"), "{metrics}");
    stop(child).await;

    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("quarantined an undecodable inbound event").count(), 1, "{text}");
    let store = SqliteStore::open(&db, Duration::from_secs(5), 1).await.unwrap();
    let (state, error) = store.inbound_state(seq).await.unwrap().unwrap();
    assert_eq!(state, "quarantined");
    assert!(error.is_some_and(|e| e.contains("inbound_events.payload")));
    store.close().await;

    // The next start does not trip over it again.
    let child = spawn(&home, &config, &log);
    wait_ready(port, &log).await;
    stop(child).await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("quarantined an undecodable inbound event").count(), 1, "{text}");
}
