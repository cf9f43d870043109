//! The load generator and the numbers of one workload run.
//!
//! A workload is `sessions` concurrent server-side sessions (`X-Hermes-Session-Id`), each sending
//! `messages` messages to `POST /v1/chat/completions` and never more than one at a time. Closed
//! loop: a session sends its next message the moment it gets a reply, so the gateway is saturated
//! and latency is mostly queueing (≈ sessions ÷ throughput). Paced (open loop): a session sends
//! on a fixed schedule, one message every `interval`, with the sessions' schedules spread evenly
//! over the interval — a load well under capacity, so latency is the per-turn overhead.
//!
//! The traffic is either the light kind (no key, "message N", a two-letter answer) or the
//! realistic kind (`Traffic::realistic`): a bearer key on every request, user messages of a few
//! hundred bytes that differ from turn to turn, and the fake model's paragraph-long answer, so a
//! session's history (and the prompt the daemon builds from it) grows turn by turn.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::daemon::{Daemon, cpu_ticks, status_mb, store_bytes};
use crate::fake_llm::FakeLlm;

/// How each session sends its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pace {
    /// The next message as soon as the reply is in.
    Closed,
    /// One message every interval (later if a reply is still outstanding: never two at once).
    Every(Duration),
}

/// What the sessions of one workload run saw.
#[derive(Default)]
struct Outcome {
    latencies: Vec<Duration>,
    errors: usize,
    first_error: Option<String>,
}

impl Outcome {
    fn record(&mut self, result: Result<Duration, String>) {
        match result {
            Ok(latency) => self.latencies.push(latency),
            Err(e) => {
                self.errors += 1;
                self.first_error.get_or_insert(e);
            }
        }
    }
}

/// What the load sends and expects back.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Traffic {
    /// The bearer key on every request (the daemon runs with it as `API_SERVER_KEY`).
    pub(crate) key: Option<&'static str>,
    /// Realistic messages and answers (else "message N" and "ok").
    pub(crate) realistic: bool,
}

impl Traffic {
    pub(crate) const LIGHT: Traffic = Traffic { key: None, realistic: false };

    /// The key the realistic daemon is started with.
    pub(crate) const KEY: &'static str = "sk-bench-0123456789abcdef0123456789abcdef";

    pub(crate) fn realistic() -> Self {
        Traffic { key: Some(Self::KEY), realistic: true }
    }

    /// The `i`-th message of a session: "message N", or a request of 150–450 bytes that differs
    /// with `i`, as people write them.
    fn text(self, i: usize) -> String {
        if !self.realistic {
            return format!("message {i}");
        }
        const ASKS: [&str; 4] = [
            "Can you check why the nightly backup of the orders database took so long yesterday? It usually \
             finishes in twenty minutes and it ran for almost two hours.",
            "Please summarise what changed in the payment service since last Tuesday, and tell me whether \
             any of it touches how refunds are retried when the bank times out.",
            "I have a meeting with the platform team at three. Draft five short questions about their plan to \
             move the queue workers to the new cluster, the ones most likely to show risks.",
            "The disk on build-runner-4 is at 91 percent again. What is using the space, what can be cleaned \
             safely, and should we raise the volume size or add a retention rule for the caches?",
        ];
        let detail = " Some context: the team is small, changes go out on Thursdays, and we would rather \
                      fix the cause than add another alert.";
        let ask = ASKS[i % ASKS.len()];
        match i % 3 {
            0 => format!("{ask} (request {i})"),
            1 => format!("{ask}{detail} (request {i})"),
            _ => format!("Following up on that: {ask}{detail}{detail} (request {i})"),
        }
    }

    fn answered(self, content: Option<&str>) -> bool {
        match (self.realistic, content) {
            (false, Some(text)) => text == "ok",
            (true, Some(text)) => text.starts_with(crate::fake_llm::REALISTIC_PREFIX),
            (_, None) => false,
        }
    }
}

/// One request: `Ok(latency)` when the answer is a 200 with "ok".
pub(crate) async fn turn(client: &reqwest::Client, url: &str, session: &str, text: String) -> Result<Duration, String> {
    turn_with(client, url, session, text, Traffic::LIGHT).await
}

