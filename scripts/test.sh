#!/usr/bin/env bash
# The project's test command: installs the test dependencies (scripts/test-deps.sh), then runs
# every test of the workspace. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-deps.sh
cargo test --workspace --locked "$@"
