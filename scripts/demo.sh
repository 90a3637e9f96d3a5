#!/usr/bin/env bash
# The no-GPU demo: build vramledger, build a PyTorch-shaped client program (tests/clients:
# a fake cudart, a fake caching allocator "libc10_cuda.so", a fake cuBLAS), run it against
# the workspace's fake driver under `vramledger run` (LD_PRELOAD=libvramledger.so), and print
# the report and every record.
#
#   scripts/demo.sh            # everything
#   SKIP_CARGO=1 scripts/demo.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [[ "${SKIP_CARGO:-0}" != 1 ]]; then
    cargo build --release --workspace
fi
REL="$ROOT/target/release"
TMP="$(mktemp -d /tmp/vramledger-demo.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/driver" "$TMP/bin" "$TMP/out"
ln -s "$REL/libfakecuda.so" "$TMP/driver/libcuda.so.1"
ln -s "$REL/libfakecuda.so" "$TMP/driver/libnvidia-ml.so.1"

SRC="$ROOT/tests/clients"
CC="${CC:-cc}"
FLAGS=(-g -O1 -I"$SRC" -Wl,-rpath,'$ORIGIN')
lib() { "$CC" "${FLAGS[@]}" -fPIC -shared -Wl,-soname,"$2" -o "$TMP/bin/$2" "$SRC/$1" "${@:3}" -ldl -lpthread; }
lib cudart.c libcudart.so.13
lib c10_cuda.c libc10_cuda.so "$TMP/bin/libcudart.so.13"
lib cublas.c libcublas.so.13
"$CC" "${FLAGS[@]}" -o "$TMP/bin/torch_like" "$SRC/torch_like.c" \
    "$TMP/bin/libc10_cuda.so" "$TMP/bin/libcudart.so.13" -ldl -lpthread

echo "== vramledger run: a PyTorch-shaped program against the fake driver, under the preload"
LD_LIBRARY_PATH="$TMP/driver" "$REL/vramledger" run --out "$TMP/out" -- "$TMP/bin/torch_like"
echo
for j in "$TMP"/out/*.vlj; do
    echo "== every record of $(basename "$j") (vramledger dump --text)"
    "$REL/vramledger" dump --text "$j"
done
