#!/usr/bin/env python3
"""Statistics for the allocation benchmarks (bench_h200.sh, bench_fake.sh).

    bench_stats.py LABEL "PLAIN_NS ..." "HOOKED_NS ..."

The runs were made alternately (plain, hooked, plain, hooked, ...): the i-th plain and the
i-th hooked run form one pair. Prints the medians, the ns the hook adds per
cuMemAlloc_v2+cuMemFree_v2 pair, and the median of the per-pair ratios hooked/plain.
"""
import statistics
import sys


def main():
    label = sys.argv[1]
    plain = [float(x) for x in sys.argv[2].split()]
    hooked = [float(x) for x in sys.argv[3].split()]
    if not plain or not hooked:
        print("%s: no numbers (plain %d, hooked %d runs)" % (label, len(plain), len(hooked)))
        return 1
    n = min(len(plain), len(hooked))
    ratios = [hooked[i] / plain[i] for i in range(n) if plain[i] > 0]
    mp, mh = statistics.median(plain), statistics.median(hooked)
    print("%s: plain pair_ns runs   = %s" % (label, " ".join("%.1f" % x for x in plain)))
    print("%s: hooked pair_ns runs  = %s" % (label, " ".join("%.1f" % x for x in hooked)))
    print("%s: median plain pair_ns = %.1f" % (label, mp))
    print("%s: median hooked pair_ns = %.1f" % (label, mh))
    print("%s: ns added per pair (median hooked - median plain) = %.1f" % (label, mh - mp))
    if ratios:
        print("%s: median ratio hooked/plain (per alternating pair) = %.3f" % (
            label, statistics.median(ratios)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
