#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, after scripts/gpu_prepare.sh filled .gpu/
# here and the device tool carried it (carry: [".gpu"]).
#
#   bash scripts/gpu_validate.sh [OUTDIR]      (OUTDIR defaults to $OUT)
#
# For each example: a plain run and a run under LD_PRELOAD=.gpu/libvramledger.so with
# VRAMLEDGER_OUT=<work>/journals/<name>; stdout compared with VRAMLEDGER_CHECK lines dropped
# (IDENTICAL / DIFFERENT); every journal dumped with `.gpu/vramledger dump` and checked with
# scripts/check_journal.py against what the program printed. Then the H200 allocation bench.
#
# OUTDIR receives at most 5 files: summary.txt (every verdict and number), outputs.tar.gz
# (stdout/stderr of every run, diffs, checker reports), dumps.tar.gz (NDJSON dumps),
# journals.tar.gz (raw journals). Work happens in /tmp and is packed on exit, also when the
# script is stopped. Budget: VALIDATE_BUDGET_S seconds in all (default 420).
set -euo pipefail

export NCCL_NVLS_ENABLE=0
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
export PYTHONDONTWRITEBYTECODE=1

ROOT="$PWD"
OUTDIR="${1:-${OUT:-}}"
if [[ -z "$OUTDIR" ]]; then
    echo "usage: $0 OUTDIR   (or set OUT)" >&2
    exit 2
fi
mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GPU="$ROOT/.gpu"
LIB="$GPU/libvramledger.so"
CLI="$GPU/vramledger"
if [[ -d "$GPU/examples" ]]; then EX="$GPU/examples"; else EX="$ROOT/examples"; fi
BUDGET="${VALIDATE_BUDGET_S:-420}"
START=$SECONDS

WORK="$(mktemp -d /tmp/vramledger-validate.XXXXXX)"
mkdir -p "$WORK/journals" "$WORK/build"
SUMMARY="$OUTDIR/summary.txt"
: >"$SUMMARY"
FAILED=0
VERDICTS=()

log() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }
logfile() { tee -a "$SUMMARY" <"$1"; }

