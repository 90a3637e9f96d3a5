#!/usr/bin/env bash
# The stdout/stderr tap's cost per write that matches nothing (see bench_tap.c).
#   scripts/bench_tap.sh [path/to/libvramledger.so [path/to/base/libvramledger.so]]
# With a second library (another build, to compare with), each run times the base right after
# the first one, so both see the same machine (the host's speed wanders between runs).
# BENCH_TAP_LINES picks the lines (default "0 1 2"; a number from 3 up is a line of that many
# bytes, see bench_tap.c).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LIB="$(realpath "${1:-$HERE/../target/release/libvramledger.so}")"
BASE="${2:+$(realpath "$2")}"
TMP="$(mktemp -d /tmp/vramledger-benchtap.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
gcc -O2 -o "$TMP/bench_tap" "$HERE/bench_tap.c"
added() { # LIB LINE PHASE: the tap_added_ns of one process
    LD_PRELOAD="$1" VRAMLEDGER_OUT="$TMP/out" "$TMP/bench_tap" 40 20000 "$2" "$3" 2>&1 >/dev/null | sed -n 's/tap_added_ns=//p'
}
for phase in startup serving; do
    for line in ${BENCH_TAP_LINES:-0 1 2}; do
        for i in 1 2 3; do
            plain=$("$TMP/bench_tap" 40 20000 $line $phase 2>&1 >/dev/null | sed -n 's/tap_added_ns=//p')
            hooked=$(added "$LIB" $line $phase)
            echo "bench_tap: $phase line $line run $i: interposed write − libc's own write, in one process: tap adds ${hooked} ns (without the preload, the method's noise: ${plain} ns)"
            if [ -n "$BASE" ]; then
                echo "bench_tap: $phase line $line run $i: the base library ($BASE): tap adds $(added "$BASE" $line $phase) ns"
            fi
        done
    done
done
