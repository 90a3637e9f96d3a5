#!/usr/bin/env python3
"""How the stdout tap's filter buckets (shim/src/hooks/tap_filter.rs, `bucket`) were chosen.

The filter puts every anchor of crates/engines/src/log/filter.rs in one of 8 buckets by its
first byte and, per anchor byte position, looks up which buckets a byte allows: both nibbles
at position 0, the low nibble alone at 1 and 2 (fewer shuffles per step). A line is handed to
the exact prefilter only where some bucket survives all three positions. This script models
that filter exactly, and searches bucket assignments for one under which ordinary serving
lines (below) have no candidate, and as few real log lines without an anchor as possible do.

    python3 scripts/tap_buckets.py [--tries N] [LOG ...]   (default logs: ../shared/logs/*.log)

It prints the current assignment's counts and the best one found. Anchors are read from the
Rust source, so the model follows the grammar's changes.
"""
import argparse
import glob
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEPTH = 3
LOW_ONLY = (False, True, True)  # positions whose high nibble is not looked up

SERVING = [
    b'INFO:     127.0.0.1:52344 - "POST /generate HTTP/1.1" 200 OK (request 8841, 412 tokens)\n',
    b"[2025-06-01 10:02:11 TP0] Decode batch. #running-req: 12, #token: 3301, token usage: 0.01, gen throughput (token/s): 812.44\n",
    b"[2025-06-01 10:02:11 TP0] Prefill batch. #new-seq: 1, #new-token: 128, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0\n",
    b'INFO:     127.0.0.1:40000 - "GET /health HTTP/1.1" 200 OK\n',
    b'(APIServer pid=123) INFO:     127.0.0.1:50866 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n',
]


def anchors():
    """{lead byte: [anchor bytes]} from filter.rs's `anchors` match."""
    src = (ROOT / "crates/engines/src/log/filter.rs").read_text()
    body = src[src.index("pub const fn anchors"):src.index("const LEAD")]
    out = {}
    for m in re.finditer(r"b'(.)' => &\[(.*?)\]", body, re.S):
        out[m.group(1).encode()[0]] = [
            s.encode().decode("unicode_escape").encode("latin-1")
            for s in re.findall(r'b"((?:[^"\\]|\\.)*)"', m.group(2))
        ]
    return out


def current_buckets(anch):
    """{lead byte: bucket} as tap_filter.rs's `bucket` says (its `_` arm for the rest)."""
    src = (ROOT / "shim/src/hooks/tap_filter.rs").read_text()
    body = src[src.index("const fn bucket"):src.index("const TABLES")]
    named = {}
    for m in re.finditer(r"((?:b'.'\s*\|?\s*)+)=> (\d+)", body):
        for lead in re.findall(r"b'(.)'", m.group(1)):
            named[lead.encode()[0]] = int(m.group(2))
    rest = int(re.search(r"_ => (\d+)", body).group(1))
    return {lead: named.get(lead, rest) for lead in anch}


def tables(assign, anch):
    t = [[[0] * 16, [0] * 16] for _ in range(DEPTH)]
    for lead, lst in anch.items():
        bit = 1 << assign[lead]
        for a in lst:
            for k in range(DEPTH):
                if k < len(a):
                    t[k][0][a[k] & 15] |= bit
                    t[k][1][a[k] >> 4] |= bit
                else:
                    for n in range(16):
                        t[k][0][n] |= bit
                        t[k][1][n] |= bit
    wild = [any(k >= len(a) for lst in anch.values() for a in lst) for k in range(DEPTH)]
    for k in range(DEPTH):
        if LOW_ONLY[k]:
            t[k][1] = [0xFF if wild[k] or h < 8 else 0 for h in range(16)]
    return t


def candidate(line, t):
    for i in range(len(line)):
        m = 0xFF
        for k in range(DEPTH):
            c = line[i + k] if i + k < len(line) else 0
            m &= t[k][0][c & 15] & t[k][1][c >> 4]
        if m:
            return True
    return False


def score(assign, anch, lines):
    t = tables(assign, anch)
    return sum(candidate(s, t) for s in SERVING), sum(candidate(l, t) for l in lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tries", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("logs", nargs="*")
    a = ap.parse_args()
    anch = anchors()
    every = [x for lst in anch.values() for x in lst]
    files = a.logs or sorted(glob.glob(str(ROOT.parent / "shared/logs/*.log")))
    lines = [l for f in files for l in open(f, "rb") if not any(x in l for x in every)]
    if not lines:
        sys.exit("tap_buckets: no log lines without an anchor (give LOG files)")
    cur = current_buckets(anch)
    print(f"{len(lines)} log lines without an anchor; current: serving lines with a candidate, log lines with one: {score(cur, anch, lines)}")
    rng = random.Random(a.seed)
    best = None
    for _ in range(a.tries):
        assign = {lead: rng.randrange(8) for lead in anch}
        s, n = score(assign, anch, lines)
        if s == 0 and (best is None or n < best[0]):
            best = (n, assign)
    if best:
        groups = {}
        for lead, b in best[1].items():
            groups.setdefault(b, []).append(chr(lead))
        print(f"best of {a.tries}: {best[0]} log lines with a candidate; buckets {dict(sorted(groups.items()))}")


if __name__ == "__main__":
    main()
