#!/usr/bin/env bash
# The stdout/stderr tap's cost per write that matches nothing (see bench_tap.c).
#   scripts/bench_tap.sh [path/to/libvramledger.so]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LIB="$(realpath "${1:-$HERE/../target/release/libvramledger.so}")"
TMP="$(mktemp -d /tmp/vramledger-benchtap.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
gcc -O2 -o "$TMP/bench_tap" "$HERE/bench_tap.c"
for phase in startup serving; do
    for line in 0 1; do
        for i in 1 2 3; do
            plain=$("$TMP/bench_tap" 40 20000 $line $phase 2>&1 >/dev/null | sed -n 's/tap_added_ns=//p')
            hooked=$(LD_PRELOAD="$LIB" VRAMLEDGER_OUT="$TMP/out" "$TMP/bench_tap" 40 20000 $line $phase 2>&1 >/dev/null | sed -n 's/tap_added_ns=//p')
            echo "bench_tap: $phase line $line run $i: interposed write − libc's own write, in one process: tap adds ${hooked} ns (without the preload, the method's noise: ${plain} ns)"
        done
    done
done
