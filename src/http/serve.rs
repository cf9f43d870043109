//! The accept loop of the one HTTP server: hyper-util's connection builder with a header read
//! timeout (slow-header clients are cut off), a cap on connections served at once (a semaphore
//! held by each connection; the rest wait in the listen backlog), `TCP_NODELAY`, the client's
//! address for the rate limit, and a graceful shutdown bounded by a deadline.
//!
//! No client holds a connection slot without bound: a connection with no request in progress is
//! closed after `header_read_timeout` before its first request (the protocol sniff and the
//! HTTP/2 handshake, which hyper does not time) and after `idle_timeout` between requests;
//! request bodies get `body_timeout`; HTTP/2 peers must answer pings.
//!
//! `axum::serve` configures neither a timer (so no header timeout) nor a connection cap, hence
//! this loop. It never parses requests itself; hyper does.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::Service;

use super::bounds::{Activity, Counted, Deadline};

/// How long open connections get to finish their requests once shutdown begins.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Streams one HTTP/2 connection may have open at once (hyper's default is 200); each may hold
/// a handler, so one connection should not stand for hundreds.
const MAX_STREAMS: u32 = 64;

/// Connection-level limits of the server.
#[derive(Debug, Clone, Copy)]
pub struct ServeSettings {
    /// Time allowed to send a request's headers (also bounds an idle keep-alive connection, and
    /// a new connection until its first request).
    pub header_read_timeout: Duration,
    /// How long a connection with no request in progress stays open after one.
    pub idle_timeout: Duration,
    /// Time allowed to send a request's body, counted from its headers.
    pub body_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
}

/// Serve `app` on `listener` until `shutdown` is cancelled, then let open connections finish
/// their current requests (up to a deadline).
pub async fn serve(listener: TcpListener, app: Router, settings: ServeSettings, shutdown: CancellationToken) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(settings.header_read_timeout);
    // A peer that stops answering pings is gone; its connection is closed rather than kept for
    // the requests it can no longer read the answers to.
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(settings.idle_timeout)
        .keep_alive_timeout(settings.header_read_timeout)
        .max_concurrent_streams(MAX_STREAMS);
    let permits = Arc::new(Semaphore::new(settings.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let connections = TaskTracker::new();
    loop {
        // The permit is taken before accepting, so a full server leaves new connections in the
        // kernel's backlog instead of accepting and starving them.
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = shutdown.cancelled() => break,
        };
        let (tcp, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_error(e).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        // Replies and SSE deltas are small writes that must leave at once, not wait for Nagle's
        // algorithm to coalesce them with the next.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
        let activity = Activity::new();
        let service = connection_service(app.clone(), remote, activity.clone(), settings.body_timeout);
        let connection = builder.serve_connection(TokioIo::new(tcp), service).into_owned();
        let connection = graceful.watch(connection);
        let (first, idle) = (settings.header_read_timeout, settings.idle_timeout);
        connections.spawn(async move {
            tokio::select! {
                result = connection => if let Err(e) = result {
                    tracing::debug!(error = %e, "http connection ended with an error");
                },
                // Nothing is in progress on it, so dropping it loses no request.
                () = activity.idle(first, idle) => tracing::debug!(client = %remote, "idle http connection closed"),
            }
            drop(permit);
        });
    }
    drop(listener);
    connections.close();
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown()).await.is_err() {
        tracing::info!("http connections still open after the shutdown grace; closing them");
    }
}

/// The service of one connection: the router, with the client's address, each request counted
/// until its response is sent, and its body bounded by `body_timeout`.
fn connection_service(
    app: Router,
    remote: SocketAddr,
    activity: Arc<Activity>,
    body_timeout: Duration,
) -> impl hyper::service::Service<Request<Incoming>, Response = axum::response::Response, Error = Infallible, Future: Send>
+ Clone {
    let service = move |mut request: Request<Incoming>| {
        let in_flight = activity.begin();
        request.extensions_mut().insert(ConnectInfo(remote));
        let request = request.map(|body| Deadline::body(Body::new(body), body_timeout));
        // A Router is always ready (its `poll_ready` returns at once), so it is called directly.
        let response = app.clone().call(request);
        async move {
            let response = response.await?;
            Ok::<_, Infallible>(response.map(|body| Counted::body(body, in_flight)))
        }
    };
    hyper::service::service_fn(service)
}

/// Accept errors: a client that went away is nothing; running out of descriptors is waited out
/// briefly instead of spinning.
async fn accept_error(e: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(e.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        return;
    }
    tracing::warn!(error = %e, "accept failed");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// The client address hyper saw, for handlers and layers that key on it.
pub(crate) fn client_addr(extensions: &axum::http::Extensions) -> Option<SocketAddr> {
    extensions.get::<ConnectInfo<SocketAddr>>().map(|info| info.0)
}
