//! The cursor across starts: a first start on a full mailbox answers nothing old, a `kill -9`
//! while mail arrives loses and doubles nothing, and a UIDVALIDITY change reprocesses nothing.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::support::{FakeLlm, eventually};
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_start_on_a_full_mailbox_answers_nothing_old() {
    let llm = FakeLlm::echo().await;
    let servers = servers().await;
    for i in 0..3 {
        servers.imap.append("INBOX", &from_ann(&format!("old{i}@example.org"), "Old", &format!("old mail {i}"))).await;
    }
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &llm, &servers, "INBOX", "").await;
    servers.imap.append("INBOX", &from_ann("new@example.org", "New", "the new mail")).await;
    assert!(eventually(WAIT, || servers.smtp.accepted().len() == 1).await, "{:?}", servers.smtp.attempts());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(servers.smtp.attempts().len(), 1);
    assert!(servers.smtp.accepted()[0].data.contains("the new mail"));
    assert_eq!(llm.count(), 1, "old mail never reached the model");
    let seen = servers.imap.seen("INBOX").await;
    assert_eq!(seen, [(1, false), (2, false), (3, false), (4, true)], "old mail is left unread for its owner");
    d.daemon.stop().await;
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn spawn(home: &Path) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(home.join("hermesd.log")).unwrap();
    Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["--home", home.to_str().unwrap(), "run"])
        .env("HERMESD_LOG", "info")
        .env("EMAIL_PASSWORD", PASSWORD)
        .env("EMAIL_ALLOWED_USERS", ANN)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn hermesd")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_mail_arrives_answers_each_mail_exactly_once() {
    let llm = FakeLlm::builder().latency(Duration::from_millis(1500)).start().await;
    let servers = servers().await;
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"fake\"\n\n{}",
        llm.base_url(),
        email_table(&servers, "INBOX", "")
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let mut child = spawn(home.path());
    super::support::wait_ready(port, home.path()).await;
    for i in 0..3 {
        servers
            .imap
            .append("INBOX", &from_ann(&format!("k{i}@example.org"), &format!("Crash {i}"), &format!("crash test {i}")))
            .await;
    }
    let started = eventually(Duration::from_secs(20), || llm.count() == 3).await;
    assert!(started, "turns started; log:\n{}", super::support::daemon_log(home.path()));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(servers.smtp.attempts().is_empty(), "nothing was answered before the kill");
    // Mail keeps arriving while the daemon is down.
    for i in 3..5 {
        servers
            .imap
            .append("INBOX", &from_ann(&format!("k{i}@example.org"), &format!("Crash {i}"), &format!("crash test {i}")))
            .await;
    }
    let mut child = spawn(home.path());
    super::support::wait_ready(port, home.path()).await;
    let all = || (0..5).all(|i| !replies_containing(&servers.smtp, &format!("crash test {i}")).is_empty());
    assert!(
        eventually(Duration::from_secs(30), all).await,
        "{:?}\nlog:\n{}",
        servers.smtp.attempts(),
        super::support::daemon_log(home.path())
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    for i in 0..5 {
        let replies = replies_containing(&servers.smtp, &format!("crash test {i}"));
        assert_eq!(replies.len(), 1, "mail {i} answered exactly once");
        assert_eq!(replies[0].header("In-Reply-To"), Some(format!("<k{i}@example.org>")));
    }
    assert_eq!(servers.smtp.attempts().len(), 5);
    assert_eq!(llm.count(), 8, "each interrupted turn ran once more, the two new ones once");
    let seen = servers.imap.seen("INBOX").await;
    assert!(seen.iter().all(|(_, s)| *s), "every mail ends \\Seen: {seen:?}");
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "hermesd did not exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uidvalidity_change_reprocesses_nothing() {
    let llm = FakeLlm::echo().await;
    let servers = servers().await;
    servers.imap.create("Agent").await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &llm, &servers, "Agent", "").await;
    let first = from_ann("v1@example.org", "One", "before the change");
    servers.imap.append("Agent", &first).await;
    assert!(eventually(WAIT, || servers.smtp.accepted().len() == 1).await, "{:?}", servers.smtp.attempts());
    d.daemon.stop().await;

    let before = servers.imap.uid_validity("Agent").await;
    // The folder is rebuilt (a restore, a migration): same mail under new UIDs, plus a new one.
    tokio::time::sleep(Duration::from_secs(1)).await;
    servers.imap.recreate("Agent", &[first, from_ann("v2@example.org", "Two", "after the change")]).await;
    assert_ne!(servers.imap.uid_validity("Agent").await, before, "the folder has a new UIDVALIDITY");
    let d = start(home.path(), &llm, &servers, "Agent", "").await;
    assert!(eventually(WAIT, || servers.smtp.accepted().len() == 2).await, "{:?}", servers.smtp.attempts());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(servers.smtp.attempts().len(), 2, "the old mail is not answered again");
    assert!(servers.smtp.accepted()[1].data.contains("after the change"));
    assert_eq!(llm.count(), 2);
    servers.imap.append("Agent", &from_ann("v3@example.org", "Three", "and later")).await;
    assert!(eventually(WAIT, || servers.smtp.accepted().len() == 3).await, "the cursor continues on the new UIDs");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_idle_is_polled() {
    let llm = FakeLlm::echo().await;
    let servers = Servers {
        imap: Dovecot::start_without_idle(ADDRESS, PASSWORD).await,
        smtp: FakeSmtp::start(ADDRESS, PASSWORD).await,
    };
    let mut probe = servers.imap.client().await;
    let capability = probe.command("CAPABILITY").await.join(" ");
    assert!(!capability.contains("IDLE"), "{capability}");
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &llm, &servers, "INBOX", "").await;
    for i in 0..2 {
        servers
            .imap
            .append("INBOX", &from_ann(&format!("p{i}@example.org"), "Poll", &format!("polled mail {i}")))
            .await;
        let answered = || !replies_containing(&servers.smtp, &format!("polled mail {i}")).is_empty();
        assert!(eventually(WAIT, answered).await, "{:?}", servers.smtp.attempts());
    }
    d.daemon.stop().await;
}
