//! Redaction of whole texts, of streamed pieces (every split point of a text gives the same
//! result as the whole), and of formatted log lines.

use std::sync::Mutex;

use super::*;

const KEY: &str = "or-live-0123456789abcdef";

fn redaction() -> Redaction {
    let redaction = Redaction::default();
    redaction.record(KEY);
    redaction.record("short");
    redaction
}

#[test]
fn recorded_secrets_and_token_shapes_are_masked_short_values_are_not() {
    let r = redaction();
    let text = format!("key={KEY} slack xoxb-1234567890-abcdefghij short words ghp_0123456789abcdefghijABCDEFGHIJ");
    assert_eq!(r.redact(&text), "key=[redacted] slack [redacted] short words [redacted]");
    assert!(format!("{r:?}").contains("secrets: 1"), "{r:?}");
}

fn streamed(r: &Redaction, pieces: &[&str]) -> (Vec<String>, String) {
    let mut mask = r.stream();
    let mut sent: Vec<String> = pieces.iter().map(|p| mask.push(p)).collect();
    sent.push(mask.finish());
    let whole = sent.concat();
    (sent, whole)
}

#[test]
fn a_token_split_across_pieces_is_masked_whole() {
    let r = redaction();
    let (sent, whole) = streamed(&r, &["Your key is sk-abcdef", "ghijklmnop1234 and more"]);
    assert_eq!(sent[0], "Your key is ");
    assert_eq!(whole, "Your key is [redacted] and more");
    let (_, whole) = streamed(&r, &["use ", &KEY[..10], &KEY[10..], " now"]);
    assert_eq!(whole, "use [redacted] now");
    let (sent, whole) = streamed(&r, &["Authorization: Bearer", " eyJhbGciOi", "JIUzI1NiJ9xyz123 ok"]);
    assert_eq!(whole, "Authorization: Bearer [redacted] ok");
    assert!(sent.iter().all(|s| !s.contains("eyJ")), "{sent:?}");
}

#[test]
fn every_split_of_a_text_streams_to_its_redaction() {
    let r = redaction();
    let texts = [
        format!("Here: {KEY}\nand sk-proj-abcdefghijklmnop123 then\tBearer abcdef123456789 — done ✓"),
        "AKIAIOSFODNN7EXAMPLE, xoxp-1-2-3-abcdefghij; plain words only".to_string(),
        format!("{KEY}{KEY} glued  Bearer  zz9zz9zz9zz9zz9"),
    ];
    for text in &texts {
        let expected = r.redact(text);
        let bounds: Vec<usize> = (0..=text.len()).filter(|i| text.is_char_boundary(*i)).collect();
        for &a in &bounds {
            for &b in bounds.iter().filter(|b| **b >= a).step_by(7) {
                let (sent, whole) = streamed(&r, &[&text[..a], &text[a..b], &text[b..]]);
                assert_eq!(whole, expected, "split at {a},{b}: {sent:?}");
            }
        }
    }
}

#[test]
fn a_word_longer_than_the_hold_limit_still_streams() {
    let r = redaction();
    let mut mask = r.stream();
    assert_eq!(mask.push("start "), "start ");
    let blob = "x".repeat(MAX_HELD_BYTES + 1);
    assert_eq!(mask.push(&blob), blob);
    assert_eq!(mask.push("y end"), "y ");
    assert_eq!(mask.finish(), "end");
}

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Buffer {
    type Writer = Buffer;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[test]
fn log_lines_carrying_a_secret_are_masked() {
    let r = redaction();
    let buffer = Buffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(RedactingWriter::new(buffer.clone(), r.clone()))
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        tracing::warn!(url = %format!("https://api.example/?key={KEY}"), "request failed");
        tracing::info!("header was Bearer abcdefghijkl0123456789");
    });
    let logged = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    assert_eq!(logged.lines().count(), 2, "{logged}");
    assert!(!logged.contains(KEY) && !logged.contains("abcdefghijkl0123456789"), "{logged}");
    assert!(logged.contains("key=[redacted]") && logged.contains("Bearer [redacted]"), "{logged}");
    // Pieces written separately are masked as one line.
    let mut line = RedactingWriter::new(buffer.clone(), r).make_writer();
    line.write_all(&KEY.as_bytes()[..6]).unwrap();
    line.write_all(&KEY.as_bytes()[6..]).unwrap();
    drop(line);
    let logged = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    assert!(logged.ends_with("[redacted]"), "{logged}");
}
