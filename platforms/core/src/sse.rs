//! An incremental Server-Sent Events decoder (the WHATWG event-stream format): model providers'
//! streamed replies and signal-cli's event stream both arrive this way.
//!
//! Bytes may be split anywhere (inside lines, CRLF pairs or UTF-8 sequences); `:` comments,
//! `id` and `retry` are dropped. It never buffers more than one event, and refuses an event over
//! its limit, so a peer that never ends a line cannot exhaust memory.

/// The most an unfinished event may buffer by default; a server that never ends a line must not
/// exhaust memory before the reader's timeout fires.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One complete event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name, when the server gave one.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// An event grew past the decoder's limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a server-sent event exceeded {0} bytes")]
pub struct EventTooLarge(pub usize);

/// Decodes a byte stream split anywhere (inside lines, CRLF pairs or UTF-8 sequences) into events.
#[derive(Debug)]
pub struct SseDecoder {
    /// The most one event may hold.
    max_event_bytes: usize,
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

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new(MAX_EVENT_BYTES)
    }
}

impl SseDecoder {
    /// A decoder refusing events over `max_event_bytes`.
    pub fn new(max_event_bytes: usize) -> Self {
        Self { max_event_bytes, line: Vec::new(), after_cr: false, seen_line: false, event: None, data: String::new() }
    }

    /// Feed the next chunk; returns the events it completed, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, EventTooLarge> {
        let mut events = Vec::new();
        let mut rest = chunk;
        while !rest.is_empty() {
            if std::mem::take(&mut self.after_cr) && rest[0] == b'\n' {
                rest = &rest[1..];
                continue;
            }
            let end = rest.iter().position(|b| matches!(b, b'\r' | b'\n')).unwrap_or(rest.len());
            if self.line.len() + self.data.len() + end > self.max_event_bytes {
                return Err(EventTooLarge(self.max_event_bytes));
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
    pub fn finish(&mut self) -> Option<SseEvent> {
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
    fn signal_clis_events_and_keepalives_decode_across_chunks() {
        let mut decoder = SseDecoder::new(1024);
        assert_eq!(decoder.push(b"event:rece").unwrap(), []);
        assert_eq!(decoder.push(b"ive\ndata:{\"a\":1}\n").unwrap(), []);
        assert_eq!(decoder.push(b"\n:\n").unwrap(), [event(Some("receive"), "{\"a\":1}")]);
        assert_eq!(decoder.push(b"data: x\r\ndata:y\r\n\r\n").unwrap(), [event(None, "x\ny")]);
        assert_eq!(decoder.push(b"data\n\n").unwrap(), [event(None, "")], "signal-cli's empty data line");
        assert_eq!(decoder.push(b"\n\n").unwrap(), [], "blank lines alone are no event");
        assert_eq!(decoder.push(&[b'x'; 1025]), Err(EventTooLarge(1024)));
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut decoder = SseDecoder::default();
        let chunk = vec![b'x'; 1024 * 1024];
        let result = (0..=MAX_EVENT_BYTES / chunk.len()).try_for_each(|_| decoder.push(&chunk).map(drop));
        assert!(result.is_err());
    }
}
