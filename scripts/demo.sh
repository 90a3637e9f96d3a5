#!/usr/bin/env bash
# The no-GPU demo, in about a minute: an SGLang-shaped server startup (tests/clients/server_like.c:
# NCCL, weights, KV cache, cuBLAS, a third-party library, CUDA-graph private pools) runs against
# the workspace's fake driver under `vramledger run`; then the report, a snapshot at the peak
# (memory_viz pickle and Perfetto trace), the HTML page, and the diff against a second run with
# a larger KV cache and one more graph. Everything is left in one folder, named at the end.
#
#   scripts/demo.sh                    # builds first (cargo build --release --workspace)
#   SKIP_CARGO=1 scripts/demo.sh       # use what target/release already has
#   DEMO_DIR=/tmp/demo scripts/demo.sh # where to leave it (default: target/demo)
#   VRAMLEDGER=vramledger scripts/demo.sh   # another vramledger CLI (the pip-installed one)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [[ "${SKIP_CARGO:-0}" != 1 ]]; then
    cargo build --release --workspace
fi
REL="$ROOT/target/release"
VL="${VRAMLEDGER:-$REL/vramledger}"
if [[ ! -f "$REL/libfakecuda.so" ]]; then
    echo "demo: $REL/libfakecuda.so is missing: run \`cargo build --release --workspace\`" >&2
    exit 1
fi
DIR="${DEMO_DIR:-$ROOT/target/demo}"
rm -rf "$DIR"
mkdir -p "$DIR/driver" "$DIR/bin"
DIR="$(cd "$DIR" && pwd)"
ln -s "$REL/libfakecuda.so" "$DIR/driver/libcuda.so.1"
ln -s "$REL/libfakecuda.so" "$DIR/driver/libnvidia-ml.so.1"

SRC="$ROOT/tests/clients"
CC="${CC:-cc}"
FLAGS=(-g -O1 -fno-omit-frame-pointer -I"$SRC" -Wl,-rpath,'$ORIGIN')
lib() { "$CC" "${FLAGS[@]}" -fPIC -shared -Wl,-soname,"$2" -o "$DIR/bin/$2" "$SRC/$1" "${@:3}" -ldl -lpthread; }
lib cudart.c libcudart.so.13
lib c10_cuda.c libc10_cuda.so "$DIR/bin/libcudart.so.13"
lib cublas.c libcublas.so.13
lib nccl.c libnccl.so.2
lib thirdparty.c libthirdparty.so "$DIR/driver/libcuda.so.1"
"$CC" "${FLAGS[@]}" -Wl,-rpath-link,"$DIR/driver" -o "$DIR/bin/server_like" "$SRC/server_like.c" \
    "$DIR/bin/libc10_cuda.so" "$DIR/bin/libcudart.so.13" "$DIR/bin/libcublas.so.13" \
    "$DIR/bin/libnccl.so.2" "$DIR/bin/libthirdparty.so" -ldl -lpthread
export LD_LIBRARY_PATH="$DIR/driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
say "vramledger run -- server_like: an SGLang-shaped startup on the fake driver (its log, then the report)"
"$VL" run --out "$DIR/run-a" -- "$DIR/bin/server_like"

say "a second run with a larger KV cache and one more CUDA graph (report kept as JSON)"
DEMO_KV_MIB=2048 DEMO_GRAPHS=3 "$VL" run --json --out "$DIR/run-b" -- "$DIR/bin/server_like" \
    >"$DIR/run-b-report.json" 2>"$DIR/run-b-program.txt"
echo "run-b: $(grep -c . "$DIR/run-b-program.txt") lines of program output, report in run-b-report.json"

say "vramledger snapshot --at-peak: what was live at the peak, for PyTorch's memory viewer and Perfetto"
"$VL" snapshot "$DIR/run-a" --at-peak --format memory-viz -o "$DIR/peak.pickle"
"$VL" snapshot "$DIR/run-a" --at-peak --format perfetto -o "$DIR/trace.json"

say "vramledger report --html: one self-contained page"
"$VL" report "$DIR/run-a" --html -o "$DIR/report.html"

say "vramledger diff run-a run-b: what the larger KV cache and the extra graph changed"
"$VL" diff "$DIR/run-a" "$DIR/run-b"

say "left in $DIR"
cat <<EOF
  run-a/, run-b/        the journals (one per process): vramledger report|dump|size|snapshot read them
  report.html           open in a browser (no script, nothing fetched)
  peak.pickle           drag onto https://pytorch.org/memory_viz (or python -m torch.cuda._memory_viz)
  trace.json            open in https://ui.perfetto.dev or chrome://tracing
  run-b-report.json     vramledger report --json of the second run
EOF
