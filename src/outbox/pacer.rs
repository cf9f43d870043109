//! Per-chat pacing: one token bucket per chat shared by send, edit and typing, paused for the
//! full `retry_after` when the platform says so.
//!
//! Sends wait for a token; droppable calls (typing, progress edits) use `try_acquire` and are
//! skipped while the chat is paused or out of tokens. Nothing here talks to a platform.
//!
//! A pause is clamped to `MAX_RETRY_AFTER` (one hour). `Pacers` keeps every chat's pacer once in a
//! map and once in an expiry queue: each call looks at a few due entries at the queue's front
//! (`EXPIRE_PER_CALL`), drops an idle, unheld pacer — `IDLE_PRUNE` (2 minutes) unused, not paused,
//! its bucket full again, nothing to deliver, so no different from a new one — and requeues a busy
//! one. A call costs O(1) at any number of chats, with no scans; `Outbox::expire_pacers` also
//! expires every due entry each `EXPIRE_EVERY` (15 s), so a burst's pacers go when no calls follow,
//! and the map and queue shrink once under a quarter full.
//!
//! Before this queue, pacers outlived their chats by 10 minutes and, without traffic, for good, and
//! expiring them scanned the map: CPU per message grew from 2.4 to 13 ms at 50,000 chats.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermesd_platform::clamp_retry_after;
use tokio::time::Instant;

use crate::store::PendingOutbound;

/// An entry idle this long (not paused, its bucket full again, nothing to deliver) may be
/// pruned: it is then no different from a new one.
const IDLE_PRUNE: Duration = Duration::from_secs(120);
/// How often the outbox expires idle pacers when no calls come (`Pacers::expire_idle`).
pub(super) const EXPIRE_EVERY: Duration = Duration::from_secs(15);

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
        let since = now.saturating_duration_since(bucket.refilled_at);
        bucket.paused_until.is_none_or(|u| u <= now)
            && since > IDLE_PRUNE
            && bucket.tokens + since.as_secs_f64() * bucket.rate >= bucket.burst
            && lane.0.is_empty()
            && !lane.1
    }
}

/// All chats' pacers, bounded by expiring idle ones in amortised O(1), without scans.
///
/// Every chat sits once in the map and once in an expiry queue ordered by when it was queued.
/// Each call looks at no more than `EXPIRE_PER_CALL` entries at the front of the queue whose
/// `IDLE_PRUNE` has passed: an idle, unheld pacer is dropped; one still in use goes to the back
/// and is looked at again one `IDLE_PRUNE` later. So the work per call is constant whatever the
/// number of chats, each chat is looked at once per `IDLE_PRUNE`, and a pacer lives at most
/// about twice `IDLE_PRUNE` after its last use (while calls keep coming). The map and the queue
/// give memory back once they fall to a quarter of their capacity (each shrink is paid for by
/// the removals before it).
#[derive(Debug, Default)]
pub struct Pacers {
    inner: Mutex<PacerMap>,
}

#[derive(Debug, Default)]
struct PacerMap {
    chats: HashMap<Arc<str>, Arc<ChatPacer>>,
    /// Every chat of `chats` once, oldest first: when it was queued, and its key.
    expiry: VecDeque<(Instant, Arc<str>)>,
}

/// Queue entries looked at per call at most (more than the one chat a call can add, so a
/// backlog of expired chats drains while new ones arrive).
const EXPIRE_PER_CALL: usize = 4;
/// Queue entries `expire_idle` looks at per hold of the lock.
const EXPIRE_PER_LOCK: usize = 1024;
/// Below this capacity the map and the queue are not worth shrinking.
const SHRINK_ABOVE: usize = 64;

