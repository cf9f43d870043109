//! The preview lane against a recording platform: coalesced and paced updates, silence during a
//! 429 wait, masking, the final chunk delivered into the preview, drafts, and the note after a
//! crash. These run in real time: the outbox needs the SQLite store, whose pool timeouts fire
//! at once under a paused clock. Timing checks are lower bounds, which load cannot break.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hermesd_platform::{
    Capabilities, ChatRef, ChatType, LengthUnit, MarkdownDialect, MessageRef, OutboundKind, OutboundMessage, Platform,
    PlatformContext, PlatformError,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::*;
use crate::metrics::Metrics;
use crate::outbox::PlatformRegistry;
use crate::store::{Outlive, SqliteStore, Store};

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Send(String),
    Edit(String, String),
    Draft(i64, String),
}

#[derive(Default)]
struct Fake {
    calls: Mutex<Vec<(Instant, Call)>>,
    failures: Mutex<VecDeque<PlatformError>>,
    drafts: bool,
    per_request: bool,
    next_id: Mutex<u64>,
}

impl Fake {
    fn calls(&self) -> Vec<(Instant, Call)> {
        self.calls.lock().unwrap().clone()
    }

    fn record(&self, call: Call) -> Result<(), PlatformError> {
        self.calls.lock().unwrap().push((Instant::now(), call));
        match self.failures.lock().unwrap().pop_front() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

#[async_trait]
impl Platform for Fake {
    fn name(&self) -> &str {
        "fake"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_len: 40,
            length_unit: LengthUnit::Chars,
            edits: true,
            threads: false,
            buttons: false,
            typing: true,
            interactive: true,
            request_response: self.per_request,
            markdown: MarkdownDialect::Plain,
            per_chat_rate: 1.0,
            per_chat_burst: 3,
            group_rate: 0.5,
            global_rate: 30.0,
        }
    }

    async fn run(&self, _ctx: PlatformContext, cancel: CancellationToken) -> Result<(), PlatformError> {
        cancel.cancelled().await;
        Ok(())
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
        self.record(Call::Send(message.text.clone()))?;
        let mut next = self.next_id.lock().unwrap();
        *next += 1;
        Ok(MessageRef { chat: message.chat.clone(), message_id: format!("m{next}") })
    }

    async fn edit(&self, message: &MessageRef, text: &str) -> Result<(), PlatformError> {
        self.record(Call::Edit(message.message_id.clone(), text.to_owned()))
    }

    async fn typing(&self, _chat: &ChatRef) -> Result<(), PlatformError> {
        Ok(())
    }

    fn supports_drafts(&self, chat: &ChatRef) -> bool {
        self.drafts && chat.chat_type == ChatType::Dm
    }

    async fn send_draft(&self, _chat: &ChatRef, draft_id: i64, text: &str) -> Result<(), PlatformError> {
        self.record(Call::Draft(draft_id, text.to_owned()))
    }
}

struct Setup {
    outbox: Outbox,
    store: Arc<dyn Store>,
    fake: Arc<Fake>,
    _dir: tempfile::TempDir,
}

async fn setup(fake: Fake) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("s.db"), Duration::from_secs(5), 2).await.unwrap());
    let fake = Arc::new(fake);
    let mut platforms = PlatformRegistry::default();
    platforms.insert(fake.clone());
    let outbox = Outbox::new(
        store.clone(),
        platforms,
        Arc::new(Metrics::default()),
        TaskTracker::new(),
        CancellationToken::new(),
    )
    .with_streaming(["fake".to_owned()]);
    let redaction = outbox.redaction().clone();
    redaction.record("sk-supersecretvalue123");
    Setup { outbox, store, fake, _dir: dir }
}

fn dm() -> ChatRef {
    ChatRef::new("fake", "7", ChatType::Dm)
}

