#!/usr/bin/env bash
# Runs HERE (the build machine): builds the release library and CLI and stages everything the
# GPU machine needs into .gpu/ (git-ignored; the device tool carries it with carry: [".gpu"]).
#
#   scripts/gpu_prepare.sh            # cargo build --release, then fill .gpu/
#   SKIP_CARGO=1 scripts/gpu_prepare.sh   # only restage already-built artefacts
#   BASE_REF=main scripts/gpu_prepare.sh  # also .gpu/base/libvramledger.so, the shim of that
#                                         # git ref, for scripts/gpu_bench.sh to compare with
#   PREV_REF=REV scripts/gpu_prepare.sh   # also .gpu/prev/libvramledger.so (e.g. the last stop's
#                                         # shim: scripts/bench_tap.sh .gpu/libvramledger.so
#                                         # .gpu/prev/libvramledger.so times the two side by side)
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
mkdir -p "$DEST/examples" "$DEST/scripts" "$DEST/clients"
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
# The fake driver's fork test client, run on the real driver too (scripts/gpu_shim_safety.sh).
cp tests/clients/fork_driver.c tests/clients/cuda_abi.h tests/clients/sig_write.c tests/clients/sig_semantics.c \
    tests/clients/context_cycles.c "$DEST/clients/"

# ref_tree REF DIR: git ref REF's files in DIR, made afresh.
ref_tree() {
    rm -rf "$2" && mkdir -p "$2"
    git archive "$1" | tar -x -C "$2"
}
# stage_shim NAME REF SRC: the shim of git ref REF (its files in SRC) as .gpu/NAME/libvramledger.so.
stage_shim() {
    local name=$1 ref=$2 src=$3
    (cd "$src" && CARGO_TARGET_DIR="$src/target" cargo build --release -p vramledger-shim)
    mkdir -p "$DEST/$name"
    cp "$src/target/release/libvramledger.so" "$DEST/$name/libvramledger.so"
    echo "${name}_ref=$ref $(git rev-parse "$ref")" > "$DEST/$name/BUILD_INFO"
}

# bench_exes DIR BENCH...: the names and paths of those benchmarks, as cargo builds them in DIR.
bench_exes() {
    local dir=$1
    shift
    (cd "$dir" && cargo bench --no-run "${@/#/--bench=}" --message-format=json 2>/dev/null) |
        python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "bench" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"])'
}
# stage_benches DEST_DIR SRC_DIR BENCH...: those benchmarks of SRC_DIR's checkout, stripped.
stage_benches() {
    local dest=$1 src=$2
    shift 2
    mkdir -p "$dest"
    bench_exes "$src" "$@" | while read -r name exe; do
        cp "$exe" "$dest/$name" && strip --strip-debug "$dest/$name"
    done
}
[[ "${BENCH_BINS:-0}" == 1 ]] && stage_benches "$DEST/bench" "$ROOT" replay report
if [[ -n "${BASE_REF:-}" ]]; then
    # One tree of the base for its shim and, with BENCH_BINS, its benchmarks and CLI. A fixed
    # folder: a base from before BENCH_SCRATCH writes its scratch journals under that target/.
    src=/tmp/vramledger-benchbase
    ref_tree "$BASE_REF" "$src"
    stage_shim base "$BASE_REF" "$src"
    if [[ "${BENCH_BINS:-0}" == 1 ]]; then
        # The report benchmark may be newer than that ref: the one staged above times its CLI.
        stage_benches "$DEST/bench/base" "$src" replay
        # That ref's CLI too: the report benchmark times it on the same events
        # (scripts/gpu_cpu_bench.sh), in the journal format of its own shim.
        (cd "$src" && CARGO_TARGET_DIR="$src/target" cargo build --release --bin vramledger >/dev/null 2>&1)
        cp "$src/target/release/vramledger" "$DEST/bench/base/vramledger"
        strip --strip-debug "$DEST/bench/base/vramledger"
        echo "bench_base_ref=$BASE_REF $(git rev-parse "$BASE_REF")" > "$DEST/bench/base/BUILD_INFO"
        echo "$src/target" > "$DEST/bench/base/SCRATCH"
    fi
    rm -rf "$src"
fi
if [[ -n "${PREV_REF:-}" ]]; then
    src="$(mktemp -d /tmp/vramledger-prev.XXXXXX)"
    ref_tree "$PREV_REF" "$src"
    stage_shim prev "$PREV_REF" "$src"
    rm -rf "$src"
fi

# The device tool carries at most 64 MiB (working tree included): drop debug info from the
# copies if they are large (the originals in target/ keep theirs).
size_kib=$(du -sk "$DEST" | cut -f1)
if (( size_kib > 40 * 1024 )) && command -v strip >/dev/null; then
    strip --strip-debug "$DEST/libvramledger.so" "$DEST/vramledger"
    for extra in base prev; do
        [[ -f "$DEST/$extra/libvramledger.so" ]] && strip --strip-debug "$DEST/$extra/libvramledger.so"
    done
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
