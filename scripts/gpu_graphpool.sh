#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, after scripts/gpu_prepare.sh staged .gpu/
# (carry: [".gpu"]): are PyTorch's private pools named right, outside capture windows too?
#
#   bash scripts/gpu_graphpool.sh [OUTDIR]      (OUTDIR defaults to $OUT)
#
# 1. examples/torch_compile_hf.py (a compiled Hugging Face Llama, CUDA-graph trees) plain, then
#    under `vramledger run`; with the default allocator, then with expandable segments (SKIPPED
#    when even the plain run fails that way). Torch's own
#    snapshot (the program's VRAMLEDGER_TORCH line) is the ground truth: the report's bytes per
#    pool id must equal it, torch_graph_pool must be the sum of the private pools, torch the
#    default pool, torch + torch_graph_pool = memory_reserved(), the snapshot the Python hook
#    took at exit must agree with the books segment by segment, and the hooked run's greedy
#    tokens (checksum) must equal the plain run's.
# 2. examples/torch_graphs.py (stream-capture graphs sharing one pool) plain and under
#    `vramledger run`: same output, every graph-pool segment carries one pool id, the pool
#    peaked above zero, and the exit snapshot agrees.
# Exit 0 when every check passes, 1 otherwise. OUTDIR gets graphpool.txt (verdicts, reports)
# and graphpool.tar.gz (outputs, reports, journals).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/vl-graphpool-inductor TRITON_CACHE_DIR=/tmp/vl-graphpool-triton
OUTDIR="${1:-${OUT:-}}"
if [[ -z "$OUTDIR" ]]; then
    echo "usage: $0 OUTDIR   (or set OUT)" >&2
    exit 2
fi
CLI="$PWD/.gpu/vramledger"
if [[ ! -x "$CLI" || ! -f "$PWD/.gpu/libvramledger.so" ]]; then
    echo "gpu_graphpool: .gpu/vramledger and .gpu/libvramledger.so are needed (scripts/gpu_prepare.sh)" >&2
    exit 2
fi
W="$(mktemp -d /tmp/vramledger-graphpool.XXXXXX)"
S="$W/summary.txt"
FAILED=0
log() { printf '%s\n' "$*" | tee -a "$S"; }
verdict() { # name rc
    if [[ $2 == 0 ]]; then log "RESULT $1: PASS"; else log "RESULT $1: FAIL"; FAILED=$((FAILED + 1)); fi
}
log "== gpu_graphpool $(date -u +%Y-%m-%dT%H:%M:%SZ) $(cat .gpu/BUILD_INFO 2>/dev/null | tr '\n' ' ')"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tee -a "$S"

# ---- 1. the compiled Hugging Face model --------------------------------------------------
# GRAPHPOOL_MODES=default skips the expandable-segments pass (a shorter GPU session).
for mode in ${GRAPHPOOL_MODES:-default expandable}; do
    if [[ $mode == expandable ]]; then alloc="expandable_segments:True"; else alloc=""; fi
    PYTORCH_CUDA_ALLOC_CONF="$alloc" timeout 200 python3 examples/torch_compile_hf.py \
        >"$W/hf-$mode-plain.out" 2>"$W/hf-$mode-plain.log"
    rc=$?
    log "hf $mode plain rc=$rc"
    if [[ $rc != 0 ]]; then
        log "RESULT hf-$mode: SKIPPED (the plain run failed: torch itself, not vramledger)"
        tail -5 "$W/hf-$mode-plain.log" | tee -a "$S"
        continue
    fi
    PYTORCH_CUDA_ALLOC_CONF="$alloc" timeout 200 "$CLI" run --out "$W/hf-$mode.run" -- \
        python3 examples/torch_compile_hf.py >"$W/hf-$mode.out" 2>"$W/hf-$mode.log"
    log "hf $mode hooked rc=$?"
    "$CLI" report --json "$W/hf-$mode.run" >"$W/hf-$mode.report.json" 2>"$W/hf-$mode.report.err"
    "$CLI" report "$W/hf-$mode.run" >"$W/hf-$mode.report.txt" 2>&1
    python3 - "$W/hf-$mode.report.json" "$W/hf-$mode.out" "$W/hf-$mode-plain.out" <<'PY' 2>&1 | tee -a "$S"
