#!/usr/bin/env bash
# Every test of the workspace, ending with one line: `N passed, N failed, N skipped`.
#
# The shim and the fake driver are cdylibs that the integration tests load, so the workspace is
# built first. A test that cannot run here (no ../shared/logs, no chromium, ...) records itself
# as skipped with its reason (tests/support/skip.rs): it is counted as skipped, never as passed,
# and the reasons are listed before the count. With VRAMLEDGER_NO_SKIP=1 (CI, where every input
# exists) a skip is a failure. Arguments go to `cargo test`: `-p NAME` tests that package alone
# (e.g. `scripts/test.sh -p vramledger-format -- live`), else the whole workspace.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work="$(mktemp -d "${TMPDIR:-/tmp}/vramledger-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export VRAMLEDGER_SKIP_LOG="$work/skipped"
: >"$VRAMLEDGER_SKIP_LOG"

if ! cargo build --workspace; then
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
# The whole workspace unless the arguments name packages (`-p NAME`, `--package NAME`).
scope=(--workspace)
for a in "$@"; do
    [[ $a == -- ]] && break
    [[ $a == -p || $a == -p?* || $a == --package || $a == --package=* ]] && scope=()
done
cargo test "${scope[@]}" --no-fail-fast "$@" 2>&1 | tee "$work/out"
rc=${PIPESTATUS[0]}

# libtest prints per test binary: "test result: ok. 12 passed; 0 failed; 1 ignored; ...".
read -r passed failed ignored < <(awk '
    /^test result:/ {
        for (i = 1; i <= NF; i++) {
            if ($(i) ~ /^passed;?$/) p += $(i - 1)
            if ($(i) ~ /^failed;?$/) f += $(i - 1)
            if ($(i) ~ /^ignored;?$/) g += $(i - 1)
        }
    }
    END { print p + 0, f + 0, g + 0 }' "$work/out")
# A test that recorded a skip returned early and was counted as passed by libtest.
sort -u -t$'\t' -k1,1 "$VRAMLEDGER_SKIP_LOG" >"$work/skips"
skipped_runtime=$(grep -c . "$work/skips" || true)
passed=$((passed - skipped_runtime))
skipped=$((ignored + skipped_runtime))
if ((rc != 0 && failed == 0)); then
    # cargo failed without a failing test (a build error of a test target, a crash).
    failed=1
fi
if ((skipped_runtime > 0)); then
    echo
    echo "skipped ($skipped_runtime, with why):"
    sed 's/\t/: /; s/^/  /' "$work/skips"
fi
echo
echo "$passed passed, $failed failed, $skipped skipped"
((rc == 0 && failed == 0))
