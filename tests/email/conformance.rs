//! The shared conformance checks from `hermesd-platform`, run against Dovecot and the fake SMTP
//! server: capabilities, cancel during an IDLE, sends within the length limit, a throttling
//! reply reported as a rate limit.

use std::sync::Arc;
use std::time::Duration;

use hermesd_email::{EmailPlatform, EmailSettings};
use hermesd_platform::conformance::{
    check_capabilities, check_reports_rate_limit, check_run_honours_cancel, check_send_chunks,
};
use hermesd_platform::{ChatRef, ChatType, OutboundKind, OutboundMessage, Platform};

use super::*;

fn settings(servers: &Servers, home: &std::path::Path) -> EmailSettings {
    EmailSettings {
        imap_url: servers.imap.url(),
        smtp_url: servers.smtp.url(),
        address: ADDRESS.into(),
        username: ADDRESS.into(),
        password: PASSWORD.into(),
        authserv_id: AUTHSERV.into(),
        media_dir: home.join("media").join("email"),
        ..EmailSettings::default()
    }
}

fn ann_thread() -> ChatRef {
    let mut chat = ChatRef::new("email", ANN, ChatType::Dm);
    chat.thread_id = Some("root@example.org".into());
    chat
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adapter_passes_the_conformance_kit() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let servers = servers().await;
    let home = tempfile::tempdir().unwrap();
    let platform = Arc::new(EmailPlatform::new(settings(&servers, home.path())));
    let caps = platform.capabilities();
    check_capabilities(&caps);
    assert_eq!(platform.name(), "email");
    assert!(caps.threads && caps.interactive && !caps.edits && !caps.buttons);
    assert!(!platform.shows_progress(&ann_thread()), "no mail per progress line");

    // Cancelled while idling on the folder, after a first completed check.
    let ingress = check_run_honours_cancel(platform.clone(), Duration::from_secs(2), Duration::from_secs(2)).await;
    let cursor = ingress.cursor("email").expect("a first start saves its cursor");
    let parts: Vec<&str> = cursor.split(':').collect();
    assert_eq!((parts.len(), parts[1]), (3, "0"), "UIDVALIDITY:last UID:date, before UIDNEXT 1: {cursor}");
    assert!(platform.health().is_some_and(|h| h.healthy), "{:?}", platform.health());

    let refs = check_send_chunks(platform.as_ref(), &ann_thread(), &"A long answer. ".repeat(800)).await;
    assert_eq!(refs.len(), 1, "one mail per answer");
    let sent = servers.smtp.accepted();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].header("In-Reply-To").as_deref(), Some("<root@example.org>"), "a notice joins its thread");
    assert_eq!(format!("<{}>", refs[0].message_id), sent[0].header("Message-ID").unwrap_or_default());

    servers.smtp.answer_next(1, "421 4.7.28 rate limited: too many messages, slow down");
    let message = OutboundMessage {
        chat: ann_thread(),
        text: "hello".into(),
        reply_to: None,
        kind: OutboundKind::Reply,
        buttons: Vec::new(),
        chunk: (0, 1),
        file: None,
    };
    check_reports_rate_limit(|| platform.send(&message), Duration::from_secs(60)).await;
}
