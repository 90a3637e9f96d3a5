#!/usr/bin/env bash
# Runs ON the GPU machine (no Rust needed: the prebuilt .gpu/vramledger and .gpu/libvramledger.so
# from scripts/gpu_prepare.sh; vLLM installed as ../shared/gpu/vllm/README.md says). Issue 16:
# `vramledger serve` follows the real vLLM example while it starts under `vramledger run`, is
# scraped every second, and afterwards the last scrape must equal `vramledger report --json` to
# the byte (scripts/check_metrics.py); `top` runs in tmux (when the machine has tmux) and its
# screen is captured every few seconds. Exit 0 only when the program succeeded and everything
# matched. Results: OUTDIR/gpu-metrics.tar.gz and a summary on stdout.
#
#   bash scripts/gpu_metrics.sh [OUTDIR]          (default $OUT)
#   env: CLI=path/to/vramledger, WORKLOAD='command line' (default: the vLLM example),
#        MODEL_NAME (the model_name label; default the example's model folder)
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUTDIR="${1:-${OUT:-/tmp}}"
CLI="${CLI:-$PWD/.gpu/vramledger}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CHECK="$HERE/check_metrics.py"
M=/tmp/vllm-model
VLLM_EXAMPLE=examples/engines/vllm_offline.py
[[ -f $VLLM_EXAMPLE ]] || VLLM_EXAMPLE="$HERE/../examples/engines/vllm_offline.py"
WORKLOAD="${WORKLOAD:-python3 $VLLM_EXAMPLE --model-dir $M}"
MODEL_NAME="${MODEL_NAME:-$M}"
# Compile caches: the caller's (scripts/gpu_session.sh shares gpu_engines.sh's warm ones), else our own.
export VLLM_CACHE_ROOT=${VLLM_CACHE_ROOT:-/tmp/vc-metrics} TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/ic-metrics} TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/tc-metrics}

if [[ ! -x $CLI ]]; then
    echo "gpu_metrics: no $CLI: run scripts/gpu_prepare.sh on the build machine and carry .gpu" >&2
    exit 2
fi
W="$(mktemp -d /tmp/gpu-metrics.XXXXXX)"
RUN="$W/run"
S="$W/summary.txt"
log() { printf '%s\n' "$*" | tee -a "$S"; }
cleanup() {
    [[ -n ${SERVE_PID:-} ]] && kill "$SERVE_PID" 2>/dev/null
    [[ -n ${TMUX_SOCK:-} ]] && tmux -L "$TMUX_SOCK" kill-server 2>/dev/null
    rm -rf "$W" # everything is in the tarball
    true
}
trap cleanup EXIT

# 1. serve on a run folder that does not exist yet.
"$CLI" serve "$RUN" --listen 127.0.0.1:0 --model-name "$MODEL_NAME" 2>"$W/serve.log" &
SERVE_PID=$!
ADDR=""
for _ in $(seq 100); do
    # Up to "/metrics": serve's line may reach the file in pieces, and a piece ending inside
    # the port would pass for an address.
    ADDR="$(grep -o 'http://[0-9.:]*/metrics' "$W/serve.log" | head -1 | sed 's|http://||; s|/metrics||')"
    [[ -n $ADDR ]] && break
    sleep 0.1
done
if [[ -z $ADDR ]]; then
    log "gpu_metrics: serve did not start:"; cat "$W/serve.log"; exit 1
fi
log "serve: $ADDR ($("$CLI" --version))"

# 2. top in tmux, when there is one.
if command -v tmux >/dev/null; then
    TMUX_SOCK="vramledger-metrics-$$"
    tmux -L "$TMUX_SOCK" -f /dev/null new-session -d -s top -x 160 -y 50 \
        "'$CLI' top '$RUN' --interval 500 --model-name '$MODEL_NAME'"
    mkdir -p "$W/top"
else
    log "tmux is not installed here: no top capture (run it where tmux is, on the journals in the tarball)"
fi

# 3. The workload under vramledger run, scraped every second while it runs.
t0=$SECONDS
"$CLI" run --out "$RUN" -- bash -c "$WORKLOAD" >"$W/program.out" 2>"$W/program.log" &
RUN_PID=$!
python3 "$CHECK" scrape "$ADDR" "$W/scrapes" --while-pid "$RUN_PID" >"$W/scrape.txt" 2>&1 &
SCRAPER=$!
n=0
while kill -0 "$RUN_PID" 2>/dev/null; do
    if [[ -n ${TMUX_SOCK:-} ]] && (( n % 3 == 0 )); then
        tmux -L "$TMUX_SOCK" capture-pane -p -t top >"$W/top/$(printf %04d "$n").txt" 2>/dev/null
    fi
    n=$((n + 1))
    sleep 1
    if (( SECONDS - t0 > 600 )); then
        log "gpu_metrics: the workload ran past 600 s; stopping it"; kill "$RUN_PID"
    fi
done
wait "$RUN_PID"; RC=$?
wait "$SCRAPER"; SCRAPE_RC=$?
log "workload rc=$RC wall=$((SECONDS - t0))s; $(cat "$W/scrape.txt")"
grep -h VRAMLEDGER_VLLM "$W/program.out" | tee -a "$S"
if [[ -n ${TMUX_SOCK:-} ]]; then
    sleep 1
    tmux -L "$TMUX_SOCK" capture-pane -p -t top >"$W/top/final.txt" 2>/dev/null
fi

# 4. The report, and the scraped series against it.
"$CLI" report --json "$RUN" >"$W/report.json" 2>"$W/report.err"; log "report --json rc=$?"
"$CLI" report "$RUN" >"$W/report.txt" 2>&1
"$CLI" metrics "$RUN" --model-name "$MODEL_NAME" >"$W/metrics.prom" 2>&1
python3 "$CHECK" compare --report "$W/report.json" --final "$W/scrapes/final.prom" \
    --scrapes "$W/scrapes" >"$W/check.txt" 2>&1
CHECK_RC=$?
cat "$W/check.txt" | tee -a "$S"
# The screen without its empty rows.
screen() { grep -v -E '^[[:space:]]*(│[[:space:]]*│)?[[:space:]]*$' "$1" | sed 's/^/  /' | head -40; }
if [[ -f $W/top/final.txt ]]; then
    mid="$(grep -l '\[running\]' "$W"/top/0*.txt 2>/dev/null | tail -1)"
    if [[ -n $mid ]]; then
        log "top while it ran ($(basename "$mid" .txt) s after the start):"; screen "$mid" | tee -a "$S"
    fi
    log "top at the end:"; screen "$W/top/final.txt" | tee -a "$S"
fi
log "check rc=$CHECK_RC scrape rc=$SCRAPE_RC"
mkdir -p "$OUTDIR"
tar czf "$OUTDIR/gpu-metrics.tar.gz" -C "$W" . && log "wrote $OUTDIR/gpu-metrics.tar.gz"
if (( RC != 0 || CHECK_RC != 0 || SCRAPE_RC != 0 )); then
    log "gpu_metrics: FAILED"
    exit 1
fi
log "gpu_metrics: ok"
