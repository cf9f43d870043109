//! The conformance kit: shared checks every platform adapter runs from its own tests, so all
//! adapters are held to one contract. The checks panic on a broken contract, so they must never
//! be called outside tests.
//!
//! `RecordingIngress` records accepts and admissions, and `refuse(sender)` plays a stranger; the
//! checks cover cancel promptness, chunked sends, normaliser tables and rate-limit reporting.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use tokio::task::JoinError;
use tokio_util::sync::CancellationToken;

use crate::chunk::{chunk, measure};
use crate::{
    Accepted, Admission, Capabilities, ChatRef, DeliveryStatus, InboundEvent, Ingress, IngressError, MessageRef,
    OutboundKind, OutboundMessage, Platform, PlatformContext, PlatformError,
};

/// An Ingress that records every accepted event and dedups by (platform, event_id) like the host
/// does; cursors kept in memory. It admits every sender except those `refuse` names, and records
/// every `admit` call, so a test can prove an adapter asks before it downloads or accepts.
pub struct RecordingIngress {
    state: Mutex<Recorded>,
    /// How many new events were accepted, so `wait_for` can sleep instead of polling.
    accepted: watch::Sender<usize>,
}

#[derive(Default)]
struct Recorded {
    events: Vec<InboundEvent>,
    seen: HashSet<(String, String)>,
    duplicates: usize,
    cursors: HashMap<String, String>,
    refused: HashSet<String>,
    admissions: Vec<(String, Admission)>,
    /// `delivery_status` reports: (platform message id, status).
    statuses: Vec<(String, DeliveryStatus)>,
    /// `last_inbound_at` answers by chat id (Unix ms), set by the test.
    last_inbound: HashMap<String, i64>,
    /// `delivery_status` finds no receipt (a host that has not stored the send yet).
    receipts_unknown: bool,
}

impl RecordingIngress {
    /// An empty ingress, shared because the platform under test holds it while the test reads it.
    pub fn new() -> Arc<Self> {
        Arc::new(Self { state: Mutex::default(), accepted: watch::Sender::new(0) })
    }

    /// Every event accepted as new, in arrival order.
    pub fn events(&self) -> Vec<InboundEvent> {
        self.lock().events.clone()
    }

    /// Refuse sender `id` from now on (`admit` answers `Pairing` in a DM, `Ignored` elsewhere).
    pub fn refuse(&self, id: &str) {
        self.lock().refused.insert(id.to_owned());
    }

    /// Every `admit` answer so far: (event id, admission), in call order.
    pub fn admissions(&self) -> Vec<(String, Admission)> {
        self.lock().admissions.clone()
    }

    /// How many events were refused as duplicates.
    pub fn duplicates(&self) -> usize {
        self.lock().duplicates
    }

    /// Returns when at least `n` events are recorded or `timeout` passes, with whatever arrived.
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<InboundEvent> {
        let mut accepted = self.accepted.subscribe();
        // Timing out is not a failure here: the caller asserts on the events it got back.
        let _ = tokio::time::timeout(timeout, accepted.wait_for(|&count| count >= n)).await;
        self.events()
    }

    /// The cursor last saved for `platform`.
    pub fn cursor(&self, platform: &str) -> Option<String> {
        self.lock().cursors.get(platform).cloned()
    }

    /// Every `delivery_status` report so far: (platform message id, status), in call order.
    pub fn statuses(&self) -> Vec<(String, DeliveryStatus)> {
        self.lock().statuses.clone()
    }

    /// Make `last_inbound_at` answer `at_ms` for `chat_id` (a host's durable record).
    pub fn set_last_inbound(&self, chat_id: &str, at_ms: i64) {
        self.lock().last_inbound.insert(chat_id.to_owned(), at_ms);
    }

    /// Make `delivery_status` answer that no sent message has the id (still recording it).
    pub fn receipts_unknown(&self) {
        self.lock().receipts_unknown = true;
    }

    fn lock(&self) -> MutexGuard<'_, Recorded> {
        // A panicking test thread must not hide the events from the assertions that follow.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl Ingress for RecordingIngress {
    async fn admit(&self, event: &InboundEvent) -> Result<Admission, IngressError> {
        let mut state = self.lock();
        let admission = if !state.refused.contains(&event.sender().id) {
            Admission::Admit
        } else if event.chat().chat_type == crate::ChatType::Dm {
            Admission::Pairing
        } else {
            Admission::Ignored
        };
        state.admissions.push((event.event_id().to_owned(), admission));
        Ok(admission)
    }

