//! Builds the Signal adapter from `[platforms.signal]` and the environment (`SIGNAL_HTTP_URL`,
//! `SIGNAL_ACCOUNT`). The adapter itself lives in `platforms/signal` (crate `hermesd-signal`).
//!
//! The settings are `config/signal.rs`'s: every problem reported as `platforms.signal…`, and a
//! `stream_deadline` below signal-cli's 15 s keepalive a `check` note.

use std::path::Path;
use std::sync::Arc;

use hermesd_platform::Platform;
use hermesd_signal::SignalPlatform;

use crate::config::{Env, SignalConfig};

/// The adapter for `config`.
pub fn build(config: &SignalConfig, env: &Env, home: &Path) -> Result<Arc<dyn Platform>, String> {
    let settings = config.settings(env, home);
    settings.validate().map_err(|problems| problems.join("; "))?;
    if settings.deadline_below_keepalive() {
        tracing::warn!(
            platform = hermesd_signal::NAME,
            deadline_s = settings.stream_deadline.as_secs_f64(),
            "signal stream_deadline is not above signal-cli's 15 s keepalive; quiet streams will be replaced"
        );
    }
    Ok(Arc::new(SignalPlatform::new(settings)?))
}
