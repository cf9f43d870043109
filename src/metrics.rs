//! Metric names and a small Prometheus-text registry passed around explicitly (no global
//! recorder). Labels are bounded by construction: platform names, outcomes and error kinds,
//! never chat or user ids.
//!
//! Some gauges are read at render time: `hermesd_tasks` from the tokio runtime, `hermesd_pacers`
//! through a probe the outbox registers, `hermesd_allocator_bytes{kind}` from jemalloc's statistics
//! in the default build.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Inbound events by platform and outcome (`new`, `duplicate`, `refused`).
pub const INBOUND_TOTAL: &str = "hermesd_inbound_events_total";
/// Outbound chunks by platform and outcome (`sent`, `retried`, `failed`).
pub const OUTBOUND_TOTAL: &str = "hermesd_outbound_messages_total";
/// Finished turns by outcome (`ok`, `error`, `stopped`, `interrupted`, `rejected`, `limited`:
/// refused by a `[limits]` cap) and profile.
pub const TURNS_TOTAL: &str = "hermesd_turns_total";
/// Turn wall time, accept to reply stored.
pub const TURN_SECONDS: &str = "hermesd_turn_duration_seconds";
/// Wall time of single model calls (one attempt each), the model time inside a turn.
pub const MODEL_SECONDS: &str = "hermesd_model_call_duration_seconds";
/// Errors by kind (`provider`, `store`, `delivery`, `panic`).
pub const ERRORS_TOTAL: &str = "hermesd_errors_total";
/// Records and files `[retention]` removed, by kind (`inbound`, `outbound`,
/// `archived_messages`, `media`, `cron_output`).
pub const RETENTION_PRUNED_TOTAL: &str = "hermesd_retention_pruned_total";
/// Tokens of answered model calls by kind (`input`: uncached prompt, `cache_read`,
/// `cache_write`, `output`: completion); no user or chat labels.
pub const MODEL_TOKENS_TOTAL: &str = "hermesd_model_tokens_total";
/// Answered model calls by whether their cost is known (`priced` = `yes` | `no`).
pub const MODEL_CALLS_TOTAL: &str = "hermesd_model_calls_total";
/// What priced model calls cost, USD (rendered from exact picodollar sums).
pub const MODEL_COST_USD_TOTAL: &str = "hermesd_model_cost_usd_total";
/// Stored rows set aside because they no longer decode, by table (`inbound_events` at start,
/// `messages` when a transcript read finds one).
pub const QUARANTINED_TOTAL: &str = "hermesd_quarantined_rows_total";
/// Memory flush turns by outcome (`saved`, `nothing_saved`, `skipped`, `failed`).
pub const MEMORY_FLUSHES_TOTAL: &str = "hermesd_memory_flushes_total";
/// Sessions the reset policy archived, by reason (`idle`, `daily`) and by whom (`sweep`, `turn`).
pub const SESSION_RESETS_TOTAL: &str = "hermesd_session_resets_total";
/// Chats holding a pacer in the outbox now (a gauge read when `/metrics` is rendered).
pub const PACERS: &str = "hermesd_pacers";
/// Tokio tasks alive in the runtime that renders `/metrics` (the daemon's one runtime).
pub const TASKS: &str = "hermesd_tasks";
/// The allocator's own figures by `kind` (builds with the `alloc-jemalloc` feature): bytes the
/// program holds (`allocated`), the pages those use (`active`), and what is resident
/// (`resident`: also freed pages not purged yet, and the allocator's `metadata`).
pub const ALLOCATOR_BYTES: &str = "hermesd_allocator_bytes";

/// A gauge read at render time from the part that owns the value (no copy to keep in step).
type Probe = Box<dyn Fn() -> i64 + Send + Sync>;

const BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0];

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        for (i, bound) in BUCKETS.iter().enumerate() {
            if secs <= *bound {
                self.counts[i] += 1;
            }
        }
        self.count += 1;
        self.sum += secs;
    }
}

/// Models whose last call is kept; the one called longest ago goes first.
const MODELS_KEPT: usize = 32;

/// The last call of one model, and its counts since the start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelLast {
    /// When it ended, Unix ms.
    pub at_ms: i64,
    /// How long it took, ms.
    pub millis: u64,
    /// Its error, when it failed (masked as the log masks it, then cut).
    pub error: Option<String>,
    /// Calls since the start.
    pub calls: u64,
    /// Of which failed.
    pub errors: u64,
}

