//! Two mailboxes as two accounts: each answered from its own address, on its own profile.

use super::support::{FakeLlm, eventually};
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_mailboxes_are_two_accounts_each_answering_its_own_mail_on_its_own_profile() {
    const WORK: &str = "work@example.com";
    let (home_llm, work_llm) = (FakeLlm::echo().await, FakeLlm::echo().await);
    let home_servers = servers().await;
    let work_servers =
        Servers { imap: Dovecot::start(WORK, "work-secret").await, smtp: FakeSmtp::start(WORK, "work-secret").await };
    let home = tempfile::tempdir().unwrap();
    // The work mailbox has its own servers, address, password variable and profile; the rest
    // (authserv_id, folder, poll_interval) comes from the table.
    let work = format!(
        "[platforms.email.accounts.work]\naddress = \"{WORK}\"\nimap_url = \"{}\"\nsmtp_url = \"{}\"\n\
         password_env = \"EMAIL_WORK_PASSWORD\"\nprofile = \"work\"\n\n\
         [profiles.work.model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"work-model\"\n",
        work_servers.imap.url(),
        work_servers.smtp.url(),
        work_llm.base_url()
    );
    let config = config_for(&home_llm, &format!("{}\n{work}", email_table(&home_servers, "INBOX", "")));
    let env = [("EMAIL_PASSWORD", PASSWORD), ("EMAIL_WORK_PASSWORD", "work-secret"), ("EMAIL_ALLOWED_USERS", ANN)];
    let d = start_daemon(home.path(), &config, &env).await;
    ready(&d.base, &home_servers.imap).await;
    let platforms = || async {
        let ready: serde_json::Value =
            support::client().get(format!("{}/readyz", d.base)).send().await.unwrap().json().await.unwrap();
        ready["platforms"].clone()
    };
    let both = serde_json::json!({"email": "ok", "email@work": "ok"});
    assert!(support::eventually_async(WAIT, || async { platforms().await == both }).await, "{}", platforms().await);

    home_servers.imap.append("INBOX", &from_ann("h1@example.org", "Home", "hello home")).await;
    work_servers.imap.append("INBOX", &from_ann("w1@example.org", "Work", "hello work")).await;
    let answered = || home_servers.smtp.accepted().len() == 1 && work_servers.smtp.accepted().len() == 1;
    let attempts = || (home_servers.smtp.attempts(), work_servers.smtp.attempts());
    assert!(eventually(WAIT, answered).await, "{:?}", attempts());
    tokio::time::sleep(Duration::from_millis(700)).await;
    let (home_reply, work_reply) = (&home_servers.smtp.accepted()[0], &work_servers.smtp.accepted()[0]);
    assert_eq!((home_reply.from.as_str(), work_reply.from.as_str()), (ADDRESS, WORK), "each from its own address");
    assert_eq!(work_reply.user, WORK, "logged in with the work mailbox's own password");
    assert!(home_reply.data.contains("hello home") && work_reply.data.contains("hello work"));
    assert_eq!((home_servers.smtp.accepted().len(), work_servers.smtp.accepted().len()), (1, 1), "once each");
    assert_eq!((home_llm.count(), work_llm.count()), (1, 1), "each on its own profile's model");
    d.daemon.stop().await;
}
