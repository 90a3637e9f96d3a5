#!/usr/bin/env bash
# Runs HERE (no GPU): the allocation benchmark against the workspace's fake driver
# (target/release/libfakecuda.so, crates/fakecuda), without and with
# LD_PRELOAD=target/release/libvramledger.so, alternately; prints both medians and the
# nanoseconds the hook adds per cuMemAlloc_v2+cuMemFree_v2 pair.
#
#   scripts/bench_fake.sh            # cargo build --release first
#   SKIP_CARGO=1 scripts/bench_fake.sh
#   env: BENCH_PAIRS (20000), BENCH_REPS (5), BENCH_BYTES (2097152)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PAIRS="${BENCH_PAIRS:-20000}"
REPS="${BENCH_REPS:-5}"
BYTES="${BENCH_BYTES:-2097152}"

if [[ "${SKIP_CARGO:-0}" != 1 ]]; then
    cargo build --release
fi
FAKE="$ROOT/target/release/libfakecuda.so"
LIB="$ROOT/target/release/libvramledger.so"
for f in "$FAKE" "$LIB"; do
    [[ -f "$f" ]] || { echo "bench_fake: missing $f" >&2; exit 1; }
done

TMP="$(mktemp -d /tmp/vramledger-benchfake.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/driver"
# The fake library answers for the driver (and NVML) under their sonames.
for name in libcuda.so.1 libcuda.so libnvidia-ml.so.1; do
    ln -s "$FAKE" "$TMP/driver/$name"
done
gcc -O2 -o "$TMP/bench_fake" "$ROOT/scripts/bench_fake.c" -ldl

pair_ns() { sed -n 's/^pair_ns=//p' | tail -1; }

plain=()
hooked=()
for ((i = 1; i <= REPS; i++)); do
    p="$(LD_LIBRARY_PATH="$TMP/driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$TMP/bench_fake" "$PAIRS" "$BYTES" | pair_ns || true)"
    mkdir -p "$TMP/journals.$i"
    h="$(LD_LIBRARY_PATH="$TMP/driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        LD_PRELOAD="$LIB" VRAMLEDGER_OUT="$TMP/journals.$i" \
        "$TMP/bench_fake" "$PAIRS" "$BYTES" | pair_ns || true)"
    echo "bench_fake: run $i plain=${p:-?} hooked=${h:-?}"
    [[ -n "$p" ]] && plain+=("$p")
    [[ -n "$h" ]] && hooked+=("$h")
done
python3 "$ROOT/scripts/bench_stats.py" bench_fake "${plain[*]:-}" "${hooked[*]:-}"
