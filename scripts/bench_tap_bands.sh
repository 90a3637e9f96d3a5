#!/usr/bin/env bash
# Why single runs of the tap bench fall in bands (on the H200 host ~13 and ~37 ns a write before
# serving, for both builds): many processes of `bench_tap` (SGLang's decode line, before
# serving), each printing its figure beside where it ran (scripts/bench_tap.c: the CPU, the
# addresses of the interposed write, the line and the stack), three ways:
#   free    unpinned, address randomisation on (as bench_tap.sh runs it);
#   pinned  on each CPU in turn (`taskset`): a band that goes with the CPU is the machine's;
#   fixed   address randomisation off (`setarch -R`): if the bands remain, not the addresses.
#   scripts/bench_tap_bands.sh [LIB [RUNS]] > bands.txt
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LIB="$(realpath "${1:-$HERE/../target/release/libvramledger.so}")"
RUNS="${2:-12}"
TMP="$(mktemp -d /tmp/vramledger-tapbands.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
gcc -O2 -o "$TMP/bench_tap" "$HERE/bench_tap.c"
one() { # WAY PREFIX...: one process's figure and where it ran, on one line
    local way=$1
    shift
    "$@" env LD_PRELOAD="$LIB" VRAMLEDGER_OUT="$TMP/out" "$TMP/bench_tap" 40 20000 1 startup 2>&1 >/dev/null |
        sed -n 's/tap_added_ns=/tap=/p; s/where_ran //p' | paste -sd' ' | sed "s/^/$way /"
}
for _ in $(seq "$RUNS"); do one free; done
for cpu in $(seq 0 $(($(nproc) - 1))); do
    one pinned taskset -c "$cpu"
    one pinned taskset -c "$cpu"
done
for _ in $(seq "$RUNS"); do one fixed setarch -R; done
