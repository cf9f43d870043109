//! A turn's hold on the worker pool. A turn runs holding one worker permit; while it waits for
//! a person (an approval, a clarifying question) it parks: it gives the permit back, so a
//! session waiting minutes for a human never stalls the others, and takes one again — queueing
//! like any turn — once answered or timed out.
//!
//! Invariant: at most `max_concurrent_turns` turns hold a worker permit and at most
//! `max_parked_turns` wait without one (for a person, or for a permit after the answer). A turn
//! that would park beyond that cap keeps its permit while it waits.
//!
//! `WorkerPool` is the bounded pool of worker permits plus the parking lot of
//! `agent.max_parked_turns`; `WorkerSlot` is one turn's permit: `park` gives it back around a wait
//! for a person and queues for it again, `ensure` takes it again after a wait cut off while parked.
//! A wait beyond the cap is warned once and counted. Gauges: `hermesd_turns_running`,
//! `hermesd_turns_parked`.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::Metrics;

/// The bounded worker pool and the parking lot beside it.
pub struct WorkerPool {
    permits: Arc<Semaphore>,
    size: usize,
    parking: Arc<Semaphore>,
    max_parked: usize,
    /// Set once the parking cap was hit, so the warning is logged once.
    warned: AtomicBool,
    /// Waits that kept their permit because the parking lot was full.
    refused: AtomicU64,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool").field("busy", &self.busy()).field("parked", &self.parked()).finish()
    }
}

impl WorkerPool {
    /// A pool of `size` permits that lets `max_parked` turns wait for a person without one.
    pub fn new(size: usize, max_parked: usize, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Self {
            permits: Arc::new(Semaphore::new(size)),
            size,
            parking: Arc::new(Semaphore::new(max_parked)),
            max_parked,
            warned: AtomicBool::new(false),
            refused: AtomicU64::new(0),
            metrics,
        })
    }

    /// Wait for a permit (in line, first come first served) and hold it in a new slot.
    pub async fn slot(self: &Arc<Self>) -> Arc<WorkerSlot> {
        let permit = self.acquire().await;
        self.metrics.turns_running.fetch_add(1, Ordering::Relaxed);
        Arc::new(WorkerSlot { pool: self.clone(), permit: Mutex::new(Some(permit)) })
    }

    async fn acquire(&self) -> OwnedSemaphorePermit {
        self.permits.clone().acquire_owned().await.expect("worker pool is never closed")
    }

    /// Permits held now: turns running (not parked).
    pub fn busy(&self) -> usize {
        self.size - self.permits.available_permits()
    }

    /// Turns parked now: waiting for a person, or for a permit again after the answer.
    pub fn parked(&self) -> usize {
        self.max_parked - self.parking.available_permits()
    }

    /// Waits that could not park (the lot was full) and kept their permit, since start.
    pub fn park_refusals(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// One turn's worker permit, given back while the turn waits for a person.
pub struct WorkerSlot {
    pool: Arc<WorkerPool>,
    permit: Mutex<Option<OwnedSemaphorePermit>>,
}

impl std::fmt::Debug for WorkerSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerSlot").field("holding", &self.holding()).finish()
    }
}

impl WorkerSlot {
    /// Whether the turn holds its permit now (false while parked).
    pub fn holding(&self) -> bool {
        self.permit.lock().expect("slot lock poisoned").is_some()
    }

    /// Run `wait` (a wait for a person) without the worker permit when the parking lot has
    /// room, then take a permit again before returning. Beyond the cap the permit is kept.
    pub async fn park<F: Future>(&self, wait: F) -> F::Output {
        let Some(guard) = self.leave() else { return wait.await };
        let output = wait.await;
        guard.rejoin().await;
        output
    }

