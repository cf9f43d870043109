//! Keeps secrets (bot tokens, app tokens, signing secrets, model keys) out of text bound for logs,
//! errors, the model's context and chats. SDK errors often carry the request URL, and some
//! platforms put the token in it; tools print whatever they find.
//!
//! Known secret values are replaced exactly. With `with_token_shapes`, common credential shapes
//! are masked too, whoever owns them: `sk-…`, `xox[abprs]-…`, `xapp-…`, `gh[pousr]_…`,
//! `github_pat_…`, `AKIA…`/`ASIA…` and the token after `Bearer`. A match never spans whitespace
//! except `Bearer <token>`, whose `Bearer ` is kept, so text can be redacted a word at a time.

/// Replaces each known secret, and optionally each token-shaped word, in a text with a marker.
#[derive(Debug, Clone)]
pub struct Redactor {
    /// Longest first, so a secret containing another is replaced whole.
    secrets: Vec<String>,
    marker: &'static str,
    shapes: bool,
}

impl Redactor {
    /// Replaces every non-empty one of `secrets` with `marker`.
    pub fn new(marker: &'static str, secrets: &[&str]) -> Self {
        let mut redactor = Self { secrets: Vec::new(), marker, shapes: false };
        for secret in secrets {
            redactor.add_secret(secret);
        }
        redactor
    }

    /// Also mask words shaped like common credentials.
    pub fn with_token_shapes(mut self) -> Self {
        self.shapes = true;
        self
    }

    /// Add a secret value (an empty one or one already known is ignored).
    pub fn add_secret(&mut self, secret: &str) {
        if secret.is_empty() || self.secrets.iter().any(|s| s == secret) {
            return;
        }
        let at = self.secrets.partition_point(|s| s.len() >= secret.len());
        self.secrets.insert(at, secret.to_owned());
    }

    /// How many secret values it knows.
    pub fn secret_count(&self) -> usize {
        self.secrets.len()
    }

    /// `text` with every secret (and, if enabled, every token shape) replaced.
    pub fn redact(&self, text: &str) -> String {
        let text = self.secrets.iter().fold(text.to_owned(), |text, secret| {
            if text.contains(secret.as_str()) { text.replace(secret.as_str(), self.marker) } else { text }
        });
        if self.shapes { mask_token_shapes(&text, self.marker) } else { text }
    }
}

/// Characters a token body is made of (ASCII, so every match ends on a char boundary).
fn token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Characters of an opaque bearer token (RFC 6750 b64token).
fn bearer_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=')
}

/// The length of the run of bytes from `at` that satisfy `ok`.
fn run(bytes: &[u8], at: usize, ok: impl Fn(u8) -> bool) -> usize {
    bytes[at.min(bytes.len())..].iter().take_while(|b| ok(**b)).count()
}

/// If a credential shape starts at `at` (a word start), the byte range to mask.
fn shape_at(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let rest = &bytes[at..];
    let body = |prefix: usize, min: usize, ok: fn(u8) -> bool| {
        let len = run(bytes, at + prefix, ok);
        (len >= min).then_some((at, at + prefix + len))
    };
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    if rest.starts_with(b"sk-") {
        return body(3, 16, token_char);
    }
    if rest.len() > 4 && rest.starts_with(b"xox") && b"abprs".contains(&rest[3]) && rest[4] == b'-' {
        return body(5, 10, |b| b.is_ascii_alphanumeric() || b == b'-');
    }
    if rest.starts_with(b"xapp-") {
        return body(5, 10, |b| b.is_ascii_alphanumeric() || b == b'-');
    }
    if rest.len() > 3 && rest.starts_with(b"gh") && b"pousr".contains(&rest[2]) && rest[3] == b'_' {
        return body(4, 20, |b| b.is_ascii_alphanumeric());
    }
    if rest.starts_with(b"github_pat_") {
        return body(11, 20, |b| b.is_ascii_alphanumeric() || b == b'_');
    }
    if rest.starts_with(b"AKIA") || rest.starts_with(b"ASIA") {
        let len = run(bytes, at + 4, |b| b.is_ascii_uppercase() || b.is_ascii_digit());
        return (len == 16 && !bytes.get(at + 20).copied().is_some_and(alnum)).then_some((at, at + 20));
    }
    if rest.len() > 6 && rest[..6].eq_ignore_ascii_case(b"bearer") && matches!(rest[6], b' ' | b'\t') {
        let start = at + 6 + run(bytes, at + 6, |b| matches!(b, b' ' | b'\t'));
        let len = run(bytes, start, bearer_char);
        let token = &bytes[start..start + len];
        // Prose ("Bearer authentication") is not a token: ask for a digit, or real length.
        let opaque = len >= 24 || (len >= 12 && token.iter().any(u8::is_ascii_digit));
        return opaque.then_some((start, start + len));
    }
    None
}

