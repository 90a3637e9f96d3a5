#!/usr/bin/env python3
"""Bytes per event of journals: the bytes a journal uses (its file size less a zero tail of
grown chunks, for writers that leave one) over its records, and over its alloc/free records.

    scripts/bench_journal_stats.py CLI LABEL JOURNAL_DIR

CLI is a vramledger binary (its `dump` counts the records; it reads every format). Prints
    journal LABEL: files=F used_bytes=B records=R alloc_free=A bytes_per_record=X
        bytes_per_alloc_free_record=Y (Y counts every byte, over alloc/free records alone)
    attribution LABEL: KIND MODULE OWNER COUNT, ...
(the allocating records by the module and owner they were attributed to: the same for two
builds of the shim on one workload, or the faster one attributes differently)
"""
import collections
import json
import os
import subprocess
import sys


def used_bytes(path):
    with open(path, "rb") as f:
        data = f.read()
    end = len(data)
    while end > 0 and data[end - 1] == 0:
        end -= 1
    return (end + 7) // 8 * 8


def main():
    cli, label, folder = sys.argv[1], sys.argv[2], sys.argv[3]
    files = []
    for root, _, names in os.walk(folder):
        files += [os.path.join(root, n) for n in names if n.endswith(".vlj")]
    used = records = alloc_free = 0
    who = collections.Counter()
    for f in files:
        used += used_bytes(f)
        out = subprocess.run([cli, "dump", f], capture_output=True, text=True).stdout
        for line in out.splitlines()[1:]:
            records += 1
            rec = json.loads(line)
            kind = rec.get("kind")
            if kind in ("alloc", "free", "host_alloc", "host_free"):
                alloc_free += 1
            if kind in ("alloc", "host_alloc", "vmm_create", "va_reserve"):
                module = rec.get("module", "").rsplit("/", 1)[-1] or "-"
                who[(kind, module, rec.get("owner", "-"))] += 1
    per = used / records if records else 0
    per_af = used / alloc_free if alloc_free else 0
    print(
        f"journal {label}: files={len(files)} used_bytes={used} records={records} "
        f"alloc_free={alloc_free} bytes_per_record={per:.1f} "
        f"bytes_per_alloc_free_record={per_af:.1f}"
    )
    parts = [f"{k} {m} {o} {n}" for (k, m, o), n in sorted(who.items())]
    print(f"attribution {label}: " + (", ".join(parts) or "none"))


if __name__ == "__main__":
    main()
