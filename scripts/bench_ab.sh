#!/usr/bin/env bash
# In-process A/B interception cost (see bench_ab.c), with and without the preload.
#
#   scripts/bench_ab.sh DRIVER_DIR LIBVRAMLEDGER [blocks] [pairs] [bytes]
# DRIVER_DIR holds libcuda.so.1 (the real driver's folder, or a folder of fake-driver links).
# BENCH_OUT: where the journals go (default a temp folder).
# Prints the median ratio hooked/direct under the preload, and the same ratio without it
# (both paths are then the driver: the method's own noise).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DRIVER_DIR="$1"
LIB="$(realpath "$2")"
BLOCKS="${3:-40}"
PAIRS="${4:-500}"
BYTES="${5:-2097152}"
TMP="$(mktemp -d /tmp/vramledger-benchab.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
gcc -O2 -shared -fPIC -o "$TMP/libbenchdirect.so" "$HERE/bench_direct.c" -L"$DRIVER_DIR" -l:libcuda.so.1
gcc -O2 -o "$TMP/bench_ab" "$HERE/bench_ab.c" -ldl
export LD_LIBRARY_PATH="$DRIVER_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "bench_ab: $BLOCKS blocks x $PAIRS pairs of $BYTES bytes, driver from $DRIVER_DIR"
without="$("$TMP/bench_ab" "$TMP/libbenchdirect.so" "$BLOCKS" "$PAIRS" "$BYTES" | tail -1)"
JOURNALS="${BENCH_OUT:-$TMP}/journals.$$"
mkdir -p "$JOURNALS"
with="$(LD_PRELOAD="$LIB" VRAMLEDGER_OUT="$JOURNALS" "$TMP/bench_ab" "$TMP/libbenchdirect.so" "$BLOCKS" "$PAIRS" "$BYTES" | tail -1)"
echo "bench_ab: without the preload (noise of the method): $without"
echo "bench_ab: with the preload:                           $with"
