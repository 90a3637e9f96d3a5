#!/usr/bin/env bash
# Runs ON the GPU machine: the replay and report benchmarks on that host's CPU (the replay on one
# pinned core, the verbs unpinned), with
# the binaries scripts/gpu_prepare.sh staged (BENCH_BINS=1) in .gpu/bench/ (built here: that
# machine has no Rust). With .gpu/bench/base/ (BASE_REF too) both builds run, alternating: the
# replay benchmarks, and the verbs of both CLIs on the same events (BASE_FORMAT=1, the default:
# the base reads format 1, as before issue 15; BASE_FORMAT=2 for a base that reads format 2).
#
#   [BASE_FORMAT=1|2] bash scripts/gpu_cpu_bench.sh [OUTDIR] [ROUNDS]
#
# Writes cpu.txt (the host's CPU) and one log per benchmark under OUTDIR.
set -uo pipefail
OUTDIR=${1:-${OUT:?set OUT or give OUTDIR}}
ROUNDS=${2:-4}
B=$PWD/.gpu/bench
[[ -x $B/replay ]] || { echo "gpu_cpu_bench: $B/replay missing (BENCH_BINS=1 scripts/gpu_prepare.sh)" >&2; exit 2; }
mkdir -p "$OUTDIR"
SCRATCH=$(mktemp -d /tmp/vl-cpu-bench.XXXXXX)
export BENCH_SCRATCH=$SCRATCH
# The base build predates BENCH_SCRATCH: it writes under the target/ it was built in.
[[ -f $B/base/SCRATCH ]] && mkdir -p "$(cat "$B/base/SCRATCH")"
{ lscpu | grep -E 'Model name|^CPU\(s\)|MHz|L2|L3'; nproc; echo "kernel $(uname -r)"; } > "$OUTDIR/cpu.txt" 2>&1
cat "$OUTDIR/cpu.txt"
# The replay's goal is for one core: pin it so runs compare. The verbs are not pinned (`diff`
# replays its two sides on two threads).
pin="taskset -c $(( $(nproc) - 1 ))"
command -v taskset >/dev/null || pin=""
for r in $(seq 1 "$ROUNDS"); do
    for build in new base; do
        bin=$B/replay; [[ $build == base ]] && bin=$B/base/replay
        [[ -x $bin ]] || continue
        echo "-- round $r $build" >> "$OUTDIR/replay-stream.log"
        $pin "$bin" --stream >> "$OUTDIR/replay-stream.log" 2>&1
    done
done
$pin "$B/replay" --split >"$OUTDIR/replay-split.log" 2>&1
if [[ -x /usr/bin/time ]]; then
    # With the base's CLI: the same 10^7 events, each CLI on the journal format its own shim
    # wrote (format 1 before issue 15), the two alternated.
    base_cli=$B/base/vramledger
    base_format=${BASE_FORMAT:-1}
    base_flag=()
    [[ $base_format == 1 ]] && base_flag=(--format1)
    for r in 1 2; do
        echo "-- round $r new (format 2)" >>"$OUTDIR/report-1e7.log"
        "$B/report" 10000000 --keep "$SCRATCH/big" --cli "$PWD/.gpu/vramledger" >>"$OUTDIR/report-1e7.log" 2>&1
        if [[ -x $base_cli ]]; then
            echo "-- round $r base (format $base_format)" >>"$OUTDIR/report-1e7.log"
            "$B/report" 10000000 "${base_flag[@]}" --keep "$SCRATCH/big" --cli "$base_cli" >>"$OUTDIR/report-1e7.log" 2>&1
        fi
    done
else
    echo "no /usr/bin/time on this host: report benchmark skipped" >"$OUTDIR/report-1e7.log"
fi
rm -rf "$SCRATCH"
cat "$OUTDIR/replay-stream.log" "$OUTDIR/replay-split.log" "$OUTDIR/report-1e7.log"