/// The registry. Cheap enough for the hot path: one uncontended lock per update.
#[derive(Default)]
pub struct Metrics {
    counters: Mutex<BTreeMap<(&'static str, String), u64>>,
    turn_seconds: Mutex<Histogram>,
    model_seconds: Mutex<Histogram>,
    /// Cost of priced model calls, picodollars (exact; rendered as USD).
    model_cost_picos: AtomicU64,
    /// Messages waiting in session mailboxes.
    pub queue_depth: AtomicI64,
    /// Turns running now (holding a worker permit).
    pub turns_running: AtomicI64,
    /// Turns waiting for a person (approval, clarify) without a worker permit.
    pub turns_parked: AtomicI64,
    /// Session actors alive now.
    pub active_sessions: AtomicI64,
    /// The last call of each model (the status page), at most `MODELS_KEPT`.
    models: Mutex<BTreeMap<String, ModelLast>>,
    /// Gauges read when rendering, by name (`PACERS`); a few, registered at wiring.
    probes: Mutex<Vec<(&'static str, Probe)>>,
}

impl Metrics {
    /// Add one to `name` with `labels` (already formatted `k="v",...`, from bounded values).
    pub fn inc(&self, name: &'static str, labels: &[(&str, &str)]) {
        self.add(name, labels, 1);
    }

    /// Add `n` to `name` with `labels` (bounded values only).
    pub fn add(&self, name: &'static str, labels: &[(&str, &str)], n: u64) {
        let mut text = String::new();
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            let _ = write!(text, "{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
        }
        let mut counters = self.counters.lock().expect("metrics lock poisoned");
        *counters.entry((name, text)).or_default() += n;
    }

    /// Record one turn's duration.
    pub fn observe_turn(&self, elapsed: Duration) {
        self.turn_seconds.lock().expect("metrics lock poisoned").observe(elapsed);
    }

    /// Record one model call's duration.
    pub fn observe_model_call(&self, elapsed: Duration) {
        self.model_seconds.lock().expect("metrics lock poisoned").observe(elapsed);
    }

    /// Count one answered model call: its tokens by kind and, when known, its cost.
    pub fn count_model_usage(&self, tokens: &[(&str, u64)], cost_picos: Option<u64>) {
        for &(kind, n) in tokens {
            if n > 0 {
                self.add(MODEL_TOKENS_TOTAL, &[("kind", kind)], n);
            }
        }
        self.inc(MODEL_CALLS_TOTAL, &[("priced", if cost_picos.is_some() { "yes" } else { "no" })]);
        if let Some(picos) = cost_picos {
            self.model_cost_picos.fetch_add(picos, Ordering::Relaxed);
        }
    }

    /// Note a call of `model` that ended at `at_ms` (Unix ms), took `elapsed` and failed with
    /// `error` (`None`: answered; secrets already masked: it is shown as is).
    pub fn note_model_call(&self, model: &str, at_ms: i64, elapsed: Duration, error: Option<String>) {
        let mut models = self.models.lock().expect("metrics lock poisoned");
        if !models.contains_key(model) && models.len() >= MODELS_KEPT {
            let oldest = models.iter().min_by_key(|(_, last)| last.at_ms).map(|(name, _)| name.clone());
            if let Some(oldest) = oldest {
                models.remove(&oldest);
            }
        }
        let last = models.entry(model.to_owned()).or_default();
        last.at_ms = at_ms;
        last.millis = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        last.calls += 1;
        last.errors += u64::from(error.is_some());
        last.error = error.map(|e| e.chars().take(300).collect());
    }

    /// Each model's last call, by name.
    pub fn models_last(&self) -> Vec<(String, ModelLast)> {
        let models = self.models.lock().expect("metrics lock poisoned");
        models.iter().map(|(name, last)| (name.clone(), last.clone())).collect()
    }

    /// Model calls timed so far and their summed duration, seconds.
    pub fn model_call_seconds(&self) -> (u64, f64) {
        let histogram = self.model_seconds.lock().expect("metrics lock poisoned");
        (histogram.count, histogram.sum)
    }

    /// The cost of priced model calls so far, picodollars.
    pub fn model_cost_picos(&self) -> u64 {
        self.model_cost_picos.load(Ordering::Relaxed)
    }

    /// Render gauge `name` from `probe` at every `/metrics` (a later probe of the same name
    /// replaces the earlier). The probe must be cheap and must not take this registry's locks.
    pub fn gauge_probe(&self, name: &'static str, probe: impl Fn() -> i64 + Send + Sync + 'static) {
        let mut probes = self.probes.lock().expect("metrics lock poisoned");
        probes.retain(|(n, _)| *n != name);
        probes.push((name, Box::new(probe)));
    }

    /// The value of a counter (tests and `/status`).
    pub fn counter(&self, name: &'static str, labels: &str) -> u64 {
        let counters = self.counters.lock().expect("metrics lock poisoned");
        counters.get(&(name, labels.to_owned())).copied().unwrap_or(0)
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let counters = self.counters.lock().expect("metrics lock poisoned").clone();
        let mut last = "";
        for ((name, labels), value) in &counters {
            if *name != last {
                let _ = writeln!(out, "# TYPE {name} counter");
                last = name;
            }
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
        for (name, histogram) in [(TURN_SECONDS, &self.turn_seconds), (MODEL_SECONDS, &self.model_seconds)] {
            let h = histogram.lock().expect("metrics lock poisoned");
            let _ = writeln!(out, "# TYPE {name} histogram");
            for (bound, count) in BUCKETS.iter().zip(h.counts) {
                let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {count}");
            }
            let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(out, "{name}_sum {}", h.sum);
            let _ = writeln!(out, "{name}_count {}", h.count);
        }
        let picos = self.model_cost_picos.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "# TYPE {MODEL_COST_USD_TOTAL} counter\n{MODEL_COST_USD_TOTAL} {}.{:012}",
            picos / 1_000_000_000_000,
            picos % 1_000_000_000_000
        );
        for (name, gauge) in [
            ("hermesd_queue_depth", &self.queue_depth),
            ("hermesd_turns_running", &self.turns_running),
            ("hermesd_turns_parked", &self.turns_parked),
            ("hermesd_active_sessions", &self.active_sessions),
        ] {
            let _ = writeln!(out, "# TYPE {name} gauge\n{name} {}", gauge.load(Ordering::Relaxed));
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let _ = writeln!(out, "# TYPE {TASKS} gauge\n{TASKS} {}", runtime.metrics().num_alive_tasks());
        }
        for (name, probe) in self.probes.lock().expect("metrics lock poisoned").iter() {
            let _ = writeln!(out, "# TYPE {name} gauge\n{name} {}", probe());
        }
        #[cfg(feature = "alloc-jemalloc")]
        allocator_gauges(&mut out);
        out
    }
}

/// `ALLOCATOR_BYTES`, as jemalloc counts it now (its statistics refresh on `epoch::advance`).
/// In the binary jemalloc is the global allocator and, unprefixed, `malloc` for SQLite too.
#[cfg(feature = "alloc-jemalloc")]
fn allocator_gauges(out: &mut String) {
    use tikv_jemalloc_ctl::{epoch, stats};
    if epoch::advance().is_err() {
        return;
    }
    type Read = fn() -> tikv_jemalloc_ctl::Result<usize>;
    let kinds: [(&str, Read); 4] = [
        ("allocated", stats::allocated::read),
        ("active", stats::active::read),
        ("resident", stats::resident::read),
        ("metadata", stats::metadata::read),
    ];
    let _ = writeln!(out, "# TYPE {ALLOCATOR_BYTES} gauge");
    for (kind, read) in kinds {
        if let Ok(bytes) = read() {
            let _ = writeln!(out, "{ALLOCATOR_BYTES}{{kind=\"{kind}\"}} {bytes}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.inc(INBOUND_TOTAL, &[("platform", "api"), ("outcome", "new")]);
        m.inc(INBOUND_TOTAL, &[("platform", "api"), ("outcome", "new")]);
        m.observe_turn(Duration::from_millis(3));
        let text = m.render();
        assert!(text.contains("hermesd_inbound_events_total{platform=\"api\",outcome=\"new\"} 2"), "{text}");
        assert!(text.contains("hermesd_turn_duration_seconds_bucket{le=\"0.005\"} 1"), "{text}");
        assert!(text.contains("hermesd_turn_duration_seconds_bucket{le=\"0.0025\"} 0"), "{text}");
    }

    #[test]
    fn model_usage_counts_tokens_by_kind_and_cost_in_usd() {
        let m = Metrics::default();
        m.count_model_usage(&[("input", 100), ("cache_read", 0), ("output", 7)], Some(1_500_000_000_000));
        m.count_model_usage(&[("input", 5)], None);
        let text = m.render();
        assert!(text.contains("hermesd_model_tokens_total{kind=\"input\"} 105"), "{text}");
        assert!(text.contains("hermesd_model_tokens_total{kind=\"output\"} 7"), "{text}");
        assert!(!text.contains("kind=\"cache_read\""), "{text}");
        assert!(text.contains("hermesd_model_calls_total{priced=\"no\"} 1"), "{text}");
        assert!(text.contains("hermesd_model_cost_usd_total 1.500000000000"), "{text}");
    }

    #[test]
    fn probed_gauges_are_read_at_render_time() {
        let m = Metrics::default();
        let held = std::sync::Arc::new(AtomicI64::new(3));
        let probe = held.clone();
        m.gauge_probe(PACERS, move || probe.load(Ordering::Relaxed));
        assert!(m.render().contains("hermesd_pacers 3\n"), "{}", m.render());
        held.store(7, Ordering::Relaxed);
        assert!(m.render().contains("hermesd_pacers 7\n"), "{}", m.render());
        m.gauge_probe(PACERS, || 1);
        assert_eq!(
            m.render().lines().filter(|l| l.starts_with("hermesd_pacers ")).count(),
            1,
            "a probe of the same name replaces the old one"
        );
        assert!(!m.render().contains("hermesd_tasks"), "outside a runtime there is no task count");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_task_gauge_counts_alive_tasks() {
        let m = Metrics::default();
        let tasks = |text: &str| -> i64 {
            let line = text.lines().find_map(|l| l.strip_prefix("hermesd_tasks ")).expect("a task gauge");
            line.parse().expect("a number")
        };
        let before = tasks(&m.render());
        let stop = tokio_util::sync::CancellationToken::new();
        let handles: Vec<_> = (0..5)
            .map(|_| {
                let stop = stop.clone();
                tokio::spawn(async move { stop.cancelled().await })
            })
            .collect();
        assert_eq!(tasks(&m.render()), before + 5);
        stop.cancel();
        for handle in handles {
            handle.await.expect("task ends");
        }
        assert_eq!(tasks(&m.render()), before);
    }
}
