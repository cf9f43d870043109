//! The soak's open-loop load: API chat completions over a sliding population of server-side
//! sessions (one new session every `rotate`, the oldest going idle; every few requests
//! streamed), Telegram DMs over a sliding population of private chats (a chat sends again only
//! once answered and a gap has passed, so nothing batches or queues), and signed webhook posts
//! (every tenth delivery id sent twice). Each generator ticks at its rate while load is on and
//! skips a tick rather than pile up requests when the daemon falls behind.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::daemon::WEBHOOK_SECRET;
use super::tally::{Activity, Tally};
use crate::fake_telegram::{Chat, FakeTelegram, User};

/// API requests in flight at most (a tick finding them all busy is skipped and counted).
const API_IN_FLIGHT: usize = 64;
/// How long an API request may take before it counts as failed.
const API_TIMEOUT: Duration = Duration::from_secs(120);
/// Telegram chat ids are `FIRST_CHAT + index`.
pub const FIRST_CHAT: i64 = 500_000;
/// How often the fake's sends are read.
const ABSORB_EVERY: Duration = Duration::from_millis(200);

/// Rates and populations of one run's load.
#[derive(Debug, Clone)]
pub struct Rates {
    /// API requests per second.
    pub api_per_s: f64,
    /// API sessions in the population at any time.
    pub api_population: u64,
    /// One new API session every this long.
    pub api_rotate: Duration,
    /// Every n-th API request streams.
    pub api_stream_every: u64,
    /// Telegram messages per second.
    pub tg_per_s: f64,
    /// Telegram chats in the population at any time.
    pub tg_population: u64,
    /// One new chat every this long.
    pub tg_rotate: Duration,
    /// Least time between a chat's answer and its next message.
    pub tg_gap: Duration,
    /// Webhook posts per second.
    pub webhook_per_s: f64,
}

/// State shared by the generators, the sampler and the conductor.
pub struct Shared {
    /// When the run started (sample times are seconds since).
    pub start: Instant,
    /// Whether generators send now.
    pub load_on: AtomicBool,
    /// Whether a fake is down now.
    pub outage: AtomicBool,
    /// Answers and counts.
    pub tally: Mutex<Tally>,
    /// Keys and chats used lately.
    pub activity: Mutex<Activity>,
    /// The daemon's `http://127.0.0.1:PORT`.
    pub base: String,
    /// The webhook route's target chat.
    pub webhook_chat: i64,
    /// Telegram chat states by chat id: answered-or-not and when last sent.
    tg_chats: Mutex<HashMap<i64, (bool, Instant)>>,
    api_busy: Mutex<HashSet<u64>>,
}

impl Shared {
    /// Shared state for a daemon at `base` with `cron_jobs` jobs.
    pub fn new(base: String, webhook_chat: i64, cron_jobs: usize) -> Arc<Self> {
        Arc::new(Self {
            start: Instant::now(),
            load_on: AtomicBool::new(false),
            outage: AtomicBool::new(false),
            tally: Mutex::new(Tally::new(cron_jobs)),
            activity: Mutex::new(Activity::default()),
            base,
            webhook_chat,
            tg_chats: Mutex::new(HashMap::new()),
            api_busy: Mutex::new(HashSet::new()),
        })
    }

    /// Seconds since the start.
    pub fn now_s(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().expect("tally lock")
    }

    fn touch(&self, key: String) {
        self.activity.lock().expect("activity lock").touch(key);
    }

    /// The window of the population `[first, first + size)` at this moment.
    fn window(&self, rotate: Duration, size: u64) -> (u64, u64) {
        let first = (self.start.elapsed().as_secs_f64() / rotate.as_secs_f64().max(0.001)) as u64;
        (first, size.max(1))
    }
}

/// Spawn every generator and the reader of the fake's sends; they stop at `cancel`.
pub fn spawn(
    tasks: &mut JoinSet<()>,
    shared: &Arc<Shared>,
    rates: &Rates,
    client: &reqwest::Client,
    tg: &FakeTelegram,
    cancel: &CancellationToken,
) {
    tasks.spawn(api(shared.clone(), rates.clone(), client.clone(), cancel.clone()));
    tasks.spawn(telegram(shared.clone(), rates.clone(), tg.clone(), cancel.clone()));
    tasks.spawn(webhooks(shared.clone(), rates.webhook_per_s, client.clone(), cancel.clone()));
    tasks.spawn(absorb(shared.clone(), tg.clone(), cancel.clone()));
}

