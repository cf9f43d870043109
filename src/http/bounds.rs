//! Time bounds hyper does not enforce on its own: a connection that has no request in progress
//! is closed after a deadline (before its first request — protocol sniff, HTTP/2 handshake,
//! first headers — `http.header_read_timeout`; between requests `http.idle_timeout`), and every
//! request body must arrive whole within `http.body_timeout` of its headers.
//!
//! Nothing here parses HTTP; it only counts requests and wraps bodies.
//!
//! `Activity` counts a connection's requests until their responses end, and closes the connection
//! when none has been in progress for too long; `Deadline` fails a request body not received in
//! time.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// What a connection is doing, as far as its deadlines care.
#[derive(Debug)]
pub(super) struct Activity {
    state: Mutex<ActivityState>,
}

#[derive(Debug)]
struct ActivityState {
    /// Requests whose response has not been sent whole yet.
    in_flight: usize,
    /// Whether a request ever arrived: until then the connection is still starting.
    served: bool,
    /// When the connection last had no request in progress (accepted, or its last response ended).
    quiet_since: Instant,
}

impl Activity {
    /// A connection accepted now.
    pub(super) fn new() -> Arc<Self> {
        let state = ActivityState { in_flight: 0, served: false, quiet_since: Instant::now() };
        Arc::new(Self { state: Mutex::new(state) })
    }

    /// Count a request until the returned guard drops (its response body ended or was dropped).
    pub(super) fn begin(self: &Arc<Self>) -> InFlight {
        let mut state = self.state.lock().expect("activity lock poisoned");
        state.in_flight += 1;
        state.served = true;
        InFlight(self.clone())
    }

    /// When the connection is due to close, or `None` while a request is in progress.
    fn due(&self, first: Duration, idle: Duration) -> Option<Instant> {
        let state = self.state.lock().expect("activity lock poisoned");
        let allowance = if state.served { idle } else { first };
        (state.in_flight == 0).then(|| state.quiet_since + allowance)
    }

    /// Resolves once the connection has had no request in progress for its allowance: `first`
    /// before any request arrived, `idle` after one.
    pub(super) async fn idle(&self, first: Duration, idle: Duration) {
        loop {
            match self.due(first, idle) {
                Some(at) if at <= Instant::now() => return,
                // Requests may come and go meanwhile; the deadline is looked at again then.
                Some(at) => tokio::time::sleep_until(at).await,
                // A request is in progress; its end starts the clock, which this sees next time.
                None => tokio::time::sleep(idle.min(first)).await,
            }
        }
    }
}

/// A request in progress on a connection.
#[derive(Debug)]
pub(super) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        // A poisoned lock only means another request panicked; the count must still go down.
        let mut state = self.0.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        state.in_flight -= 1;
        state.quiet_since = Instant::now();
    }
}

/// A response body that keeps its request counted until it is sent whole (or dropped), so a
/// long answer or an SSE stream is never taken for an idle connection.
pub(super) struct Counted {
    inner: Body,
    _request: InFlight,
}

impl Counted {
    /// `inner`, counted by `request`.
    pub(super) fn body(inner: Body, request: InFlight) -> Body {
        Body::new(Self { inner, _request: request })
    }
}

impl HttpBody for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request body that fails once its deadline passes before it ended: a client trickling a
/// body a byte at a time holds its handler, and the connection, no longer than that.
pub(super) struct Deadline {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
    expired: bool,
}

impl Deadline {
    /// `inner`, which must be read whole within `limit` from now.
    pub(super) fn body(inner: Body, limit: Duration) -> Body {
        Body::new(Self { inner, deadline: Box::pin(tokio::time::sleep(limit)), expired: false })
    }
}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.expired {
            return Poll::Ready(None);
        }
        // Data already here is taken first, so a body that arrived in time is never refused.
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            self.expired = true;
            let error = std::io::Error::new(std::io::ErrorKind::TimedOut, "request body not received in time");
            return Poll::Ready(Some(Err(axum::Error::new(error))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_without_requests() {
        let activity = Activity::new();
        let (first, idle) = (Duration::from_secs(2), Duration::from_secs(5));
        let started = Instant::now();
        activity.idle(first, idle).await;
        assert_eq!(started.elapsed(), first, "before any request the first allowance applies");

        let request = activity.begin();
        let waited = tokio::time::timeout(Duration::from_secs(60), activity.idle(first, idle)).await;
        assert!(waited.is_err(), "a request in progress is never idle");
        drop(request);
        let ended = Instant::now();
        activity.idle(first, idle).await;
        assert_eq!(ended.elapsed(), idle, "after a request the idle allowance applies");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_past_its_deadline_fails_and_one_in_time_does_not() {
        let on_time = Deadline::body(Body::from("hello"), Duration::from_secs(1));
        assert_eq!(axum::body::to_bytes(on_time, 100).await.unwrap(), "hello");

        let never = futures_util::stream::pending::<Result<Bytes, std::io::Error>>();
        let slow = Deadline::body(Body::from_stream(never), Duration::from_secs(1));
        let error = axum::body::to_bytes(slow, 100).await.expect_err("the deadline passed");
        assert!(error.to_string().contains("not received in time"), "{error}");
    }
}
