//! Code layout rules that keep the tree navigable: no Rust file reaches 1000 lines, and every
//! file opens with a `//!` line saying what it is for.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn files_stay_small_and_say_what_they_are() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest);
    let mut files = Vec::new();
    for dir in ["src", "platforms", "tests", "benches"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 20, "found only {} files", files.len());
    let mut problems = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines = text.lines().count();
        if lines >= 1000 {
            problems.push(format!("{}: {lines} lines (split it by responsibility)", file.display()));
        }
        if !text.trim_start().starts_with("//!") {
            problems.push(format!("{}: does not open with a //! doc line", file.display()));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
