//! The daemon's redaction: every secret value it loaded (model keys, platform tokens,
//! `API_SERVER_KEY`, webhook secrets — recorded by `Env::secret` as they are read) and common
//! token shapes are masked in tool output before it enters the transcript, in text bound for a
//! chat, in streamed answers, and in log lines. One shared `Redaction` serves all of them, so a
//! secret read late (at the first request, say) is masked everywhere from then on.
//!
//! It must never log, store or return a secret it was given.
//!
//! Values shorter than 8 characters are not masked. The users: the tool executor (every result),
//! the outbox (composed chunks and progress edits), `StreamMask` (streamed answers, masked on the
//! accumulated text while the unfinished last word is held back, so a token split across deltas is
//! caught) and `RedactingWriter` (every log line, `cli::init_logging`).

use std::io::{self, Write};
use std::sync::{Arc, RwLock};

use hermesd_platform::Redactor;
use tracing_subscriber::fmt::MakeWriter;

/// What a masked secret or token reads as.
pub const MARKER: &str = "[redacted]";

/// Secret values shorter than this are not masked: they could not be told from ordinary words,
/// and masking them would garble every text (real keys and tokens are far longer).
pub const MIN_SECRET_CHARS: usize = 8;

/// The longest unfinished word a stream holds back waiting for its end; longer ones are sent as
/// they are (after redaction of what is there), so a reply without spaces still streams.
const MAX_HELD_BYTES: usize = 1024;

/// The shared set of secrets plus token shapes. Cheap to clone; clones share the set.
#[derive(Clone)]
pub struct Redaction {
    redactor: Arc<RwLock<Redactor>>,
}

impl Default for Redaction {
    fn default() -> Self {
        Self { redactor: Arc::new(RwLock::new(Redactor::new(MARKER, &[]).with_token_shapes())) }
    }
}

impl std::fmt::Debug for Redaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.redactor.read().unwrap_or_else(|e| e.into_inner()).secret_count();
        f.debug_struct("Redaction").field("secrets", &count).finish()
    }
}

impl Redaction {
    /// Mask `secret` from now on (ignored when shorter than `MIN_SECRET_CHARS`).
    pub fn record(&self, secret: &str) {
        let secret = secret.trim();
        if secret.chars().count() >= MIN_SECRET_CHARS {
            self.redactor.write().unwrap_or_else(|e| e.into_inner()).add_secret(secret);
        }
    }

    /// `text` with every known secret and token shape masked.
    pub fn redact(&self, text: &str) -> String {
        self.redactor.read().unwrap_or_else(|e| e.into_inner()).redact(text)
    }

    /// A mask for one streamed answer.
    pub fn stream(&self) -> StreamMask {
        StreamMask { redaction: self.clone(), raw: String::new(), sent: 0 }
    }
}

/// Redacts a text that arrives in pieces. It works on the accumulated text, never a piece alone:
/// the unfinished last word is held back until whitespace ends it, so a token split across
/// pieces is masked whole. Matches never span whitespace (except `Bearer <token>`, whose
/// `Bearer ` stays), so what was sent is never revised.
#[derive(Debug)]
pub struct StreamMask {
    redaction: Redaction,
    /// Text not yet sent, after the last sent word kept for context (`raw[..sent]`).
    raw: String,
    sent: usize,
}

impl StreamMask {
    /// Add a piece; returns the redacted text that is now safe to send (often empty).
    pub fn push(&mut self, piece: &str) -> String {
        self.raw.push_str(piece);
        let pending = &self.raw[self.sent..];
        let end = match pending.rfind(char::is_whitespace) {
            Some(at) => self.sent + at + pending[at..].chars().next().map_or(1, char::len_utf8),
            None if pending.len() > MAX_HELD_BYTES => self.raw.len(),
            None => return String::new(),
        };
        self.emit(end)
    }

    /// Everything still held back, redacted (the answer is complete).
    pub fn finish(&mut self) -> String {
        self.emit(self.raw.len())
    }

    fn emit(&mut self, end: usize) -> String {
        let before = self.redaction.redact(&self.raw[..self.sent]);
        let upto = self.redaction.redact(&self.raw[..end]);
        let common =
            before.char_indices().zip(upto.chars()).find(|((_, a), b)| a != b).map_or(before.len(), |((i, _), _)| i);
        let out = upto.get(common.min(upto.len())..).unwrap_or_default().to_owned();
        // Keep the last sent word (and the whitespace after it) as context for `Bearer <token>`.
        let trimmed = self.raw[..end].trim_end();
        let keep_from = trimmed.rfind(char::is_whitespace).map_or(0, |at| at + 1);
        let keep_from = if trimmed.is_empty() { end } else { keep_from };
        self.raw.drain(..keep_from);
        self.sent = end - keep_from;
        out
    }
}

/// A `MakeWriter` that masks secrets in every formatted log line before it reaches `inner`.
#[derive(Clone)]
pub struct RedactingWriter<M> {
    inner: M,
    redaction: Redaction,
}

impl<M> RedactingWriter<M> {
    /// Wrap `inner` (stderr in the daemon).
    pub fn new(inner: M, redaction: Redaction) -> Self {
        Self { inner, redaction }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for RedactingWriter<M> {
    type Writer = RedactedLine<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        RedactedLine { inner: self.inner.make_writer(), redaction: self.redaction.clone(), line: Vec::new() }
    }
}

/// One log event, buffered whole and written masked when dropped (the formatter makes one
/// writer per event, so a secret is never split between two writes).
pub struct RedactedLine<W: Write> {
    inner: W,
    redaction: Redaction,
    line: Vec<u8>,
}

impl<W: Write> Write for RedactedLine<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<W: Write> Drop for RedactedLine<W> {
    fn drop(&mut self) {
        if self.line.is_empty() {
            return;
        }
        let masked = self.redaction.redact(&String::from_utf8_lossy(&self.line));
        // A log line that cannot be written has nowhere else to go.
        let _ = self.inner.write_all(masked.as_bytes());
        let _ = self.inner.flush();
    }
}

#[cfg(test)]
mod tests;
