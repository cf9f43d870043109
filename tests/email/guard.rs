//! Mail that must never be answered: auto-replies, bounces, list and bulk mail, spoofed or
//! unauthenticated senders, strangers (no pairing reply by mail).

use std::time::Duration;

use super::support::{FakeLlm, eventually};
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_replies_bounces_and_list_mail_get_no_answer() {
    let llm = FakeLlm::echo().await;
    let servers = servers().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &llm, &servers, "INBOX", "").await;
    let loops = [
        ("auto1@example.org", "Auto-Submitted: auto-replied\r\n"),
        ("auto2@example.org", "X-Autoreply: yes\r\n"),
        ("list1@example.org", "List-Id: <team.lists.example.org>\r\n"),
        ("bulk1@example.org", "Precedence: bulk\r\n"),
    ];
    for (id, extra) in loops {
        servers.imap.append("INBOX", &mail(ANN, id, "Away", "I am out of office", extra)).await;
    }
    let bounce = from_ann("bounce1@example.org", "Undelivered", "bounced").replacen(
        &format!("Return-Path: <{ANN}>"),
        "Return-Path: <>",
        1,
    );
    servers.imap.append("INBOX", &bounce).await;
    let report =
        from_ann("report1@example.org", "Delivery report", "--r\r\nContent-Type: text/plain\r\n\r\nfailed\r\n--r--")
            .replace(
                "Content-Type: text/plain; charset=utf-8\r\n\r\n",
                "Content-Type: multipart/report; report-type=delivery-status; boundary=\"r\"\r\n\r\n",
            );
    servers.imap.append("INBOX", &report).await;
    servers.imap.append("INBOX", &from_ann("real@example.org", "Question", "a real question")).await;
    assert!(eventually(WAIT, || servers.smtp.accepted().len() == 1).await, "{:?}", servers.smtp.attempts());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(servers.smtp.attempts().len(), 1, "only the real question is answered");
    assert_eq!(llm.count(), 1, "no turn for loop mail");
    assert!(servers.smtp.accepted()[0].data.contains("a real question"));
    let seen = servers.imap.seen("INBOX").await;
    assert_eq!(seen.iter().filter(|(_, s)| *s).count(), 1, "only the accepted mail is \\Seen: {seen:?}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spoofed_and_unknown_senders_are_refused_without_a_reply() {
    let llm = FakeLlm::echo().await;
    let servers = servers().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &llm, &servers, "INBOX", "").await;
    let genuine = format!(
        "Authentication-Results: {AUTHSERV}; spf=pass smtp.mailfrom=example.org; dmarc=pass header.from=example.org\r\n"
    );
    let without = from_ann("s1@example.org", "Hi", "no verdict").replacen(&genuine, "", 1);
    let foreign = from_ann("s2@example.org", "Hi", "foreign verdict").replacen(
        &genuine,
        "Authentication-Results: mx.attacker.example; dmarc=pass header.from=example.org\r\n",
        1,
    );
    let failed = from_ann("s3@example.org", "Hi", "dmarc failed").replacen(
        &genuine,
        &format!("Authentication-Results: {AUTHSERV}; dmarc=fail header.from=example.org\r\n"),
        1,
    );
    let stranger = mail("mallory@example.net", "s4@example.net", "Hi", "let me in", "");
    for raw in [&without, &foreign, &failed, &stranger] {
        servers.imap.append("INBOX", raw).await;
    }
    servers.imap.append("INBOX", &from_ann("ok@example.org", "Hi", "genuine ann")).await;
    assert!(eventually(WAIT, || servers.smtp.accepted().len() == 1).await, "{:?}", servers.smtp.attempts());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(servers.smtp.attempts().len(), 1, "no reply (and no pairing code) to the spoofed or unknown");
    assert!(servers.smtp.accepted()[0].data.contains("genuine ann"));
    assert_eq!(servers.smtp.accepted()[0].to, [ANN]);
    assert_eq!(llm.count(), 1);
    d.daemon.stop().await;
}
