//! Per-chat pacing: one token bucket per chat shared by send, edit and typing, paused for the
//! full `retry_after` when the platform says so.
//!
//! Sends wait for a token; droppable calls (typing, progress edits) use `try_acquire` and are
//! skipped while the chat is paused or out of tokens. Nothing here talks to a platform.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermesd_platform::clamp_retry_after;
use tokio::time::Instant;

use crate::store::PendingOutbound;

/// Pacer entries kept before idle ones are pruned.
const PRUNE_ABOVE: usize = 4096;
/// An entry idle this long (and not paused) may be pruned.
const IDLE_PRUNE: Duration = Duration::from_secs(600);

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    rate: f64,
    burst: f64,
    refilled_at: Instant,
    paused_until: Option<Instant>,
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled_at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.refilled_at = now;
    }

    /// Time until a token can be taken; zero means take it now.
    fn wait(&mut self, now: Instant) -> Duration {
        if let Some(until) = self.paused_until {
            if until > now {
                return until - now;
            }
            self.paused_until = None;
        }
        self.refill(now);
        if self.tokens >= 1.0 { Duration::ZERO } else { Duration::from_secs_f64((1.0 - self.tokens) / self.rate) }
    }
}

/// A turn waiting for delivery: its id, and its chunks when the caller already has them.
pub(super) type LaneEntry = (String, Option<Vec<PendingOutbound>>);

/// One chat's pacer plus its ordered delivery lane.
#[derive(Debug)]
pub struct ChatPacer {
    bucket: Mutex<Bucket>,
    /// Waiters queue here (tokio's mutex is fair): only the first sleeps on the bucket, so a busy
    /// shared bucket (the bot-wide one) wakes one task per token instead of all of them.
    turn: tokio::sync::Mutex<()>,
    /// Turns waiting to be delivered to this chat, in order (with their chunks when the caller
    /// already has them), and whether a drainer runs.
    pub(super) lane: Mutex<(VecDeque<LaneEntry>, bool)>,
}