/// `text` with every credential-shaped word replaced by `marker`.
fn mask_token_shapes(text: &str, marker: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut copied, mut at) = (0, 0);
    while at < bytes.len() {
        let word_start = at == 0 || !token_char(bytes[at - 1]);
        match shape_at(bytes, at).filter(|_| word_start) {
            Some((start, end)) => {
                out.push_str(&text[copied..start]);
                out.push_str(marker);
                (copied, at) = (end, end);
            }
            None => at += 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_secret_is_replaced_and_empty_ones_are_ignored() {
        let redactor = Redactor::new("<secret>", &["xoxb-1", "", "xapp-2"]);
        assert_eq!(redactor.redact("a xoxb-1 b xapp-2 c"), "a <secret> b <secret> c");
        assert_eq!(Redactor::new("<token>", &[""]).redact("plain"), "plain");
    }

    #[test]
    fn a_longer_secret_containing_a_shorter_one_is_replaced_whole() {
        let mut redactor = Redactor::new("<s>", &["abc"]);
        redactor.add_secret("abcdef");
        redactor.add_secret("abc");
        assert_eq!(redactor.secret_count(), 2);
        assert_eq!(redactor.redact("x abcdef abc"), "x <s> <s>");
    }

    #[test]
    fn token_shapes_are_masked() {
        let cases = [
            ("key sk-abcdefghijklmnop1234 end", "key <m> end"),
            ("sk-proj-AbC_dEf-1234567890xyz,", "<m>,"),
            ("sk-short", "sk-short"),
            ("ask-abcdefghijklmnopqrstuv", "ask-abcdefghijklmnopqrstuv"),
            ("SLACK=xoxb-1234567890-abcdefABCDEF.", "SLACK=<m>."),
            ("xoxp-12-34-56-abcdef xoxa-2-abcdefghij xoxe-1", "<m> <m> xoxe-1"),
            ("app xapp-1-A0123456789-abc", "app <m>"),
            ("ghp_0123456789abcdefghijABCDEFGHIJ012345 ok", "<m> ok"),
            ("gho_0123456789abcdefghij ghx_0123456789abcdefghij", "<m> ghx_0123456789abcdefghij"),
            ("github_pat_11ABCDEFG0123456789_abcdefghijkl", "<m>"),
            ("AKIAIOSFODNN7EXAMPLE and ASIAIOSFODNN7EXAMPLE1", "<m> and ASIAIOSFODNN7EXAMPLE1"),
            ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc", "Authorization: Bearer <m>"),
            ("authorization: bearer  abcdef123456", "authorization: bearer  <m>"),
            ("use Bearer authentication here", "use Bearer authentication here"),
            ("Bearer tokens", "Bearer tokens"),
            ("héllo sk-abcdefghijklmnop1234✓", "héllo <m>✓"),
        ];
        let redactor = Redactor::new("<m>", &[]).with_token_shapes();
        for (text, masked) in cases {
            assert_eq!(redactor.redact(text), masked, "{text}");
        }
        assert_eq!(Redactor::new("<m>", &[]).redact(cases[0].0), cases[0].0, "shapes are opt-in");
    }
}
