//! Compression of a long session, in process, through the hermesd library.
//!
//! A `SqliteStore` in a temp dir gets a fresh session per run, filled with `MESSAGES` messages
//! (~300 chars of varied text each) the way the gateway writes them: per turn `accept_inbound` +
//! `begin_turn` for the user's message and `finish_turn` for the answer. Then a forced
//! `Compressor::compact` runs through a `ProviderChain` whose one provider answers a fixed
//! summary instantly, so the time is hermesd's own: loading the transcript, building the summary
//! prompt, rebuilding the system prompt, archiving the span and reloading the live transcript.
//! Afterwards full-text search is timed on the same store (every run's messages, archived ones
//! included): a word query (FTS5) and a substring query (no word match, so the trigram index).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hermesd::agent::provider::{ChatRequest, ChatResponse, DeltaSink, Provider, ProviderError};
use hermesd::agent::runtime::chain::{ProviderChain, RetryPolicy};
use hermesd::agent::runtime::compress::Compressor;
use hermesd::agent::runtime::prompt::PromptBuilder;
use hermesd::store::{AcceptOutcome, EventState, Outlive, SessionKey, SqliteStore, Store, TurnEnd};
use hermesd::vocab::message::{Message, Role};
use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, Sender};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;

use crate::load::median;

/// Messages in each compacted session (half user, half assistant).
pub(crate) const MESSAGES: usize = 2_000;
/// Timed repetitions of each search.
const SEARCHES: usize = 20;
/// A word planted in every 50th message, and a piece of it that is no word of its own.
pub(crate) const WORD_QUERY: &str = "invoice";
pub(crate) const SUBSTRING_QUERY: &str = "nvoic";
const SUMMARY: &str = "## Goal\nFinish the migration.\n## Progress\nSchema drafted.\n## Decisions\nKeep SQLite.\n\
                       ## Files\nsrc/store/mod.rs\n## Next steps\nWrite the tests.";

/// What the compression bench measured.
pub(crate) struct CompressionReport {
    pub(crate) runs: usize,
    /// Writing one session's messages, ms per run.
    pub(crate) fill_ms: Vec<f64>,
    pub(crate) compact_ms: Vec<f64>,
    pub(crate) archived: Vec<usize>,
    pub(crate) load_before_ms: Vec<f64>,
    pub(crate) load_after_ms: Vec<f64>,
    pub(crate) live_before: usize,
    pub(crate) live_after: usize,
    /// Chars of the summary request the provider received.
    pub(crate) summary_request_chars: usize,
    pub(crate) store_messages: usize,
    pub(crate) word_ms: Vec<f64>,
    pub(crate) word_hits: usize,
    pub(crate) substring_ms: Vec<f64>,
    pub(crate) substring_hits: usize,
}

/// A provider that answers every call with `SUMMARY` at once, remembering the request's size.
struct InstantProvider {
    request_chars: AtomicUsize,
}

#[async_trait]
impl Provider for InstantProvider {
    fn model(&self) -> &str {
        "instant"
    }

    fn context_length(&self) -> u64 {
        200_000
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        _deltas: Option<DeltaSink<'_>>,
    ) -> Result<ChatResponse, ProviderError> {
        let chars = request.messages.iter().filter_map(|m| m.content.as_deref()).map(str::len).sum();
        self.request_chars.store(chars, Ordering::Relaxed);
        Ok(ChatResponse {
            message: Message::text(Role::Assistant, SUMMARY),
            usage: None,
            finish_reason: Some("stop".into()),
            reasoning: None,
        })
    }
}

