//! Round trips: threading headers, sessions by thread, attachments under the cap, SMTP 4xx
//! retried and 5xx failed with a receipt.

use std::time::Duration;

use super::support::{FakeLlm, eventually};
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_threads_correctly_and_a_thread_is_one_session() {
    let llm = FakeLlm::echo().await;
    let servers = servers().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &llm, &servers, "INBOX", "").await;
    servers.imap.append("INBOX", &from_ann("m1@example.org", "Plans", "Lunch at noon?")).await;
    assert!(eventually(WAIT, || servers.smtp.accepted().len() == 1).await, "{:?}", servers.smtp.attempts());
    let first = &servers.smtp.accepted()[0];
    assert_eq!(first.user, ADDRESS, "logged in with the configured user");
    assert_eq!(first.from, ADDRESS);
    assert_eq!(first.to, [ANN]);
    assert_eq!(first.header("Subject").as_deref(), Some("Re: Plans"));
    assert_eq!(first.header("In-Reply-To").as_deref(), Some("<m1@example.org>"));
    assert_eq!(first.header("References").as_deref(), Some("<m1@example.org>"));
    assert_eq!(first.header("Auto-Submitted").as_deref(), Some("auto-replied"));
    assert!(first.header("Content-Type").is_some_and(|c| c.contains("multipart/alternative")), "{}", first.data);
    assert!(first.data.contains("text/plain") && first.data.contains("text/html"), "{}", first.data);
    assert!(first.data.contains("Lunch at noon?"), "{}", first.data);
    let ours = first.header("Message-ID").expect("our message id");
    let seen = super::support::eventually_async(WAIT, || async { servers.imap.seen("INBOX").await == [(1, true)] });
    assert!(seen.await, "the mail is \\Seen once accepted");

    // Ann answers our reply, quoting it; the answer continues the same session.
    let quoted = format!("Make it one.\r\n\r\nOn Tue, Agent <{ADDRESS}> wrote:\r\n> echo: Lunch at noon?");
    let extra = format!("In-Reply-To: {ours}\r\nReferences: <m1@example.org> {ours}\r\n");
    servers.imap.append("INBOX", &mail(ANN, "m3@example.org", "Re: Re: Plans", &quoted, &extra)).await;
    assert!(eventually(WAIT, || servers.smtp.accepted().len() == 2).await, "{:?}", servers.smtp.attempts());
    let second = &servers.smtp.accepted()[1];
    assert_eq!(second.header("Subject").as_deref(), Some("Re: Plans"), "Re: is not doubled");
    assert_eq!(second.header("In-Reply-To").as_deref(), Some("<m3@example.org>"));
    assert_eq!(second.header("References"), Some(format!("<m1@example.org> {ours} <m3@example.org>")));
    let requests = llm.requests();
    let last = requests.last().expect("a request").to_string();
    assert!(last.contains("Lunch at noon?"), "the thread's history is in the same session: {last}");
    assert!(last.contains("Make it one."));
    assert!(!last.contains("> echo: Lunch"), "quoted history is trimmed from what the model sees: {last}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_are_kept_under_the_cap_and_noted_over_it() {
    let llm = FakeLlm::echo().await;
    let servers = servers().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &llm, &servers, "INBOX", "max_file_mb = 1").await;
    let big = "QUJD".repeat(400_000);
    let body = format!(
        "--b\r\nContent-Type: text/plain\r\n\r\nTwo files attached\r\n--b\r\nContent-Type: text/plain; name=\"notes.txt\"\r\n\
         Content-Disposition: attachment; filename=\"notes.txt\"\r\n\r\nthe secret word is marmalade\r\n--b\r\n\
         Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\
         Content-Disposition: attachment; filename=\"big.bin\"\r\n\r\n{big}\r\n--b--"
    );
    let raw = from_ann("files@example.org", "Files", &body).replace(
        "Content-Type: text/plain; charset=utf-8\r\n\r\n",
        "Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n",
    );
    servers.imap.append("INBOX", &raw).await;
    assert!(eventually(WAIT, || servers.smtp.accepted().len() == 1).await, "{:?}", servers.smtp.attempts());
    let prompt = llm.requests()[0].to_string();
    assert!(prompt.contains("file too large: big.bin"), "{prompt}");
    assert!(prompt.contains("marmalade") || prompt.contains("notes.txt"), "{prompt}");
    let saved: Vec<_> = walk(&home.path().join("media").join("email"));
    assert_eq!(saved.len(), 1, "only the small file is saved: {saved:?}");
    assert!(saved[0].ends_with("notes.txt"));
    d.daemon.stop().await;
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path.to_string_lossy().into_owned());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smtp_4xx_is_retried_and_5xx_fails_with_a_receipt() {
    let llm = FakeLlm::echo().await;
    let servers = servers().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &llm, &servers, "INBOX", "").await;
    servers.smtp.answer_next(1, "451 4.3.0 mailbox busy, try again later");
    servers.imap.append("INBOX", &from_ann("t1@example.org", "Retry", "first")).await;
    assert!(
        eventually(Duration::from_secs(30), || servers.smtp.accepted().len() == 1).await,
        "{:?}",
        servers.smtp.attempts()
    );
    let codes: Vec<u16> = servers.smtp.attempts().iter().map(|s| s.code).collect();
    assert_eq!(codes, [451, 250], "retried after the 4xx");

    servers.smtp.answer_next(1, "550 5.7.1 recipient refused");
    servers.imap.append("INBOX", &from_ann("t2@example.org", "Refused", "second")).await;
    assert!(eventually(WAIT, || servers.smtp.attempts().len() == 3).await);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let codes: Vec<u16> = servers.smtp.attempts().iter().map(|s| s.code).collect();
    assert_eq!(codes, [451, 250, 550], "a 5xx is not retried");
    let pool =
        sqlx::SqlitePool::connect(&format!("sqlite://{}", home.path().join("state.db").display())).await.unwrap();
    let failed: Vec<(String, String)> =
        sqlx::query_as("SELECT state, COALESCE(error, '') FROM outbound_messages WHERE state = 'failed'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].1.contains("550"), "the receipt names the refusal: {failed:?}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_answered_by_replying_approve() {
    let llm = FakeLlm::builder()
        .tool_calls(&[("terminal", r#"{"command":"git push --force origin x"}"#)])
        .reply("pushed (or tried)")
        .start()
        .await;
    let servers = servers().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &llm, &servers, "INBOX", "\n[tools]\napproval_timeout = \"30s\"\n").await;
    servers.imap.append("INBOX", &from_ann("ask@example.org", "Deploy", "force push please")).await;
    let asked = || replies_containing(&servers.smtp, "/approve").into_iter().next();
    assert!(eventually(WAIT, || asked().is_some()).await, "{:?}", servers.smtp.attempts());
    let prompt = asked().unwrap();
    assert_eq!(prompt.header("In-Reply-To").as_deref(), Some("<ask@example.org>"), "the prompt is in the thread");
    let ours = prompt.header("Message-ID").expect("prompt id");
    let answer = format!("/approve\r\n\r\nOn Tue, Agent <{ADDRESS}> wrote:\r\n> Approval needed");
    let extra = format!("In-Reply-To: {ours}\r\nReferences: <ask@example.org> {ours}\r\n");
    servers.imap.append("INBOX", &mail(ANN, "yes@example.org", "Re: Deploy", &answer, &extra)).await;
    let finished = || !replies_containing(&servers.smtp, "pushed (or tried)").is_empty();
    assert!(eventually(Duration::from_secs(30), finished).await, "{:?}", servers.smtp.attempts());
    let requests = llm.requests();
    let tool = requests[1]["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "tool").cloned();
    let result = tool.and_then(|m| m["content"].as_str().map(str::to_owned)).unwrap_or_default();
    assert!(result.contains("exit code"), "the command ran after the mailed /approve: {result}");
    d.daemon.stop().await;
}
