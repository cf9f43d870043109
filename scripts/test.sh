#!/usr/bin/env bash
# The project's test command: installs the test dependencies (scripts/test-deps.sh), then runs
# every test of the workspace. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-deps.sh
cargo test --workspace --locked "$@"
# The fuzz targets (tests/fuzz, a workspace of their own that tests/fuzz/run.sh builds with
# cargo-afl) must still resolve with their committed lock file.
cargo metadata --locked --format-version 1 --manifest-path tests/fuzz/Cargo.toml > /dev/null
