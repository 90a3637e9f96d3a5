#!/usr/bin/env bash
# Runs ON the GPU machine after the vLLM parts were installed (../shared/gpu/vllm/README.md) and
# scripts/gpu_prepare.sh staged .gpu/: a first look at real programs under the preload, to learn
# what they print and allocate. Part A: vLLM offline (plain cold, hooked, plain warm, preload
# disabled, hooked without tap / NVML); part B: more vLLM pairs, then the compiled Hugging Face Llama, plain and
# hooked, with torch's own allocator snapshot. Everything lands in OUTDIR/explore-PART.tar.gz.
#   bash scripts/gpu_explore.sh A|B [OUTDIR]
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PART=${1:?A or B}
OUTDIR="${2:-$OUT}"
CLI=$PWD/.gpu/vramledger
LIB=$PWD/.gpu/libvramledger.so
W=/tmp/explore-$PART
mkdir -p "$W"
S="$W/summary.txt"
log() { printf '%s\n' "$*" | tee -a "$S"; }
export VLLM_CACHE_ROOT=/tmp/vc TORCHINDUCTOR_CACHE_DIR=/tmp/ic TRITON_CACHE_DIR=/tmp/tc
M=/tmp/vllm-model
V=(python3 examples/engines/vllm_offline.py --model-dir "$M")

vllm_plain() { # name
    local t0=$SECONDS
    timeout 240 "${V[@]}" >"$W/$1.out" 2>"$W/$1.log"; local rc=$?
    log "$1 rc=$rc wall=$((SECONDS - t0))s $(grep -h VRAMLEDGER_VLLM "$W/$1.out" | tr '\n' ' ')"
}
vllm_hooked() { # name [env...]
    local name=$1; shift; local t0=$SECONDS
    env "$@" timeout 240 "$CLI" run --out "$W/$name.run" -- "${V[@]}" >"$W/$name.out" 2>"$W/$name.log"; local rc=$?
    log "$name rc=$rc wall=$((SECONDS - t0))s $(grep -h VRAMLEDGER_VLLM "$W/$name.out" | tr '\n' ' ')"
}

if [[ $PART == A ]]; then
    nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv | tee -a "$S"
    vllm_plain plain-cold
    vllm_hooked hooked
    "$CLI" report "$W/hooked.run" >"$W/hooked.report.txt" 2>&1; log "report rc=$?"
    "$CLI" report --json "$W/hooked.run" >"$W/hooked.report.json" 2>&1
    "$CLI" size "$W/hooked.run" >"$W/hooked.size.txt" 2>&1; log "size rc=$?"
    vllm_plain plain-warm
    vllm_hooked disabled VRAMLEDGER_DISABLE=1
    vllm_hooked hooked-notap VRAMLEDGER_TAP=0
else
    vllm_hooked hooked-nonvml VRAMLEDGER_NVML=0
    vllm_plain plain-warm2
    vllm_hooked hooked2
    for mode in plain hooked; do
        t0=$SECONDS
        if [[ $mode == plain ]]; then
            timeout 200 python3 examples/torch_compile_hf.py >"$W/hf-$mode.out" 2>"$W/hf-$mode.log"; rc=$?
        else
            timeout 200 "$CLI" run --out "$W/hf.run" -- python3 examples/torch_compile_hf.py \
                >"$W/hf-$mode.out" 2>"$W/hf-$mode.log"; rc=$?
        fi
        log "hf-$mode rc=$rc wall=$((SECONDS - t0))s"
    done
    "$CLI" report "$W/hf.run" >"$W/hf.report.txt" 2>&1; log "hf report rc=$?"
    "$CLI" report --json "$W/hf.run" >"$W/hf.report.json" 2>&1
fi
cat "$S"
tar czf "$OUTDIR/explore-$PART.tar.gz" -C /tmp "explore-$PART"
ls -la "$OUTDIR"
