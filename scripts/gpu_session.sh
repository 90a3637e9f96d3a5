#!/usr/bin/env bash
# One H200 session in a few calls (device time is short): runs ON the GPU machine from the
# repository root, with .gpu/ staged by scripts/gpu_prepare.sh and, for the vLLM parts, vLLM
# installed (`eval "$(bash /tmp/vllm-parts/install.sh)"`, ../shared/gpu/vllm/README.md). Each part
# runs the repository's own GPU scripts in turn, each under a time limit, writes one line per
# step (rc, seconds) to session.txt and packs everything into OUTDIR/session-PART.tar.gz.
#
#   [BENCH_REPS=N] bash scripts/gpu_session.sh torch [OUTDIR]
#                                                  everything that needs no vLLM: graph pools of a
#                                                  compiled HF model, the in-process benchmarks, the
#                                                  pip package, the shim's safety checks, the
#                                                  SGLang-shaped books, sizing from a run's settings;
#                                                  the tap against .gpu/prev (PREV_REF) when staged
#   bash scripts/gpu_session.sh engines [OUTDIR]   the real vLLM lane (check, record) and metrics
#                                                  scraped while vLLM starts
#   bash scripts/gpu_session.sh ab BUDGET_S [OUTDIR]  the vLLM overhead A/B for BUDGET_S seconds
#   bash scripts/gpu_session.sh cpu [OUTDIR]       the replay and report benchmarks on the host's
#                                                  CPU (~2-4 min; BENCH_BINS=1 scripts/gpu_prepare.sh
#                                                  stages them; with BASE_REF, that ref's side by side)
#   bash scripts/gpu_session.sh tap [OUTDIR]       after a change to the tap only (~2 min): the
#                                                  shim's safety checks, the SGLang-shaped books,
#                                                  the tap against .gpu/prev (PREV_REF), by line
#                                                  and by length
#
# Step limits add up to under 10 minutes a part (one device call) with BENCH_REPS up to 4.
# Calls that follow each other on a warm machine share /tmp (compile caches, the A/B state).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PART=${1:?engines, torch, cpu, tap or ab}; shift
BUDGET=0
if [[ $PART == ab ]]; then BUDGET=${1:?ab needs a budget in seconds}; shift; fi
OUTDIR=${1:-${OUT:?set OUT or give OUTDIR}}
W=/tmp/vl-session/$PART
rm -rf "$W"; mkdir -p "$W"
S=$W/session.txt
CLI=$PWD/.gpu/vramledger
# gpu_engines.sh's compile caches, shared by every vLLM run of this machine.
export VLLM_CACHE_ROOT=/tmp/vl-cache/vllm TORCHINDUCTOR_CACHE_DIR=/tmp/vl-cache/inductor TRITON_CACHE_DIR=/tmp/vl-cache/triton

# step NAME LIMIT_S COMMAND...: the command's output goes to NAME.log, its verdict to session.txt.
step() {
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    mkdir -p "$W/$name"
    OUT="$W/$name" timeout "$limit" "$@" >"$W/$name.log" 2>&1
    local rc=$?
    printf '%-14s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" "$(tail -1 "$W/$name.log" | cut -c1-160)" | tee -a "$S"
}


echo "== gpu_session $PART $(date -u +%FT%TZ) $(tr '\n' ' ' <.gpu/BUILD_INFO 2>/dev/null)" | tee "$S"
case $PART in
engines)
    nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader | tee -a "$S"
    # The 8-layer model of the A/B: its compile caches are then warm for every later vLLM run.
    step engines-check 240 bash scripts/gpu_engines.sh check --layers 8
    grep -q '^checks: PASS' "$W/engines-check.log" && mkdir -p /tmp/vl-ab && touch /tmp/vl-ab/warm-l8-tp1
    WORKLOAD="python3 examples/engines/vllm_offline.py --model-dir /tmp/vllm-model-l8 --layers 8" \
        MODEL_NAME=/tmp/vllm-model-l8 step metrics 100 bash scripts/gpu_metrics.sh "$W/metrics"
    ;;
torch)
    nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader | tee -a "$S"
    step shim-safety 120 bash scripts/gpu_shim_safety.sh "$W/shim-safety"
    step books 60 bash scripts/gpu_books.sh "$W/books"
    step sizing 50 bash scripts/gpu_sizing.sh "$W/sizing"
    GRAPHPOOL_MODES=default step graphpool 150 bash scripts/gpu_graphpool.sh "$W/graphpool"
    # BENCH_REPS (default 1): runs of each pair ratio, ~25 s each for both builds.
    REPS=${BENCH_REPS:-1}
    BENCH_REPS=$REPS step bench $((130 + 25 * REPS)) bash scripts/gpu_bench.sh "$W/bench"
    # The tap against the shim of PREV_REF (scripts/gpu_prepare.sh), both in every run.
    if [[ -f .gpu/prev/libvramledger.so ]]; then
        step tap-prev 90 bash scripts/bench_tap.sh .gpu/libvramledger.so .gpu/prev/libvramledger.so
    fi
    step first-hour 90 bash scripts/gpu_first_hour.sh "$W"
    ;;
tap)
    nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader | tee -a "$S"
    step shim-safety 120 bash scripts/gpu_shim_safety.sh "$W/shim-safety"
    step books 60 bash scripts/gpu_books.sh "$W/books"
    if [[ -f .gpu/prev/libvramledger.so ]]; then
        step tap-prev 90 bash scripts/bench_tap.sh .gpu/libvramledger.so .gpu/prev/libvramledger.so
        BENCH_TAP_LINES="8 24 50 87 128 200 400" \
            step tap-lengths 120 bash scripts/bench_tap.sh .gpu/libvramledger.so .gpu/prev/libvramledger.so
    fi
    ;;
cpu)
    step cpu-bench 420 bash scripts/gpu_cpu_bench.sh "$W/cpu" 4
    ;;
ab)
    step ab $((BUDGET + 90)) bash scripts/gpu_engines.sh ab --budget-s "$BUDGET"
    cat "$W/ab.log" | tail -20 | tee -a "$S"
    ;;
*)
    echo "gpu_session: unknown part '$PART' (engines, torch, cpu, tap or ab)" >&2
    exit 2
    ;;
esac
tar -czf "$OUTDIR/session-$PART.tar.gz" -C /tmp/vl-session "$PART"
cp "$S" "$OUTDIR/session-$PART.txt"
ls -la "$OUTDIR"
