#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, after scripts/gpu_prepare.sh (carry .gpu):
# how much of a real program's time vramledger's own recording takes, measured from inside
# (VRAMLEDGER_DEBUG=1: every recording timed; each stage boundary and the exit print the sum
# next to the time since the library was loaded; shim/src/selftime.rs). An A/B of whole runs
# cannot resolve 1% of an engine's startup (its runs spread by 10%); this can.
#
#   bash scripts/gpu_selftime.sh [OUTDIR]        the SGLang-shaped example and a PyTorch churn;
#                                                with vLLM importable, vLLM offline (8 layers) too
#
# Writes OUTDIR/selftime.txt: each program's "self time at ..." lines, its journal records.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUTDIR="${1:-${OUT:?set OUT or give OUTDIR}}"
CLI=.gpu/vramledger
[[ -x $CLI ]] || { echo "gpu_selftime.sh: $CLI missing (scripts/gpu_prepare.sh, carry .gpu)" >&2; exit 2; }
W="$(mktemp -d /tmp/vramledger-selftime.XXXXXX)"
S="$OUTDIR/selftime.txt"
: >"$S"

# one NAME LIMIT_S COMMAND...: under `vramledger run` with VRAMLEDGER_DEBUG=1.
one() {
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    VRAMLEDGER_DEBUG=1 timeout "$limit" "$CLI" run --out "$W/$name" -- "$@" >"$W/$name.out" 2>"$W/$name.err"
    local rc=$?
    {
        echo "== $name: rc=$rc wall=$((SECONDS - t0))s: $*"
        grep -h "self time at" "$W/$name.err" | sed 's/^/  /'
        python3 .gpu/scripts/bench_journal_stats.py "$CLI" "$name" "$W/$name" 2>&1 | sed 's/^/  /' | head -1
    } | tee -a "$S"
}

one sglang_shape 120 python3 .gpu/examples/sglang_shape.py
one torch_churn 120 python3 .gpu/scripts/bench_torch_churn.py 1500
if python3 -c 'import vllm' 2>/dev/null; then
    export VLLM_CACHE_ROOT=/tmp/vl-cache/vllm TORCHINDUCTOR_CACHE_DIR=/tmp/vl-cache/inductor TRITON_CACHE_DIR=/tmp/vl-cache/triton
    one vllm_l8 300 python3 examples/engines/vllm_offline.py --model-dir /tmp/vllm-model-l8 --layers 8 \
        --requests 64 --max-tokens 32 --warmup 8
else
    echo "== vllm: not importable here (install it first: ../shared/gpu/vllm/README.md)" | tee -a "$S"
fi
tar -czf "$OUTDIR/selftime.tar.gz" -C "$W" . 2>/dev/null
rm -rf "$W"
