//! systemd integration: READY after the HTTP bind and store open, WATCHDOG pings while the store
//! answers, STOPPING on drain. Every call is a no-op outside systemd.

use std::sync::Arc;

use sd_notify::NotifyState;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::store::Store;

/// Signal READY and start watchdog pings when systemd asks for them.
pub fn ready(tasks: &TaskTracker, cancel: CancellationToken, store: Arc<dyn Store>) {
    if let Err(e) = sd_notify::notify(&[NotifyState::Ready, NotifyState::Status("serving")]) {
        tracing::debug!(error = %e, "sd_notify ready");
    }
    let Some(interval) = sd_notify::watchdog_enabled() else { return };
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(interval / 2);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            // Ping only while the store answers, so a wedged daemon is restarted by systemd.
            match store.ping().await {
                Ok(()) => {
                    let _ = sd_notify::notify(&[NotifyState::Watchdog]);
                }
                Err(e) => tracing::error!(error = %e, "store not answering; withholding watchdog ping"),
            }
        }
    });
}

/// Signal STOPPING.
pub fn stopping() {
    let _ = sd_notify::notify(&[NotifyState::Stopping]);
}
