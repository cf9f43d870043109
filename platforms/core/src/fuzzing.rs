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
    #[test]
    fn seeds_pass() {
        crate::corpus::seeds("chunk").iter().for_each(|seed| super::chunk(seed));
    }
}
