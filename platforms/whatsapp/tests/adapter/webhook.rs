//! Webhooks handed to the adapter: signatures, the handshake, normalising and accepting,
//! strangers, media under the cap, button presses, statuses and the 24-hour window.

use hermesd_platform::{
    Admission, AttachmentKind, Button, ChatRef, ChatType, DeliveryStatus, InboundEvent, OutboundKind, OutboundMessage,
    Platform, PlatformError, WebhookRequest,
};
use serde_json::json;

use crate::fake_whatsapp::webhook;
use crate::{USER, VERIFY, rig, rig_with};

fn reply(text: &str, buttons: Vec<Button>) -> OutboundMessage {
    OutboundMessage {
        chat: ChatRef::new("whatsapp", USER, ChatType::Dm),
        text: text.into(),
        reply_to: Some("wamid.IN".into()),
        kind: OutboundKind::Reply,
        buttons,
        chunk: (0, 1),
        file: None,
    }
}

#[tokio::test]
async fn a_signed_text_is_accepted_once_and_a_bad_signature_stores_nothing() {
    let rig = rig().await;
    let (wamid, notification) = webhook::text(USER, "hello");
    let body = notification.to_string().into_bytes();
    for headers in [vec![], vec![("x-hub-signature-256".to_owned(), hermesd_whatsapp::sign("wrong", &body))]] {
        let answer = rig.platform.handle_webhook(&rig.ctx, WebhookRequest { headers, body: body.clone() }).await;
        assert_eq!(answer.status, 401);
    }
    assert!(
        rig.ingress.events().is_empty() && rig.ingress.admissions().is_empty(),
        "nothing read before the signature"
    );
    assert_eq!(rig.post(&notification).await, 200);
    assert_eq!(rig.post(&notification).await, 200, "Meta's redelivery is acknowledged");
    let events = rig.ingress.events();
    assert_eq!(events.len(), 1);
    assert_eq!(rig.ingress.duplicates(), 1, "and deduplicated by wamid");
    let InboundEvent::Message { event_id, message } = &events[0] else { panic!("not a message") };
    assert_eq!((event_id.as_str(), message.text.as_str(), message.sender.id.as_str()), (wamid.as_str(), "hello", USER));
}

#[tokio::test]
async fn the_handshake_echoes_the_challenge_for_the_verify_token_only() {
    let rig = rig().await;
    let ok =
        rig.platform.webhook_get(&format!("hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token={VERIFY}"));
    assert_eq!((ok.status, ok.body.as_str()), (200, "1158201444"));
    assert_eq!(rig.platform.webhook_get("hub.mode=subscribe&hub.challenge=1&hub.verify_token=nope").status, 403);
}

#[tokio::test]
async fn media_is_fetched_under_the_cap_after_admission_and_strangers_cost_nothing() {
    let rig = rig_with(|s| s.max_file_bytes = 1024).await;
    rig.fake.add_media("MEDIA-SMALL", "image/jpeg", &[7; 100]);
    rig.fake.add_media("MEDIA-BIG", "application/pdf", &[8; 4096]);
    let (_, small) =
        webhook::message(USER, "image", json!({ "id": "MEDIA-SMALL", "mime_type": "image/jpeg", "caption": "look" }));
    let (_, big) = webhook::message(
        USER,
        "document",
        json!({ "id": "MEDIA-BIG", "mime_type": "application/pdf", "filename": "big.pdf" }),
    );
    assert_eq!(rig.post(&webhook::notification(USER, "Ann", vec![small, big])).await, 200);
    let events = rig.ingress.events();
    assert_eq!(events.len(), 2, "both accepted, in order");
    let InboundEvent::Message { message, .. } = &events[0] else { panic!() };
    assert_eq!(message.attachments.len(), 1);
    let attachment = &message.attachments[0];
    assert_eq!((attachment.kind, attachment.size), (AttachmentKind::Image, 100));
    assert!(attachment.path.starts_with("media/whatsapp/16505551234/MEDIA-SMALL"), "{}", attachment.path);
    assert_eq!(std::fs::read(rig.dir.join(&attachment.path)).unwrap(), vec![7; 100]);
    let InboundEvent::Message { message, .. } = &events[1] else { panic!() };
    assert!(message.attachments.is_empty() && message.text.contains("[file too large: big.pdf"), "{}", message.text);
    assert_eq!(rig.fake.calls_to("download").len(), 1, "the big file's announced size stopped it before download");

    rig.ingress.refuse("15550000000");
    rig.fake.add_media("MEDIA-X", "image/jpeg", &[1; 10]);
    let (_, stranger) = webhook::message("15550000000", "image", json!({ "id": "MEDIA-X", "mime_type": "image/jpeg" }));
    assert_eq!(rig.post(&webhook::notification("15550000000", "Eve", vec![stranger])).await, 200);
    assert_eq!(rig.ingress.admissions().last().map(|a| a.1), Some(Admission::Pairing));
    assert_eq!(rig.ingress.events().len(), 2, "nothing of the stranger's stored");
    assert!(rig.fake.calls_to("media_lookup").iter().all(|c| c.body["id"] != "MEDIA-X"), "nor downloaded");
}