/// One request of `traffic`: `Ok(latency)` when the answer is a 200 with the expected text.
async fn turn_with(
    client: &reqwest::Client,
    url: &str,
    session: &str,
    text: String,
    traffic: Traffic,
) -> Result<Duration, String> {
    let body = json!({ "model": "hermes-agent", "messages": [{ "role": "user", "content": text }] });
    let started = Instant::now();
    let mut request = client.post(url).header("X-Hermes-Session-Id", session).json(&body);
    if let Some(key) = traffic.key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.map_err(|e| format!("send: {e}"))?;
    let status = response.status();
    let reply: Value = response.json().await.map_err(|e| format!("read body ({status}): {e}"))?;
    let elapsed = started.elapsed();
    match reply["choices"][0]["message"]["content"].as_str() {
        content if status == 200 && traffic.answered(content) => Ok(elapsed),
        _ => Err(format!("{status}: {reply}")),
    }
}

/// One session sending `messages` messages; `start` is when its schedule begins (paced only).
async fn session(
    client: &reqwest::Client,
    url: &str,
    id: String,
    (messages, pace, traffic): (usize, Pace, Traffic),
    start: Instant,
) -> Outcome {
    let mut outcome = Outcome::default();
    for i in 0..messages {
        if let Pace::Every(interval) = pace {
            tokio::time::sleep_until(start + interval * i as u32).await;
        }
        outcome.record(turn_with(client, url, &id, traffic.text(i), traffic).await);
    }
    outcome
}

/// `sessions` concurrent sessions with ids `<label>-<n>`; returns the merged outcome and wall time.
async fn drive(
    client: &reqwest::Client,
    base: &str,
    label: &str,
    sessions: usize,
    messages: usize,
    pace: Pace,
    traffic: Traffic,
) -> (Outcome, Duration) {
    let url = format!("{base}/v1/chat/completions");
    let started = Instant::now();
    let offset = |n: usize| match pace {
        Pace::Closed => Duration::ZERO,
        Pace::Every(interval) => interval.mul_f64(n as f64 / sessions as f64),
    };
    let outcomes = futures_util::future::join_all(
        (0..sessions)
            .map(|n| session(client, &url, format!("{label}-{n}"), (messages, pace, traffic), started + offset(n))),
    )
    .await;
    let wall = started.elapsed();
    let mut merged = Outcome::default();
    for outcome in outcomes {
        merged.latencies.extend(outcome.latencies);
        merged.errors += outcome.errors;
        if merged.first_error.is_none() {
            merged.first_error = outcome.first_error;
        }
    }
    (merged, wall)
}

/// An unmeasured run (warm-up); returns its first error, if any.
pub(crate) async fn warm_up(
    client: &reqwest::Client,
    daemon: &Daemon,
    label: &str,
    sessions: usize,
    messages: usize,
    traffic: Traffic,
) -> Option<String> {
    drive(client, &daemon.base, label, sessions, messages, Pace::Closed, traffic).await.0.first_error
}

/// The numbers of one workload run (or the medians of several).
#[derive(Clone, Default)]
pub(crate) struct Metrics {
    pub(crate) turns: f64,
    pub(crate) errors: f64,
    pub(crate) wall_s: f64,
    pub(crate) turns_per_s: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) cpu_ms_per_turn: f64,
    /// Daemon CPU ÷ model calls the fake LLM answered.
    pub(crate) cpu_ms_per_call: f64,
    pub(crate) bench_cpu_ms_per_turn: f64,
    pub(crate) peak_rss_mb: f64,
    pub(crate) llm_calls_per_turn: f64,
    pub(crate) store_bytes_per_turn: f64,
    /// Mean model time per turn as the daemon measured it (`hermesd_model_call_duration_seconds`):
    /// the loopback call to the fake model, which DESIGN §12 excludes from gateway overhead.
    pub(crate) model_ms_per_turn: f64,
    /// p50 latency minus the mean model time per turn.
    pub(crate) overhead_p50_ms: f64,
    /// p99 latency minus the mean model time per turn.
    pub(crate) overhead_p99_ms: f64,
    /// Mean and largest request the fake model received, in KB (realistic traffic only).
    pub(crate) prompt_kb_mean: f64,
    pub(crate) prompt_kb_max: f64,
}

