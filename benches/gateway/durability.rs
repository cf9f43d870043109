//! The price of a synced commit, in process through the hermesd library: events accepted as a
//! platform that was told "taken" before the turn runs needs them (`Outlive::PowerCut`, the
//! batch commits with `synchronous = FULL`) against events accepted as the API and Home
//! Assistant requests need them (`Outlive::Crash`: the caller waits for the answer itself). One
//! caller accepting one event after another, and 50 callers at once (their accepts share
//! batches, so they share syncs). The store lives in a temp dir on the same file system as the
//! daemons' homes, so its syncs cost what theirs do.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermesd::store::{AcceptOutcome, InboundStore, Outlive, SqliteStore};
use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, Sender};

use crate::load::median;

/// Concurrent callers of each row.
const CALLERS: [usize; 2] = [1, 50];
/// Events accepted per row (split over its callers).
const EVENTS: usize = 1_000;

/// One row: what the accepts had to outlive, by how many callers, and what it cost.
struct Row {
    outlive: Outlive,
    callers: usize,
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
}

/// The measured rows.
pub(crate) struct Durability {
    rows: Vec<Row>,
}

/// Measure each row on a fresh store, on a runtime shaped like the daemon's (two workers), so
/// accepts queued while a batch syncs share the next batch as they do there.
pub(crate) fn run(quick: bool) -> Durability {
    let events = if quick { EVENTS / 10 } else { EVENTS };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("build the accepting runtime");
    let mut rows = Vec::new();
    for callers in CALLERS {
        for outlive in [Outlive::Crash, Outlive::PowerCut] {
            rows.push(runtime.block_on(measure(outlive, callers, events)));
        }
    }
    Durability { rows }
}

async fn measure(outlive: Outlive, callers: usize, events: usize) -> Row {
    let dir = tempfile::tempdir().expect("create a store dir");
    let store = Arc::new(
        SqliteStore::open(&dir.path().join("state.db"), Duration::from_secs(5), 2).await.expect("open a store"),
    );
    let each = events / callers;
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|caller| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(each);
                for i in 0..each {
                    let event = event(&format!("{caller}-{i}"), caller);
                    let at = Instant::now();
                    let outcome = store.accept_inbound(&event, 1, outlive).await.expect("accept an event");
                    assert!(matches!(outcome, AcceptOutcome::New { .. }), "event {caller}-{i} was a duplicate");
                    latencies.push(at.elapsed().as_secs_f64() * 1000.0);
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(events);
    for task in tasks {
        latencies.extend(task.await.expect("an accepting task"));
    }
    let wall = started.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    let p99 = latencies[((latencies.len() as f64 * 0.99) as usize).min(latencies.len() - 1)];
    Row { outlive, callers, per_second: latencies.len() as f64 / wall, p50_ms: median(latencies), p99_ms: p99 }
}

fn event(id: &str, caller: usize) -> InboundEvent {
    InboundEvent::Message {
        event_id: id.into(),
        message: InboundMessage {
            profile: None,
            message_id: id.into(),
            chat: ChatRef::new("telegram", caller.to_string(), ChatType::Dm),
            sender: Sender { id: format!("{caller}"), name: None, is_bot: false, roles: Vec::new() },
            text: format!("message {id}"),
            attachments: Vec::new(),
            reply_to: None,
            addressed: true,
            timestamp_ms: 1,
            history: Vec::new(),
            chat_title: None,
            client: None,
        },
    }
}

impl Durability {
    pub(crate) fn print(&self) {
        println!("\n### The price of a synced accept (in process, `accept_inbound`)\n");
        println!("| accepts must outlive | callers | accepts/s | p50 ms | p99 ms | vs a crash only |");
        println!("|---|---:|---:|---:|---:|---:|");
        for row in &self.rows {
            let base = self
                .rows
                .iter()
                .find(|other| other.callers == row.callers && other.outlive == Outlive::Crash)
                .map_or(1.0, |other| other.per_second);
            let label = match row.outlive {
                Outlive::Crash => "a crash (API, HA requests)",
                Outlive::PowerCut => "a power cut (synced)",
            };
            println!(
                "| {label} | {} | {:.0} | {:.3} | {:.3} | {:.2}× |",
                row.callers,
                row.per_second,
                row.p50_ms,
                row.p99_ms,
                row.per_second / base
            );
        }
    }
}
