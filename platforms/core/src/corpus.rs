//! The fuzz corpus (`tests/fuzz/corpus/<target>/`) read back by the crates' own tests, so each
//! fuzz target's seeds are also run on every `cargo test`.
//!
//! The folder is found from `CARGO_MANIFEST_DIR` as cargo sets it when it runs a test, read at
//! run time: a test binary reused from another checkout (a shared `CARGO_TARGET_DIR`) must read
//! the corpus of the checkout it runs in, not the one it was compiled in.

use std::path::{Path, PathBuf};

/// Every seed of one fuzz target; panics (this is for tests) when the corpus is missing or
/// holds fewer than three seeds.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = folder().join(target);
    let seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the corpus {} exists: {e}", dir.display()))
        .map(|entry| std::fs::read(entry.expect("a corpus entry").path()).expect("a readable seed"))
        .collect();
    assert!(seeds.len() >= 3, "only {} seeds in {}", seeds.len(), dir.display());
    seeds
}

/// `tests/fuzz/corpus` of the workspace the running test belongs to.
fn folder() -> PathBuf {
    let start = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from("."), PathBuf::from);
    start
        .ancestors()
        .map(|dir| dir.join("tests/fuzz/corpus"))
        .find(|dir| dir.is_dir())
        .unwrap_or_else(|| Path::new(&start).join("tests/fuzz/corpus"))
}
