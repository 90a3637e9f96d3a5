#!/usr/bin/env bash
# Runs ON the GPU machine (prebuilt .gpu/, no Rust): the SGLang-shaped startup with an uncapped KV
# pool under `vramledger run`; its journal keeps the printed server_args line as a settings record,
# so `vramledger size RUN` must reproduce the engine's token count with no flag (issue 13).
#   bash scripts/gpu_sizing.sh [OUTDIR]      (default $OUT)
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUTDIR=${1:-$OUT}
CLI=$PWD/.gpu/vramledger
R=$OUTDIR/run
"$CLI" run --out "$R" -- python3 examples/sglang_shape.py --kv-cap-gib 1000 >"$OUTDIR/program.txt" 2>&1
echo "run rc=$?"
# The example logs a model folder that does not exist: its config.json goes beside the journals.
grep -m1 '^config ' "$OUTDIR/program.txt" | cut -d' ' -f2- >"$R/config.json"
echo "settings records: $("$CLI" dump --text "$R"/*.vlj | grep -c vramledger_settings)"
"$CLI" size "$R" | tee "$OUTDIR/size.txt"
echo "size rc=${PIPESTATUS[0]}"
