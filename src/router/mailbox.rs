//! A session's mailbox: a bounded first-in-first-out queue of jobs with one reader, the
//! session's actor, and any number of senders (the router, under its actor-map lock).
//!
//! Why not tokio's bounded `mpsc` channel: each one allocates its shared state, padded to cache
//! lines, and a first block of 32 slots when it is made, about a kilobyte per session whether
//! or not a job ever waits; with 10,000 sessions alive that was 10 MB. Most mailboxes are empty
//! nearly all the time, so this one is a lock around a `VecDeque` (which allocates only when a
//! job waits, and gives its memory back once empty again) and a `Notify`, inside the actor's
//! state.
//!
//! The jobs are boxed (`batch::Mail`) and the mailbox lives in the actor's `ActorState`.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use tokio::sync::Notify;

use super::batch::Mail;

/// A session's mailbox (see the module's doc).
#[derive(Debug)]
pub(super) struct Mailbox {
    jobs: Mutex<Jobs>,
    /// Wakes the reader; a notification sent while it is not waiting is kept for its next wait.
    arrived: Notify,
    capacity: usize,
}

#[derive(Debug, Default)]
struct Jobs {
    queue: VecDeque<Mail>,
    /// The actor left: nothing more is taken in.
    closed: bool,
}

impl Mailbox {
    /// An empty mailbox holding at most `capacity` jobs (at least one).
    pub(super) fn new(capacity: usize) -> Self {
        Self { jobs: Mutex::default(), arrived: Notify::new(), capacity: capacity.max(1) }
    }

    /// Queue `mail`, or hand it back when the mailbox is full or closed.
    pub(super) fn try_send(&self, mail: Mail) -> Result<(), Mail> {
        let mut jobs = self.lock();
        if jobs.closed || jobs.queue.len() >= self.capacity {
            return Err(mail);
        }
        jobs.queue.push_back(mail);
        drop(jobs);
        self.arrived.notify_one();
        Ok(())
    }

    /// The next job, once there is one; `None` once closed. Cancel-safe: a job is only ever
    /// taken by a call that returns it.
    pub(super) async fn recv(&self) -> Option<Mail> {
        loop {
            {
                let mut jobs = self.lock();
                if let Some(mail) = jobs.queue.pop_front() {
                    if jobs.queue.is_empty() {
                        // A flood's queue does not keep its capacity for the session's life.
                        jobs.queue = VecDeque::new();
                    }
                    return Some(mail);
                }
                if jobs.closed {
                    return None;
                }
            }
            self.arrived.notified().await;
        }
    }

    /// Jobs waiting.
    pub(super) fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Take nothing more in and drop what waits (those events stay accepted in the store and run
    /// at the next start); how many were waiting.
    pub(super) fn close(&self) -> usize {
        let mut jobs = self.lock();
        jobs.closed = true;
        let left = std::mem::take(&mut jobs.queue).len();
        drop(jobs);
        // A reader waiting now (there is none while the actor itself closes) hears of it.
        self.arrived.notify_one();
        left
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Jobs> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::router::batch::Queued;

    fn mail(seq: i64) -> Mail {
        Box::new(Queued::turn(crate::router::batch::tests::job(seq, "u", ""), false))
    }

    #[tokio::test]
    async fn jobs_come_out_in_order_up_to_the_capacity_and_none_after_close() {
        let mailbox = Mailbox::new(3);
        for seq in 1..=3 {
            mailbox.try_send(mail(seq)).unwrap();
        }
        assert_eq!(mailbox.try_send(mail(4)).map_err(|m| m.job.seq), Err(4), "full");
        assert_eq!(mailbox.len(), 3);
        assert_eq!(mailbox.recv().await.map(|m| m.job.seq), Some(1));
        mailbox.try_send(mail(5)).unwrap();
        assert_eq!(mailbox.recv().await.map(|m| m.job.seq), Some(2));
        assert_eq!(mailbox.close(), 2, "two were waiting");
        assert!(mailbox.is_empty());
        assert_eq!(mailbox.try_send(mail(6)).map_err(|m| m.job.seq), Err(6), "closed");
        assert!(mailbox.recv().await.is_none());
    }

    #[tokio::test]
    async fn a_waiting_reader_wakes_and_a_cancelled_wait_loses_nothing() {
        let mailbox = Arc::new(Mailbox::new(8));
        // A wait given up (as the actor's `select!` does on its idle timer) takes nothing.
        assert!(tokio::time::timeout(Duration::from_millis(10), mailbox.recv()).await.is_err());
        let reader = tokio::spawn({
            let mailbox = mailbox.clone();
            async move { mailbox.recv().await.map(|m| m.job.seq) }
        });
        tokio::task::yield_now().await;
        mailbox.try_send(mail(7)).unwrap();
        assert_eq!(reader.await.unwrap(), Some(7));
        // Sent while nobody waits: the next wait finds it at once.
        mailbox.try_send(mail(8)).unwrap();
        let next = tokio::time::timeout(Duration::from_secs(5), mailbox.recv()).await;
        assert_eq!(next.unwrap().map(|m| m.job.seq), Some(8));
    }
}
