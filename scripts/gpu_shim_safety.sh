#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, after scripts/gpu_prepare.sh (carry .gpu):
# what the shim's safety work (issue 11) and its exit samples (issue 9 item 5) must show on the
# real driver. Prints one verdict line per check into OUTDIR/shim_safety.txt ($1 or $OUT).
#   1. the real driver's answers in a forked child: tests/clients/fork_driver.c, whose lines on
#      the fake driver tests/fake_driver.rs asserts (devices=N: the real machine's count)
#   2. a plain PyTorch program that never asks for free memory balances (free@end known)
#   3. a file-size limit too small for the journal: one warning, the program's output unchanged
#   4. the journal truncated while the program runs: it goes on, one warning
#   5. signal handlers behind the shim's trampolines: a Python handler's stage line is seen,
#      faulthandler still dumps and dies of SIGSEGV as without it (examples/signal_handlers.py);
#      engine lines written from a C handler while its thread takes malloc's lock do not hang
#      or corrupt the heap (tests/clients/sig_write.c, `lines`, the handler installed by
#      sigaction, bsd_signal, sysv_signal, __sysv_signal and sigset); sigaction/signal read-backs
#      the same as plain (tests/clients/sig_semantics.c)
#   6. contexts made and destroyed in turn (tests/clients/context_cycles.c): the books hold
#      one context at the end, each cycle's stage gives its context back, balanced
set -uo pipefail
export PYTHONUNBUFFERED=1
OUTDIR="${1:-$OUT}"
CLI=$PWD/.gpu/vramledger
LIB=$PWD/.gpu/libvramledger.so
W="$(mktemp -d /tmp/vramledger-safety.XXXXXX)"
S="$OUTDIR/shim_safety.txt"
: >"$S"
log() { printf '%s\n' "$*" | tee -a "$S"; }

# 1. fork
gcc -O1 -I .gpu/clients -o "$W/fork_check" .gpu/clients/fork_driver.c -ldl
"$W/fork_check" | tee -a "$S"
log "fork check rc=$? (expected: the lines tests/fake_driver.rs asserts for fork_driver)"

# 2. plain PyTorch, no engine line, no mem_get_info: balanced, free@end known
cat >"$W/quiet.py" <<'PY'
import torch
x = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
y = torch.ones(64 << 20, device="cuda")
torch.cuda.synchronize()
print("quiet: held", x.numel() + y.numel() * 4)
PY
"$CLI" run --out "$W/quiet" -- python3 "$W/quiet.py" >"$W/quiet.out" 2>&1
log "quiet run rc=$?"
"$CLI" report --json "$W/quiet" >"$W/quiet.json" 2>>"$W/quiet.out"
python3 - "$W/quiet.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
r = json.load(open(sys.argv[1]))
for p in r["processes"]:
    for d in p["devices"]:
        rec = d["reconciliation"]
        ok = rec["balanced"] and rec["end_free_bytes"] is not None
        print(f"quiet pid {p['pid']} device {d['device']}: end_free={rec['end_free_bytes']} "
              f"balanced={rec['balanced']} unattributed={rec['unattributed_bytes']} -> {'PASS' if ok else 'FAIL'}")
PY

# 3. a file-size limit of 1 MiB: the journal's first 4 MiB chunk cannot be reserved
python3 .gpu/examples/torch_default.py >"$W/plain.out" 2>"$W/plain.err"; p=$?
(ulimit -f 1024; LD_PRELOAD="$LIB" VRAMLEDGER_OUT="$W/fsize" python3 .gpu/examples/torch_default.py >"$W/fsize.out" 2>"$W/fsize.err"); h=$?
warnings=$(grep -c '^vramledger\[' "$W/fsize.err")
same=$(cmp -s <(grep -v '^VRAMLEDGER' "$W/plain.out" | sed 's/[0-9.]* s$//') <(grep -v '^VRAMLEDGER' "$W/fsize.out" | sed 's/[0-9.]* s$//') && echo same || echo differs)
log "fsize: plain rc=$p hooked rc=$h warnings=$warnings ($(grep '^vramledger\[' "$W/fsize.err" | head -1)) stdout $same -> $([[ $p == "$h" && $warnings == 1 ]] && echo PASS || echo FAIL)"

