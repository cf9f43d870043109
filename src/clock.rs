//! Wall-clock helpers; the store keeps Unix milliseconds.

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}
