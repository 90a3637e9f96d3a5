#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, after scripts/gpu_prepare.sh (carry .gpu):
# what the shim's safety work (issue 11) and its exit samples (issue 9 item 5) must show on the
# real driver. Prints one verdict line per check into OUTDIR/shim_safety.txt ($1 or $OUT).
#   1. the real driver's answers in a forked child: tests/clients/fork_driver.c, whose lines on
#      the fake driver tests/fake_driver.rs asserts (devices=N: the real machine's count)
#   2. a plain PyTorch program that never asks for free memory balances (free@end known)
#   3. a file-size limit too small for the journal: one warning, the program's output unchanged
#   4. the journal truncated while the program runs: it goes on, one warning
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
tar -czf "$OUTDIR/shim_safety.tar.gz" -C "$W" . 2>/dev/null
log "files: $OUTDIR/shim_safety.tar.gz"
