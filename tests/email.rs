//! E-mail end to end: the real daemon against a real Dovecot (IMAP, started by the test support
//! on loopback) and the fake SMTP submission server — threading, loops, spoofed senders,
//! attachments, SMTP failures, first start on a full mailbox, restarts and UIDVALIDITY changes.
#![cfg(feature = "email")]

mod support;

#[path = "email/accounts.rs"]
mod accounts;
#[path = "email/conformance.rs"]
mod conformance;
#[path = "email/delivery.rs"]
mod delivery;
#[path = "email/durability.rs"]
mod durability;
#[path = "email/guard.rs"]
mod guard;

use std::path::Path;
use std::time::Duration;

use support::dovecot::Dovecot;
use support::fake_smtp::{FakeSmtp, Submission};
use support::{FakeLlm, TestDaemon, config_for, start_daemon};

const ADDRESS: &str = "agent@example.com";
const PASSWORD: &str = "imap-and-smtp-secret";
const ANN: &str = "ann@example.org";
const AUTHSERV: &str = "mx.test";
const WAIT: Duration = Duration::from_secs(20);

/// Dovecot and the fake SMTP server for one test.
struct Servers {
    imap: Dovecot,
    smtp: FakeSmtp,
}

async fn servers() -> Servers {
    Servers { imap: Dovecot::start(ADDRESS, PASSWORD).await, smtp: FakeSmtp::start(ADDRESS, PASSWORD).await }
}

/// `[platforms.email]` for `servers` watching `folder`, plus `settings` lines.
fn email_table(servers: &Servers, folder: &str, settings: &str) -> String {
    format!(
        "[agent]\nbatch_window = \"0s\"\n\n[platforms.email]\nenabled = true\nimap_url = \"{}\"\nsmtp_url = \"{}\"\n\
         address = \"{ADDRESS}\"\nauthserv_id = \"{AUTHSERV}\"\nfolder = \"{folder}\"\npoll_interval = \"1s\"\n{settings}\n",
        servers.imap.url(),
        servers.smtp.url()
    )
}

/// The daemon with the e-mail adapter; waits until the first mailbox check completed (so the
/// cursor exists and mail appended from now on is new).
async fn start(home: &Path, llm: &FakeLlm, servers: &Servers, folder: &str, settings: &str) -> TestDaemon {
    let config = config_for(llm, &email_table(servers, folder, settings));
    let env = [("EMAIL_PASSWORD", PASSWORD), ("EMAIL_ALLOWED_USERS", "Ann@Example.org")];
    let d = start_daemon(home, &config, &env).await;
    ready(&d.base, &servers.imap).await;
    d
}

async fn ready(base: &str, imap: &Dovecot) {
    let url = format!("{base}/readyz");
    let ok = support::eventually_async(WAIT, || async {
        support::client().get(&url).send().await.is_ok_and(|r| r.status() == 200)
    })
    .await;
    assert!(ok, "the email adapter never became healthy; dovecot log:\n{}", imap.log());
}

/// A message as Ann's mail server would deliver it: our server's `Authentication-Results`
/// with `dmarc=pass`, unless `extra` says otherwise.
fn mail(from: &str, id: &str, subject: &str, body: &str, extra: &str) -> String {
    let domain = from.rsplit('@').next().unwrap_or_default();
    format!(
        "Return-Path: <{from}>\r\nAuthentication-Results: {AUTHSERV}; spf=pass smtp.mailfrom={domain}; \
         dmarc=pass header.from={domain}\r\n{extra}From: Ann <{from}>\r\nTo: {ADDRESS}\r\nSubject: {subject}\r\n\
         Date: {}\r\nMessage-ID: <{id}>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n",
        chrono::Utc::now().to_rfc2822()
    )
}

/// A mail from Ann with no extra headers.
fn from_ann(id: &str, subject: &str, body: &str) -> String {
    mail(ANN, id, subject, body, "")
}

/// Accepted submissions whose text part contains `needle`.
fn replies_containing(smtp: &FakeSmtp, needle: &str) -> Vec<Submission> {
    smtp.accepted().into_iter().filter(|s| s.data.contains(needle)).collect()
}