import json, sys
report, hooked, plain = sys.argv[1:4]
def torch_line(path):
    for line in open(path):
        if line.startswith("VRAMLEDGER_TORCH "):
            return json.loads(line.split(" ", 1)[1])
    return None
problems = []
t, p = torch_line(hooked), torch_line(plain)
if t is None:
    print("no VRAMLEDGER_TORCH line in the hooked run"); sys.exit(1)
if p is None or p["checksum"] != t["checksum"]:
    problems.append("greedy checksum hooked %s != plain %s" % (t["checksum"], p and p["checksum"]))
r = json.load(open(report))
procs = [q for q in r["processes"] if "torch_compile_hf.py" in q["cmdline"] and q["devices"]]
if len(procs) != 1:
    print("expected one process of torch_compile_hf.py with device memory, found %d" % len(procs)); sys.exit(1)
q = procs[0]
tp = q["torch_pools"]
if not tp["hooks"]:
    problems.append("the Python hooks were not installed in the process")
rows = {x["pool"]: x for x in tp["pools"] if x["device"] == 0}
owners = q["devices"][0]["live_at_end"]["by_owner"]
print("torch (exact bytes):  reserved %d allocated %d pools %s" % (t["reserved"], t["allocated"], t["pools"]))
print("report (live at end): torch %d torch_graph_pool %d; pools %s; windows %d" % (
    owners["torch"], owners["torch_graph_pool"],
    {k: v["live_bytes"] for k, v in sorted(rows.items())}, tp["windows"]))
for pool, nbytes in sorted(t["pools"].items()):
    got = rows.get(pool, {}).get("live_bytes", 0)
    print("  pool %-6s torch %12d  report %12d  %s" % (pool, nbytes, got, "ok" if got == nbytes else "DIFFERS"))
    if got != nbytes:
        problems.append("pool %s: report %d, torch %d" % (pool, got, nbytes))
for pool, row in sorted(rows.items()):
    if pool not in t["pools"] and row["live_bytes"] != 0:
        problems.append("pool %s: report %d, torch has no such pool" % (pool, row["live_bytes"]))
private = sum(v for k, v in t["pools"].items() if k != "0,0")
if owners["torch_graph_pool"] != private:
    problems.append("torch_graph_pool %d != torch's private pools %d" % (owners["torch_graph_pool"], private))
if owners["torch"] != t["pools"].get("0,0", 0):
    problems.append("torch %d != torch's default pool %d" % (owners["torch"], t["pools"].get("0,0", 0)))
both = owners["torch"] + owners["torch_graph_pool"]
print("torch + torch_graph_pool = %d, memory_reserved() = %d, difference %d" % (both, t["reserved"], both - t["reserved"]))
if both != t["reserved"]:
    problems.append("torch + torch_graph_pool - reserved = %d bytes" % (both - t["reserved"]))
c = tp["snapshot_check"]
if c is None:
    problems.append("no torch snapshot at exit in the journal")
else:
    print("exit snapshot #%d: %d segments %d bytes, agree=%s" % (c["snapshot"], c["segments"], c["bytes"], c["agree"]))
    for m in c["mismatches"][:20]:
        print("  mismatch", m)
    if not c["agree"]:
        problems.append("%d segments differ from torch's exit snapshot" % len(c["mismatches"]))
for x in problems:
    print("PROBLEM", x)
print("CHECK %s" % ("PASS" if not problems else "FAIL (%d)" % len(problems)))
sys.exit(1 if problems else 0)
PY
    verdict "hf-$mode" "${PIPESTATUS[0]}"
