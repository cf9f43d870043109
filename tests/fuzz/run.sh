#!/usr/bin/env bash
# Coverage-guided fuzzing of hermesd's network-facing parsers with cargo-afl.
#
#   tests/fuzz/run.sh [target|all] [seconds]     (default: all targets, 300 s each)
#
# Builds the targets (`cargo afl build --release`, its own target dir, under the shared cargo
# lock), runs each one in turn for the given time (`cargo afl fuzz -V`), prints execs, execs/s,
# corpus size and crashes per target, and fails when any target found a crash or a hang. Found
# inputs stay in tests/fuzz/out/<target>/default/{crashes,hangs,queue} (git-ignored); a rerun
# resumes from there. Replay one with: $CARGO_TARGET_DIR/release/<target> < <file>.
#
# The AFL settings below are for containers and shared machines:
# - AFL_SKIP_CPUFREQ=1: the CPU frequency governor cannot be read or set without root.
# - AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1: /proc/sys/kernel/core_pattern pipes core dumps to a
#   handler and cannot be changed without root on the host; AFL still sees every crash (a
#   panic aborts the target), it only warns that reporting may be delayed.
# - AFL_NO_AFFINITY=1: other builds share the cores, so AFL must not insist on a free one.
# - AFL_NO_UI=1: plain status lines instead of the full-screen UI, so the output can be logged.
# - AFL_AUTORESUME=1: an existing out/<target> is resumed, not refused.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
targets=(chunk telegram_update telegram_markdown slack_envelope slack_signature slack_markdown discord_message hass_event sse
    tool_arguments webhook whatsapp_webhook whatsapp_signature signal_envelope signal_stream)
want="${1:-all}"
seconds="${2:-300}"
if [[ "$want" != all ]]; then
    [[ " ${targets[*]} " == *" $want "* ]] || { echo "unknown target $want (one of: ${targets[*]})" >&2; exit 2; }
    targets=("$want")
fi

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hermesd-fuzz-target}"
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1 AFL_NO_UI=1 AFL_AUTORESUME=1
lock="${HERMESD_CARGO_LOCK:-/tmp/hermesd-cargo.lock}"

cd "$here"
# FUZZ_SKIP_BUILD=1 reuses the targets already built (e.g. to fuzz while others hold the lock).
if [[ "${FUZZ_SKIP_BUILD:-0}" != 1 ]]; then
    flock -o "$lock" cargo afl build --release --locked --bins
fi

dictionary() {
    case "$1" in
        telegram_update | slack_envelope | discord_message | hass_event | whatsapp_webhook | signal_envelope) echo "$here/dict/json.dict" ;;
        *) echo "$here/dict/text.dict" ;;
    esac
}

for target in "${targets[@]}"; do
    echo "== fuzzing $target for ${seconds}s"
    mkdir -p "out/$target"
    cargo afl fuzz -V "$seconds" -i "corpus/$target" -o "out/$target" -x "$(dictionary "$target")" \
        -- "$CARGO_TARGET_DIR/release/$target" > "out/$target/afl.log" 2>&1 || {
        echo "afl-fuzz failed for $target, see tests/fuzz/out/$target/afl.log:" >&2
        tail -20 "out/$target/afl.log" >&2
        exit 1
    }
done

stat() { sed -n "s/^$2 *: *//p" "out/$1/default/fuzzer_stats"; }
found=0
printf '%-18s %12s %9s %7s %8s %6s %8s\n' target execs execs/s corpus coverage hangs crashes
for target in "${targets[@]}"; do
    crashes=$(find "out/$target/default/crashes" -type f -name 'id:*' | wc -l)
    hangs=$(find "out/$target/default/hangs" -type f -name 'id:*' | wc -l)
    printf '%-18s %12s %9s %7s %8s %6s %8s\n' "$target" "$(stat "$target" execs_done)" \
        "$(stat "$target" execs_per_sec)" "$(stat "$target" corpus_count)" "$(stat "$target" bitmap_cvg)" "$hangs" "$crashes"
    if (( crashes + hangs > 0 )); then
        found=1
        # `head` closes the pipe early; that is not a failure.
        find "out/$target/default/crashes" "out/$target/default/hangs" -type f -name 'id:*' | head -3 |
            sed "s|^|  replay: $CARGO_TARGET_DIR/release/$target < tests/fuzz/|" || true
    fi
done
exit "$found"