impl PacerMap {
    /// Look at up to `max` queue entries whose idle time has passed; how many were looked at.
    fn expire(&mut self, now: Instant, max: usize) -> usize {
        let mut looked = 0;
        while looked < max {
            let due = self.expiry.front().is_some_and(|(at, _)| now.saturating_duration_since(*at) > IDLE_PRUNE);
            if !due {
                break;
            }
            looked += 1;
            let (_, key) = self.expiry.pop_front().expect("the front entry was just seen");
            let keep = self.chats.get(&key).is_some_and(|p| Arc::strong_count(p) > 1 || !p.idle(now));
            if keep {
                self.expiry.push_back((now, key));
            } else {
                self.chats.remove(&key);
            }
        }
        self.shrink();
        looked
    }

    /// Give memory back once a structure uses under a quarter of its capacity.
    fn shrink(&mut self) {
        let len = self.chats.len();
        if self.chats.capacity() > SHRINK_ABOVE.max(4 * len) {
            self.chats.shrink_to(2 * len);
        }
        if self.expiry.capacity() > SHRINK_ABOVE.max(4 * len) {
            self.expiry.shrink_to(2 * len);
        }
    }
}

impl Pacers {
    /// The pacer for `chat_key`, created with `rate`/`burst` on first use.
    pub fn get(&self, chat_key: &str, rate: f64, burst: u32) -> Arc<ChatPacer> {
        let mut map = self.inner.lock().expect("pacers lock poisoned");
        // Taken under the lock, so the queue's times never go backwards.
        let now = Instant::now();
        map.expire(now, EXPIRE_PER_CALL);
        if let Some(pacer) = map.chats.get(chat_key) {
            return pacer.clone();
        }
        let key: Arc<str> = Arc::from(chat_key);
        let pacer = Arc::new(ChatPacer::new(rate, burst));
        map.chats.insert(key.clone(), pacer.clone());
        map.expiry.push_back((now, key));
        pacer
    }

    /// Expire every pacer whose idle time has passed, also when no calls come (after a burst
    /// of chats, their pacers would otherwise stay until traffic returns). Each entry is looked
    /// at once per `IDLE_PRUNE`, so this costs O(1) per chat; the lock is let go between runs of
    /// `EXPIRE_PER_LOCK`.
    pub fn expire_idle(&self) {
        loop {
            let mut map = self.inner.lock().expect("pacers lock poisoned");
            if map.expire(Instant::now(), EXPIRE_PER_LOCK) < EXPIRE_PER_LOCK {
                return;
            }
        }
    }

