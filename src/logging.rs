//! The daemon's log lines: to stderr, every secret masked (`redact::RedactingWriter`), filtered by
//! `HERMESD_LOG` (else `RUST_LOG`, else `info,sqlx=warn`). The filter can change while the daemon
//! runs (`set_filter`: a reload reads `HERMESD_LOG` from `$HERMESD_HOME/.env` again).

use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

/// The filter when nothing says otherwise.
const DEFAULT_FILTER: &str = "info,sqlx=warn";

/// Where the running filter is changed; set once by `init`.
static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Start logging to stderr through `redaction`.
pub fn init(redaction: crate::redact::Redaction) {
    let filter = EnvFilter::try_from_env("HERMESD_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let (filter, handle) = reload::Layer::new(filter);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let writer = crate::redact::RedactingWriter::new(std::io::stderr, redaction);
    let fmt = tracing_subscriber::fmt::layer().with_ansi(ansi).with_writer(writer);
    if tracing_subscriber::registry().with(filter).with(fmt).try_init().is_ok() {
        let _ = FILTER.set(handle);
    }
}

/// Filter log lines by `spec` (`HERMESD_LOG`'s syntax) from now on; `None`: the default. `Err`
/// says why a spec was refused (the running filter stays).
pub fn set_filter(spec: Option<&str>) -> Result<(), String> {
    let filter = match spec.map(str::trim).filter(|s| !s.is_empty()) {
        Some(spec) => EnvFilter::try_new(spec).map_err(|e| format!("HERMESD_LOG {spec:?}: {e}"))?,
        None => EnvFilter::new(DEFAULT_FILTER),
    };
    match FILTER.get() {
        Some(handle) => handle.reload(filter).map_err(|e| e.to_string()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_that_does_not_parse_is_refused() {
        assert!(set_filter(Some("info,[[[")).is_err());
        assert!(set_filter(Some("debug")).is_ok(), "no subscriber in unit tests: nothing to change");
    }
}
