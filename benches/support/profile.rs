//! Which cargo profile built the binary a bench runs (`release` for `cargo bench`, `dist` for
//! `cargo bench --profile dist`), read from the binary's path (`target/<profile>/hermesd`), so
//! every printed table says what it measured.

/// The profile directory `bin` was built into, e.g. `release`.
pub(crate) fn of(bin: &str) -> String {
    std::path::Path::new(bin)
        .parent()
        .and_then(|dir| dir.file_name())
        .map_or_else(|| "unknown".to_owned(), |name| name.to_string_lossy().into_owned())
}