impl Metrics {
    /// The median of each field over `runs`.
    pub(crate) fn median(runs: &[Metrics]) -> Metrics {
        let m = |f: fn(&Metrics) -> f64| median(runs.iter().map(f).collect());
        Metrics {
            turns: m(|r| r.turns),
            errors: m(|r| r.errors),
            wall_s: m(|r| r.wall_s),
            turns_per_s: m(|r| r.turns_per_s),
            p50_ms: m(|r| r.p50_ms),
            p99_ms: m(|r| r.p99_ms),
            cpu_ms_per_turn: m(|r| r.cpu_ms_per_turn),
            cpu_ms_per_call: m(|r| r.cpu_ms_per_call),
            bench_cpu_ms_per_turn: m(|r| r.bench_cpu_ms_per_turn),
            peak_rss_mb: m(|r| r.peak_rss_mb),
            llm_calls_per_turn: m(|r| r.llm_calls_per_turn),
            store_bytes_per_turn: m(|r| r.store_bytes_per_turn),
            model_ms_per_turn: m(|r| r.model_ms_per_turn),
            overhead_p50_ms: m(|r| r.overhead_p50_ms),
            overhead_p99_ms: m(|r| r.overhead_p99_ms),
            prompt_kb_mean: m(|r| r.prompt_kb_mean),
            prompt_kb_max: m(|r| r.prompt_kb_max),
        }
    }
}

pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 { values[mid] } else { (values[mid - 1] + values[mid]) / 2.0 }
}

/// Nearest-rank percentile of sorted latencies, in ms.
fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1000.0
}

/// Shared context of the measured runs against one daemon.
pub(crate) struct Bench<'a> {
    pub(crate) client: &'a reqwest::Client,
    pub(crate) daemon: &'a Daemon,
    pub(crate) llm: &'a FakeLlm,
    pub(crate) ticks_per_s: f64,
    pub(crate) traffic: Traffic,
}

impl Bench<'_> {
    /// One run of `sessions` × `messages`, with the daemon's CPU, RSS and store measured around it.
    pub(crate) async fn measure(
        &self,
        label: &str,
        sessions: usize,
        messages: usize,
        pace: Pace,
    ) -> (Metrics, Option<String>) {
        let pid = self.daemon.pid();
        let ticks_before = cpu_ticks(pid);
        let own_ticks_before = cpu_ticks("self");
        let store_before = store_bytes(self.daemon.home());
        let calls_before = self.llm.calls();
        let model_before = self.model_seconds().await;
        let (prompt_before, _) = self.llm.take_prompt_bytes();
        let (mut outcome, wall) =
            drive(self.client, &self.daemon.base, label, sessions, messages, pace, self.traffic).await;
        let (prompt_after, prompt_max) = self.llm.take_prompt_bytes();
        let model_s = self.model_seconds().await - model_before;
        let ticks = cpu_ticks(pid) - ticks_before;
        let own_ticks = cpu_ticks("self") - own_ticks_before;
        let store_growth = store_bytes(self.daemon.home()) as f64 - store_before as f64;
        let calls = (self.llm.calls() - calls_before) as f64;
        outcome.latencies.sort();
        let turns = outcome.latencies.len() as f64;
        let cpu_ms = ticks as f64 * 1000.0 / self.ticks_per_s;
        let model_ms_per_turn = model_s * 1000.0 / turns;
        let (p50_ms, p99_ms) = (percentile_ms(&outcome.latencies, 50.0), percentile_ms(&outcome.latencies, 99.0));
        let metrics = Metrics {
            turns,
            errors: outcome.errors as f64,
            wall_s: wall.as_secs_f64(),
            turns_per_s: turns / wall.as_secs_f64(),
            p50_ms,
            p99_ms,
            model_ms_per_turn,
            overhead_p50_ms: p50_ms - model_ms_per_turn,
            overhead_p99_ms: p99_ms - model_ms_per_turn,
            cpu_ms_per_turn: cpu_ms / turns,
            cpu_ms_per_call: cpu_ms / calls,
            bench_cpu_ms_per_turn: own_ticks as f64 * 1000.0 / self.ticks_per_s / turns,
            peak_rss_mb: status_mb(pid, "VmHWM"),
            llm_calls_per_turn: calls / turns,
            store_bytes_per_turn: store_growth / turns,
            prompt_kb_mean: (prompt_after - prompt_before) as f64 / 1024.0 / calls,
            prompt_kb_max: prompt_max as f64 / 1024.0,
        };
        (metrics, outcome.first_error)
    }

    /// Total model-call seconds the daemon has recorded so far (`/metrics`).
    async fn model_seconds(&self) -> f64 {
        let url = format!("{}/metrics", self.daemon.base);
        let text = match self.client.get(&url).send().await {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        text.lines()
            .find_map(|l| l.strip_prefix("hermesd_model_call_duration_seconds_sum "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }
}
