//! The loop that feeds a streamed reply body to the Server-Sent Events decoder
//! (`hermesd_platform::sse`). It knows nothing of any provider's event payloads.

use std::ops::ControlFlow;

use futures_util::StreamExt;
pub(super) use hermesd_platform::sse::{SseDecoder, SseEvent};

use super::ProviderError;

/// How a streamed reply's events ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum StreamEnd {
    /// The consumer saw the final event and stopped reading.
    Finished,
    /// The body ended or failed first; why, for the error message.
    Cut(String),
}

/// Read `response`'s body as events, handing each to `on_event` until it breaks (the final event),
/// returns an error, or the body ends.
pub(super) async fn read_events<F>(response: reqwest::Response, mut on_event: F) -> Result<StreamEnd, ProviderError>
where
    F: FnMut(SseEvent) -> Result<ControlFlow<()>, ProviderError>,
{
    let mut body = response.bytes_stream();
    let mut decoder = SseDecoder::default();
    while let Some(chunk) = body.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(error) => return Ok(StreamEnd::Cut(describe(&error))),
        };
        let events = decoder.push(&chunk).map_err(|e| ProviderError::InvalidResponse(e.to_string()))?;
        for event in events {
            if on_event(event)?.is_break() {
                return Ok(StreamEnd::Finished);
            }
        }
    }
    // An unterminated last event counts only if it completes the stream; anything else in it may
    // be cut mid-payload, so its errors mean a cut stream rather than a bad reply.
    if let Some(event) = decoder.finish()
        && let Ok(ControlFlow::Break(())) = on_event(event)
    {
        return Ok(StreamEnd::Finished);
    }
    Ok(StreamEnd::Cut("the stream ended before its final event".into()))
}

/// A body error with its causes, without the URL.
fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return "timed out".into();
    }
    // The top level only says "error decoding response body" and may name the URL; the causes
    // say what happened.
    let mut text = String::from("reading the stream failed");
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
