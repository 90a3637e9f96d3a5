#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, after scripts/gpu_prepare.sh filled .gpu/
# (carry: [".gpu"]); no Rust needed there. Every in-process figure of issue 15, side by side
# for this build (.gpu/libvramledger.so) and, when staged, the build it is compared with
# (.gpu/base/libvramledger.so: BASE_REF=main scripts/gpu_prepare.sh), in under 3 minutes:
#
#   1. what a hook's ingredients cost next to the real driver (bench_costs.c, no preload);
#   2. the cuMemAlloc_v2+cuMemFree_v2 pair through the driver, hooked/direct (bench_ab.sh);
#   3. the cudaMalloc+cudaFree pair through PyTorch's libcudart, hooked/direct (bench_rt.sh);
#   4. the tap's cost per write that matches nothing, before serving (bench_tap.c), and the
#      stdio tap's per printf/fputs (bench_stdio.c);
#   5. journal bytes per event, and the end-to-end time, of a PyTorch workload
#      (bench_torch_churn.py: cudaMalloc/cudaFree through the caching allocator, then the
#      same with expandable segments: VMM).
#
#   bash scripts/gpu_bench.sh [OUTDIR]        (OUTDIR defaults to $OUT)
#   env: BENCH_REPS (2) repetitions of 2 and 3; CHURN_ROUNDS (1500); DRIVER_DIR, CUDART (found
#        by default: ldconfig, PyTorch's nvidia/*/lib)
#
# OUTDIR receives bench.txt (every line, the summary table last) and journals.tar.gz.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
export PYTHONUNBUFFERED=1
export PYTHONDONTWRITEBYTECODE=1

ROOT="$PWD"
OUTDIR="${1:-${OUT:-}}"
[[ -n "$OUTDIR" ]] || { echo "usage: $0 OUTDIR   (or set OUT)" >&2; exit 2; }
mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GPU="$ROOT/.gpu"
CLI="$GPU/vramledger"
REPS="${BENCH_REPS:-2}"
ROUNDS="${CHURN_ROUNDS:-1500}"
START=$SECONDS
WORK="$(mktemp -d /tmp/vramledger-gpubench.XXXXXX)"
LOG="$OUTDIR/bench.txt"
: >"$LOG"
log() { printf '%s\n' "$*" | tee -a "$LOG"; }
finish() {
    (cd "$WORK" && tar -czf "$OUTDIR/journals.tar.gz" journals 2>/dev/null)
    rm -rf "$WORK"
}
trap finish EXIT

LIBS=("new:$GPU/libvramledger.so")
[[ -f "$GPU/base/libvramledger.so" ]] && LIBS=("base:$GPU/base/libvramledger.so" "${LIBS[@]}")
# DRIVER_DIR and CUDART may be given (a dry run against the fake driver and runtime).
if [[ -z "${DRIVER_DIR:-}" ]]; then
    DRIVER_DIR="$(dirname "$(ldconfig -p | sed -n 's/.*libcuda.so.1 (libc6,x86-64) => //p' | head -1)")"
    [[ -f "$DRIVER_DIR/libcuda.so.1" ]] || DRIVER_DIR=/usr/local/nvidia/lib64
fi
[[ -n "${CUDART:-}" ]] || CUDART="$(python3 - <<'PY' 2>/dev/null
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
hits = [p for r in roots for p in glob.glob(os.path.join(r, "nvidia", "**", "libcudart.so.1*"), recursive=True)]
print(sorted(hits)[0] if hits else "")
PY
)"
[[ -n "$CUDART" ]] || CUDART="$(ldconfig -p | sed -n 's/.*libcudart.so.1[0-9]* (libc6,x86-64) => //p' | head -1)"

log "== vramledger gpu_bench $(date -u +%Y-%m-%dT%H:%M:%SZ) $(cat "$GPU/BUILD_INFO" 2>/dev/null | tr '\n' ' ')"
log "driver=$DRIVER_DIR cudart=${CUDART:-none} libs=${LIBS[*]} reps=$REPS"
log "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown); kernel $(uname -r); $(nproc) cpus; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 | sed 's/^/gpu /' | tee -a "$LOG"

gcc -O2 -o "$WORK/bench_costs" "$HERE/bench_costs.c" -ldl -lpthread
gcc -O2 -o "$WORK/bench_tap" "$HERE/bench_tap.c"
gcc -O2 -o "$WORK/bench_stdio" "$HERE/bench_stdio.c"
declare -A SUM

log ""
log "== 1. a hook's ingredients next to the real driver (added ns per alloc+free pair)"
LD_LIBRARY_PATH="$DRIVER_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout -k 5 60 "$WORK/bench_costs" 20 300 2>&1 | tee -a "$LOG"
[[ ${PIPESTATUS[0]} == 0 ]] || log "bench_costs failed (rc ${PIPESTATUS[0]})"

log ""
log "== 2. through the driver: cuMemAlloc_v2+cuMemFree_v2, hooked/direct (bench_ab.sh 40 x 500)"
for ((r = 1; r <= REPS; r++)); do
    for l in "${LIBS[@]}"; do
        name="${l%%:*}"
        line=$(timeout -k 5 60 bash "$HERE/bench_ab.sh" "$DRIVER_DIR" "${l#*:}" 40 500 2>&1 | tail -1)
        log "driver $name run $r: $line"
        SUM[driver_$name]+="$(sed -n 's/.*ratio=\([0-9.]*\).*added_ns=\([-0-9.]*\).*/\1 (+\2 ns)/p' <<<"$line"); "
    done
