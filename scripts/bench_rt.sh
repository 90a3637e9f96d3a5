#!/usr/bin/env bash
# In-process A/B interception cost through the CUDA runtime (cudaMalloc + cudaFree, see
# bench_rt.c), with and without the preload.
#
#   scripts/bench_rt.sh DRIVER_DIR LIBCUDART LIBVRAMLEDGER [blocks] [pairs] [bytes]
# DRIVER_DIR holds libcuda.so.1 (the real driver's folder, or a folder of fake-driver links).
# LIBCUDART is the runtime (e.g. PyTorch's nvidia/cuda_runtime/lib/libcudart.so.13), or `fake`
# for the fake runtime of tests/clients (cudart.c, built here -O2 without frame pointers, as
# the real one is built). BENCH_OUT: where the journals go (default a temp folder).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DRIVER_DIR="$1"
RT="$2"
LIB="$(realpath "$3")"
BLOCKS="${4:-40}"
PAIRS="${5:-500}"
BYTES="${6:-2097152}"
TMP="$(mktemp -d /tmp/vramledger-benchrt.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
if [[ "$RT" == fake ]]; then
    CLIENTS="$HERE/../tests/clients"
    gcc -O2 -fomit-frame-pointer -fPIC -shared -Wl,-soname,libcudart.so.13 -I"$CLIENTS" \
        -o "$TMP/libcudart.so.13" "$CLIENTS/cudart.c" -ldl -lpthread
    RT="$TMP/libcudart.so.13"
fi
RT="$(realpath "$RT")"
cp "$RT" "$TMP/libcudart-direct.so"
gcc -O2 -o "$TMP/bench_rt" "$HERE/bench_rt.c" -ldl
export LD_LIBRARY_PATH="$DRIVER_DIR:$(dirname "$RT")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "bench_rt: $BLOCKS blocks x $PAIRS pairs of $BYTES bytes through $RT, driver from $DRIVER_DIR"
without="$("$TMP/bench_rt" "$RT" "$TMP/libcudart-direct.so" "$BLOCKS" "$PAIRS" "$BYTES" | tail -1)"
JOURNALS="${BENCH_OUT:-$TMP}/journals.$$"
mkdir -p "$JOURNALS"
with="$(LD_PRELOAD="$LIB" VRAMLEDGER_OUT="$JOURNALS" "$TMP/bench_rt" "$RT" "$TMP/libcudart-direct.so" "$BLOCKS" "$PAIRS" "$BYTES" | tail -1)"
echo "bench_rt: without the preload (noise of the method): $without"
echo "bench_rt: with the preload:                           $with"
