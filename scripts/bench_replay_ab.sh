#!/usr/bin/env bash
# Alternates builds of the replay benchmark (`cargo bench --bench replay --no-run`, each built
# from a variant of the reader: another part size, another table) on this machine: the
# streamed replay from the file, 2*10^6 records, ROUNDS rounds; each one's split; then 10^7
# records, two rounds. Prints the CPU first (model, caches, the CRC's instructions).
#
#   scripts/bench_replay_ab.sh [ROUNDS] NAME=BENCH_BINARY...
#
# e.g. on the GPU machine's host, with stripped binaries carried in .gpu/exp/:
#   bash scripts/bench_replay_ab.sh 4 part4=.gpu/exp/replay-part4 part16=.gpu/exp/replay-part16
set -euo pipefail
rounds=4
if [[ ${1:-} =~ ^[0-9]+$ ]]; then
    rounds=$1
    shift
fi
if [ $# -lt 1 ]; then
    echo "usage: $0 [ROUNDS] NAME=BENCH_BINARY..." >&2
    exit 2
fi
names=()
bins=()
for a in "$@"; do
    names+=("${a%%=*}")
    bins+=("$(realpath "${a#*=}")")
done
BENCH_SCRATCH=$(mktemp -d /tmp/vl-replay-ab.XXXXXX)
export BENCH_SCRATCH
trap 'rm -rf "$BENCH_SCRATCH"' EXIT
lscpu | grep -E "Model name|L2 cache|L3 cache" || true
echo "kernel $(uname -r)"
grep -o -w -E "vpclmulqdq|avx512f|pclmulqdq" /proc/cpuinfo | sort | uniq -c || true
for ((r = 1; r <= rounds; r++)); do
    for i in "${!bins[@]}"; do
        echo "${names[$i]} 2e6 $("${bins[$i]}" --stream | grep 'from its file')"
    done
done
for i in "${!bins[@]}"; do
    echo "== split ${names[$i]}"
    "${bins[$i]}" --split | tail -8
done
for r in 1 2; do
    for i in "${!bins[@]}"; do
        echo "${names[$i]} 1e7 $("${bins[$i]}" --stream 10000000 | grep 'from its file')"
    done
done