impl ChatPacer {
    fn new(rate: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            bucket: Mutex::new(Bucket {
                tokens: burst,
                rate: rate.max(0.001),
                burst,
                refilled_at: Instant::now(),
                paused_until: None,
            }),
            lane: Mutex::new((VecDeque::new(), false)),
            turn: tokio::sync::Mutex::new(()),
        }
    }

    /// Wait for a token and take it; waiters are served in arrival order.
    pub async fn acquire(&self) {
        let _turn = self.turn.lock().await;
        loop {
            let wait = {
                let mut bucket = self.bucket.lock().expect("pacer lock poisoned");
                let wait = bucket.wait(Instant::now());
                if wait.is_zero() {
                    bucket.tokens -= 1.0;
                    return;
                }
                wait
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// Take a token if one is free now and the chat is not paused.
    pub fn try_acquire(&self) -> bool {
        let mut bucket = self.bucket.lock().expect("pacer lock poisoned");
        if bucket.wait(Instant::now()).is_zero() {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// The platform said "retry after": nothing goes to this chat until then. The wait is
    /// clamped to `MAX_RETRY_AFTER` before the lock is taken: an absurd value from a platform
    /// must not overflow the deadline (a panic here would poison the chat's pacer for good).
    pub fn pause(&self, retry_after: Duration) {
        let retry_after = clamp_retry_after(retry_after);
        let now = Instant::now();
        let until = now.checked_add(retry_after).unwrap_or(now);
        let mut bucket = self.bucket.lock().expect("pacer lock poisoned");
        bucket.paused_until = Some(bucket.paused_until.map_or(until, |u| u.max(until)));
        bucket.tokens = 0.0;
    }

    fn idle(&self, now: Instant) -> bool {
        let bucket = self.bucket.lock().expect("pacer lock poisoned");
        let lane = self.lane.lock().expect("pacer lock poisoned");
        bucket.paused_until.is_none_or(|u| u <= now)
            && now.saturating_duration_since(bucket.refilled_at) > IDLE_PRUNE
            && lane.0.is_empty()
            && !lane.1
    }
}

/// All chats' pacers, bounded by pruning idle ones.
///
/// Pruning scans every pacer, so it runs only when the map has doubled since the last scan (each
/// scan is paid for by the insertions before it: amortised O(1) per call, whatever the number of
/// chats) or, once above `PRUNE_ABOVE`, when `IDLE_PRUNE` has passed since the last scan (so a
/// steady map still sheds its idle chats). The map never holds more than about twice the chats
/// active in the last `IDLE_PRUNE`, or `PRUNE_ABOVE`.
#[derive(Debug, Default)]
pub struct Pacers {
    inner: Mutex<PacerMap>,
}

#[derive(Debug, Default)]
struct PacerMap {
    chats: HashMap<String, Arc<ChatPacer>>,
    /// The size that triggers the next scan.
    scan_above: usize,
    /// When the last scan ran.
    scanned_at: Option<Instant>,
}

impl PacerMap {
    fn prune_due(&self, now: Instant) -> bool {
        let len = self.chats.len();
        len > self.scan_above.max(PRUNE_ABOVE)
            || (len > PRUNE_ABOVE && self.scanned_at.is_none_or(|at| now.saturating_duration_since(at) > IDLE_PRUNE))
    }

    fn prune(&mut self, now: Instant) {
        self.chats.retain(|_, p| Arc::strong_count(p) > 1 || !p.idle(now));
        if self.chats.capacity() > 2 * self.chats.len().max(PRUNE_ABOVE) {
            self.chats.shrink_to(self.chats.len().max(PRUNE_ABOVE));
        }
        self.scan_above = 2 * self.chats.len();
        self.scanned_at = Some(now);
    }
}

impl Pacers {
    /// The pacer for `chat_key`, created with `rate`/`burst` on first use.
    pub fn get(&self, chat_key: &str, rate: f64, burst: u32) -> Arc<ChatPacer> {
        let mut map = self.inner.lock().expect("pacers lock poisoned");
        if let Some(pacer) = map.chats.get(chat_key) {
            return pacer.clone();
        }
        let now = Instant::now();
        if map.prune_due(now) {
            map.prune(now);
        }
        map.chats.entry(chat_key.to_owned()).or_insert_with(|| Arc::new(ChatPacer::new(rate, burst))).clone()
    }

    /// Chats with a pacer now.
    pub fn len(&self) -> usize {
        self.inner.lock().expect("pacers lock poisoned").chats.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The map size that triggers the next pruning scan.
    #[cfg(test)]
    fn scan_above(&self) -> usize {
        self.inner.lock().expect("pacers lock poisoned").scan_above
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn bucket_paces_after_burst() {
        let pacer = ChatPacer::new(1.0, 2);
        let start = Instant::now();
        for _ in 0..4 {
            pacer.acquire().await;
        }
        // Two from the burst, then one per second.
        assert_eq!(Instant::now() - start, Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn pause_holds_sends_and_drops_optional_calls() {
        let pacer = ChatPacer::new(30.0, 5);
        pacer.pause(Duration::from_secs(7));
        assert!(!pacer.try_acquire(), "typing is dropped while paused");
        let start = Instant::now();
        pacer.acquire().await;
        assert_eq!(Instant::now() - start, Duration::from_secs(7));
    }

    #[tokio::test(start_paused = true)]
    async fn an_absurd_retry_after_is_clamped_to_an_hour() {
        let pacer = ChatPacer::new(30.0, 5);
        pacer.pause(Duration::MAX);
        pacer.pause(Duration::from_secs(u64::MAX / 2));
        assert!(!pacer.try_acquire(), "paused");
        let start = Instant::now();
        pacer.acquire().await;
        assert_eq!(Instant::now() - start, hermesd_platform::MAX_RETRY_AFTER);
    }

    #[tokio::test(start_paused = true)]
    async fn idle_pacers_are_pruned() {
        let pacers = Pacers::default();
        for i in 0..=PRUNE_ABOVE {
            pacers.get(&format!("c{i}"), 1.0, 1);
        }
        tokio::time::advance(IDLE_PRUNE + Duration::from_secs(1)).await;
        let _held = pacers.get("kept", 1.0, 1);
        assert!(pacers.len() < 10, "idle pacers pruned, got {}", pacers.len());
    }

    #[tokio::test(start_paused = true)]
    async fn busy_pacers_are_scanned_only_when_the_map_doubles() {
        let pacers = Pacers::default();
        // Every chat stays in use (held), so no scan can remove any of them.
        let held: Vec<_> = (0..=PRUNE_ABOVE).map(|i| pacers.get(&format!("c{i}"), 1.0, 1)).collect();
        pacers.get("one more", 1.0, 1);
        let next = pacers.scan_above();
        assert_eq!(next, 2 * (PRUNE_ABOVE + 1), "a scan ran once the cap was passed, and set the next at twice");
        // Until the map doubles (or the idle time passes), new chats trigger no scan.
        for i in 0..PRUNE_ABOVE {
            pacers.get(&format!("d{i}"), 1.0, 1);
        }
        assert_eq!(pacers.scan_above(), next, "no scan in between");
        assert_eq!(pacers.len(), 2 * PRUNE_ABOVE + 2);
        // Lookups of existing chats never scan.
        assert!(Arc::ptr_eq(&pacers.get("c0", 1.0, 1), &held[0]));
        drop(held);
    }
}
