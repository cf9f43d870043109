//! One consumer per home: the daemon that runs the adapters, recovery, turns and cron holds the
//! home — an OS lock on `$HERMESD_HOME/daemon.lock` for as long as the process lives, and the
//! `home` lease in the store (`LeaseStore`: who holds it, for status, and a fencing token that
//! grows with each holder). A second `hermesd run` on the same home stands by — no adapter,
//! recovery, turn or cron; `/healthz` and `/readyz` ("standby: held by PID …") when its listen
//! address is free — and takes over as soon as the lock is free: within `POLL` (half a second)
//! after the holder stops or is killed (`kill -9` included, since the kernel drops a dead process's
//! locks), with no expiry to wait out and no periodic write to keep it.
//!
//! A shared store (several machines) gives each single-consumer account a lease of its own with
//! an expiry renewed by its holder (`acquire_lease` / `renew_lease`). Either way the holding's
//! fencing token gates the cursor writes (`HostIngress::with_fence`, `InboundStore::save_cursor`):
//! a holder that lost its lease cannot move a platform's cursor under the new one.

use std::fs::{File, TryLockError};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::clock::now_ms;
use crate::config::HttpConfig;
use crate::store::LeaseStore;

/// The lease of a whole home.
pub(super) const HOME: &str = "home";
/// How often a standby tries the lock.
const POLL: Duration = Duration::from_millis(500);

/// This process's holding of the home: dropping it (at the very end of the daemon's life, or
/// with the process) lets a standby in.
#[derive(Debug)]
pub(super) struct Holding {
    /// The OS lock, held while this value lives.
    _lock: File,
    /// The fencing token of this holding.
    pub(super) token: i64,
}

/// A holder id and label for this process.
fn me() -> (String, String) {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned()).unwrap_or_default();
    let label = if host.is_empty() {
        format!("PID {}", std::process::id())
    } else {
        format!("PID {} on {host}", std::process::id())
    };
    (uuid::Uuid::new_v4().to_string(), label)
}

/// Take the home, standing by until it is free: `None` when `cancel` fired first. While standing
/// by, `/healthz` and `/readyz` are served on `http.listen` if that address is free (the holder
/// usually has it), and systemd hears READY with a standby status (and watchdog pings).
pub(super) async fn hold(
    store: &dyn LeaseStore,
    home: &Path,
    http: &HttpConfig,
    systemd: bool,
    cancel: &CancellationToken,
) -> anyhow::Result<Option<Holding>> {
    use anyhow::Context as _;
    let path = home.join("daemon.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("open {}", path.display()))?;
    let (holder, label) = me();
    let mut standby: Option<Standby> = None;
    let mut last_watchdog = std::time::Instant::now();
    loop {
        match lock.try_lock() {
            Ok(()) => {
                if let Some(standby) = standby.take() {
                    standby.stop().await;
                    tracing::info!("took over the home: the daemon holding it stopped");
                }
                let token = store.take_lease(HOME, &holder, &label, now_ms()).await.context("take the home lease")?;
                return Ok(Some(Holding { _lock: lock, token }));
            }
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => return Err(e).with_context(|| format!("lock {}", path.display())),
        }
        if standby.is_none() {
            let held_by = store.lease(HOME).await?.map(|l| l.label).unwrap_or_else(|| "another process".into());
            let status = format!("standby: held by {held_by}");
            tracing::warn!("{status}; this daemon stands by and takes over when it stops");
            if systemd {
                let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready, sd_notify::NotifyState::Status(&status)]);
            }
            standby = Some(Standby::start(http, &status).await);
        }
        if systemd
            && let Some(every) = sd_notify::watchdog_enabled()
            && last_watchdog.elapsed() >= every / 2
        {
            let _ = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]);
            last_watchdog = std::time::Instant::now();
        }
        tokio::select! {
            _ = cancel.cancelled() => {
                if let Some(standby) = standby.take() {
                    standby.stop().await;
                }
                return Ok(None);
            }
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

/// A standby's health server.
struct Standby {
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Standby {
    async fn start(http: &HttpConfig, status: &str) -> Self {
        let cancel = CancellationToken::new();
        let task = match TcpListener::bind(&http.listen).await {
            Ok(listener) => {
                let app = health_router(Arc::from(status));
                let settings = crate::http::ServeSettings {
                    header_read_timeout: http.header_read_timeout.get(),
                    idle_timeout: http.idle_timeout.get(),
                    body_timeout: http.body_timeout.get(),
                    max_connections: http.max_connections,
                };
                Some(tokio::spawn(crate::http::serve(listener, app, settings, cancel.clone())))
            }
            Err(e) => {
                tracing::info!(listen = %http.listen, error = %e, "standby: serving no HTTP until it takes over");
                None
            }
        };
        Self { cancel, task }
    }

    /// Stop serving and give the listen address back before the daemon binds it.
    async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// `/healthz` (the process lives) and `/readyz` (503, naming the holder); nothing else.
fn health_router(status: Arc<str>) -> Router {
    let ready = status.clone();
    Router::new()
        .route("/healthz", get(|| async { "ok (standby)" }))
        .route("/readyz", get(move || std::future::ready((StatusCode::SERVICE_UNAVAILABLE, ready.to_string()))))
        .fallback(move || std::future::ready((StatusCode::SERVICE_UNAVAILABLE, status.to_string())))
}
