//! Human durations in config ("90s", "3m", "1h", "250ms", "2d"), parsed into `std::time::Duration`.
//!
//! Parsing only; it never reads the clock.
//!
//! `HumanDuration` is the config type of the host and of every platform's table.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A config duration; serialises back to the same text form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct HumanDuration(pub Duration);

impl HumanDuration {
    /// The duration.
    pub fn get(self) -> Duration {
        self.0
    }

    /// `n` seconds.
    pub const fn secs(n: u64) -> Self {
        Self(Duration::from_secs(n))
    }
}

/// Parse `"<number><unit>"` with units ms, s, m, h, d; a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?}: expected a number followed by ms, s, m, h or d"))?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        "d" => value * 86_400.0,
        other => return Err(format!("invalid duration {text:?}: unknown unit {other:?} (use ms, s, m, h or d)")),
    };
    if !seconds.is_finite() || !(0.0..=10.0 * 365.0 * 86_400.0).contains(&seconds) {
        return Err(format!("invalid duration {text:?}: out of range"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if !ms.is_multiple_of(1000) { write!(f, "{ms}ms") } else { write!(f, "{}s", ms / 1000) }
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse_duration(&text).map(HumanDuration).map_err(serde::de::Error::custom)
    }
}

impl Serialize for HumanDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        let cases = [
            ("90s", 90_000),
            ("3m", 180_000),
            ("1h", 3_600_000),
            ("2d", 172_800_000),
            ("250ms", 250),
            ("15", 15_000),
            ("1.5s", 1_500),
        ];
        for (text, ms) in cases {
            assert_eq!(parse_duration(text).unwrap().as_millis(), ms, "{text}");
        }
    }

    #[test]
    fn rejects_garbage() {
        for text in ["", "abc", "5 weeks", "-3s", "3y"] {
            assert!(parse_duration(text).is_err(), "{text} should be rejected");
        }
    }
}