/// Fill `runs` fresh sessions, compact each, then time searches over the store.
pub(crate) async fn run(runs: usize) -> CompressionReport {
    let dir = tempfile::tempdir().expect("create the compression store dir");
    let sqlite = SqliteStore::open(&dir.path().join("state.db"), Duration::from_secs(5), 2)
        .await
        .expect("open the compression store");
    let store: Arc<dyn Store> = Arc::new(sqlite);
    let provider = Arc::new(InstantProvider { request_chars: AtomicUsize::new(0) });
    let chain = ProviderChain::new(vec![provider.clone() as Arc<dyn Provider>], RetryPolicy::default());
    let prompts = PromptBuilder::new(None, dir.path().join("work"), dir.path().join("data"));
    let mut rng = StdRng::seed_from_u64(0x6865_726d_6573);
    let mut report = CompressionReport {
        runs,
        fill_ms: Vec::new(),
        compact_ms: Vec::new(),
        archived: Vec::new(),
        load_before_ms: Vec::new(),
        load_after_ms: Vec::new(),
        live_before: 0,
        live_after: 0,
        summary_request_chars: 0,
        store_messages: 0,
        word_ms: Vec::new(),
        word_hits: 0,
        substring_ms: Vec::new(),
        substring_hits: 0,
    };
    for run in 0..runs {
        let started = Instant::now();
        let session_id = fill(store.as_ref(), run, &mut rng).await;
        report.fill_ms.push(ms(started.elapsed()));

        let started = Instant::now();
        let live = store.load_transcript(&session_id).await.expect("load the transcript");
        report.load_before_ms.push(ms(started.elapsed()));
        report.live_before = live.len();

        let compressor = Compressor {
            store: store.clone(),
            session_id: session_id.clone(),
            threshold: 0.5,
            prompts: prompts.clone(),
            toolsets: Vec::new(),
            before: None,
        };
        let mut state = chain.start_turn();
        let started = Instant::now();
        let compacted = compressor
            .compact(&chain, &mut state, &CancellationToken::new(), true)
            .await
            .expect("compaction succeeds")
            .expect("a 2,000-message session has something to compact");
        report.compact_ms.push(ms(started.elapsed()));
        report.archived.push(compacted.archived);
        report.summary_request_chars = provider.request_chars.load(Ordering::Relaxed);

        let started = Instant::now();
        let live = store.load_transcript(&session_id).await.expect("load the compacted transcript");
        report.load_after_ms.push(ms(started.elapsed()));
        report.live_after = live.len();
    }
    report.store_messages = runs * MESSAGES;
    (report.word_ms, report.word_hits) = time_search(store.as_ref(), WORD_QUERY).await;
    (report.substring_ms, report.substring_hits) = time_search(store.as_ref(), SUBSTRING_QUERY).await;
    report
}

/// A new session with `MESSAGES` messages, written turn by turn; returns its id.
async fn fill(store: &dyn Store, run: usize, rng: &mut StdRng) -> String {
    let chat_id = format!("compress-{run}");
    let key = SessionKey {
        key: format!("agent:main:api:dm:{chat_id}"),
        platform: "api".into(),
        chat_id: chat_id.clone(),
        chat_type: ChatType::Dm,
        thread_id: None,
        user_id: None,
    };
    let session = store.start_session(&key, now()).await.expect("start a session");
    for i in 0..MESSAGES / 2 {
        let question = text(rng, 2 * i);
        let event = event(&format!("{chat_id}-{i}"), &chat_id, &question);
        let AcceptOutcome::New { seq } =
            store.accept_inbound(&event, now(), Outlive::PowerCut).await.expect("accept an event")
        else {
            panic!("event {i} of {chat_id} was a duplicate")
        };
        store.begin_turn(seq, &session.id, &Message::text(Role::User, question), now()).await.expect("begin a turn");
        let answer = [Message::text(Role::Assistant, text(rng, 2 * i + 1))];
        let end = TurnEnd {
            messages: &answer,
            reply: &[],
            state: EventState::Done,
            error: None,
            prompt_tokens: None,
            also_done: &[],
            usage: Default::default(),
        };
        store.finish_turn(seq, &session.id, &end, now()).await.expect("finish a turn");
    }
    session.id
}

