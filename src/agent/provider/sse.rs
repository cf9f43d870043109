//! An incremental Server-Sent Events decoder, and the loop that feeds it a streamed reply body.
//!
//! It knows nothing of any provider's event payloads; it never buffers more than one event.

use std::ops::ControlFlow;

use futures_util::StreamExt;

use super::ProviderError;

/// The most an unfinished event may buffer; a server that never ends a line must not exhaust
/// memory before the request timeout fires.
const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One complete event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SseEvent {
    /// The `event:` name, when the server gave one.
    pub(super) event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub(super) data: String,
}

/// An event grew past [`MAX_EVENT_BYTES`].
#[derive(Debug, thiserror::Error)]
#[error("a server-sent event exceeded {MAX_EVENT_BYTES} bytes")]
pub(super) struct EventTooLarge;

/// Decodes a byte stream split anywhere (inside lines, CRLF pairs or UTF-8 sequences) into events.
#[derive(Debug, Default)]
pub(super) struct SseDecoder {
    /// Bytes of the line not yet ended. Line ends are ASCII, so a multi-byte UTF-8 sequence is
    /// never cut by one and each completed line decodes whole.
    line: Vec<u8>,
    /// The last byte was a CR, so an LF opening the next chunk belongs to the same line end.
    after_cr: bool,
    /// A line has been completed, so a byte-order mark can no longer appear.
    seen_line: bool,
    event: Option<String>,
    /// `data:` values, each followed by `\n`, as the specification builds them.
    data: String,
}

impl SseDecoder {
    /// Feed the next chunk; returns the events it completed, in order.
    pub(super) fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, EventTooLarge> {
        let mut events = Vec::new();
        let mut rest = chunk;
        while !rest.is_empty() {
            if std::mem::take(&mut self.after_cr) && rest[0] == b'\n' {
                rest = &rest[1..];
                continue;
            }
            let end = rest.iter().position(|b| matches!(b, b'\r' | b'\n')).unwrap_or(rest.len());
            if self.line.len() + self.data.len() + end > MAX_EVENT_BYTES {
                return Err(EventTooLarge);
            }
            self.line.extend_from_slice(&rest[..end]);
            let Some(&line_end) = rest.get(end) else { break };
            self.after_cr = line_end == b'\r';
            events.extend(self.end_line());
            rest = &rest[end + 1..];
        }
        Ok(events)
    }

    /// The body ended: returns an event left without its closing blank line. The specification
    /// discards it, but some servers omit the final blank line; callers must treat it as
    /// possibly truncated.
    pub(super) fn finish(&mut self) -> Option<SseEvent> {
        if !self.line.is_empty() {
            // A field line cannot dispatch on its own, only a blank one can.
            let _ = self.end_line();
        }
        self.dispatch()
    }

    fn end_line(&mut self) -> Option<SseEvent> {
        let bytes = std::mem::take(&mut self.line);
        let decoded = String::from_utf8_lossy(&bytes);
        let mut line: &str = &decoded;
        if !std::mem::replace(&mut self.seen_line, true) {
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        let event = self.field(line);
        // Hand the allocation back so a long stream reuses one line buffer.
        self.line = bytes;
        self.line.clear();
        event
    }

    fn field(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (name, value) = match line.split_once(':') {
            Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match name {
            "event" => self.event = Some(value.to_owned()).filter(|v| !v.is_empty()),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            // `id`, `retry` and unknown fields matter only to reconnecting browsers.
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        if self.data.is_empty() {
            return None;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        Some(SseEvent { event, data })
    }
}

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

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: Option<&str>, data: &str) -> SseEvent {
        SseEvent { event: name.map(str::to_owned), data: data.to_owned() }
    }

    fn decode_in_pieces(input: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::default();
        let mut events = Vec::new();
        for chunk in input.chunks(piece) {
            events.extend(decoder.push(chunk).expect("small events"));
        }
        events.extend(decoder.finish());
        events
    }

    const STREAM: &str = "\u{feff}: keep-alive comment\n\
        event: message_start\n\
        id: 7\n\
        retry: 1000\n\
        data: {\"text\":\"héllo → wörld 🦀\"}\n\
        \n\
        data: first\n\
        data:second\n\
        data\n\
        \n\
        event: ping\n\
        \n\
        data: [DONE]\n\
        \n";

    fn expected() -> Vec<SseEvent> {
        vec![
            event(Some("message_start"), "{\"text\":\"héllo → wörld 🦀\"}"),
            event(None, "first\nsecond\n"),
            event(None, "[DONE]"),
        ]
    }

    #[test]
    fn decodes_whole_and_byte_by_byte() {
        for piece in [STREAM.len(), 1, 2, 3, 5, 7] {
            assert_eq!(decode_in_pieces(STREAM.as_bytes(), piece), expected(), "pieces of {piece}");
        }
    }

    #[test]
    fn decodes_crlf_and_cr_line_ends_split_anywhere() {
        let crlf = STREAM.replace('\n', "\r\n");
        let cr = STREAM.replace('\n', "\r");
        for input in [&crlf, &cr] {
            for piece in [input.len(), 1, 2, 3] {
                assert_eq!(decode_in_pieces(input.as_bytes(), piece), expected(), "{input:?} in pieces of {piece}");
            }
        }
    }

    #[test]
    fn an_unfinished_event_is_held_until_its_blank_line() {
        let mut decoder = SseDecoder::default();
        assert!(decoder.push(b"event: a\ndata: x").expect("small").is_empty());
        assert!(decoder.push(b"y\r").expect("small").is_empty());
        assert_eq!(decoder.push(b"\n\r\n").expect("small"), vec![event(Some("a"), "xy")]);
        assert_eq!(decoder.finish(), None);
    }

    #[test]
    fn finish_returns_an_event_missing_its_blank_line() {
        let mut decoder = SseDecoder::default();
        assert!(decoder.push(b"data: [DONE]").expect("small").is_empty());
        assert_eq!(decoder.finish(), Some(event(None, "[DONE]")));
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        assert_eq!(decode_in_pieces(b"data: a\xffb\n\n", 1), vec![event(None, "a\u{fffd}b")]);
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut decoder = SseDecoder::default();
        let chunk = vec![b'x'; 1024 * 1024];
        let result = (0..=MAX_EVENT_BYTES / chunk.len()).try_for_each(|_| decoder.push(&chunk).map(drop));
        assert!(result.is_err());
    }
}
