#!/usr/bin/env bash
# Byte-compares two builds of the CLI on the reader's verbs: `report` (text, --json, --bytes,
# --html), `snapshot` (--at-peak, --at-end, --at-oom; json, memory-viz, perfetto) over every
# journal and journal folder of tests/data, and `diff` (text, --json) over every pair of them;
# then, with BIG (a large journal or run folder, e.g. the one `cargo bench --bench report --
# 10000000 --keep DIR` writes), the same verbs on it. Prints each comparison that differs
# (stdout, stderr or exit code) and the counts; exits 1 if any differ.
#
#     scripts/compare_cli.sh OLD_CLI NEW_CLI [BIG]
set -u
if [ $# -lt 2 ]; then
    echo "usage: $0 OLD_CLI NEW_CLI [BIG_JOURNAL_OR_FOLDER]" >&2
    exit 2
fi
old=$1
new=$2
big=${3:-}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/compare_cli.XXXXXX)
trap 'rm -rf "$work"' EXIT

same=0
differ=0

# One run of one CLI: stdout, stderr (the CLI's own name replaced), exit code, and the file it
# wrote (if any) into $work/<tag>.*
run_one() {
    local tag=$1 cli=$2
    shift 2
    # The same output path for both CLIs (messages name it).
    local out="$work/out.file"
    rm -f "$out" "$work/$tag.file"
    local args=() arg
    for arg in "$@"; do
        args+=("${arg//@OUT@/$out}")
    done
    "$cli" "${args[@]}" >"$work/$tag.stdout" 2>"$work/$tag.stderr"
    echo $? >"$work/$tag.rc"
    sed -i "s#$cli#CLI#g" "$work/$tag.stderr"
    if [ -e "$out" ]; then mv "$out" "$work/$tag.file"; else : >"$work/$tag.file"; fi
}

compare() {
    run_one old "$old" "$@"
    run_one new "$new" "$@"
    local bad=""
    for part in stdout stderr rc file; do
        if ! cmp -s "$work/old.$part" "$work/new.$part"; then
            bad="$bad $part"
        fi
    done
    if [ -n "$bad" ]; then
        differ=$((differ + 1))
        echo "DIFFERS ($bad ): $*"
    else
        same=$((same + 1))
    fi
}

report_verbs() {
    local p=$1
    compare report "$p"
    compare report --json "$p"
    compare report --bytes "$p"
    compare report --html -o @OUT@ "$p"
}

snapshot_verbs() {
    local p=$1
    for at in --at-peak --at-end --at-oom; do
        for fmt in json memory-viz perfetto; do
            compare snapshot "$at" --format "$fmt" -o @OUT@ "$p"
        done
    done
}

mapfile -t inputs < <(
    cd "$root" || exit
    {
        find tests/data -name '*.vlj'
        find tests/data -name '*.vlj' -printf '%h\n'
    } | sort -u
)
for p in "${inputs[@]}"; do
    report_verbs "$root/$p"
    snapshot_verbs "$root/$p"
done
for a in "${inputs[@]}"; do
    for b in "${inputs[@]}"; do
        compare diff "$root/$a" "$root/$b"
        compare diff --json "$root/$a" "$root/$b"
    done
done
if [ -n "$big" ]; then
    report_verbs "$big"
    for at in --at-peak --at-end; do
        compare snapshot "$at" -o @OUT@ "$big"
    done
    compare diff --json "$big" "$big"
    compare diff "$big" "$big"
fi
echo "compare_cli: $same same, $differ differ"
[ "$differ" -eq 0 ]