pack() {
    set +e
    cd "$WORK" || return
    log ""
    log "== packing results ($((SECONDS - START)) s elapsed)"
    tar -czf "$OUTDIR/journals.tar.gz" journals 2>>"$SUMMARY"
    local dumps
    dumps=$(find . -maxdepth 1 -name '*.ndjson' -printf '%f\n' | sort)
    if [[ -n "$dumps" ]]; then
        tar -czf "$OUTDIR/dumps.tar.gz" $dumps 2>>"$SUMMARY"
    fi
    tar -czf "$OUTDIR/outputs.tar.gz" --exclude=./journals --exclude=./build --exclude='*.ndjson' . 2>>"$SUMMARY"
    for f in "$OUTDIR"/*; do
        local sz
        sz=$(stat -c %s "$f")
        log "file $(basename "$f") $sz bytes"
        if ((sz > 15 * 1024 * 1024)); then
            log "WARNING: $(basename "$f") is over 15 MiB; the device tool brings back 16 MiB per file"
        fi
    done
    cd / && rm -rf "$WORK"
}
trap pack EXIT
trap 'log "stopped by a signal"; exit 143' TERM INT

remaining() { echo $((BUDGET - (SECONDS - START))); }

# ---------------------------------------------------------------------------------------
log "== vramledger GPU validation $(date -u +%Y-%m-%dT%H:%M:%SZ)"
log "root=$ROOT examples=$EX lib=$LIB cli=$CLI budget=${BUDGET}s"
for f in "$LIB" "$CLI"; do
    if [[ ! -f "$f" ]]; then
        log "FATAL: missing $f (run scripts/gpu_prepare.sh here and carry .gpu)"
        exit 1
    fi
done
[[ -f "$GPU/BUILD_INFO" ]] && logfile "$GPU/BUILD_INFO"
log "lib bytes=$(stat -c %s "$LIB") cli bytes=$(stat -c %s "$CLI")"
nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version --format=csv,noheader 2>&1 |
    sed 's/^/gpu: /' | tee -a "$SUMMARY" || true
NGPU=$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
log "torch: $(python3 -c 'import torch; v = torch.cuda.nccl.version(); print(torch.__version__, "cuda", torch.version.cuda, "nccl", v if isinstance(v, int) else ".".join(map(str, v)))' 2>&1 | tail -1)"
log "visible GPUs (torch): $NGPU"
log "env: NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST"

# libdirectalloc.so for direct_cudamalloc.py (built here: the GPU machine has gcc).
if gcc -O2 -shared -fPIC -o "$WORK/build/libdirectalloc.so" "$EX/direct_alloc.c" -ldl 2>"$WORK/build.err"; then
    export DIRECTALLOC_LIB="$WORK/build/libdirectalloc.so"
    log "built libdirectalloc.so"
else
    log "WARNING: building libdirectalloc.so failed:"
    logfile "$WORK/build.err"
fi

# ---------------------------------------------------------------------------------------
# run_example NAME TIMEOUT_S
run_example() {
    local name=$1 limit=$2
    local script="$EX/$name.py"
    local left
    left=$(remaining)
    log ""
    log "== example $name"
    if ((left < 40)); then
        log "RESULT $name: SKIPPED (time budget: ${left}s left)"
        VERDICTS+=("$name: SKIPPED (time budget)")
        return 0
    fi
    ((limit > left / 2)) && limit=$((left / 2))

    local rc_p=0 rc_h=0 t0 t_p t_h
    t0=$SECONDS
    timeout -k 5 "$limit" python3 "$script" >"$WORK/$name.plain.txt" 2>"$WORK/$name.plain.err" || rc_p=$?
    t_p=$((SECONDS - t0))
    mkdir -p "$WORK/journals/$name"
    t0=$SECONDS
    timeout -k 5 "$limit" env LD_PRELOAD="$LIB" VRAMLEDGER_OUT="$WORK/journals/$name" \
        python3 "$script" >"$WORK/$name.hooked.txt" 2>"$WORK/$name.hooked.err" || rc_h=$?
    t_h=$((SECONDS - t0))
    log "$name: plain rc=$rc_p ${t_p}s, hooked rc=$rc_h ${t_h}s (limit ${limit}s each)"
    local ok=1
    if ((rc_p != 0)); then
        ok=0
        log "$name: plain run failed; stderr tail:"
        tail -n 15 "$WORK/$name.plain.err" | sed 's/^/  | /' | tee -a "$SUMMARY"
    fi
    if ((rc_h != 0)); then
        ok=0
        log "$name: hooked run failed; stderr tail:"
        tail -n 15 "$WORK/$name.hooked.err" | sed 's/^/  | /' | tee -a "$SUMMARY"
    fi

    # Outputs without the checkpoint lines must be byte-identical.
    grep -v '^VRAMLEDGER_CHECK' "$WORK/$name.plain.txt" >"$WORK/$name.plain.cmp" || true
    grep -v '^VRAMLEDGER_CHECK' "$WORK/$name.hooked.txt" >"$WORK/$name.hooked.cmp" || true
    local same
    if cmp -s "$WORK/$name.plain.cmp" "$WORK/$name.hooked.cmp"; then
        same=IDENTICAL
    else
        same=DIFFERENT
        ok=0
        diff -u "$WORK/$name.plain.cmp" "$WORK/$name.hooked.cmp" >"$WORK/$name.diff" || true
        head -n 30 "$WORK/$name.diff" | sed 's/^/  | /' | tee -a "$SUMMARY"
    fi
    local n_plain n_hooked
    n_plain=$(grep -c '^VRAMLEDGER_CHECK' "$WORK/$name.plain.txt" || true)
    n_hooked=$(grep -c '^VRAMLEDGER_CHECK' "$WORK/$name.hooked.txt" || true)
    log "$name: output $same ($(wc -l <"$WORK/$name.plain.cmp") lines compared; checkpoints plain=$n_plain hooked=$n_hooked)"
    if [[ "$n_plain" != "$n_hooked" ]]; then ok=0; fi

    # Journals: one per process. Accept VRAMLEDGER_OUT as a folder or as a file prefix.
    local journals=() j
    while IFS= read -r j; do journals+=("$j"); done < <(
        find "$WORK/journals" -type f \( -path "$WORK/journals/$name/*" -o -path "$WORK/journals/$name*" \) | sort)
    log "$name: ${#journals[@]} journal file(s)"
    if ((${#journals[@]} == 0)); then ok=0; fi
    local dumped_pids="" checks_pass=0 checks_fail=0
    for j in "${journals[@]}"; do
        local rc_d=0 pid rc_c=0
        "$CLI" dump "$j" >"$WORK/dump.tmp" 2>"$WORK/dump.err" || rc_d=$?
        pid=$(python3 - "$WORK/dump.tmp" <<'PY' 2>/dev/null || true
import json, sys
with open(sys.argv[1]) as f:
    first = f.readline()
try:
    print(int(str(json.loads(first).get("pairs", {}).get("pid")).strip()))
except Exception:
    print("")
PY
)
        [[ -n "$pid" ]] || pid="$(basename "$j" | tr -c 'A-Za-z0-9._-\n' '_')"
        mv "$WORK/dump.tmp" "$WORK/$name.$pid.ndjson"
        dumped_pids="$dumped_pids $pid"
        log "$name: journal $(basename "$j") ($(stat -c %s "$j") bytes) -> $name.$pid.ndjson ($(wc -l <"$WORK/$name.$pid.ndjson") lines), dump rc=$rc_d"
        if ((rc_d != 0)); then
            ok=0
            sed 's/^/  | /' "$WORK/dump.err" | head -n 10 | tee -a "$SUMMARY"
            mv "$WORK/dump.err" "$WORK/$name.$pid.dump.err"
        fi
        python3 "$SCRIPTS/check_journal.py" --stdout "$WORK/$name.hooked.txt" \
            --journal "$WORK/$name.$pid.ndjson" --name "$name" >"$WORK/$name.$pid.check.txt" 2>&1 || rc_c=$?
        logfile "$WORK/$name.$pid.check.txt"
        if ((rc_c != 0)); then
            ok=0
            checks_fail=$((checks_fail + 1))
        else
            checks_pass=$((checks_pass + 1))
        fi
    done

    # Every process that printed checkpoints must have a journal.
    local p
    for p in $(sed -n 's/^VRAMLEDGER_CHECK //p' "$WORK/$name.hooked.txt" |
        python3 -c 'import json,sys; print(" ".join(sorted({str(json.loads(l)["pid"]) for l in sys.stdin if l.strip()})))'); do
        if [[ " $dumped_pids " != *" $p "* ]]; then
            log "$name: MISSING_JOURNAL for pid $p (it printed checkpoints)"
            ok=0
        fi
    done

    local verdict=PASS
    ((ok)) || verdict=FAIL
    ((ok)) || FAILED=$((FAILED + 1))
    log "RESULT $name: $verdict (output $same; journal checks pass=$checks_pass fail=$checks_fail; plain rc=$rc_p hooked rc=$rc_h; ${t_p}s/${t_h}s)"
    VERDICTS+=("$name: $verdict (output $same; journal checks pass=$checks_pass fail=$checks_fail; rc $rc_p/$rc_h; ${t_p}s/${t_h}s)")
}

run_example torch_default 120
run_example torch_expandable 120
run_example torch_graphs 120
run_example cublas_direct 120
run_example direct_cudamalloc 120
if ((NGPU >= 2)); then
    run_example nccl_allreduce 180
else
    log ""
    log "== example nccl_allreduce"
    log "RESULT nccl_allreduce: SKIPPED (needs 2 visible GPUs, torch sees $NGPU; use kind nvidia-h200-x2)"
    VERDICTS+=("nccl_allreduce: SKIPPED (needs 2 GPUs, $NGPU visible)")
fi

# ---------------------------------------------------------------------------------------
log ""
log "== bench: cuMemAlloc_v2+cuMemFree_v2 pairs, hooked vs direct, in one process"
left=$(remaining)
if ((left > 30)); then
    blimit=$((left - 10))
    ((blimit > 150)) && blimit=150
    rc_b=0
    # In one process, alternating blocks through the hook and through a direct binding to
    # the driver (bench_ab.c): the run-to-run drift of the driver's own cost cancels out.
    DRIVER_DIR="$(dirname "$(ldconfig -p | sed -n 's/.*libcuda.so.1 (libc6,x86-64) => //p' | head -1)")"
    [[ -f "$DRIVER_DIR/libcuda.so.1" ]] || DRIVER_DIR=/usr/local/nvidia/lib64
    timeout -k 5 "$blimit" bash "$SCRIPTS/bench_ab.sh" "$DRIVER_DIR" "$LIB" 40 500 >"$WORK/bench.txt" 2>&1 || rc_b=$?
    logfile "$WORK/bench.txt"
    log "bench rc=$rc_b"
    ratio=$(sed -n 's/.*with the preload: .*ratio=\([0-9.]*\).*/\1/p' "$WORK/bench.txt" | tail -1)
    VERDICTS+=("bench_ab: rc=$rc_b median ratio hooked/direct = ${ratio:-?}")
else
    log "bench: SKIPPED (time budget: ${left}s left)"
    VERDICTS+=("bench_h200: SKIPPED (time budget)")
fi

log ""
log "== verdicts ($((SECONDS - START)) s)"
for v in "${VERDICTS[@]}"; do log "  $v"; done
log "failed examples: $FAILED"
if ((FAILED > 0)); then exit 1; fi
exit 0
