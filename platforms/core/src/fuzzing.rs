//! Entry points for the fuzz targets in tests/fuzz (built by cargo-afl with `--cfg fuzzing`, and
//! by the tests). Each takes the fuzzer's raw bytes and panics when a promise is broken.

use crate::LengthUnit;

/// The chunker: the first two bytes pick the limit (1..=1024) and the unit, the rest is the text.
pub fn chunk(data: &[u8]) {
    let [a, b, rest @ ..] = data else { return };
    let limit = 1 + usize::from(u16::from_le_bytes([*a, *b]) & 0x3ff);
    let unit = if b & 0x80 == 0 { LengthUnit::Chars } else { LengthUnit::Utf16 };
    let text = String::from_utf8_lossy(rest);
    if let Err(broken) = crate::chunk::check::check(&text, limit, unit) {
        panic!("chunk(limit {limit}, {unit:?}) of {text:?}: {broken}");
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn seeds_pass() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fuzz/corpus/chunk");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).expect("the chunk corpus exists") {
            super::chunk(&std::fs::read(entry.expect("a corpus entry").path()).expect("a readable seed"));
            seen += 1;
        }
        assert!(seen >= 3, "only {seen} seeds in {}", dir.display());
    }
}