    /// Chats with a pacer now.
    pub fn len(&self) -> usize {
        self.inner.lock().expect("pacers lock poisoned").chats.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Capacity of the map and of the expiry queue.
    #[cfg(test)]
    fn capacity(&self) -> (usize, usize) {
        let map = self.inner.lock().expect("pacers lock poisoned");
        (map.chats.capacity(), map.expiry.capacity())
    }

    /// Entries of the expiry queue.
    #[cfg(test)]
    fn queued(&self) -> usize {
        self.inner.lock().expect("pacers lock poisoned").expiry.len()
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
    async fn idle_pacers_expire_as_calls_come() {
        let pacers = Pacers::default();
        for i in 0..1000 {
            pacers.get(&format!("c{i}"), 1.0, 1);
        }
        assert_eq!(pacers.len(), 1000, "nothing expires within the idle time");
        tokio::time::advance(IDLE_PRUNE + Duration::from_secs(1)).await;
        // Each call expires a few: 1,000 / (EXPIRE_PER_CALL - 1) new chats drain the old ones.
        for i in 0..400 {
            pacers.get(&format!("d{i}"), 1.0, 1);
        }
        assert_eq!(pacers.len(), 400, "all idle pacers expired, only the new chats stay");
        assert_eq!(pacers.queued(), 400, "each chat is queued once");
        let (map, queue) = pacers.capacity();
        assert!(map <= 4 * 400 && queue <= 4 * 400, "capacity given back: map {map}, queue {queue}");
    }

    #[tokio::test(start_paused = true)]
    async fn idle_pacers_expire_without_calls_and_the_others_stay() {
        let pacers = Pacers::default();
        for i in 0..3000 {
            pacers.get(&format!("c{i}"), 1.0, 1);
        }
        let held = pacers.get("held", 1.0, 1);
        // A chat whose bucket refills slower than the idle time (one token in 1,000 s) stays
        // until it is full: dropping it would hand the chat a fresh burst too early.
        assert!(pacers.get("slow", 0.001, 1).try_acquire());
        pacers.expire_idle();
        assert_eq!(pacers.len(), 3002, "nothing expires within the idle time");
        tokio::time::advance(IDLE_PRUNE + Duration::from_secs(1)).await;
        pacers.expire_idle();
        assert_eq!(pacers.len(), 2, "every idle pacer expired, in runs of EXPIRE_PER_LOCK");
        assert_eq!(pacers.queued(), 2);
        let (map, queue) = pacers.capacity();
        assert!(map <= 64 && queue <= 64, "capacity given back: map {map}, queue {queue}");
        assert!(Arc::ptr_eq(&pacers.get("held", 1.0, 1), &held));
        tokio::time::advance(Duration::from_secs(1000)).await;
        pacers.expire_idle();
        assert_eq!(pacers.len(), 1, "the slow chat's bucket is full again: it expired");
    }

    #[tokio::test(start_paused = true)]
    async fn calls_on_known_chats_also_expire_idle_ones() {
        let pacers = Pacers::default();
        for i in 0..100 {
            pacers.get(&format!("c{i}"), 1.0, 1);
        }
        tokio::time::advance(IDLE_PRUNE + Duration::from_secs(1)).await;
        for _ in 0..30 {
            pacers.get("c0", 1.0, 1);
        }
        assert!(pacers.len() <= 100 - 30 * (EXPIRE_PER_CALL - 1), "got {}", pacers.len());
    }

    #[tokio::test(start_paused = true)]
    async fn pacers_in_use_paused_or_with_a_lane_are_kept() {
        let pacers = Pacers::default();
        let held = pacers.get("held", 1.0, 1);
        pacers.get("paused", 1.0, 1).pause(Duration::from_secs(3000));
        pacers.get("lane", 1.0, 1).lane.lock().expect("lane").0.push_back(("t".into(), None));
        let used = pacers.get("used", 1.0, 1);
        tokio::time::advance(IDLE_PRUNE - Duration::from_secs(10)).await;
        assert!(used.try_acquire(), "used shortly before its check");
        drop(used);
        tokio::time::advance(Duration::from_secs(11)).await;
        for _ in 0..10 {
            pacers.get("other", 1.0, 1);
        }
        assert_eq!(pacers.len(), 5, "none of them expired");
        // A pacer looked at and kept is looked at again one idle time later.
        tokio::time::advance(IDLE_PRUNE + Duration::from_secs(1)).await;
        for _ in 0..10 {
            pacers.get("other", 1.0, 1);
        }
        assert_eq!(pacers.len(), 4, "the used one expired once idle long enough (other expired too, then came back)");
        assert!(Arc::ptr_eq(&pacers.get("held", 1.0, 1), &held), "a held pacer is never replaced");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_looks_at_a_bounded_number_of_entries() {
        let pacers = Pacers::default();
        // Every chat stays in use (held), so every look finds it busy and queues it again.
        let held: Vec<_> = (0..10_000).map(|i| pacers.get(&format!("c{i}"), 1.0, 1)).collect();
        tokio::time::advance(IDLE_PRUNE + Duration::from_secs(1)).await;
        pacers.get("one more", 1.0, 1);
        let first = pacers.inner.lock().expect("lock").expiry.front().map(|(_, k)| k.to_string());
        assert_eq!(first.as_deref(), Some(&*format!("c{EXPIRE_PER_CALL}")), "only the first few were looked at");
        assert_eq!(pacers.len(), 10_001);
        assert_eq!(pacers.queued(), 10_001);
        drop(held);
    }
}
