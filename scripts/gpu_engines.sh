#!/usr/bin/env bash
# The real-engine lane, ON the GPU machine: vLLM 0.26.0 installed (../shared/gpu/vllm/README.md:
# `eval "$(bash /tmp/vllm-parts/install.sh)"` first) and the prebuilt .gpu/vramledger and
# .gpu/libvramledger.so (scripts/gpu_prepare.sh). No Rust needed. Run from the repository root.
#
#   bash scripts/gpu_engines.sh check [--tp N] [--layers L] [--tag NAME]
#       examples/engines/vllm_offline.py plain, then under `vramledger run` (after one unmeasured
#       warm-up run when this machine's compile caches are cold); checks the same
#       output token ids (sha256) and num_gpu_blocks, every device balanced, the stages of real
#       vLLM present, `size RUN --log` reproducing the blocks (and, with --tp 2: both ranks, NCCL
#       bytes, the cross-rank minimum and the imbalance rule); records the hooked run (journals
#       trimmed to their used size, the engine's output, config.json) in $OUT/h200-vllm-NAME/.
#   bash scripts/gpu_engines.sh ab [--budget-s 480] [--layers 8] [--rounds 3] [--requests 512]
#       [--max-tokens 64] [--tp 1] [--state /tmp/vl-ab]
#       the overhead A/B: triplets plain / preload / preload with VRAMLEDGER_DISABLE=1 (order
#       rotated each triplet), all arms on the same warm compile caches after one warm-up run;
#       each run gives its startup (process start → LLM ready) and the median of --rounds timed
#       decode rounds. Stops starting triplets when the next would pass --budget-s; results are
#       appended to STATE/results.jsonl (and copied to $OUT), so a second call on the same warm
#       machine continues the series. Prints the summary.
#   bash scripts/gpu_engines.sh summary FILE.jsonl...   the summary of saved results
#
# Why this A/B shape: a run costs ~25-35 s before LLM is ready (mostly Python imports, the same
# for every arm), so only ~6-8 triplets fit in 12 minutes. Between runs of one arm decode
# throughput varied by ±20% (exploration, 512 x 128 tokens): each run therefore times several
# decode rounds and keeps their median (run-level noise, not round noise, remains), triplets
# rotate the arm order (no arm always runs first after the warm-up), and the summary reports the
# median of the per-triplet ratios with their min/max. A small model (8 layers) makes each step
# short, so host-side costs of the preload weigh more than with 32 layers: a conservative test.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
MODE=${1:?check, ab or summary}; shift
CLI=$PWD/.gpu/vramledger
LIB=$PWD/.gpu/libvramledger.so
HELP=$PWD/scripts/gpu_engines.py
OUTDIR=${OUT:-/tmp/vl-engines-out}
mkdir -p "$OUTDIR"

TP=1 LAYERS="" TAG="" BUDGET=480 ROUNDS=3 REQUESTS=512 MAXTOK=64 STATE=/tmp/vl-ab
while [[ $# -gt 0 && $MODE != summary ]]; do
    case $1 in
        --tp) TP=$2; shift 2 ;;
        --layers) LAYERS=$2; shift 2 ;;
        --tag) TAG=$2; shift 2 ;;
        --budget-s) BUDGET=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --requests) REQUESTS=$2; shift 2 ;;
        --max-tokens) MAXTOK=$2; shift 2 ;;
        --state) STATE=$2; shift 2 ;;
        *) echo "gpu_engines.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if [[ $MODE == summary ]]; then
    exec python3 "$HELP" summary "$@"
fi
for f in "$CLI" "$LIB"; do
    [[ -f $f ]] || { echo "gpu_engines.sh: $f missing (scripts/gpu_prepare.sh, carry .gpu)" >&2; exit 2; }
done
python3 -c 'import vllm' 2>/dev/null || { echo "gpu_engines.sh: vllm not importable (install.sh)" >&2; exit 2; }