fn event(id: &str, chat_id: &str, text: &str) -> InboundEvent {
    InboundEvent::Message {
        event_id: id.into(),
        message: InboundMessage {
            profile: None,
            message_id: id.into(),
            chat: ChatRef::new("api", chat_id, ChatType::Dm),
            sender: Sender { id: "bench-user".into(), name: None, is_bot: false, roles: Vec::new() },
            text: text.into(),
            attachments: vec![],
            reply_to: None,
            addressed: true,
            timestamp_ms: now(),
            history: vec![],
            chat_title: None,
            client: None,
        },
    }
}

/// ~300 chars of varied text: common words and made-up names from syllables, a number now and
/// then, and `WORD_QUERY` in every 50th message.
pub(crate) fn text(rng: &mut StdRng, n: usize) -> String {
    const COMMON: &[&str] = &[
        "the", "and", "of", "to", "file", "path", "config", "please", "check", "build", "test", "error", "deploy",
        "server", "branch", "merge", "review", "because", "then", "after", "which", "with", "from", "should",
    ];
    const SYLLABLES: &[&str] =
        &["ka", "lo", "mi", "ren", "to", "sha", "vel", "dor", "pri", "an", "est", "ul", "bro", "qui", "zen", "fa"];
    let mut out = format!("#{n}");
    if n % 50 == 7 {
        out.push_str(" the ");
        out.push_str(WORD_QUERY);
    }
    while out.len() < 300 {
        out.push(' ');
        match rng.random_range(0..10) {
            0..5 => out.push_str(COMMON[rng.random_range(0..COMMON.len())]),
            5..9 => {
                for _ in 0..rng.random_range(1..=3) {
                    out.push_str(SYLLABLES[rng.random_range(0..SYLLABLES.len())]);
                }
            }
            _ => out.push_str(&rng.random_range(0..100_000).to_string()),
        }
    }
    out
}

/// `SEARCHES` timed runs of `query` over the whole store; in ms, plus the hits of the last.
async fn time_search(store: &dyn Store, query: &str) -> (Vec<f64>, usize) {
    let mut times = Vec::with_capacity(SEARCHES);
    let mut hits = 0;
    for _ in 0..SEARCHES {
        let started = Instant::now();
        hits = store.search(query, None, 10).await.expect("search").len();
        times.push(ms(started.elapsed()));
    }
    (times, hits)
}

fn now() -> i64 {
    hermesd::clock::now_ms()
}

fn ms(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1000.0
}

impl CompressionReport {
    pub(crate) fn print(&self) {
        let archived = median(self.archived.iter().map(|&a| a as f64).collect());
        println!("### compression of a {MESSAGES}-message session (in process, instant summariser)\n");
        println!(
            "- forced `Compressor::compact`, median of {} fresh session(s): {:.1} ms; archived {archived:.0} \
             messages, live transcript {} → {} messages; summary request {:.0} KB",
            self.runs,
            median(self.compact_ms.clone()),
            self.live_before,
            self.live_after,
            self.summary_request_chars as f64 / 1024.0
        );
        println!(
            "- `load_transcript`: {:.2} ms before ({} messages), {:.2} ms after ({} messages); medians",
            median(self.load_before_ms.clone()),
            self.live_before,
            median(self.load_after_ms.clone()),
            self.live_after
        );
        let fill = median(self.fill_ms.clone());
        println!(
            "- writing the session ({} turns of accept_inbound + begin_turn + finish_turn): {fill:.0} ms, {:.0} µs per turn",
            MESSAGES / 2,
            fill * 1000.0 / (MESSAGES / 2) as f64
        );
        println!(
            "- FTS search over the store ({} messages, archived included), median of {SEARCHES}: word {WORD_QUERY:?} \
             {:.2} ms ({} hits, limit 10); substring {SUBSTRING_QUERY:?} {:.2} ms ({} hits, trigram fallback after an \
             empty word search)",
            self.store_messages,
            median(self.word_ms.clone()),
            self.word_hits,
            median(self.substring_ms.clone()),
            self.substring_hits
        );
        println!();
    }
}
