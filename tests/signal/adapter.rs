//! The Signal adapter alone against the fake signal-cli: the conformance kit from
//! `hermesd-platform` (capabilities, cancel, chunked sends, rate limits), error mapping, typing,
//! reactions, files as data URIs, and the measured hand-over window between signal-cli's
//! acknowledgement (its write to the stream) and the host's accept.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hermesd_platform::chunk::measure;
use hermesd_platform::conformance::{
    RecordingIngress, check_capabilities, check_reports_rate_limit, check_run_honours_cancel, check_send_chunks,
};
use hermesd_platform::{
    Accepted, Admission, AttachmentKind, ChatRef, ChatType, InboundEvent, Ingress, IngressError, LengthUnit,
    OutboundFile, OutboundKind, OutboundMessage, Platform, PlatformContext,
};
use hermesd_signal::{SignalPlatform, SignalSettings};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::eventually;
use super::support::fake_signal::FakeSignal;
use super::support::fake_signal::envelopes::{self, ACCOUNT, ALICE};

fn settings(fake: &FakeSignal, media: &std::path::Path) -> SignalSettings {
    SignalSettings {
        http_url: fake.url().to_owned(),
        account: ACCOUNT.into(),
        media_dir: media.join("media").join("signal"),
        api_timeout: Duration::from_secs(5),
        ..SignalSettings::default()
    }
}

fn platform(fake: &FakeSignal, media: &std::path::Path) -> SignalPlatform {
    let _ = rustls::crypto::ring::default_provider().install_default();
    SignalPlatform::new(settings(fake, media)).expect("adapter builds")
}

fn dm() -> ChatRef {
    ChatRef::new("signal", ALICE.uuid, ChatType::Dm)
}

fn message(chat: ChatRef, text: &str) -> OutboundMessage {
    OutboundMessage {
        chat,
        text: text.into(),
        reply_to: None,
        kind: OutboundKind::Reply,
        buttons: Vec::new(),
        chunk: (0, 1),
        file: None,
    }
}