# 4. the journal truncated while the SGLang-shaped example runs
(LD_PRELOAD="$LIB" VRAMLEDGER_OUT="$W/trunc" python3 .gpu/examples/sglang_shape.py >"$W/trunc.out" 2>"$W/trunc.err") &
pid=$!
for _ in $(seq 1 100); do
    f=$(ls "$W"/trunc/*.vlj 2>/dev/null | head -1)
    [[ -n "$f" ]] && break
    sleep 0.1
done
sleep 2
[[ -n "${f:-}" ]] && truncate -s 0 "$f"
wait $pid; rc=$?
log "truncate: rc=$rc warnings=$(grep -c '^vramledger\[' "$W/trunc.err") ($(grep '^vramledger\[' "$W/trunc.err" | head -1)) -> $([[ $rc == 0 ]] && echo PASS || echo FAIL)"
# 5. signal handlers
python3 .gpu/examples/signal_handlers.py --crash >"$W/sig-plain.out" 2>"$W/sig-plain.err"; p=$?
"$CLI" run --out "$W/sig" -- python3 .gpu/examples/signal_handlers.py --crash >"$W/sig.out" 2>"$W/sig.err"; h=$?
"$CLI" report --json "$W/sig" >"$W/sig.json" 2>>"$W/sig.err"
stages=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(",".join(s["name"] for p in r["processes"] for d in p["devices"] for s in d["stages"]))' "$W/sig.json" 2>&1)
dumped=$(grep -c 'Fatal Python error: Segmentation fault' "$W/sig.err")
ran=$(grep -c 'signals: python handler ran' "$W/sig.out")
log "signals python: plain rc=$p hooked rc=$h dumped=$dumped ran=$ran stages=$stages -> $([[ $p == 139 && $h == 139 && $dumped == 1 && $ran == 1 && $stages == *weight_load* ]] && echo PASS || echo FAIL)"
gcc -O1 -o "$W/sig_write" .gpu/clients/sig_write.c -lpthread
gcc -O1 -o "$W/sig_semantics" .gpu/clients/sig_semantics.c
LD_PRELOAD="$LIB" VRAMLEDGER_OUT="$W/sigw" timeout 60 "$W/sig_write" 3000 lines >"$W/sigw.out" 2>"$W/sigw.err"; rc=$?
lines=$(grep -c 'Load weight\|GPU KV cache size' "$W/sigw.err")
log "signals C handler lines: rc=$rc $(grep '^sig_write: [0-9]' "$W/sigw.err") passed on=$lines $(grep -v 'Load weight\|GPU KV cache size\|^sig_write' "$W/sigw.err" | head -1) -> $([[ $rc == 0 ]] && grep -q 'sig_write: ok' "$W/sigw.out" && echo PASS || echo FAIL)"
# The same with the handler installed the older ways (bsd_signal, sysv_signal, __sysv_signal, sigset).
for how in bsd_signal sysv_signal __sysv_signal sigset; do
    LD_PRELOAD="$LIB" VRAMLEDGER_OUT="$W/sigw-$how" timeout 60 "$W/sig_write" 2000 lines "$how" >"$W/sigw-$how.out" 2>"$W/sigw-$how.err"; rc=$?
    lines=$(grep -c 'Load weight\|GPU KV cache size' "$W/sigw-$how.err")
    log "signals C handler lines ($how): rc=$rc $(grep '^sig_write: [0-9]' "$W/sigw-$how.err") passed on=$lines -> $([[ $rc == 0 ]] && grep -q 'sig_write: ok' "$W/sigw-$how.out" && echo PASS || echo FAIL)"
done
"$W/sig_semantics" >"$W/sems-plain.out" 2>&1
LD_PRELOAD="$LIB" VRAMLEDGER_OUT="$W/sems" "$W/sig_semantics" >"$W/sems.out" 2>&1
log "signals semantics: $(grep -c . "$W/sems.out") lines, $(cmp -s "$W/sems-plain.out" "$W/sems.out" && echo same || echo differs) -> $(cmp -s "$W/sems-plain.out" "$W/sems.out" && grep -q 'sig_semantics: done' "$W/sems.out" && echo PASS || echo FAIL)"

# 6. context cycles on the real driver
gcc -O2 -o "$W/context_cycles" .gpu/clients/context_cycles.c -ldl
LD_PRELOAD="$LIB" VRAMLEDGER_OUT="$W/ctx" "$W/context_cycles" 4 >"$W/ctx.out" 2>"$W/ctx.err"; rc=$?
"$CLI" report --json "$W/ctx" >"$W/ctx.json" 2>>"$W/ctx.err"
cp "$W"/ctx/*.vlj "$OUTDIR/" 2>/dev/null
python3 - "$W/ctx.json" "$rc" <<'PY' 2>&1 | tee -a "$S"
import json, sys
r = json.load(open(sys.argv[1]))
d = r["processes"][0]["devices"][0]
ctx = {s["name"]: s["by_owner"]["context"] for s in d["stages"]}
live = d["live_at_end"]["by_owner"]["context"]
made = max(ctx.values())
rec = d["reconciliation"]
cycles = [v for k, v in ctx.items() if k.startswith("cycle_")]
ok = sys.argv[2] == "0" and rec["balanced"] and 0 < live <= made and all(abs(v) <= 2 << 20 for v in cycles)
print(f"context cycles: rc={sys.argv[2]} context by stage {ctx} live at end {live} "
      f"unattributed={rec['unattributed_bytes']} balanced={rec['balanced']} -> {'PASS' if ok else 'FAIL'}")
PY

tar -czf "$OUTDIR/shim_safety.tar.gz" -C "$W" . 2>/dev/null
log "files: $OUTDIR/shim_safety.tar.gz"