    async fn accept(&self, event: InboundEvent) -> Result<Accepted, IngressError> {
        let key = (event.platform().to_owned(), event.event_id().to_owned());
        {
            let mut state = self.lock();
            if !state.seen.insert(key) {
                state.duplicates += 1;
                return Ok(Accepted::Duplicate);
            }
            state.events.push(event);
        }
        // Increments commute, so concurrent accepts can never make the count go backwards.
        self.accepted.send_modify(|count| *count += 1);
        Ok(Accepted::New)
    }

    async fn load_cursor(&self, platform: &str) -> Result<Option<String>, IngressError> {
        Ok(self.cursor(platform))
    }

    async fn save_cursor(&self, platform: &str, cursor: &str) -> Result<(), IngressError> {
        self.lock().cursors.insert(platform.to_owned(), cursor.to_owned());
        Ok(())
    }

    async fn delivery_status(
        &self,
        _platform: &str,
        platform_message_id: &str,
        status: &DeliveryStatus,
    ) -> Result<bool, IngressError> {
        let mut state = self.lock();
        state.statuses.push((platform_message_id.to_owned(), status.clone()));
        Ok(!state.receipts_unknown)
    }

    async fn last_inbound_at(&self, _platform: &str, chat_id: &str) -> Result<Option<i64>, IngressError> {
        Ok(self.lock().last_inbound.get(chat_id).copied())
    }
}

/// Checks capabilities are sane: max_message_len > 0, per_chat_rate > 0, burst >= 1; panics with
/// a clear message otherwise.
pub fn check_capabilities(caps: &Capabilities) {
    assert!(caps.max_message_len > 0, "capabilities: max_message_len must be positive, got 0");
    assert!(
        caps.per_chat_rate.is_finite() && caps.per_chat_rate > 0.0,
        "capabilities: per_chat_rate must be a positive finite rate, got {}",
        caps.per_chat_rate
    );
    assert!(caps.per_chat_burst >= 1, "capabilities: per_chat_burst must be at least 1, got 0");
}

/// Starts `platform.run` with a RecordingIngress, waits `settle`, cancels the token, and asserts
/// run returns `Ok` within `deadline` (e.g. 2 s). A run that ends before the cancel fails the
/// check too, since it proves nothing about cancellation. Returns the ingress so the caller can
/// inspect it. The adapter must not block the runtime's threads, or the deadline cannot fire.
pub async fn check_run_honours_cancel(
    platform: Arc<dyn Platform>,
    settle: Duration,
    deadline: Duration,
) -> Arc<RecordingIngress> {
    let name = platform.name().to_owned();
    let ingress = RecordingIngress::new();
    let ctx = PlatformContext { ingress: ingress.clone() };
    let cancel = CancellationToken::new();
    let token = cancel.clone();
    let mut run = tokio::spawn(async move { platform.run(ctx, token).await });
    tokio::time::sleep(settle).await;
    if run.is_finished() {
        let outcome = (&mut run).await;
        panic!("platform `{name}`: run returned before cancel: {}", describe(outcome));
    }
    cancel.cancel();
    match tokio::time::timeout(deadline, &mut run).await {
        Ok(Ok(Ok(()))) => ingress,
        Ok(outcome) => panic!("platform `{name}`: run failed on cancel: {}", describe(outcome)),
        Err(_) => {
            // Abort so a runaway adapter does not outlive the failing test.
            run.abort();
            panic!("platform `{name}`: run did not return within {deadline:?} of cancel")
        }
    }
}

fn describe(outcome: Result<Result<(), PlatformError>, JoinError>) -> String {
    match outcome {
        Ok(Ok(())) => "it returned ok".to_owned(),
        Ok(Err(error)) => format!("it returned an error: {error}"),
        Err(error) => format!("it panicked: {error}"),
    }
}