#[test]
fn capabilities_are_signals() {
    let platform = SignalPlatform::new(SignalSettings { account: ACCOUNT.into(), ..SignalSettings::default() })
        .expect("adapter builds");
    let caps = platform.capabilities();
    check_capabilities(&caps);
    assert_eq!(platform.name(), "signal");
    assert_eq!((caps.max_message_len, caps.length_unit), (2000, LengthUnit::Chars));
    assert!(!caps.buttons && !caps.threads && !caps.edits && caps.typing && caps.interactive);
    assert!(platform.file_limits().is_some());
    assert_eq!(platform.health(), None, "nothing to report before run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_stops_promptly_on_cancel_with_the_stream_open() {
    let fake = FakeSignal::start().await;
    let dir = tempfile::tempdir().unwrap();
    let platform = Arc::new(platform(&fake, dir.path()));
    check_run_honours_cancel(platform.clone(), Duration::from_millis(500), Duration::from_secs(2)).await;
    assert_eq!(fake.connections(), 1);
    assert_eq!(platform.streams_opened(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_replies_are_sent_in_chunks_of_at_most_2000_chars() {
    let fake = FakeSignal::start().await;
    let dir = tempfile::tempdir().unwrap();
    let platform = platform(&fake, dir.path());
    let text = "Signal splits long text; so do we, at paragraph and word boundaries. ".repeat(100);
    let refs = check_send_chunks(&platform, &dm(), &text).await;
    let sent = fake.calls("send");
    assert!(refs.len() >= 4 && sent.len() == refs.len(), "{} refs, {} sends", refs.len(), sent.len());
    for params in &sent {
        assert!(measure(params["message"].as_str().unwrap_or_default(), LengthUnit::Chars) <= 2000);
        assert_eq!(params["recipient"], json!([ALICE.uuid]));
    }
    assert_eq!(refs[0].message_id, "1800000000000", "the id is the send's timestamp");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_map_to_rate_limits_permanent_and_transient_failures() {
    let fake = FakeSignal::start().await;
    let dir = tempfile::tempdir().unwrap();
    let platform = platform(&fake, dir.path());
    fake.rate_limit_next_send(7);
    let hi = message(dm(), "hi");
    check_reports_rate_limit(|| platform.send(&hi), Duration::from_secs(7)).await;
    fake.fail_next("send", 1, -4, "Failed to send message due to untrusted identities", json!(null));
    assert_eq!(platform.send(&message(dm(), "hi")).await.err().map(|e| e.kind()), Some("permanent"));
    fake.fail_next("send", 1, -1, "The user +15557654321 is not registered.", json!(null));
    assert_eq!(platform.send(&message(dm(), "hi")).await.err().map(|e| e.kind()), Some("permanent"));
    fake.fail_next("send", 1, -32603, "Failed to send message: timeout (IOException)", json!(null));
    assert_eq!(platform.send(&message(dm(), "hi")).await.err().map(|e| e.kind()), Some("transient"));
    let gone = SignalSettings { http_url: "http://127.0.0.1:9".into(), ..settings(&fake, dir.path()) };
    let gone = SignalPlatform::new(gone).expect("adapter builds");
    assert_eq!(gone.send(&message(dm(), "hi")).await.err().map(|e| e.kind()), Some("transient"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_reactions_and_files_use_signal_clis_calls() {
    let fake = FakeSignal::start().await;
    let dir = tempfile::tempdir().unwrap();
    let platform = platform(&fake, dir.path());
    let group = ChatRef::new("signal", "group:R3JvdXA=", ChatType::Group);
    platform.typing(&group).await.expect("typing");
    assert_eq!(
        fake.calls("sendTyping"),
        [json!({"groupId": "R3JvdXA=", "account": ACCOUNT})],
        "every call names the account, as a multi-account signal-cli needs"
    );
    platform.react(&dm(), &format!("{}:1700000000001", ALICE.uuid), "👍").await.expect("reaction");
    let reaction = fake.calls("sendReaction").remove(0);
    assert_eq!(
        (reaction["emoji"].as_str(), reaction["targetAuthor"].as_str(), reaction["targetTimestamp"].as_i64()),
        (Some("👍"), Some(ALICE.uuid), Some(1_700_000_000_001))
    );
    let file = OutboundFile {
        path: "media/outbound/1/report.txt".into(),
        name: "report.txt".into(),
        mime: "text/plain".into(),
        kind: AttachmentKind::Document,
        size: 5,
    };
    let sent = platform.send_file(&message(dm(), "here it is"), &file, b"hello").await.expect("file sent");
    assert_eq!(sent.chat, dm());
    let params = fake.calls("send").remove(0);
    assert_eq!(params["attachments"], json!(["data:text/plain;filename=report.txt;base64,aGVsbG8="]));
    assert_eq!(params["message"], "here it is");
}

/// An ingress that notes when each event was accepted.
struct TimedIngress {
    inner: Arc<RecordingIngress>,
    accepted: Mutex<Vec<(String, Instant)>>,
}

#[async_trait]
impl Ingress for TimedIngress {
    async fn admit(&self, event: &InboundEvent) -> Result<Admission, IngressError> {
        self.inner.admit(event).await
    }

    async fn accept(&self, event: InboundEvent) -> Result<Accepted, IngressError> {
        let id = event.event_id().to_owned();
        let accepted = self.inner.accept(event).await;
        self.accepted.lock().unwrap_or_else(PoisonError::into_inner).push((id, Instant::now()));
        accepted
    }

    async fn load_cursor(&self, platform: &str) -> Result<Option<String>, IngressError> {
        self.inner.load_cursor(platform).await
    }

    async fn save_cursor(&self, platform: &str, cursor: &str) -> Result<(), IngressError> {
        self.inner.save_cursor(platform, cursor).await
    }
}

/// signal-cli acknowledges a message to Signal before it writes it to the stream, so the time
/// from that write to the host's accept is when a crash loses it. Measured here: 300 messages,
/// the window per message, and what a wedge costs (messages written into the dead stream).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hand_over_window_is_measured_and_a_wedge_loses_only_what_it_swallowed() {
    let fake = FakeSignal::start().await;
    fake.set_keepalive(Duration::from_millis(200));
    let dir = tempfile::tempdir().unwrap();
    let settings = SignalSettings { stream_deadline: Duration::from_secs(1), ..settings(&fake, dir.path()) };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let platform = Arc::new(SignalPlatform::new(settings).expect("adapter builds"));
    let ingress = Arc::new(TimedIngress { inner: RecordingIngress::new(), accepted: Mutex::default() });
    let cancel = CancellationToken::new();
    let run = {
        let (platform, ctx, cancel) = (platform.clone(), PlatformContext { ingress: ingress.clone() }, cancel.clone());
        tokio::spawn(async move { platform.run(ctx, cancel).await })
    };
    assert!(eventually(Duration::from_secs(5), || fake.connections() == 1).await);
    const N: i64 = 300;
    for i in 0..N {
        fake.push(envelopes::dm(ALICE, 1_700_000_100_000 + i, &format!("m{i}")));
    }
    let all = || ingress.accepted.lock().unwrap_or_else(PoisonError::into_inner).len() == N as usize;
    assert!(eventually(Duration::from_secs(20), all).await, "every handed-over message accepted");
    let handed: std::collections::HashMap<String, Instant> = fake.handed_over().into_iter().collect();
    let mut windows: Vec<Duration> = ingress
        .accepted
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|(id, at)| at.duration_since(handed[id]))
        .collect();
    windows.sort();
    let (p50, p99, max) = (windows[windows.len() / 2], windows[windows.len() * 99 / 100], windows[windows.len() - 1]);
    println!("signal hand-over window over {N} messages: p50 {p50:?}, p99 {p99:?}, max {max:?}");
    assert!(p99 < Duration::from_secs(2), "p50 {p50:?}, p99 {p99:?}");

    // A wedge: what signal-cli writes into the dead stream is lost; the next stream gets the rest.
    fake.wedge();
    fake.push(envelopes::dm(ALICE, 1_700_000_200_000, "into the void"));
    assert!(eventually(Duration::from_secs(5), || fake.connections() == 2).await, "the wedged stream was replaced");
    fake.push(envelopes::dm(ALICE, 1_700_000_200_001, "after the wedge"));
    let after = || ingress.inner.events().iter().any(|e| e.event_id().ends_with(":1700000200001"));
    assert!(eventually(Duration::from_secs(5), after).await);
    assert_eq!(fake.swallowed().len(), 1, "only the message written into the wedged stream is lost");
    assert_eq!(platform.streams_replaced_for_silence(), 1);
    let health = platform.health().expect("running");
    assert!(health.healthy && health.detail.contains("1 silent stream(s) replaced"), "{health:?}");
    cancel.cancel();
    run.await.expect("run joins").expect("run ends cleanly");
}
