//! The daemon's log lines: to stderr, every secret masked (`redact::RedactingWriter`), filtered by
//! `HERMESD_LOG` (else `RUST_LOG`, else `info,sqlx=warn`). The filter can change while the daemon
//! runs (`set_filter`: a reload reads `HERMESD_LOG` from `$HERMESD_HOME/.env` again). The last
//! `RECENT` lines, masked the same way, are kept in memory for the control panel (`recent`).

use std::collections::VecDeque;
use std::sync::{Mutex, OnceLock, PoisonError};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

/// The filter when nothing says otherwise.
const DEFAULT_FILTER: &str = "info,sqlx=warn";

/// Log lines kept for the control panel.
const RECENT: usize = 1000;

/// The last `RECENT` lines, oldest first.
static LINES: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());

/// Where the kept lines are written: each event's text becomes one line of `LINES`.
#[derive(Clone, Copy)]
struct Keep;

/// One event's bytes, kept when dropped.
struct KeptLine(Vec<u8>);

impl std::io::Write for KeptLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for KeptLine {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        let mut lines = LINES.lock().unwrap_or_else(PoisonError::into_inner);
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if lines.len() == RECENT {
                lines.pop_front();
            }
            lines.push_back(line.to_owned());
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Keep {
    type Writer = KeptLine;

    fn make_writer(&'a self) -> Self::Writer {
        KeptLine(Vec::new())
    }
}

/// The most recent log lines (masked), oldest first, at most `limit`.
pub fn recent(limit: usize) -> Vec<String> {
    let lines = LINES.lock().unwrap_or_else(PoisonError::into_inner);
    lines.iter().skip(lines.len().saturating_sub(limit)).cloned().collect()
}

/// Where the running filter is changed; set once by `init`.
static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// The secrets the log masks, once `init` ran.
static MASK: OnceLock<crate::redact::Redaction> = OnceLock::new();

/// `text` with every secret the log masks masked (as is before `init`).
pub fn mask(text: &str) -> String {
    MASK.get().map_or_else(|| text.to_owned(), |redaction| redaction.redact(text))
}

/// Start logging to stderr through `redaction`.
pub fn init(redaction: crate::redact::Redaction) {
    let _ = MASK.set(redaction.clone());
    let filter = EnvFilter::try_from_env("HERMESD_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let (filter, handle) = reload::Layer::new(filter);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let writer = crate::redact::RedactingWriter::new(std::io::stderr, redaction.clone());
    let fmt = tracing_subscriber::fmt::layer().with_ansi(ansi).with_writer(writer);
    let kept = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(crate::redact::RedactingWriter::new(Keep, redaction));
    if tracing_subscriber::registry().with(filter).with(fmt).with(kept).try_init().is_ok() {
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
    fn kept_lines_are_bounded_and_newest_last() {
        for i in 0..RECENT + 5 {
            drop(KeptLine(format!("line {i}\n").into_bytes()));
        }
        let lines = recent(2);
        assert_eq!(lines, [format!("line {}", RECENT + 3), format!("line {}", RECENT + 4)]);
        assert!(recent(usize::MAX).len() <= RECENT);
    }

    #[test]
    fn a_spec_that_does_not_parse_is_refused() {
        assert!(set_filter(Some("info,[[[")).is_err());
        assert!(set_filter(Some("debug")).is_ok(), "no subscriber in unit tests: nothing to change");
    }
}
