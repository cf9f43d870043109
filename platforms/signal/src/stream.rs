//! The receive loop: signal-cli's `GET /api/v1/events` stream, held open, with a liveness
//! deadline measured on bytes and keepalive comments (signal-cli writes `:` every 15 s, so a
//! quiet chat still shows a live stream). A stream silent past `stream_deadline` is dropped and
//! opened again at once, as is one that ends after working; one that cannot be opened is tried
//! again with backoff.
//!
//! signal-cli acknowledges a message to Signal before it writes it here, so whatever it wrote
//! into a stream that dies before we accept it is lost; with `--receive-mode=manual` it takes
//! messages from Signal only while this stream is connected (ARCHITECTURE.md, Known gaps).

use std::time::Duration;

use futures_util::StreamExt;
use hermesd_platform::{Backoff, PlatformContext, PlatformError};
use tokio_util::sync::CancellationToken;

use crate::SignalPlatform;
use hermesd_platform::sse::SseDecoder;

/// How one stream ended.
enum Ended {
    Cancelled,
    /// It could not be opened, or failed before it carried anything: open another after the
    /// backoff.
    Retry,
    /// It carried bytes for a while, then ended or went silent: open another at once, so a
    /// wedged stream is replaced within its deadline.
    Lost,
}

/// A stream must have lived this long for its loss to skip the backoff (a peer that answers
/// and hangs up at once must not make the loop spin).
const LIVED: Duration = Duration::from_secs(1);

/// The largest event accepted on the stream (envelopes are small; attachments are fetched
/// separately); a larger one drops the stream, which is opened again.
pub(crate) const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// Runs until `cancel`.
pub(crate) async fn run(
    platform: &SignalPlatform,
    ctx: &PlatformContext,
    cancel: &CancellationToken,
) -> Result<(), PlatformError> {
    let mut backoff = Backoff::new();
    loop {
        match one_stream(platform, ctx, cancel, &mut backoff).await {
            Ended::Cancelled => return Ok(()),
            Ended::Lost => {}
            Ended::Retry => {
                if !backoff.wait(cancel).await {
                    return Ok(());
                }
            }
        }
    }
}

async fn one_stream(
    platform: &SignalPlatform,
    ctx: &PlatformContext,
    cancel: &CancellationToken,
    backoff: &mut Backoff,
) -> Ended {
    let settings = &platform.settings;
    // `+` would read as a space in a query string.
    let account = settings.account.replace('+', "%2B");
    let url = format!("{}/api/v1/events?account={account}", settings.base());
    let request = platform.http.get(&url).send();
    let response = tokio::select! {
        () = cancel.cancelled() => return Ended::Cancelled,
        response = tokio::time::timeout(settings.api_timeout, request) => response,
    };
    let response = match response {
        Ok(Ok(response)) if response.status().is_success() => response,
        Ok(Ok(response)) => {
            let why = format!("signal-cli refused the event stream: HTTP {}", response.status().as_u16());
            tracing::warn!(platform = crate::NAME, %why);
            platform.health.disconnected(why);
            return Ended::Retry;
        }
        Ok(Err(error)) => {
            let why = format!("cannot reach signal-cli at {}: {}", settings.http_url, crate::rpc::describe(&error));
            tracing::warn!(platform = crate::NAME, %why);
            platform.health.disconnected(why);
            return Ended::Retry;
        }
        Err(_) => {
            platform.health.disconnected("signal-cli did not answer the event stream request".into());
            return Ended::Retry;
        }
    };
    platform.health.connected();
    platform.stream_opened();
    tracing::info!(platform = crate::NAME, "signal-cli event stream open");
    let mut body = response.bytes_stream();
    let mut decoder = SseDecoder::new(MAX_EVENT_BYTES);
    let mut healthy_since_open = false;
    let opened = tokio::time::Instant::now();
    let lost = |carried: bool| if carried && opened.elapsed() >= LIVED { Ended::Lost } else { Ended::Retry };
    loop {
        let next = tokio::select! {
            () = cancel.cancelled() => return Ended::Cancelled,
            next = tokio::time::timeout(settings.stream_deadline, body.next()) => next,
        };
        let bytes = match next {
            Err(_) => {
                tracing::warn!(
                    platform = crate::NAME,
                    deadline_s = settings.stream_deadline.as_secs_f64(),
                    "signal-cli event stream silent past its deadline; replacing it"
                );
                platform.health.wedged();
                return lost(healthy_since_open);
            }
            Ok(None) => {
                platform.health.disconnected("signal-cli closed the event stream".into());
                return lost(healthy_since_open);
            }
            Ok(Some(Err(error))) => {
                let why = format!("event stream failed: {}", crate::rpc::describe(&error));
                tracing::warn!(platform = crate::NAME, %why);
                platform.health.disconnected(why);
                return lost(healthy_since_open);
            }
            Ok(Some(Ok(bytes))) => bytes,
        };
        platform.health.alive();
        if !healthy_since_open {
            // The stream delivered something: the next failure starts the backoff afresh.
            healthy_since_open = true;
            backoff.reset();
        }
        let events = match decoder.push(&bytes) {
            Ok(events) => events,
            Err(error) => {
                platform.health.disconnected(error.to_string());
                return Ended::Retry;
            }
        };
        for event in events {
            if event.event.as_deref() != Some("receive") {
                continue;
            }
            match serde_json::from_str(&event.data) {
                Ok(payload) => platform.handle(ctx, &payload, cancel).await,
                Err(error) => tracing::warn!(platform = crate::NAME, %error, "unreadable event from signal-cli"),
            }
        }
    }
}

/// How long to keep retrying an accept the store refused before the message is given up.
pub(crate) const ACCEPT_PATIENCE: Duration = Duration::from_secs(60);
