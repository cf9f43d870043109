//! A server-sent events decoder for signal-cli's `/api/v1/events` stream (`ServerSentEventSender`:
//! `event:receive` + `data:<json>` lines, a blank line ending an event, `:` keepalive comments).
//!
//! Bounded: an event larger than `MAX_EVENT_BYTES` is an error (the stream is dropped and opened
//! again), so a broken peer cannot grow the buffer without limit.

/// The largest event accepted (envelopes are small; attachments are fetched separately).
pub(crate) const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// One thing read from the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SseItem {
    /// A complete event: its `event:` name (`message` when absent) and its data lines joined.
    Event { name: String, data: String },
    /// A comment line (signal-cli's keepalive).
    Comment,
}

/// Incremental decoder state.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    line: Vec<u8>,
    name: Option<String>,
    data: Option<String>,
    /// Bytes held for the event being read.
    held: usize,
}

/// The stream sent more than `MAX_EVENT_BYTES` for one event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an event on the stream exceeds {MAX_EVENT_BYTES} bytes")]
pub(crate) struct TooLarge;

impl SseDecoder {
    /// Feeds `bytes`; returns the items completed by them.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseItem>, TooLarge> {
        let mut items = Vec::new();
        for &byte in bytes {
            if byte != b'\n' {
                self.line.push(byte);
                self.held += 1;
                if self.held > MAX_EVENT_BYTES {
                    return Err(TooLarge);
                }
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if let Some(item) = self.line_done(&String::from_utf8_lossy(&line)) {
                items.push(item);
            }
        }
        Ok(items)
    }

    fn line_done(&mut self, line: &str) -> Option<SseItem> {
        if line.is_empty() {
            self.held = 0;
            let name = self.name.take();
            return self
                .data
                .take()
                .map(|data| SseItem::Event { name: name.unwrap_or_else(|| "message".into()), data });
        }
        if line.starts_with(':') {
            return Some(SseItem::Comment);
        }
        let (field, value) = line.split_once(':').map_or((line, ""), |(f, v)| (f, v.strip_prefix(' ').unwrap_or(v)));
        match field {
            "event" => self.name = Some(value.to_owned()),
            "data" => {
                let data = self.data.get_or_insert_with(String::new);
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value);
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, data: &str) -> SseItem {
        SseItem::Event { name: name.into(), data: data.into() }
    }

    #[test]
    fn decodes_signal_clis_events_and_keepalives_across_chunks() {
        let mut decoder = SseDecoder::default();
        assert_eq!(decoder.feed(b"event:rece").unwrap(), []);
        assert_eq!(decoder.feed(b"ive\ndata:{\"a\":1}\n").unwrap(), []);
        assert_eq!(decoder.feed(b"\n:\n").unwrap(), [event("receive", "{\"a\":1}"), SseItem::Comment]);
        assert_eq!(decoder.feed(b"data: x\r\ndata:y\r\n\r\n").unwrap(), [event("message", "x\ny")]);
        assert_eq!(decoder.feed(b"data\n\n").unwrap(), [event("message", "")], "signal-cli's empty data line");
        assert_eq!(decoder.feed(b"\n\n").unwrap(), [], "blank lines alone are no event");
    }

    #[test]
    fn an_oversized_event_is_an_error() {
        let mut decoder = SseDecoder::default();
        let big = vec![b'x'; MAX_EVENT_BYTES + 1];
        assert_eq!(decoder.feed(&big), Err(TooLarge));
    }

    mod props {
        use proptest::prelude::*;

        use super::super::*;

        proptest! {
            #[test]
            fn any_split_gives_the_same_items(data in "[a-z{}:\" ]{0,40}", cut in 0usize..80) {
                let text = format!("event:receive\ndata:{data}\n\n:\nevent:receive\ndata:{data}\n\n");
                let bytes = text.as_bytes();
                let cut = cut.min(bytes.len());
                let mut whole = SseDecoder::default();
                let expected = whole.feed(bytes).unwrap();
                let mut split = SseDecoder::default();
                let mut got = split.feed(&bytes[..cut]).unwrap();
                got.extend(split.feed(&bytes[cut..]).unwrap());
                prop_assert_eq!(got, expected);
            }

            #[test]
            fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
                let _ = SseDecoder::default().feed(&bytes);
            }
        }
    }
}