/// Let the lane make the call it can make at once.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// Wait (up to 10 s) until `fake` recorded `n` calls.
async fn calls_reach(fake: &Fake, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while fake.calls().len() < n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn updates_are_coalesced_paced_and_masked() {
    let s = setup(Fake::default()).await;
    let preview = s.outbox.preview(&dm(), Some("u1"), "evt:1").expect("streaming is on");
    preview.push("Hello ");
    settle().await;
    // Many pieces within one interval become one update with the latest text.
    for word in ["there, ", "key ", "sk-supersecretvalue123 ", "ok "] {
        preview.push(word);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    calls_reach(&s.fake, 2).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    preview.finish().await;
    let calls = s.fake.calls();
    assert_eq!(calls[0].1, Call::Send("Hello …".into()));
    assert_eq!(calls.len(), 2, "one send, then one coalesced edit: {calls:?}");
    assert_eq!(calls[1].1, Call::Edit("m1".into(), "Hello there, key [redacted] ok …".into()));
    assert!(calls[1].0 - calls[0].0 >= PREVIEW_EVERY, "edits are spaced: {calls:?}");
    assert_eq!(
        s.store.preview("evt:1").await.unwrap().map(|p| p.message_id),
        Some("m1".into()),
        "the preview's id is stored when it is first sent"
    );
}

#[tokio::test]
async fn a_429_silences_the_preview_until_the_wait_is_over() {
    let s = setup(Fake::default()).await;
    let preview = s.outbox.preview(&dm(), None, "evt:2").unwrap();
    preview.push("one ");
    settle().await;
    s.fake.failures.lock().unwrap().push_back(PlatformError::RateLimited { retry_after: Duration::from_secs(2) });
    preview.push("two ");
    calls_reach(&s.fake, 2).await;
    let limited_at = s.fake.calls()[1].0;
    for word in ["three ", "four ", "five "] {
        preview.push(word);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    calls_reach(&s.fake, 3).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    preview.finish().await;
    let calls = s.fake.calls();
    assert_eq!(calls.len(), 3, "send, the limited edit, one edit after the wait: {calls:?}");
    assert!(calls[2].0 - limited_at >= Duration::from_secs(2), "no call during the 429 wait: {calls:?}");
    assert_eq!(calls[2].1, Call::Edit("m1".into(), "one two three four five …".into()));
}

#[tokio::test]
async fn the_final_reply_fills_the_preview_and_overflow_goes_out_as_new_messages() {
    let s = setup(Fake::default()).await;
    let preview = s.outbox.preview(&dm(), Some("u1"), "evt:3").unwrap();
    let long = "word ".repeat(30);
    preview.push(&long);
    settle().await;
    preview.push("more ");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    preview.finish().await;
    let calls = s.fake.calls();
    let Call::Send(first) = &calls[0].1 else { panic!("{calls:?}") };
    assert!(first.chars().count() <= 40 && first.ends_with(WRITING), "the preview stops at the limit: {first}");
    assert_eq!(calls.len(), 1, "a preview at its limit does not grow: {calls:?}");

    let reply = s.outbox.compose(&dm(), &long, OutboundKind::Reply, Some("u1"));
    assert!(reply.len() > 1);
    s.store.enqueue_outbound("evt:3", &reply, 1).await.unwrap();
    s.outbox.deliver(&dm(), "evt:3");
    calls_reach(&s.fake, 1 + reply.len()).await;
    let calls = s.fake.calls();
    assert_eq!(calls[1].1, Call::Edit("m1".into(), reply[0].text.clone()), "chunk 0 replaces the preview");
    let sends = calls[2..].iter().filter(|(_, c)| matches!(c, Call::Send(_))).count();
    assert_eq!(sends, reply.len() - 1, "the rest are new messages: {calls:?}");
    assert!(s.store.preview("evt:3").await.unwrap().is_none(), "settled");
    assert!(s.store.pending_for_turn("evt:3").await.unwrap().is_empty());
}

#[tokio::test]
async fn a_preview_that_cannot_be_edited_any_more_gives_way_to_a_new_message() {
    let s = setup(Fake::default()).await;
    s.store.save_preview("evt:4", &MessageRef { chat: dm(), message_id: "gone".into() }, 1).await.unwrap();
    s.fake.failures.lock().unwrap().push_back(PlatformError::Permanent("message to edit not found".into()));
    let reply = s.outbox.compose(&dm(), "final", OutboundKind::Reply, None);
    s.store.enqueue_outbound("evt:4", &reply, 1).await.unwrap();
    s.outbox.deliver(&dm(), "evt:4");
    calls_reach(&s.fake, 2).await;
    let calls: Vec<Call> = s.fake.calls().into_iter().map(|(_, c)| c).collect();
    assert_eq!(calls, vec![Call::Edit("gone".into(), "final".into()), Call::Send("final".into())]);
    assert!(s.store.preview("evt:4").await.unwrap().is_none());
}

#[tokio::test]
async fn drafts_stream_without_a_message_and_fall_back_to_edits_when_refused() {
    let s = setup(Fake { drafts: true, ..Fake::default() }).await;
    let preview = s.outbox.preview(&dm(), None, "evt:5").unwrap();
    preview.push("thinking about it ");
    settle().await;
    preview.finish().await;
    let calls = s.fake.calls();
    assert!(
        matches!(&calls[..], [(_, Call::Draft(id, text))] if *id != 0 && text == "thinking about it …"),
        "{calls:?}"
    );
    assert!(s.store.preview("evt:5").await.unwrap().is_none(), "a draft leaves nothing to clean up");

    let s = setup(Fake { drafts: true, ..Fake::default() }).await;
    s.fake.failures.lock().unwrap().push_back(PlatformError::Permanent("method not found".into()));
    let preview = s.outbox.preview(&dm(), None, "evt:6").unwrap();
    preview.push("hello ");
    calls_reach(&s.fake, 2).await;
    preview.finish().await;
    let calls: Vec<Call> = s.fake.calls().into_iter().map(|(_, c)| c).collect();
    assert!(matches!(&calls[..], [Call::Draft(..), Call::Send(text)] if text == "hello …"), "{calls:?}");
}

#[tokio::test]
async fn an_interrupted_preview_is_noted_and_one_with_a_pending_reply_is_left_to_fill() {
    let s = setup(Fake::default()).await;
    let crashed = MessageRef { chat: dm(), message_id: "p1".into() };
    let answered = MessageRef { chat: dm(), message_id: "p2".into() };
    s.store.save_preview("evt:7", &crashed, 1).await.unwrap();
    s.store.save_preview("evt:8", &answered, 2).await.unwrap();
    let reply = s.outbox.compose(&dm(), "the answer", OutboundKind::Reply, None);
    s.store.enqueue_outbound("evt:8", &reply, 3).await.unwrap();
    assert_eq!(s.outbox.note_interrupted_previews().await, 1);
    s.outbox.resume_pending().await;
    calls_reach(&s.fake, 2).await;
    let calls: Vec<Call> = s.fake.calls().into_iter().map(|(_, c)| c).collect();
    assert_eq!(
        calls,
        vec![Call::Edit("p1".into(), INTERRUPTED_NOTE.into()), Call::Edit("p2".into(), "the answer".into())]
    );
    assert!(s.store.previews().await.unwrap().is_empty());
}

#[test]
fn streaming_is_off_unless_configured() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let s = setup(Fake::default()).await;
        let off = s.outbox.clone().with_streaming(Vec::new());
        assert!(off.preview(&dm(), None, "evt:9").is_none());
        assert!(s.outbox.preview(&ChatRef::new("other", "1", ChatType::Dm), None, "evt:9").is_none());
    });
}

