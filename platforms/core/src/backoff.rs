//! Reconnect delays shared by every adapter's receive loop: 1 s doubling to 30 s, back to 1 s
//! after a connection that worked. Never sleeps past a cancel.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Retry delays for a receive loop.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Backoff {
    const FIRST: Duration = Duration::from_secs(1);
    const MAX: Duration = Duration::from_secs(30);

    /// Starts at the shortest delay.
    pub fn new() -> Self {
        Self { next: Self::FIRST }
    }

    /// Back to the shortest delay (after a success).
    pub fn reset(&mut self) {
        self.next = Self::FIRST;
    }

    /// The delay the next `wait` sleeps.
    pub fn peek(&self) -> Duration {
        self.next
    }

    /// Sleeps the next delay; `false` when cancelled first.
    pub async fn wait(&mut self, cancel: &CancellationToken) -> bool {
        let delay = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        tokio::select! {
            () = cancel.cancelled() => false,
            () = tokio::time::sleep(delay) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn doubles_to_thirty_seconds_resets_and_stops_on_cancel() {
        let mut backoff = Backoff::new();
        let cancel = CancellationToken::new();
        let mut delays = Vec::new();
        for _ in 0..7 {
            delays.push(backoff.peek().as_secs());
            assert!(backoff.wait(&cancel).await);
        }
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
        backoff.reset();
        assert_eq!(backoff.peek(), Duration::from_secs(1));
        cancel.cancel();
        assert!(!backoff.wait(&cancel).await);
    }
}