done

if [[ "$CUDART" == fake || ( -n "$CUDART" && -f "$CUDART" ) ]]; then
    log ""
    log "== 3. through the runtime: cudaMalloc+cudaFree via $CUDART, hooked/direct (bench_rt.sh 40 x 400)"
    for ((r = 1; r <= REPS; r++)); do
        for l in "${LIBS[@]}"; do
            name="${l%%:*}"
            line=$(timeout -k 5 60 bash "$HERE/bench_rt.sh" "$DRIVER_DIR" "$CUDART" "${l#*:}" 40 400 2>&1 | tail -1)
            log "runtime $name run $r: $line"
            SUM[runtime_$name]+="$(sed -n 's/.*ratio=\([0-9.]*\).*added_ns=\([-0-9.]*\).*/\1 (+\2 ns)/p' <<<"$line"); "
        done
    done
else
    log "== 3. skipped: no libcudart found"
fi

log ""
log "== 4. the tap before serving (ns added per write / printf / fputs that matches nothing)"
for line in 0 1; do
    for l in "${LIBS[@]}"; do
        name="${l%%:*}"
        for ((r = 1; r <= 3; r++)); do
            # tap_added_ns: the interposed write against libc's own in one process (the
            # figure); write_minus_syscall_ns with and without the preload: the older one.
            plain=$("$WORK/bench_tap" 60 10000 $line startup 2>&1 >/dev/null)
            hooked=$(LD_PRELOAD="${l#*:}" VRAMLEDGER_OUT="$WORK/tapj" "$WORK/bench_tap" 60 10000 $line startup 2>&1 >/dev/null)
            p_sys=$(sed -n 's/write_minus_syscall_ns=//p' <<<"$plain")
            h_sys=$(sed -n 's/write_minus_syscall_ns=//p' <<<"$hooked")
            noise=$(sed -n 's/tap_added_ns=//p' <<<"$plain")
            add=$(sed -n 's/tap_added_ns=//p' <<<"$hooked")
            log "tap $name line $line run $r: in one process adds $add ns (method noise without the preload: $noise ns); write − syscall without ${p_sys} ns, with ${h_sys} ns"
            SUM[tap_${name}_$line]+="$add; "
        done
        p=$("$WORK/bench_stdio" 100000 $line 2>&1 >/dev/null)
        h=$(LD_PRELOAD="${l#*:}" VRAMLEDGER_OUT="$WORK/tapj" "$WORK/bench_stdio" 100000 $line 2>&1 >/dev/null)
        log "stdio $name line $line: without $p; with $h"
    done
done

log ""
log "== 5. a PyTorch workload (bench_torch_churn.py $ROUNDS rounds): journal bytes per event, time"
for conf in default expandable; do
    env_conf=()
    [[ $conf == expandable ]] && env_conf=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)
    plain=$(env "${env_conf[@]}" timeout -k 5 60 python3 "$HERE/bench_torch_churn.py" "$ROUNDS" 2>&1 | sed -n 's/.*seconds=//p')
    log "churn $conf plain: ${plain:-?} s"
    for l in "${LIBS[@]}"; do
        name="${l%%:*}"
        jd="$WORK/journals/$conf-$name"
        mkdir -p "$jd"
        t=$(env "${env_conf[@]}" LD_PRELOAD="${l#*:}" VRAMLEDGER_OUT="$jd" timeout -k 5 60 python3 "$HERE/bench_torch_churn.py" "$ROUNDS" 2>&1 | sed -n 's/.*seconds=//p')
        stats=$(python3 "$HERE/bench_journal_stats.py" "$CLI" "$conf-$name" "$jd")
        log "churn $conf $name: ${t:-?} s; $stats"
        SUM[attr_${conf}_$name]="$(sed -n 's/^attribution [^:]*: //p' <<<"$stats")"
        SUM[churn_${conf}_$name]="$(sed -n 's/.*bytes_per_record=\([0-9.]*\).*bytes_per_alloc_free_record=\([0-9.]*\).*/\1 per record, \2 per alloc\/free/p' <<<"$stats"); ${t:-?} s vs plain ${plain:-?} s"
    done
done

log ""
log "== summary ($((SECONDS - START)) s)"
for l in "${LIBS[@]}"; do
    name="${l%%:*}"
    log "$name: driver pair ratio ${SUM[driver_$name]:-} | runtime pair ratio ${SUM[runtime_$name]:-}"
    log "$name: tap ns/write access line ${SUM[tap_${name}_0]:-} decode line ${SUM[tap_${name}_1]:-}"
    log "$name: journal default ${SUM[churn_default_$name]:-} | expandable ${SUM[churn_expandable_$name]:-}"
done
# The faster walk past libcudart must attribute exactly as the slow one did.
if [[ ${#LIBS[@]} == 2 ]]; then
    for conf in default expandable; do
        if [[ "${SUM[attr_${conf}_base]:-}" == "${SUM[attr_${conf}_new]:-}" ]]; then
            log "attribution $conf: same for base and new (${SUM[attr_${conf}_new]:-})"
        else
            log "attribution $conf: DIFFERS: base ${SUM[attr_${conf}_base]:-} | new ${SUM[attr_${conf}_new]:-}"
        fi
    done
fi
