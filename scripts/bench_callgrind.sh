#!/usr/bin/env bash
# Instructions per cuMemAlloc_v2+cuMemFree_v2 pair under callgrind (exact, unlike wall time on a
# busy machine): the instruction count of N2 pairs minus that of N1 pairs, over N2 - N1, so
# start-up and the journal's opening cancel out. Through the driver (bench_fake.c) and through
# the runtime (bench_rt.c with the fake libcudart), plain and with each library given.
#
#   scripts/bench_callgrind.sh DRIVER_DIR LIB...    (DRIVER_DIR: fake-driver links)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DRIVER_DIR="$1"
shift
TMP="$(mktemp -d /tmp/vramledger-benchcg.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
gcc -O2 -o "$TMP/bench_fake" "$HERE/bench_fake.c" -ldl
gcc -O2 -o "$TMP/bench_rt" "$HERE/bench_rt.c" -ldl
CLIENTS="$HERE/../tests/clients"
gcc -O2 -fomit-frame-pointer -fPIC -shared -Wl,-soname,libcudart.so.13 -I"$CLIENTS" \
    -o "$TMP/libcudart.so.13" "$CLIENTS/cudart.c" -ldl -lpthread
export LD_LIBRARY_PATH="$DRIVER_DIR:$TMP"
N1=2000
N2=12000
count() { # preload-or-empty, then the command
    local pre="$1"
    shift
    rm -rf "$TMP/j"
    LD_PRELOAD="$pre" VRAMLEDGER_OUT="$TMP/j" valgrind --tool=callgrind \
        --callgrind-out-file="$TMP/cg.out" "$@" 2>&1 >/dev/null | sed -n 's/.*refs: *//p' | tr -d ,
}
per_pair() {
    local pre="$1" what="$2" a b
    if [[ "$what" == driver ]]; then
        a=$(count "$pre" "$TMP/bench_fake" $N1)
        b=$(count "$pre" "$TMP/bench_fake" $N2)
        # bench_fake warms up with min(pairs/10, 1000) pairs more.
        echo $(((b - a) / (N2 + 1000 - N1 - 200)))
    else
        a=$(count "$pre" "$TMP/bench_rt" "$TMP/libcudart.so.13" x 2 $N1 2097152 hooked)
        b=$(count "$pre" "$TMP/bench_rt" "$TMP/libcudart.so.13" x 2 $N2 2097152 hooked)
        echo $(((b - a) / (N2 - N1)))
    fi
}
for what in driver runtime; do
    plain=$(per_pair "" $what)
    echo "bench_callgrind: $what plain: $plain instructions per pair"
    for lib in "$@"; do
        n=$(per_pair "$(realpath "$lib")" $what)
        echo "bench_callgrind: $what $lib: $n instructions per pair ($((n - plain)) added)"
    done
done
