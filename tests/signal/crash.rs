//! kill -9 of the real binary mid-turn with the Signal adapter: after a restart each accepted
//! message is answered exactly once.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::sent_to;
use super::support::fake_signal::FakeSignal;
use super::support::fake_signal::envelopes::{self, ACCOUNT, ALICE, BOB, Person};
use super::support::{FakeLlm, daemon_log, eventually, wait_ready};

fn spawn(home: &Path) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(home.join("hermesd.log")).unwrap();
    Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["--home", home.to_str().unwrap(), "run"])
        .env("HERMESD_LOG", "info")
        .env("SIGNAL_ACCOUNT", ACCOUNT)
        .env("SIGNAL_ALLOWED_USERS", format!("{},{}", ALICE.uuid, BOB.uuid))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn hermesd")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_turn_then_restart_answers_each_signal_chat_exactly_once() {
    let llm = FakeLlm::builder().latency(Duration::from_millis(1500)).start().await;
    let fake = FakeSignal::start().await;
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[agent]\ndrain_timeout = \"2s\"\nbatch_window = \"0s\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"fake\"\n\n[platforms.signal]\nenabled = true\nhttp_url = \"{}\"\n",
        llm.base_url(),
        fake.url()
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let mut child = spawn(home.path());
    wait_ready(port, home.path()).await;
    let people: [Person; 2] = [ALICE, BOB];
    for (i, person) in people.iter().enumerate() {
        fake.push(envelopes::dm(*person, 1_700_000_300_000 + i as i64, &format!("crash test {}", person.name)));
    }
    let log = || daemon_log(home.path());
    assert!(eventually(Duration::from_secs(15), || llm.count() == 2).await, "turns started; log:\n{}", log());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(fake.calls("send").is_empty(), "nothing was answered before the kill: {:?}", fake.calls("send"));

    let mut child = spawn(home.path());
    wait_ready(port, home.path()).await;
    let all = || people.iter().all(|p| !sent_to(&fake, p.uuid).is_empty());
    assert!(eventually(Duration::from_secs(20), all).await, "{:?}\nlog:\n{}", fake.calls("send"), log());
    tokio::time::sleep(Duration::from_secs(2)).await;
    for person in &people {
        assert_eq!(sent_to(&fake, person.uuid), [format!("echo: crash test {}", person.name)], "{}", person.name);
    }
    assert_eq!(llm.count(), 4, "each interrupted turn ran once more, and only once");
    assert!(fake.connections() >= 2, "the restarted daemon opened its own stream");
    child.kill().unwrap();
    child.wait().unwrap();
}