    /// Give the permit back and take a place in the parking lot; `None` when the turn keeps its
    /// permit (the lot is full, or the turn is parked already by another wait).
    fn leave(&self) -> Option<Parked<'_>> {
        let mut permit = self.permit.lock().expect("slot lock poisoned");
        permit.as_ref()?;
        let place = match self.pool.parking.clone().try_acquire_owned() {
            Ok(place) => place,
            Err(_) => {
                self.pool.refused.fetch_add(1, Ordering::Relaxed);
                if !self.pool.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        max_parked_turns = self.pool.max_parked,
                        "the parking lot for turns waiting on a person is full; further waits keep their worker \
                         permit (raise agent.max_parked_turns)"
                    );
                }
                return None;
            }
        };
        drop(permit.take());
        self.pool.metrics.turns_running.fetch_sub(1, Ordering::Relaxed);
        self.pool.metrics.turns_parked.fetch_add(1, Ordering::Relaxed);
        Some(Parked { slot: self, _place: place })
    }

    /// Take a permit again if the turn has none (a wait was cut off while parked, e.g. a tool
    /// timed out); the turn then goes on only once it holds one.
    pub async fn ensure(&self) {
        if self.holding() {
            return;
        }
        let permit = self.pool.acquire().await;
        self.put(permit);
    }

    fn put(&self, permit: OwnedSemaphorePermit) {
        let mut slot = self.permit.lock().expect("slot lock poisoned");
        if slot.is_none() {
            *slot = Some(permit);
            self.pool.metrics.turns_running.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Give the permit back for good (the turn ended).
    pub fn release(&self) {
        if self.permit.lock().expect("slot lock poisoned").take().is_some() {
            self.pool.metrics.turns_running.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for WorkerSlot {
    fn drop(&mut self) {
        self.release();
    }
}

/// A place in the parking lot; dropping it (answered, or the wait cut off) leaves the lot.
struct Parked<'a> {
    slot: &'a WorkerSlot,
    _place: OwnedSemaphorePermit,
}

impl Parked<'_> {
    /// Queue for a permit like any turn, then leave the lot.
    async fn rejoin(self) {
        let permit = self.slot.pool.acquire().await;
        self.slot.put(permit);
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.slot.pool.metrics.turns_parked.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::*;

    fn pool(size: usize, parked: usize) -> (Arc<WorkerPool>, Arc<Metrics>) {
        let metrics = Arc::new(Metrics::default());
        (WorkerPool::new(size, parked, metrics.clone()), metrics)
    }

    #[tokio::test]
    async fn a_parked_turn_gives_its_permit_to_another_and_takes_one_again() {
        let (pool, metrics) = pool(1, 1);
        let first = pool.slot().await;
        assert_eq!(pool.busy(), 1);
        let (tx, rx) = oneshot::channel::<&str>();
        let parked = tokio::spawn({
            let first = first.clone();
            async move { first.park(rx).await }
        });
        // While the first waits for a person, a second turn gets the only permit.
        let second = tokio::time::timeout(Duration::from_secs(5), pool.slot()).await.expect("the permit came back");
        assert!(!first.holding());
        assert_eq!((pool.busy(), pool.parked()), (1, 1));
        assert_eq!(metrics.turns_parked.load(Ordering::Relaxed), 1);
        assert_eq!(metrics.turns_running.load(Ordering::Relaxed), 1);
        // Answered: the first waits in line until the second is done.
        tx.send("yes").expect("parked wait listens");
        tokio::task::yield_now().await;
        assert!(!parked.is_finished(), "the answered turn waits for a permit");
        second.release();
        assert_eq!(parked.await.expect("park task"), Ok("yes"));
        assert!(first.holding());
        assert_eq!((pool.busy(), pool.parked()), (1, 0));
        assert_eq!(metrics.turns_parked.load(Ordering::Relaxed), 0);
        first.release();
        assert_eq!(metrics.turns_running.load(Ordering::Relaxed), 0);
        assert_eq!(pool.busy(), 0);
    }

    #[tokio::test]
    async fn beyond_the_cap_a_waiting_turn_keeps_its_permit() {
        let (pool, _metrics) = pool(2, 1);
        let a = pool.slot().await;
        let b = pool.slot().await;
        let (tx_a, rx_a) = oneshot::channel::<()>();
        let (tx_b, rx_b) = oneshot::channel::<()>();
        let task_a = tokio::spawn({
            let a = a.clone();
            async move { a.park(rx_a).await }
        });
        tokio::time::timeout(Duration::from_secs(5), async {
            while pool.parked() < 1 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("a parks");
        let task_b = tokio::spawn({
            let b = b.clone();
            async move { b.park(rx_b).await }
        });
        tokio::task::yield_now().await;
        assert!(!a.holding(), "the first wait parked");
        assert!(b.holding(), "the lot is full: the second wait keeps its permit");
        assert_eq!((pool.busy(), pool.parked(), pool.park_refusals()), (1, 1, 1));
        tx_a.send(()).expect("a listens");
        tx_b.send(()).expect("b listens");
        task_a.await.expect("a").expect("a answered");
        task_b.await.expect("b").expect("b answered");
        assert!(a.holding() && b.holding());
        assert_eq!((pool.busy(), pool.parked()), (2, 0));
    }

    #[tokio::test]
    async fn a_wait_cut_off_while_parked_leaves_the_lot_and_ensure_takes_a_permit_again() {
        let (pool, metrics) = pool(1, 4);
        let slot = pool.slot().await;
        let (_tx, rx) = oneshot::channel::<()>();
        let cut = tokio::time::timeout(Duration::from_millis(10), slot.park(rx)).await;
        assert!(cut.is_err(), "the wait was cut off");
        assert_eq!(pool.parked(), 0);
        assert_eq!(metrics.turns_parked.load(Ordering::Relaxed), 0);
        assert!(!slot.holding());
        slot.ensure().await;
        assert!(slot.holding());
        assert_eq!(metrics.turns_running.load(Ordering::Relaxed), 1);
        drop(slot);
        assert_eq!((pool.busy(), metrics.turns_running.load(Ordering::Relaxed)), (0, 0));
    }
}
