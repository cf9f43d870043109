//! The accept loop of the one HTTP server: hyper-util's connection builder with a header read
//! timeout (slow-header clients are cut off), a cap on connections served at once (a semaphore
//! held by each connection; the rest wait in the listen backlog), `TCP_NODELAY`, the client's
//! address for the rate limit, and a graceful shutdown bounded by a deadline.
//!
//! `axum::serve` configures neither a timer (so no header timeout) nor a connection cap, hence
//! this loop. It never parses requests itself; hyper does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::Layer;

/// How long open connections get to finish their requests once shutdown begins.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Connection-level limits of the server.
#[derive(Debug, Clone, Copy)]
pub struct ServeSettings {
    /// Time allowed to send a request's headers (also bounds an idle keep-alive connection).
    pub header_read_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
}

/// Serve `app` on `listener` until `shutdown` is cancelled, then let open connections finish
/// their current requests (up to a deadline).
pub async fn serve(listener: TcpListener, app: Router, settings: ServeSettings, shutdown: CancellationToken) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(settings.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
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
        let service = TowerToHyperService::new(axum::Extension(ConnectInfo(remote)).layer(app.clone()));
        let connection = builder.serve_connection(TokioIo::new(tcp), service).into_owned();
        let connection = graceful.watch(connection);
        connections.spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "http connection ended with an error");
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
