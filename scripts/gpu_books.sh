#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, after scripts/gpu_prepare.sh (carry .gpu):
# the SGLang-shaped example under `vramledger run`, then every offline command on its journals:
# report (text, JSON, HTML) checked against the program's own numbers, size (reproduced from the
# journals), snapshots in the three formats (the memory_viz pickle read back by torch's own
# tool), and the stdout/stderr tap benchmark. Everything lands in OUTDIR ($1 or $OUT) as
# books.txt (the verdicts and the reports) and books.tar.gz (all files).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUTDIR="${1:-$OUT}"
CLI=.gpu/vramledger
W="$(mktemp -d /tmp/vramledger-books.XXXXXX)"
S="$W/summary.txt"
log() { printf '%s\n' "$*" | tee -a "$S"; }

"$CLI" run --out "$W/run" -- python3 .gpu/examples/sglang_shape.py >"$W/program.txt" 2>&1
log "run rc=$?"
"$CLI" report --json "$W/run" >"$W/report.json"; log "report --json rc=$?"
"$CLI" report "$W/run" >"$W/report.txt"; log "report rc=$?"
"$CLI" report "$W/run" --html -o "$W/report.html"; log "report --html rc=$?"
python3 .gpu/scripts/check_report.py "$W/report.json" "$W/program.txt" >"$W/check.txt" 2>&1
log "check_report rc=$? $(tail -1 "$W/check.txt")"
grep '^config ' "$W/program.txt" | sed 's/^config //' >"$W/run/config.json"
"$CLI" size "$W/run" --json >"$W/size.json"; log "size rc=$?"
"$CLI" size "$W/run" >"$W/size.txt"; log "size (text) rc=$?"
python3 - "$W/size.json" "$W/program.txt" <<'PY' 2>&1 | tee -a "$S"
import json, sys
size = json.load(open(sys.argv[1]))
prog = [json.loads(l.split(" ", 1)[1]) for l in open(sys.argv[2]) if l.startswith("VRAMLEDGER_SGLANG ")]
kv = next(p for p in prog if p["line"] == "kv_cache_allocated")
print("size: tokens", size.get("tokens"), "program", kv["tokens"], "profiled", size.get("profiled_tokens"),
      kv.get("profiled_tokens"), "f", size["mem_fraction_static"], "program f", kv.get("mem_fraction_static"),
      "tolerance", size.get("tolerance_tokens"), "reproduced", size.get("reproduced"))
PY
for fmt in json memory-viz perfetto; do
    for at in --at-end --at-peak "--at kv_pool"; do
        name="snap-${fmt}-$(echo "$at" | tr -d ' -').out"
        "$CLI" snapshot "$W/run" $at --format "$fmt" -o "$W/$name" 2>>"$W/snapshot-stderr.txt"
        log "snapshot $fmt $at rc=$?"
    done
done
python3 -m torch.cuda._memory_viz stats "$W/snap-memory-viz-atpeak.out" >"$W/memviz-stats.txt" 2>&1
log "torch.cuda._memory_viz stats rc=$? $(head -3 "$W/memviz-stats.txt" | tr '\n' ' ')"
python3 -m torch.cuda._memory_viz trace_plot "$W/snap-memory-viz-atpeak.out" -o "$W/memviz-trace.html" >>"$W/memviz-stats.txt" 2>&1
log "torch.cuda._memory_viz trace_plot rc=$?"
bash .gpu/scripts/bench_tap.sh .gpu/libvramledger.so >"$W/bench_tap.txt" 2>&1
cat "$W/bench_tap.txt" >>"$S"
cat "$S" "$W/check.txt" "$W/report.txt" "$W/size.txt" >"$OUTDIR/books.txt"
tar -czf "$OUTDIR/books.tar.gz" -C "$W" .