#[tokio::test]
async fn each_model_call_starts_the_preview_over() {
    let s = setup(Fake::default()).await;
    let preview = s.outbox.preview(&dm(), None, "evt:10").unwrap();
    preview.push("Let me look that up ");
    calls_reach(&s.fake, 1).await;
    // Tools ran; the next call writes the answer, which replaces the earlier text.
    preview.restart();
    preview.push("The answer is 42 ");
    calls_reach(&s.fake, 2).await;
    preview.finish().await;
    let calls: Vec<Call> = s.fake.calls().into_iter().map(|(_, c)| c).collect();
    assert_eq!(
        calls,
        vec![Call::Send("Let me look that up …".into()), Call::Edit("m1".into(), "The answer is 42 …".into())]
    );
}

/// Accepts and receipts must outlive a power cut, except where the platform answers per request
/// (its caller waits on the request itself) — and a platform not registered gets the safe side.
#[tokio::test]
async fn what_a_write_must_outlive_follows_the_platforms_acknowledgement() {
    let acked_before = setup(Fake::default()).await;
    assert_eq!(acked_before.outbox.outlive(&dm()), Outlive::PowerCut);
    assert_eq!(acked_before.outbox.outlive(&ChatRef::new("webhook", "github", ChatType::Dm)), Outlive::PowerCut);
    let per_request = setup(Fake { per_request: true, ..Fake::default() }).await;
    assert_eq!(per_request.outbox.outlive(&dm()), Outlive::Crash);
}
