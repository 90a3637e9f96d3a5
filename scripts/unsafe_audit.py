#!/usr/bin/env python3
"""Counts the `unsafe { ... }` blocks of Rust sources and how many say why they hold.

    scripts/unsafe_audit.py [DIR ...]        (default: shim/src)

A block is explained when the comment lines right above the line it starts on (nothing else
between) hold a `// SAFETY:` (or `// SAFETY (caller):`) line. `unsafe fn`, `unsafe extern`
and `unsafe impl` are declarations, not blocks. Prints every unexplained block, then the
count; exits 1 when fewer than 95% are explained.
"""
import pathlib
import re
import sys

BLOCK = re.compile(r"\bunsafe\s*\{")
SAFETY = re.compile(r"//\s*SAFETY\b")


def audit(path):
    lines = path.read_text().split("\n")
    total = explained = 0
    missing = []
    for i, line in enumerate(lines):
        code = line.split("//", 1)[0]
        n = len(BLOCK.findall(code))
        if not n:
            continue
        total += n
        ok = bool(SAFETY.search(line))
        j = i - 1
        while not ok and j >= 0 and lines[j].strip().startswith("//"):
            ok = bool(SAFETY.search(lines[j]))
            j -= 1
        if ok:
            explained += n
        else:
            missing.append(f"{path}:{i + 1}: {line.strip()}")
    return total, explained, missing


def main():
    dirs = [pathlib.Path(d) for d in (sys.argv[1:] or ["shim/src"])]
    total = explained = 0
    for d in dirs:
        for f in sorted(d.rglob("*.rs")):
            t, e, missing = audit(f)
            total += t
            explained += e
            for m in missing:
                print(m)
    share = 100.0 * explained / total if total else 100.0
    print(f"unsafe blocks: {total}, with a SAFETY line: {explained} ({share:.1f}%)")
    return 0 if share >= 95.0 else 1


if __name__ == "__main__":
    sys.exit(main())