/// Chunks `text` with the platform's capabilities, sends every chunk through `platform.send`, and
/// asserts each chunk measured in the platform's unit is within max_message_len and that send
/// returned a non-empty MessageRef in the same chat. Chunks are numbered from 1 in
/// `OutboundMessage::chunk`. Returns the refs.
pub async fn check_send_chunks(platform: &dyn Platform, chat: &ChatRef, text: &str) -> Vec<MessageRef> {
    let name = platform.name();
    let caps = platform.capabilities();
    check_capabilities(&caps);
    let chunks = chunk(text, caps.max_message_len, caps.length_unit);
    assert!(!chunks.is_empty() || text.trim().is_empty(), "platform `{name}`: a non-blank text produced no chunks");
    let total = u32::try_from(chunks.len()).unwrap_or(u32::MAX);
    let mut refs = Vec::with_capacity(chunks.len());
    for (position, piece) in (0..total).zip(chunks) {
        let len = measure(&piece, caps.length_unit);
        assert!(
            len <= caps.max_message_len,
            "platform `{name}`: chunk {position} is {len} {:?} units, over max_message_len {}",
            caps.length_unit,
            caps.max_message_len
        );
        let message = OutboundMessage {
            chat: chat.clone(),
            text: piece,
            reply_to: None,
            kind: OutboundKind::Reply,
            buttons: Vec::new(),
            chunk: (position, total),
            file: None,
        };
        let sent = match platform.send(&message).await {
            Ok(sent) => sent,
            Err(error) => panic!("platform `{name}`: send of chunk {position} failed: {error}"),
        };
        assert_eq!(&sent.chat, chat, "platform `{name}`: send of chunk {position} returned a message in another chat");
        assert!(
            !sent.message_id.is_empty(),
            "platform `{name}`: send of chunk {position} returned an empty message id"
        );
        refs.push(sent);
    }
    refs
}

/// Table test for normalisers: for each (name, raw input, expected `Option<InboundEvent>`) run
/// `normalise` and assert equality, naming the failing row.
pub fn check_normalise_table<R>(
    rows: &[(&str, R, Option<InboundEvent>)],
    normalise: impl Fn(&R) -> Option<InboundEvent>,
) {
    for (name, raw, expected) in rows {
        let got = normalise(raw);
        assert_eq!(&got, expected, "normalise row `{name}` gave the wrong result");
    }
}

/// Asserts an adapter maps a rate-limit response to PlatformError::RateLimited with the given
/// retry_after: calls `op` and checks the result.
pub async fn check_reports_rate_limit<F, Fut>(op: F, expected: Duration)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<MessageRef, PlatformError>>,
{
    match op().await {
        Err(PlatformError::RateLimited { retry_after }) => assert_eq!(
            retry_after, expected,
            "rate limit reported with retry_after {retry_after:?}, expected {expected:?}"
        ),
        other => panic!("expected PlatformError::RateLimited {{ retry_after: {expected:?} }}, got {other:?}"),
    }
}

/// The problems `hermesd check` would list for `section` (under `platforms.<name>`) with only
/// `vars` set, every delivery target accepted.
pub fn section_problems(section: &dyn crate::section::Registered, vars: &[(&str, &str)]) -> Vec<String> {
    let env: HashMap<String, String> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    section.problems(&format!("platforms.{}", section.name()), &env, &|_| Ok(()))
}

#[cfg(test)]
mod tests {
    use std::panic::{AssertUnwindSafe, catch_unwind};

    use super::*;
    use crate::{ChatType, InboundMessage, LengthUnit, MarkdownDialect, Sender};

    fn caps() -> Capabilities {
        Capabilities {
            max_message_len: 64,
            length_unit: LengthUnit::Utf16,
            edits: true,
            threads: false,
            buttons: false,
            typing: true,
            interactive: true,
            request_response: false,
            markdown: MarkdownDialect::Markdown,
            per_chat_rate: 1.0,
            per_chat_burst: 3,
            group_rate: 1000.0,
            global_rate: 10000.0,
        }
    }

    fn chat() -> ChatRef {
        ChatRef::new("fake", "chat-1", ChatType::Dm)
    }

    fn event(platform: &str, id: &str) -> InboundEvent {
        let message = InboundMessage {
            profile: None,
            message_id: format!("msg-{id}"),
            chat: ChatRef::new(platform, "chat-1", ChatType::Dm),
            sender: Sender { id: "user-1".into(), name: None, is_bot: false, roles: Vec::new() },
            text: "hi".into(),
            attachments: Vec::new(),
            reply_to: None,
            addressed: true,
            timestamp_ms: 0,
            history: Vec::new(),
            chat_title: None,
            client: None,
        };
        InboundEvent::Message { event_id: id.into(), message }
    }