fn ticker(per_s: f64) -> Option<tokio::time::Interval> {
    (per_s > 0.0).then(|| {
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / per_s));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        tick
    })
}

async fn api(shared: Arc<Shared>, rates: Rates, client: reqwest::Client, cancel: CancellationToken) {
    let Some(mut tick) = ticker(rates.api_per_s) else { return };
    let permits = Arc::new(Semaphore::new(API_IN_FLIGHT));
    let mut requests = JoinSet::new();
    let mut seq = 0u64;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            Some(_) = requests.join_next(), if !requests.is_empty() => continue,
            () = cancel.cancelled() => break,
        }
        if !shared.load_on.load(Ordering::Relaxed) {
            continue;
        }
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            shared.tally().api_skipped += 1;
            continue;
        };
        let (first, size) = shared.window(rates.api_rotate, rates.api_population);
        let session = {
            let mut busy = shared.api_busy.lock().expect("api busy lock");
            let mut rng = rand::rng();
            let picked = (0..4).map(|_| first + rng.random_range(0..size)).find(|s| !busy.contains(s));
            let Some(session) = picked else { continue };
            busy.insert(session);
            session
        };
        seq += 1;
        let stream = rates.api_stream_every > 0 && seq.is_multiple_of(rates.api_stream_every);
        let (shared, client) = (shared.clone(), client.clone());
        requests.spawn(async move {
            let _permit = permit;
            ask(&shared, &client, session, seq, stream).await;
            shared.api_busy.lock().expect("api busy lock").remove(&session);
        });
    }
    requests.shutdown().await;
}

/// One chat completion in session `soak-api-<session>`, checked against its echo.
async fn ask(shared: &Shared, client: &reqwest::Client, session: u64, seq: u64, stream: bool) {
    let text = format!("api-{seq}");
    shared.touch(format!("api:{session}"));
    shared.tally().api_sent += 1;
    let sent_s = shared.now_s();
    let outage_before = shared.outage.load(Ordering::Relaxed);
    let body = json!({"model": "hermes-agent", "stream": stream, "messages": [{"role": "user", "content": text}]});
    let response = client
        .post(format!("{}/v1/chat/completions", shared.base))
        .header("X-Hermes-Session-Id", format!("soak-api-{session}"))
        .json(&body)
        .timeout(API_TIMEOUT)
        .send()
        .await;
    let answer = match response {
        Ok(r) if r.status() == 200 => r.text().await.map_err(|e| format!("read: {e}")),
        Ok(r) => Err(format!("status {}: {}", r.status(), r.text().await.unwrap_or_default())),
        Err(e) => Err(format!("send: {e}")),
    };
    let took = shared.now_s() - sent_s;
    // The session's actor lives on for `session_idle` after this answer.
    shared.touch(format!("api:{session}"));
    let overlapped = outage_before || shared.outage.load(Ordering::Relaxed);
    let mut tally = shared.tally();
    match answer.map(|body| if stream { streamed_text(&body) } else { completion_text(&body) }) {
        Ok(content) if content == format!("echo: {text}") => {
            tally.api_ok += 1;
            tally.api_latency.push((sent_s, took, overlapped));
        }
        Ok(content) => {
            tally.api_wrong += 1;
            tally.note(format!("api {text} (stream {stream}) answered {content:?}"));
        }
        Err(e) => {
            tally.api_failed += 1;
            tally.note(format!("api {text} (stream {stream}) failed after {took:.1}s: {e}"));
        }
    }
}

