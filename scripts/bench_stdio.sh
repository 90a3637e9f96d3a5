#!/usr/bin/env bash
# The stdio tap's cost per printf / fputs that matches nothing (see bench_stdio.c), stdout to
# /dev/null, alternating runs without and with the preload.
#   scripts/bench_stdio.sh [path/to/libvramledger.so] [calls] [runs]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LIB="$(realpath "${1:-$HERE/../target/release/libvramledger.so}")"
N="${2:-200000}"
RUNS="${3:-3}"
TMP="$(mktemp -d /tmp/vramledger-benchstdio.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
gcc -O2 -o "$TMP/bench_stdio" "$HERE/bench_stdio.c"
for line in 0 1; do
    for ((i = 1; i <= RUNS; i++)); do
        plain=$("$TMP/bench_stdio" "$N" $line 2>&1 >/dev/null)
        hooked=$(LD_PRELOAD="$LIB" VRAMLEDGER_OUT="$TMP/out" "$TMP/bench_stdio" "$N" $line 2>&1 >/dev/null)
        echo "bench_stdio: line $line run $i: without preload $plain; with $hooked"
    done
done