    /// How the fake adapter misbehaves, one flaw at a time.
    #[derive(Clone, Copy, PartialEq)]
    enum Flaw {
        None,
        IgnoresCancel,
        ReturnsEarly,
        WrongChat,
    }

    struct Fake {
        flaw: Flaw,
        sent: Mutex<Vec<OutboundMessage>>,
    }

    fn fake(flaw: Flaw) -> Fake {
        Fake { flaw, sent: Mutex::default() }
    }

    #[async_trait]
    impl Platform for Fake {
        fn name(&self) -> &str {
            "fake"
        }

        fn capabilities(&self) -> Capabilities {
            caps()
        }

        async fn run(&self, ctx: PlatformContext, cancel: CancellationToken) -> Result<(), PlatformError> {
            if self.flaw == Flaw::ReturnsEarly {
                return Err(PlatformError::Unauthorized("bad token".into()));
            }
            let refused = |e: IngressError| PlatformError::Transient(e.to_string());
            // The second "e1" is a redelivery, which the ingress must refuse.
            for id in ["e1", "e1", "e2"] {
                ctx.ingress.accept(event("fake", id)).await.map_err(refused)?;
            }
            ctx.ingress.save_cursor("fake", "e2").await.map_err(refused)?;
            if self.flaw == Flaw::IgnoresCancel {
                loop {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            cancel.cancelled().await;
            Ok(())
        }

        async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
            let mut sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
            sent.push(message.clone());
            let mut chat = message.chat.clone();
            if self.flaw == Flaw::WrongChat {
                chat.chat_id = "elsewhere".into();
            }
            Ok(MessageRef { chat, message_id: format!("out-{}", sent.len()) })
        }

        async fn edit(&self, _message: &MessageRef, _text: &str) -> Result<(), PlatformError> {
            Ok(())
        }

        async fn typing(&self, _chat: &ChatRef) -> Result<(), PlatformError> {
            Ok(())
        }
    }

    const SETTLE: Duration = Duration::from_millis(50);
    const DEADLINE: Duration = Duration::from_millis(300);

    /// Runs a check in its own task and returns its panic message; a check that passes fails the
    /// test, since every caller expects a failure.
    async fn failure<T: Send + 'static>(check: impl Future<Output = T> + Send + 'static) -> String {
        match tokio::spawn(check).await {
            Ok(_) => panic!("the check passed but should have failed"),
            Err(error) => error
                .try_into_panic()
                .ok()
                .and_then(|payload| payload.downcast::<String>().ok())
                .map_or_else(String::new, |message| *message),
        }
    }

    #[tokio::test]
    async fn ingress_dedups_per_platform_and_keeps_cursors() {
        let ingress = RecordingIngress::new();
        let table = [("a", Accepted::New), ("a", Accepted::Duplicate), ("b", Accepted::New)];
        for (platform, want) in table {
            let got = ingress.accept(event(platform, "1")).await.ok();
            assert_eq!(got, Some(want), "{platform}");
        }
        assert_eq!(ingress.events(), vec![event("a", "1"), event("b", "1")]);
        assert_eq!(ingress.duplicates(), 1);
        assert_eq!(ingress.load_cursor("a").await.ok(), Some(None));
        assert!(ingress.save_cursor("a", "42").await.is_ok());
        assert_eq!(ingress.cursor("a").as_deref(), Some("42"));
        assert_eq!(ingress.load_cursor("a").await.ok().flatten().as_deref(), Some("42"));
        assert_eq!(ingress.cursor("b"), None);
    }

