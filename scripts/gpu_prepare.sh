#!/usr/bin/env bash
# Runs HERE (the build machine): builds the release library and CLI and stages everything the
# GPU machine needs into .gpu/ (git-ignored; the device tool carries it with carry: [".gpu"]).
#
#   scripts/gpu_prepare.sh            # cargo build --release, then fill .gpu/
#   SKIP_CARGO=1 scripts/gpu_prepare.sh   # only restage already-built artefacts
#   BASE_REF=main scripts/gpu_prepare.sh  # also .gpu/base/libvramledger.so, the shim of that
#                                         # git ref, for scripts/gpu_bench.sh to compare with
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [[ "${SKIP_CARGO:-0}" != 1 ]]; then
    cargo build --release --workspace
fi

LIB="target/release/libvramledger.so"
CLI="target/release/vramledger"
for f in "$LIB" "$CLI"; do
    if [[ ! -f "$f" ]]; then
        echo "gpu_prepare: missing $f (did the build produce it?)" >&2
        exit 1
    fi
done

DEST="$ROOT/.gpu"
rm -rf "$DEST"
mkdir -p "$DEST/examples" "$DEST/scripts"
cp "$LIB" "$DEST/libvramledger.so"
cp "$CLI" "$DEST/vramledger"
chmod +x "$DEST/vramledger"
# The Python package, when scripts/python_package.sh has built it (scripts/gpu_first_hour.sh).
for whl in target/wheels/vramledger-*manylinux*.whl; do
    [[ -f "$whl" ]] && cp "$whl" "$DEST/"
done
# Sources only: no build outputs, no caches.
find examples -maxdepth 1 -type f \( -name '*.py' -o -name '*.c' -o -name '*.md' \) -exec cp {} "$DEST/examples/" \;
find scripts -maxdepth 1 -type f \( -name '*.py' -o -name '*.c' -o -name '*.h' -o -name '*.sh' \) -exec cp {} "$DEST/scripts/" \;

if [[ -n "${BASE_REF:-}" ]]; then
    BASE_SRC="$(mktemp -d /tmp/vramledger-base.XXXXXX)"
    git archive "$BASE_REF" | tar -x -C "$BASE_SRC"
    (cd "$BASE_SRC" && CARGO_TARGET_DIR="$BASE_SRC/target" cargo build --release -p vramledger-shim)
    mkdir -p "$DEST/base"
    cp "$BASE_SRC/target/release/libvramledger.so" "$DEST/base/libvramledger.so"
    echo "base_ref=$BASE_REF $(git rev-parse "$BASE_REF")" > "$DEST/base/BUILD_INFO"
    rm -rf "$BASE_SRC"
fi

# The device tool carries at most 64 MiB (working tree included): drop debug info from the
# copies if they are large (the originals in target/ keep theirs).
size_kib=$(du -sk "$DEST" | cut -f1)
if (( size_kib > 40 * 1024 )) && command -v strip >/dev/null; then
    strip --strip-debug "$DEST/libvramledger.so" "$DEST/vramledger"
    [[ -f "$DEST/base/libvramledger.so" ]] && strip --strip-debug "$DEST/base/libvramledger.so"
    size_kib=$(du -sk "$DEST" | cut -f1)
fi

{
    echo "built_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "git_commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "git_dirty=$(git status --porcelain 2>/dev/null | grep -c . || true)"
    echo "build_host=$(uname -m) $(ldd --version 2>/dev/null | head -1)"
} > "$DEST/BUILD_INFO"

echo "gpu_prepare: staged .gpu/ (${size_kib} KiB):"
ls -l "$DEST"
if (( size_kib > 56 * 1024 )); then
    echo "gpu_prepare: WARNING: .gpu is over 56 MiB; the device tool carries 64 MiB in all" >&2
fi
