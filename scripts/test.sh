#!/usr/bin/env bash
# Every test of the workspace. The shim and the fake driver are cdylibs that the
# integration tests load, so the workspace is built first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --workspace
cargo test --workspace "$@"