done

# ---- 2. stream-capture graphs sharing one pool ------------------------------------------
timeout 120 python3 examples/torch_graphs.py >"$W/graphs-plain.out" 2>"$W/graphs-plain.log"
log "torch_graphs plain rc=$?"
timeout 120 "$CLI" run --out "$W/graphs.run" -- python3 examples/torch_graphs.py \
    >"$W/graphs-hooked.out" 2>"$W/graphs-hooked.log"
log "torch_graphs hooked rc=$?"
"$CLI" report --json "$W/graphs.run" >"$W/graphs.report.json" 2>"$W/graphs.report.err"
"$CLI" report "$W/graphs.run" >"$W/graphs.report.txt" 2>&1
for j in "$W"/graphs.run/*.vlj; do "$CLI" dump "$j" >"$W/graphs.$(basename "$j" .vlj).ndjson"; done
python3 - "$W/graphs.report.json" "$W/graphs-plain.out" "$W/graphs-hooked.out" "$W"/graphs.*.ndjson <<'PY' 2>&1 | tee -a "$S"
import json, re, sys
report, plain, hooked, dumps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
problems = []
def program_lines(path):
    """The program's own lines: checkpoints dropped, and the report `vramledger run` prints
    on stdout after the program ended (from its first `process <pid> on ...` line)."""
    out = []
    for line in open(path):
        if re.match(r"process \d+ on ", line):
            break
        if not line.startswith("VRAMLEDGER_CHECK "):
            out.append(line)
    return out
if program_lines(plain) != program_lines(hooked) or not program_lines(plain):
    problems.append("the program's output changed under vramledger run")
ids = set()
graph_bytes = 0
for d in dumps:
    for line in open(d):
        e = json.loads(line)
        if e.get("kind") == "alloc" and e.get("owner") == "torch_graph_pool":
            graph_bytes += e["size"]
            ids.add((e["arg1"], e["arg2"]) if e["flags"] & 32 else None)
print("graph-pool segments allocated: %d bytes, pool ids %s" % (graph_bytes, sorted(ids, key=str)))
if graph_bytes == 0:
    problems.append("no torch_graph_pool allocation at all")
if len(ids) != 1 or None in ids:
    problems.append("graph-pool segments should carry one pool id (the shared pool), got %s" % sorted(ids, key=str))
r = json.load(open(report))
procs = [q for q in r["processes"] if "torch_graphs.py" in q["cmdline"] and q["devices"]]
tp = procs[0]["torch_pools"] if len(procs) == 1 else None
if tp is None:
    problems.append("no single torch_graphs.py process in the report")
else:
    rows = [x for x in tp["pools"] if x["pool"] not in ("0,0", "?")]
    print("pools: %s" % [(x["pool"], x["live_bytes"], x["peak_bytes"]) for x in rows])
    if not rows or max(x["peak_bytes"] for x in rows) <= 0:
        problems.append("no private pool with a peak above zero")
    c = tp["snapshot_check"]
    print("exit snapshot: %s" % (c and {k: c[k] for k in ("segments", "bytes", "agree")}))
    if c is None or not c["agree"]:
        problems.append("the exit snapshot does not agree with the books: %s" % (c and c["mismatches"][:5]))
for x in problems:
    print("PROBLEM", x)
print("CHECK %s" % ("PASS" if not problems else "FAIL (%d)" % len(problems)))
sys.exit(1 if problems else 0)
PY
verdict torch_graphs "${PIPESTATUS[0]}"

log "failed checks: $FAILED"
cat "$S" "$W/hf-default.report.txt" "$W/hf-expandable.report.txt" "$W/graphs.report.txt" >"$OUTDIR/graphpool.txt" 2>/dev/null
tar -czf "$OUTDIR/graphpool.tar.gz" -C "$W" . 2>/dev/null
ls -la "$OUTDIR"
rm -rf "$W"
((FAILED == 0))