fn completion_text(body: &str) -> String {
    let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    value["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_owned()
}

/// The content deltas of an SSE body joined (keepalive comments and `[DONE]` skipped).
fn streamed_text(body: &str) -> String {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect()
}

async fn telegram(shared: Arc<Shared>, rates: Rates, tg: FakeTelegram, cancel: CancellationToken) {
    let Some(mut tick) = ticker(rates.tg_per_s) else { return };
    let mut seq = 0u64;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = cancel.cancelled() => break,
        }
        if !shared.load_on.load(Ordering::Relaxed) {
            continue;
        }
        let (first, size) = shared.window(rates.tg_rotate, rates.tg_population);
        let now = Instant::now();
        let chat = {
            let mut chats = shared.tg_chats.lock().expect("tg chats lock");
            let lowest = FIRST_CHAT + i64::try_from(first).unwrap_or(0);
            // Chats that left the population never send again; only waiting ones stay (a
            // late answer still finds its chat).
            chats.retain(|id, (waiting, _)| *id >= lowest || *waiting);
            let mut rng = rand::rng();
            let ready = |id: &i64, chats: &HashMap<i64, (bool, Instant)>| {
                chats.get(id).is_none_or(|(waiting, at)| !waiting && now.duration_since(*at) >= rates.tg_gap)
            };
            let picked = (0..8).map(|_| lowest + rng.random_range(0..size) as i64).find(|id| ready(id, &chats));
            let Some(chat) = picked else {
                drop(chats);
                shared.tally().tg_skipped += 1;
                continue;
            };
            chats.insert(chat, (true, now));
            chat
        };
        seq += 1;
        let user = User::new(chat, &format!("Soak{chat}"));
        shared.touch(format!("tg:{chat}"));
        shared.tally().tg_sent(seq, chat);
        tg.push_message(&Chat::private(&user), &user, &format!("tg-{seq}"));
    }
}

async fn webhooks(shared: Arc<Shared>, per_s: f64, client: reqwest::Client, cancel: CancellationToken) {
    let Some(mut tick) = ticker(per_s) else { return };
    let mut seq = 0u64;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = cancel.cancelled() => break,
        }
        if !shared.load_on.load(Ordering::Relaxed) {
            continue;
        }
        seq += 1;
        shared.touch(format!("wh:{seq}"));
        shared.touch(format!("tg:{}", shared.webhook_chat));
        match post_webhook(&shared.base, &client, seq).await {
            Ok((202, _)) => shared.tally().wh_accepted(seq),
            Ok((status, body)) => {
                let mut tally = shared.tally();
                tally.wh_refused += 1;
                tally.note(format!("webhook wh-{seq}: {status} {body}"));
            }
            Err(e) => {
                let mut tally = shared.tally();
                tally.wh_refused += 1;
                tally.note(format!("webhook wh-{seq}: {e}"));
            }
        }
        if seq.is_multiple_of(10) {
            // The sender retries a delivery it already made: it must not run again.
            let repeat = post_webhook(&shared.base, &client, seq).await;
            let mut tally = shared.tally();
            tally.wh_repeats += 1;
            if !matches!(&repeat, Ok((200, body)) if body["status"] == "duplicate") {
                tally.wh_repeats_run += 1;
                tally.note(format!("webhook repeat of wh-{seq}: {repeat:?}"));
            }
        }
    }
}

/// POST delivery `seq` to `/webhooks/soak`, signed with the generic HMAC scheme.
async fn post_webhook(base: &str, client: &reqwest::Client, seq: u64) -> Result<(u16, Value), String> {
    let body = json!({ "token": format!("wh-{seq}") }).to_string();
    let ts = chrono::Utc::now().timestamp();
    let signature = hermesd::webhooks::signature::sign_generic(WEBHOOK_SECRET.as_bytes(), ts, body.as_bytes());
    let response = client
        .post(format!("{base}/webhooks/soak"))
        .header("content-type", "application/json")
        .header("x-webhook-timestamp", ts.to_string())
        .header("x-webhook-signature", signature)
        .header("x-request-id", format!("soak-{seq}"))
        .body(body)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    Ok((status, response.json().await.unwrap_or(Value::Null)))
}

/// Read the fake's new sends every `ABSORB_EVERY`; answered chats may send again.
async fn absorb(shared: Arc<Shared>, tg: FakeTelegram, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(ABSORB_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = cancel.cancelled() => break,
        }
        absorb_once(&shared, &tg);
    }
}

/// Match whatever the fake received since the last read.
pub fn absorb_once(shared: &Shared, tg: &FakeTelegram) {
    let seen = shared.tally().seen;
    let sent = tg.sent_since(seen);
    if sent.is_empty() {
        return;
    }
    let answered = shared.tally().absorb(&sent);
    let now = Instant::now();
    let mut chats = shared.tg_chats.lock().expect("tg chats lock");
    for key in answered {
        if let Some(chat) = key.strip_prefix("tg:").and_then(|c| c.parse().ok()) {
            chats.insert(chat, (false, now));
        }
        // An actor's idle time starts when its turn ends: the key is live until then.
        shared.touch(key);
    }
}