#[tokio::test]
async fn approvals_go_out_as_reply_buttons_and_a_press_comes_back_as_an_action() {
    let rig = rig().await;
    rig.post(&webhook::text(USER, "run it").1).await;
    let buttons = vec![
        Button { label: "Approve".into(), data: "approve".into() },
        Button { label: "Deny".into(), data: "deny".into() },
    ];
    let sent = rig.platform.send(&reply("Approval needed: rm -rf build", buttons)).await.expect("sent");
    let payload = &rig.fake.sent_to(USER)[0];
    assert_eq!(payload["type"], "interactive");
    assert_eq!(payload["interactive"]["action"]["buttons"][0]["reply"], json!({ "id": "approve", "title": "Approve" }));
    let (press_id, press) = webhook::button_reply(USER, &sent.message_id, "approve", "Approve");
    assert_eq!(rig.post(&press).await, 200);
    let InboundEvent::Action { event_id, action } = rig.ingress.events().pop().unwrap() else {
        panic!("not an action")
    };
    assert_eq!((event_id, action.data, action.message_id), (press_id, "approve".to_owned(), sent.message_id));
}

#[tokio::test]
async fn statuses_reach_the_hosts_receipts_and_start_nothing() {
    let rig = rig().await;
    assert_eq!(rig.post(&webhook::status(USER, "wamid.OUT9", "delivered", None)).await, 200);
    assert_eq!(rig.post(&webhook::status(USER, "wamid.OUT9", "failed", Some(131_047))).await, 200);
    let statuses = rig.ingress.statuses();
    assert_eq!(statuses.len(), 2);
    assert_eq!(statuses[0], ("wamid.OUT9".to_owned(), DeliveryStatus::Delivered));
    let DeliveryStatus::Failed(why) = &statuses[1].1 else { panic!("{statuses:?}") };
    assert!(why.contains("131047"), "{why}");
    assert!(rig.ingress.events().is_empty());
}

#[tokio::test]
async fn a_failure_that_outruns_the_receipt_is_asked_again() {
    let rig = rig().await;
    rig.post(&webhook::text(USER, "hi").1).await;
    let sent = rig.platform.send(&reply("hello", Vec::new())).await.expect("sent");
    rig.ingress.receipts_unknown();
    let failed = webhook::status(USER, &sent.message_id, "failed", Some(131_026));
    assert_eq!(rig.post(&failed).await, 503, "Meta retries until the receipt is stored");
    let foreign = webhook::status(USER, "wamid.SENT-BY-ANOTHER-APP", "failed", Some(131_026));
    assert_eq!(rig.post(&foreign).await, 200, "a message this process never sent is not waited for");
    let delivered = webhook::status(USER, &sent.message_id, "delivered", None);
    assert_eq!(rig.post(&delivered).await, 200, "progress without a receipt is not worth a retry");
}

#[tokio::test]
async fn typing_marks_the_last_message_read_with_the_indicator() {
    let rig = rig().await;
    let chat = ChatRef::new("whatsapp", USER, ChatType::Dm);
    rig.platform.typing(&chat).await.expect("no message yet: nothing to do");
    assert!(rig.fake.reads().is_empty());
    let (wamid, notification) = webhook::text(USER, "hi");
    rig.post(&notification).await;
    rig.platform.typing(&chat).await.expect("typing");
    let reads = rig.fake.reads();
    assert_eq!(reads.len(), 1);
    assert_eq!(reads[0]["message_id"], wamid.as_str());
    assert_eq!(reads[0]["typing_indicator"]["type"], "text");
}

#[tokio::test]
async fn outside_the_window_the_template_goes_once_and_the_reply_fails_clearly() {
    let rig = rig_with(|s| s.reengage_template = "hermes_reengage".into()).await;
    // The host's durable record: the user last wrote 30 hours ago.
    rig.ingress.set_last_inbound(USER, now_ms() - 30 * 3_600_000);
    rig.post(&webhook::status(USER, "wamid.OLD", "read", None)).await;
    let error = rig.platform.send(&reply("here is your answer", Vec::new())).await.expect_err("outside the window");
    assert!(
        matches!(&error, PlatformError::Permanent(why) if why.contains("24-hour") && why.contains("hermes_reengage")),
        "{error}"
    );
    let sent = rig.fake.sent_to(USER);
    assert_eq!(sent.len(), 1, "only the template: {sent:?}");
    assert_eq!(sent[0]["type"], "template");
    assert_eq!(sent[0]["template"], json!({ "name": "hermes_reengage", "language": { "code": "en_US" } }));
    let again = rig.platform.send(&reply("second chunk", Vec::new())).await.expect_err("still outside");
    assert!(again.to_string().contains("waiting for the user"), "{again}");
    assert_eq!(rig.fake.sent_to(USER).len(), 1, "the template goes once per lapsed window");
    // The user answers the template: the window is open again.
    rig.post(&webhook::text(USER, "ok, what is it?").1).await;
    rig.platform.send(&reply("here it is", Vec::new())).await.expect("inside the window");
    assert_eq!(rig.fake.texts(USER), ["here it is"]);
}

#[tokio::test]
async fn outside_the_window_without_a_template_nothing_is_sent() {
    let rig = rig().await;
    let early = rig.platform.send(&reply("hello?", Vec::new())).await.expect_err("not started");
    assert_eq!(early.kind(), "transient", "before the host's record can be asked, the send waits: {early}");
    rig.post(&webhook::status(USER, "wamid.OLD", "read", None)).await;
    let error = rig.platform.send(&reply("hello?", Vec::new())).await.expect_err("no window");
    assert!(matches!(&error, PlatformError::Permanent(why) if why.contains("reengage_template")), "{error}");
    assert!(rig.fake.sent().is_empty());
}

fn now_ms() -> i64 {
    i64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()).unwrap()
}