[[ -n $LAYERS ]] || LAYERS=$([[ $MODE == ab ]] && echo 8 || echo 32)
# The same compile caches for every run of this machine (warm after the first).
export VLLM_CACHE_ROOT=/tmp/vl-cache/vllm TORCHINDUCTOR_CACHE_DIR=/tmp/vl-cache/inductor TRITON_CACHE_DIR=/tmp/vl-cache/triton
MODEL=/tmp/vllm-model-l$LAYERS
V=(python3 examples/engines/vllm_offline.py --model-dir "$MODEL" --layers "$LAYERS" --tp "$TP")

if [[ $MODE == check ]]; then
    W=/tmp/vl-check-tp$TP
    rm -rf "$W"; mkdir -p "$W"
    TAG=${TAG:-tp$TP-l$LAYERS}
    # A small decode keeps the journal small (the host-pinned churn grows with the steps).
    SMALL=(--requests 64 --max-tokens 32 --warmup 8)
    # A cold compile cache changes vLLM's own profile (its first run compiles; on the H200 the
    # 8-layer model's peak activation read 1.78 GiB cold, 1.72 GiB warm: 128295 vs 128415 blocks),
    # so both compared runs must find the caches warm: one unmeasured plain run warms them.
    WARM=/tmp/vl-cache/warm-l$LAYERS-tp$TP
    if [[ ! -f $WARM ]]; then
        t0=$SECONDS
        timeout 400 "${V[@]}" "${SMALL[@]}" >"$W/warmup.out" 2>"$W/warmup.err" && touch "$WARM"
        echo "warm-up rc=$? wall=$((SECONDS - t0))s $(grep -h VRAMLEDGER_VLLM "$W/warmup.out" | head -1)"
    fi
    t0=$SECONDS
    timeout 400 "${V[@]}" "${SMALL[@]}" >"$W/plain.out" 2>"$W/plain.err"; rc=$?
    echo "plain rc=$rc wall=$((SECONDS - t0))s $(grep -h VRAMLEDGER_VLLM "$W/plain.out" | tr '\n' ' ')"
    t0=$SECONDS
    timeout 400 "$CLI" run --out "$W/run" -- "${V[@]}" "${SMALL[@]}" >"$W/hooked.out" 2>"$W/hooked.err"; rc=$?
    echo "hooked rc=$rc wall=$((SECONDS - t0))s $(grep -h VRAMLEDGER_VLLM "$W/hooked.out" | tr '\n' ' ')"
    # The engine's own output: stdout up to the report vramledger run prints at the end.
    awk '/^process [0-9]+ on /{exit} {print}' "$W/hooked.out" >"$W/engine-stdout.txt"
    grep -v '^vramledger: journals of run' "$W/hooked.err" >"$W/engine-stderr.txt"
    "$CLI" report "$W/run" >"$W/report.txt" 2>&1; echo "report rc=$?"
    "$CLI" report --json "$W/run" >"$W/report.json" 2>"$W/report.err"
    "$CLI" size "$W/run" --log "$W/engine-stdout.txt" --what-if-gpu-memory-utilization 0.9 \
        >"$W/size.txt" 2>&1; echo "size rc=$?"
    "$CLI" size "$W/run" --log "$W/engine-stdout.txt" --json >"$W/size.json" 2>"$W/size.err"
    cat "$W/report.txt" "$W/size.txt"
    python3 "$HELP" check --plain "$W/plain.out" --hooked "$W/hooked.out" --report "$W/report.json" \
        --size "$W/size.json" --tp "$TP"; checks=$?
    D="$OUTDIR/h200-vllm-$TAG"
    rm -rf "$D"; mkdir -p "$D"
    for j in "$W"/run/*.vlj; do
        pid=$(basename "$j" | awk -F. '{print $(NF-2)}')
        python3 "$HELP" trim "$j" "$D/pid$pid.vlj"
    done
    cp "$W/engine-stdout.txt" "$W/engine-stderr.txt" "$MODEL/config.json" "$D/"
    cp "$W/report.txt" "$W/size.txt" "$W/plain.out" "$OUTDIR/" 2>/dev/null
    du -sh "$D"
    echo "checks: $([[ $checks == 0 ]] && echo PASS || echo FAIL) (recorded run in $D)"
    exit $checks
fi

# ab
mkdir -p "$STATE"
RES="$STATE/results.jsonl"
SESSION=$(date +%s)
WORK=(--requests "$REQUESTS" --max-tokens "$MAXTOK" --rounds "$ROUNDS" --warmup 32)
WORKLOAD="vllm_offline.py --layers $LAYERS --tp $TP ${WORK[*]}"
start=$SECONDS
run_arm() { # arm triplet timeout
    local arm=$1 k=$2 limit=$3 t0=$SECONDS rc out="$STATE/run.out" jd="$STATE/j"
    rm -rf "$jd"
    case $arm in
        plain) timeout "$limit" "${V[@]}" "${WORK[@]}" >"$out" 2>"$STATE/run.err"; rc=$? ;;
        preload) LD_PRELOAD=$LIB VRAMLEDGER_OUT=$jd timeout "$limit" "${V[@]}" "${WORK[@]}" >"$out" 2>"$STATE/run.err"; rc=$? ;;
        disabled) LD_PRELOAD=$LIB VRAMLEDGER_DISABLE=1 VRAMLEDGER_OUT=$jd timeout "$limit" "${V[@]}" "${WORK[@]}" >"$out" 2>"$STATE/run.err"; rc=$? ;;
    esac
    rm -rf "$jd"
    python3 - "$out" "$arm" "$k" "$rc" "$((SECONDS - t0))" "$SESSION" "$WORKLOAD" >>"$RES" <<'PY'
import json, sys
out, arm, k, rc, wall, session, workload = sys.argv[1:]
v = {}
for line in open(out, errors="replace"):
    if line.startswith("VRAMLEDGER_VLLM "):
        d = json.loads(line[16:]); v[d["phase"]] = d
print(json.dumps({"session": session, "triplet": int(k), "arm": arm, "rc": int(rc), "wall_s": int(wall),
                  "workload": workload,
                  "startup_s": v.get("ready", {}).get("startup_s"),
                  "tok_s": v.get("decode", {}).get("tok_s_median"),
                  "rounds_tok_s": v.get("decode", {}).get("rounds_tok_s", []),
                  "num_gpu_blocks": v.get("ready", {}).get("num_gpu_blocks"),
                  "sha256": v.get("result", {}).get("output_sha256")}))
PY
    tail -1 "$RES"
}
if [[ ! -f $STATE/warm-l$LAYERS-tp$TP ]]; then
    t0=$SECONDS
    run_arm plain -1 300 && touch "$STATE/warm-l$LAYERS-tp$TP"
    echo "warm-up (compile caches) took $((SECONDS - t0))s"
fi
ARMS=(plain preload disabled)
k=1 per=0
while :; do
    elapsed=$((SECONDS - start))
    est=$(( per > 0 ? per : 150 ))
    if (( elapsed + est > BUDGET )); then
        echo "budget: ${elapsed}s used, next triplet ~${est}s would pass ${BUDGET}s; stopping"
        break
    fi
    t0=$SECONDS
    for i in 0 1 2; do
        arm=${ARMS[$(( (i + k) % 3 ))]}
        left=$(( BUDGET - (SECONDS - start) + 60 ))
        run_arm "$arm" "$k" $(( left < 300 ? (left > 60 ? left : 60) : 300 ))
    done
    per=$((SECONDS - t0))
    k=$((k + 1))
done
cp "$RES" "$OUTDIR/ab-results.jsonl"
python3 "$HELP" summary "$RES"
