//! Keeps secrets (bot tokens, app tokens, signing secrets) out of text bound for logs and errors.
//! SDK errors often carry the request URL, and some platforms put the token in it.

/// Replaces each known secret in a text with a marker.
#[derive(Debug, Clone)]
pub struct Redactor {
    secrets: Vec<String>,
    marker: &'static str,
}

impl Redactor {
    /// Replaces every non-empty one of `secrets` with `marker`.
    pub fn new(marker: &'static str, secrets: &[&str]) -> Self {
        Self { secrets: secrets.iter().filter(|s| !s.is_empty()).map(|s| (*s).to_owned()).collect(), marker }
    }

    /// `text` with every secret replaced.
    pub fn redact(&self, text: &str) -> String {
        self.secrets.iter().fold(text.to_owned(), |text, secret| text.replace(secret.as_str(), self.marker))
    }
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
}
