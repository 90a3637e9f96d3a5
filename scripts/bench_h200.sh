#!/usr/bin/env bash
# Runs ON the GPU machine: cuMemAlloc_v2+cuMemFree_v2 pairs (2 MiB) timed without and with
# LD_PRELOAD=libvramledger.so, alternately, BENCH_REPS times each; prints the median ratio.
#
#   scripts/bench_h200.sh [path/to/libvramledger.so]   (default: .gpu/libvramledger.so)
#   env: BENCH_PAIRS (20000), BENCH_REPS (5), BENCH_BYTES (2097152)
set -euo pipefail
export NCCL_NVLS_ENABLE=0

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LIB="$(realpath "${1:-.gpu/libvramledger.so}")"
PAIRS="${BENCH_PAIRS:-20000}"
REPS="${BENCH_REPS:-5}"
BYTES="${BENCH_BYTES:-2097152}"
[[ -f "$LIB" ]] || { echo "bench_h200: no library at $LIB" >&2; exit 1; }

TMP="$(mktemp -d /tmp/vramledger-bench.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
gcc -O2 -o "$TMP/bench_h200" "$HERE/bench_h200.c" -ldl

pair_ns() { sed -n 's/^pair_ns=//p' | tail -1; }

echo "bench_h200: clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)"
plain=()
hooked=()
disabled=()
for ((i = 1; i <= REPS; i++)); do
    p="$("$TMP/bench_h200" "$PAIRS" "$BYTES" | pair_ns || true)"
    mkdir -p "$TMP/journals.$i"
    h="$(LD_PRELOAD="$LIB" VRAMLEDGER_OUT="$TMP/journals.$i" "$TMP/bench_h200" "$PAIRS" "$BYTES" | pair_ns || true)"
    # The same preload switched off: the cost of the pass-through path alone.
    d="$(LD_PRELOAD="$LIB" VRAMLEDGER_DISABLE=1 "$TMP/bench_h200" "$PAIRS" "$BYTES" | pair_ns || true)"
    echo "bench_h200: run $i plain=${p:-?} hooked=${h:-?} disabled=${d:-?}"
    [[ -n "$p" ]] && plain+=("$p")
    [[ -n "$h" ]] && hooked+=("$h")
    [[ -n "$d" ]] && disabled+=("$d")
done
jbytes="$(du -cb "$TMP"/journals.* 2>/dev/null | tail -1 | cut -f1)"
echo "bench_h200: journal bytes written by the $REPS hooked runs: ${jbytes:-0}"
python3 "$HERE/bench_stats.py" bench_h200 "${plain[*]:-}" "${hooked[*]:-}"
echo "bench_h200: pass-through only (VRAMLEDGER_DISABLE=1) against plain:"
python3 "$HERE/bench_stats.py" bench_h200_disabled "${plain[*]:-}" "${disabled[*]:-}"
python3 - <<'PY'
import time
n = 1_000_000
t = time.perf_counter_ns()
for _ in range(n):
    time.monotonic_ns()
print(f"bench_h200: clock_gettime(CLOCK_MONOTONIC) through Python: {(time.perf_counter_ns() - t) / n:.1f} ns per call")
PY
