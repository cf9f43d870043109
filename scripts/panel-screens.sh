#!/usr/bin/env bash
# Regenerates the control panel's screenshots in docs/panel/ (linked from README): runs the
# browser test, which saves each page under the test target folder, and copies them here.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
cargo test --test panel_browser
mkdir -p docs/panel
cp "$target"/tmp/panel-screens/*.png docs/panel/
ls -l docs/panel
