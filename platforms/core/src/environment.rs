//! Where a platform's secrets and settings from the environment come from, as the host gives
//! them: `Environment` (the host's `Env` implements it) and `Secret`, whose `Debug` and
//! `Display` never show the value.

use std::fmt;

/// A secret value; it prints as `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that must send it (an Authorization header).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// The host's variables and secrets. A platform reads its token and its environment overrides
/// (`HASS_URL`, `SIGNAL_ACCOUNT`, …) only through this, so the host records every secret it
/// hands out (for redaction and the tools' sandbox).
pub trait Environment: Send + Sync {
    /// A plain variable, if set and not blank.
    fn var(&self, name: &str) -> Option<String>;

    /// A secret by name. An error means it is named (a `NAME_FILE`, a credential) but unreadable.
    fn secret(&self, name: &str) -> Result<Option<Secret>, String>;
}

impl dyn Environment + '_ {
    /// A secret that must be set (an adapter's token): its value, or why it is missing.
    pub fn required_secret(&self, name: &str) -> Result<String, String> {
        self.secret(name)?.map(|s| s.expose().to_owned()).ok_or_else(|| format!("{name} is not set"))
    }

    /// A comma-separated list from variable `name` (blank entries dropped).
    pub fn list(&self, name: &str) -> Vec<String> {
        let value = self.var(name).unwrap_or_default();
        value.split(',').map(str::trim).filter(|item| !item.is_empty()).map(str::to_owned).collect()
    }
}

/// A fixed set of variables, every one also readable as a secret (tests, embedders).
impl Environment for std::collections::HashMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).filter(|value| !value.trim().is_empty()).cloned()
    }

    fn secret(&self, name: &str) -> Result<Option<Secret>, String> {
        Ok(self.var(name).map(|value| Secret::new(value.trim())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_prints_its_value() {
        let secret = Secret::new("xoxb-very-secret");
        assert_eq!(format!("{secret} {secret:?}"), "[redacted] [redacted]");
        assert_eq!(secret.expose(), "xoxb-very-secret");
    }
}
