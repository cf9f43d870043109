//! Table tests of the normaliser: raw mail in, the expected event (or skip reason) out.

use hermesd_platform::conformance::check_normalise_table;
use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, Sender};

use super::*;

fn rules() -> Rules {
    Rules {
        own: "agent@example.com".into(),
        authserv_id: "mx.example.com".into(),
        require_auth: true,
        max_file_bytes: 1024,
    }
}

const PASS: &str =
    "Authentication-Results: mx.example.com; spf=pass; dkim=pass; dmarc=pass header.from=example.org\r\n";

fn mail(extra: &str, body: &str) -> String {
    format!(
        "{PASS}{extra}From: Ann Smith <Ann@Example.org>\r\nTo: agent@example.com\r\nSubject: Plans\r\n\
         Date: Tue, 2 Jan 2024 10:00:00 +0000\r\nMessage-ID: <m2@example.org>\r\n\r\n{body}"
    )
}

fn expected(text: &str, thread: &str) -> InboundEvent {
    let mut chat = ChatRef::new("email", "ann@example.org", ChatType::Dm);
    chat.thread_id = Some(thread.into());
    InboundEvent::Message {
        event_id: "m2@example.org".into(),
        message: InboundMessage {
            profile: None,
            message_id: "m2@example.org".into(),
            chat,
            sender: Sender {
                id: "ann@example.org".into(),
                name: Some("Ann Smith".into()),
                is_bot: false,
                roles: vec![],
            },
            text: text.into(),
            attachments: vec![],
            reply_to: None,
            addressed: true,
            timestamp_ms: 1_704_189_600_000,
            history: vec![],
            chat_title: Some("Plans".into()),
            client: None,
        },
    }
}

#[test]
fn normaliser_table() {
    let rows = vec![
        (
            "new thread",
            mail("", "Lunch at noon?\r\n-- \r\nAnn"),
            Some(expected("Subject: Plans\n\nLunch at noon?", "m2@example.org")),
        ),
        (
            "reply keys the thread by the first reference",
            mail(
                "In-Reply-To: <m1@example.org>\r\nReferences: <m0@example.org> <m1@example.org>\r\n",
                "Yes.\r\n\r\nOn Mon, Agent wrote:\r\n> Lunch?",
            ),
            Some(expected("Yes.", "m0@example.org")),
        ),
        (
            "in-reply-to without references",
            mail("In-Reply-To: <m1@example.org>\r\n", "Sure"),
            Some(expected("Sure", "m1@example.org")),
        ),
        (
            "a command is the first word",
            mail("", "/approve\r\n\r\nOn Tue, Agent wrote:\r\n> Approval needed"),
            Some(expected("/approve", "m2@example.org")),
        ),
        ("auto-reply", mail("Auto-Submitted: auto-replied\r\n", "I am away"), None),
        ("list mail", mail("List-Id: <news.example.org>\r\n", "News"), None),
        ("bulk", mail("Precedence: bulk\r\n", "Sale"), None),
        ("bounce", mail("Return-Path: <>\r\n", "Undeliverable"), None),
    ];
    check_normalise_table(&rows, |raw| normalise(raw.as_bytes(), &rules(), 0).ok().map(|n| n.event));
}

#[test]
fn html_only_mail_becomes_text() {
    let raw = mail(
        "MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n",
        "<html><body><p>Hello <b>there</b></p><p>Second&nbsp;para</p></body></html>",
    );
    let normalised = normalise(raw.as_bytes(), &rules(), 0).expect("normalised");
    let InboundEvent::Message { message, .. } = normalised.event else { panic!("a message") };
    assert!(message.text.contains("Hello there"), "{}", message.text);
    assert!(message.text.contains("Second"), "{}", message.text);
    assert!(!message.text.contains('<'), "{}", message.text);
}

#[test]
fn spoofed_and_unauthenticated_senders_are_refused() {
    let no_header = mail("", "hi").replacen(PASS, "", 1);
    let forged = no_header.replacen(
        "From:",
        "Authentication-Results: mx.evil.example; dmarc=pass header.from=example.org\r\nFrom:",
        1,
    );
    let failed = no_header.replacen(
        "From:",
        "Authentication-Results: mx.example.com; dmarc=fail header.from=example.org\r\nFrom:",
        1,
    );
    for (name, raw) in [("no header", &no_header), ("foreign authserv-id", &forged), ("dmarc=fail", &failed)] {
        assert!(
            matches!(normalise(raw.as_bytes(), &rules(), 0), Err(Skip::Unauthenticated(_))),
            "{name} must be refused"
        );
    }
    let open = Rules { require_auth: false, ..rules() };
    assert!(normalise(no_header.as_bytes(), &open, 0).is_ok(), "require_auth = false lets it through");
}

#[test]
fn own_mail_and_no_sender_are_skipped() {
    let own = mail("", "x").replace("Ann Smith <Ann@Example.org>", "agent@example.com");
    assert_eq!(normalise(own.as_bytes(), &rules(), 0).err(), Some(Skip::Own));
    let nobody = mail("", "x").replace("From: Ann Smith <Ann@Example.org>\r\n", "");
    assert_eq!(normalise(nobody.as_bytes(), &rules(), 0).err(), Some(Skip::NoSender));
}

#[test]
fn attachments_over_the_cap_keep_no_bytes_and_threading_is_recorded() {
    let big = "A".repeat(2000);
    let raw = mail(
        "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\nReferences: <m0@example.org>\r\n",
        &format!(
            "--b\r\nContent-Type: text/plain\r\n\r\nSee files\r\n--b\r\nContent-Type: text/plain; name=\"small.txt\"\r\n\
             Content-Disposition: attachment; filename=\"small.txt\"\r\n\r\nsmall\r\n--b\r\n\
             Content-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"big.bin\"\r\n\r\n{big}\r\n--b--\r\n"
        ),
    );
    let normalised = normalise(raw.as_bytes(), &rules(), 0).expect("normalised");
    let parts: Vec<(&str, bool)> = normalised.parts.iter().map(|p| (p.name.as_str(), p.bytes.is_some())).collect();
    assert_eq!(parts, [("small.txt", true), ("big.bin", false)]);
    assert_eq!(normalised.thread.references, ["m0@example.org", "m2@example.org"]);
    assert_eq!(normalised.thread.subject, "Plans");
}

#[test]
fn a_missing_message_id_gets_a_stable_synthetic_one() {
    let raw = mail("", "x").replace("Message-ID: <m2@example.org>\r\n", "");
    let a = normalise(raw.as_bytes(), &rules(), 0).expect("normalised");
    let b = normalise(raw.as_bytes(), &rules(), 0).expect("normalised");
    assert_eq!(a.event.event_id(), b.event.event_id());
    assert!(a.event.event_id().ends_with("@no-message-id.invalid"));
}

mod props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = normalise(&raw, &rules(), 0);
        }

        #[test]
        fn arbitrary_bodies_and_headers_never_panic(header in "[ -~]{0,80}", body in "(?s).{0,400}") {
            let raw = mail(&format!("X-Test: {header}\r\nAuthentication-Results: {header}\r\n"), &body);
            let _ = normalise(raw.as_bytes(), &rules(), 0);
            let trimmed = crate::text::trim_reply(&body);
            prop_assert!(body.trim().is_empty() || !trimmed.is_empty());
        }
    }
}