    #[tokio::test]
    async fn wait_for_returns_once_enough_arrived_or_on_timeout() {
        let ingress = RecordingIngress::new();
        let writer = Arc::clone(&ingress);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = writer.accept(event("a", "1")).await;
            let _ = writer.accept(event("a", "2")).await;
        });
        let started = tokio::time::Instant::now();
        assert_eq!(ingress.wait_for(2, Duration::from_secs(5)).await.len(), 2);
        assert!(started.elapsed() < Duration::from_secs(5));
        let got = ingress.wait_for(3, Duration::from_millis(30)).await;
        assert_eq!(got.len(), 2, "a timed-out wait returns what arrived");
    }

    #[tokio::test]
    async fn run_check_passes_and_returns_what_the_platform_sent() {
        let ingress = check_run_honours_cancel(Arc::new(fake(Flaw::None)), SETTLE, DEADLINE).await;
        assert_eq!(ingress.events(), vec![event("fake", "e1"), event("fake", "e2")]);
        assert_eq!(ingress.duplicates(), 1);
        assert_eq!(ingress.cursor("fake").as_deref(), Some("e2"));
    }

    #[tokio::test]
    async fn run_check_fails_when_cancel_is_ignored() {
        let platform: Arc<dyn Platform> = Arc::new(fake(Flaw::IgnoresCancel));
        let message = failure(check_run_honours_cancel(platform, SETTLE, DEADLINE)).await;
        assert!(message.contains("did not return within"), "{message}");
    }

    #[tokio::test]
    async fn run_check_fails_when_run_returns_before_cancel() {
        let platform: Arc<dyn Platform> = Arc::new(fake(Flaw::ReturnsEarly));
        let message = failure(check_run_honours_cancel(platform, SETTLE, DEADLINE)).await;
        assert!(message.contains("returned before cancel"), "{message}");
    }

    #[test]
    fn capabilities_check_rejects_each_bad_field() {
        check_capabilities(&caps());
        let breakers: [fn(&mut Capabilities); 4] = [
            |c| c.max_message_len = 0,
            |c| c.per_chat_rate = 0.0,
            |c| c.per_chat_rate = f64::NAN,
            |c| c.per_chat_burst = 0,
        ];
        for breaker in breakers {
            let mut bad = caps();
            breaker(&mut bad);
            let failed = catch_unwind(|| check_capabilities(&bad)).is_err();
            assert!(failed, "{bad:?} passed");
        }
    }

    #[tokio::test]
    async fn send_check_sends_every_chunk_in_order() {
        let platform = fake(Flaw::None);
        let text = "Thumbs 👍🏽 and family 👨‍👩‍👧‍👦 in a reply long enough to need a few chunks. ".repeat(4);
        let refs = check_send_chunks(&platform, &chat(), &text).await;
        let sent = platform.sent.into_inner().unwrap_or_else(PoisonError::into_inner);
        assert!(refs.len() > 1);
        assert_eq!(refs.len(), sent.len());
        let total = u32::try_from(sent.len()).unwrap_or(u32::MAX);
        for (position, message) in (0..).zip(&sent) {
            assert_eq!(message.chunk, (position, total));
            assert!(measure(&message.text, LengthUnit::Utf16) <= 64);
        }
    }

    #[tokio::test]
    async fn send_check_fails_when_the_reply_lands_in_another_chat() {
        let message = failure(async move {
            check_send_chunks(&fake(Flaw::WrongChat), &chat(), "hello").await;
        })
        .await;
        assert!(message.contains("another chat"), "{message}");
    }

    #[test]
    fn normalise_table_names_the_failing_row() {
        let rows = [("first", 1, Some(event("fake", "1"))), ("dropped", 2, None)];
        let normalise = |raw: &i32| (*raw == 1).then(|| event("fake", "1"));
        check_normalise_table(&rows, normalise);
        let rows = [("first", 1, Some(event("fake", "1"))), ("second", 2, Some(event("fake", "2")))];
        let failure = catch_unwind(AssertUnwindSafe(|| check_normalise_table(&rows, normalise)));
        let message = failure.err().and_then(|p| p.downcast::<String>().ok()).unwrap_or_default();
        assert!(message.contains("row `second`"), "{message}");
    }

    #[tokio::test]
    async fn rate_limit_check_accepts_only_the_expected_wait() {
        let limited = |secs| async move {
            Err::<MessageRef, _>(PlatformError::RateLimited { retry_after: Duration::from_secs(secs) })
        };
        check_reports_rate_limit(|| limited(3), Duration::from_secs(3)).await;
        let expected = Duration::from_secs(3);
        let message = failure(check_reports_rate_limit(move || limited(5), expected)).await;
        assert!(message.contains("retry_after 5s"), "{message}");
        let transient = || async { Err(PlatformError::Transient("timeout".into())) };
        let message = failure(check_reports_rate_limit(transient, expected)).await;
        assert!(message.contains("Transient"), "{message}");
        let ok = || async { Ok(MessageRef { chat: chat(), message_id: "1".into() }) };
        let message = failure(check_reports_rate_limit(ok, expected)).await;
        assert!(message.contains("got Ok"), "{message}");
    }
}
