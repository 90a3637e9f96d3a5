#!/usr/bin/env python3
"""Compares what a workload printed at its checkpoints with what its journal says.

    check_journal.py --stdout WORKLOAD_STDOUT --journal DUMP.ndjson [--name LABEL]

WORKLOAD_STDOUT holds the workload's `VRAMLEDGER_CHECK {json}` lines (examples/
vramledger_marks.py); DUMP.ndjson is `vramledger dump <journal>` of ONE process. Only the
CHECK lines of that process (same pid as the journal header) are used.

For every checkpoint it prints:
  * torch-owned live bytes on the checkpoint's device (the `live` records written right after
    the `stage` record "checkpoint:<name>", owners torch + torch_graph_pool, mem device)
    against the memory_reserved figure the program printed;
  * the free-memory samples around the checkpoint (the program's own cuMemGetInfo_v2 record,
    the library's vramledger_sample, NVML) against the program's own free reading;
  * the library's live bytes per owner, and per-module live bytes replayed from the
    alloc/free/VMM records up to that point (libcublas, libnccl, libdirectalloc, ...).
Then per-module totals for the whole process.

Exit status: 0 when torch-owned bytes == reserved at every checkpoint of this process (or the
process printed no checkpoint), 1 when any differs or a checkpoint has no stage record in the
journal, 3 when the input cannot be used. No expected number is built in: everything is the
program's own reading against the journal's.
"""

import argparse
import json
import os
import sys
from collections import OrderedDict, defaultdict

CHECK_PREFIX = "VRAMLEDGER_CHECK "
TORCH_OWNERS = ("torch", "torch_graph_pool")
PROGRAM_MEMINFO_APIS = ("cuMemGetInfo_v2", "cuMemGetInfo", "cudaMemGetInfo")
SAMPLE_API = "vramledger_sample"
# Records the library writes as part of one checkpoint, right after the stage record.
SNAPSHOT_KINDS = ("meminfo", "live", "nvml_sample", "pool_sample")
MiB = float(1 << 20)


def mib(n):
    return "%.2f MiB" % (n / MiB)


def signed_bytes(n):
    return "%+d B (%+.2f MiB)" % (n, n / MiB)


def read_checks(path):
    checks = []
    with open(path, errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.startswith(CHECK_PREFIX):
                continue
            try:
                c = json.loads(line[len(CHECK_PREFIX):])
            except ValueError as e:
                print("warning: %s:%d: unreadable CHECK line (%s)" % (path, lineno, e))
                continue
            checks.append(c)
    return checks


def read_dump(path):
    header = None
    records = []
    bad = 0
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except ValueError:
                bad += 1
                continue
            if not isinstance(r, dict):
                bad += 1
                continue
            if r.get("kind") == "header" and header is None and not records:
                header = r
                continue
            records.append(r)
    return header, records, bad


def header_pid(header):
    if not header:
        return None
    pairs = header.get("pairs") or {}
    for key in ("pid", "process_id"):
        v = pairs.get(key, header.get(key))
        if v is not None:
            try:
                return int(str(v).strip())
            except ValueError:
                pass
    return None


def stage_name(r):
    """A stage record's name: the first line of its text (a log line may follow)."""
    return str(r.get("text") or r.get("stage") or "").split("\n", 1)[0].strip()


def module_name(r):
    m = r.get("module") or ""
    return os.path.basename(m) if m else "<none>"


class Replay:
    """Live physical bytes per (device, module, owner, mem), from alloc/free/VMM records."""

    def __init__(self):
        self.allocs = {}  # addr -> (device, module, owner, mem, size)
        self.handles = {}  # handle -> dict
        self.maps = {}  # addr -> handle
        self.unmatched_frees = 0
        self.totals = defaultdict(lambda: defaultdict(int))  # module -> counter

    def _handle_done(self, h):
        st = self.handles.get(h)
        if st is not None and st["refs"] <= 0 and st["maps"] <= 0:
            del self.handles[h]

    def apply(self, r):
        k = r.get("kind")
        mod = module_name(r)
        size = int(r.get("size") or 0)
        addr = r.get("addr")
        handle = r.get("handle")
        tot = self.totals[mod]
        if k in ("alloc", "host_alloc"):
            self.allocs[addr] = (r.get("device"), mod, r.get("owner"), r.get("mem"), size)
            tot[k + "_count"] += 1
            tot[k + "_bytes"] += size
        elif k in ("free", "host_free"):
            tot[k + "_count"] += 1
            if self.allocs.pop(addr, None) is None:
                self.unmatched_frees += 1
        elif k == "alloc_failed":
            tot["alloc_failed_count"] += 1
            tot["alloc_failed_bytes"] += size
        elif k == "vmm_create":
            self.handles[handle] = {
                "device": r.get("device"), "module": mod, "owner": r.get("owner"),
                "mem": r.get("mem"), "size": size, "refs": 1, "maps": 0,
            }
            tot["vmm_create_count"] += 1
            tot["vmm_create_bytes"] += size
        elif k == "vmm_retain":
            if handle in self.handles:
                self.handles[handle]["refs"] += 1
        elif k == "vmm_release":
            tot["vmm_release_count"] += 1
            if handle in self.handles:
                self.handles[handle]["refs"] -= 1
                self._handle_done(handle)
        elif k == "vmm_map":
            tot["vmm_map_count"] += 1
            self.maps[addr] = handle
            if handle in self.handles:
                self.handles[handle]["maps"] += 1
        elif k == "vmm_unmap":
            h = self.maps.pop(addr, None)
            if h in self.handles:
                self.handles[h]["maps"] -= 1
                self._handle_done(h)
        elif k == "register":
            tot["register_count"] += 1
        elif k == "warning":
            tot["warning_count"] += 1

    def live(self, device=None, mem="device"):
        out = defaultdict(int)  # (module, owner) -> bytes
        for dev, mod, owner, m, size in self.allocs.values():
            if m == mem and (device is None or dev == device):
                out[(mod, owner)] += size
        for st in self.handles.values():
            if st["mem"] == mem and (device is None or st["device"] == device):
                out[(st["module"], st["owner"])] += st["size"]
        return out


def snapshot_after(records, i):
    """The library's checkpoint snapshot that follows the stage record at index i."""
    stage = records[i]
    tid = stage.get("tid")
    samples, lives, nvml = [], [], []
    seen_live = set()
    j = i + 1
    while j < len(records):
        r = records[j]
        k = r.get("kind")
        if k == "stage":
            break
        if k in SNAPSHOT_KINDS:
            if k == "meminfo" and r.get("api") == SAMPLE_API:
                samples.append(r)
            elif k == "live":
                key = (r.get("device"), r.get("owner"), r.get("mem"))
                if key in seen_live:
                    break  # a second snapshot begins
                seen_live.add(key)
                lives.append(r)
            elif k == "nvml_sample":
                nvml.append(r)
            elif k == "meminfo" and r.get("tid") == tid:
                break  # the program's next own reading: the snapshot is over
        elif tid is not None and r.get("tid") == tid:
            break  # the program's thread moved on
        j += 1
    return samples, lives, nvml


def last_program_meminfo(records, i, device):
    """The program's own last free-memory reading before the stage record at index i
    (same device when the record says which; else the last one of any device)."""
    fallback = None
    for j in range(i - 1, max(-1, i - 400), -1):
        r = records[j]
        if r.get("kind") == "stage":
            break
        if r.get("kind") == "meminfo" and r.get("api") in PROGRAM_MEMINFO_APIS:
            if r.get("device") in (device, None):
                return r
            if fallback is None:
                fallback = r
    return fallback


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stdout", required=True, help="the workload's stdout (VRAMLEDGER_CHECK lines)")
    ap.add_argument("--journal", required=True, help="NDJSON dump of one process's journal")
    ap.add_argument("--name", default="", help="label for the report")
    args = ap.parse_args()

    checks = read_checks(args.stdout)
    header, records, bad = read_dump(args.journal)
    label = args.name or os.path.basename(args.journal)
    pid = header_pid(header)
    print("== %s: journal %s, %d records, pid %s" % (
        label, os.path.basename(args.journal), len(records), pid if pid is not None else "?"))
    if header:
        pairs = header.get("pairs") or {}
        cmd = str(pairs.get("cmdline", "")).replace("\0", " ").strip()[:160]
        print("   cmdline: %s" % cmd)
    if bad:
        print("   warning: %d unreadable NDJSON lines skipped" % bad)
    if header is None:
        print("   warning: no header record")

    if pid is not None:
        mine = [c for c in checks if c.get("pid") == pid]
    else:
        pids = {c.get("pid") for c in checks}
        if len(pids) > 1:
            print("VERDICT: UNUSABLE (journal has no pid and the stdout holds %d processes)" % len(pids))
            return 3
        mine = checks
        print("   warning: journal header has no pid; using all %d CHECK lines" % len(mine))

    stage_idx = [i for i, r in enumerate(records)
                 if r.get("kind") == "stage" and stage_name(r).startswith("checkpoint:")]
    print("   checkpoints: %d printed by this pid, %d checkpoint stage records in journal" % (
        len(mine), len(stage_idx)))

    replay = Replay()
    applied = 0
    failures = []
    cursor = 0  # next stage_idx position to search from
    for c in mine:
        name = c.get("name")
        dev = c.get("device")
        want = "checkpoint:%s" % name
        found = None
        for pos in range(cursor, len(stage_idx)):
            if stage_name(records[stage_idx[pos]]) == want:
                found = pos
                break
        if found is None:
            print("-- checkpoint %s (device %s): NO STAGE RECORD in journal -> FAIL" % (name, dev))
            failures.append(name)
            continue
        cursor = found + 1
        i = stage_idx[found]
        while applied < i:
            replay.apply(records[applied])
            applied += 1

        samples, lives, nvml = snapshot_after(records, i)
        by_owner = OrderedDict()
        torch_bytes = 0
        for r in lives:
            if r.get("mem") != "device" or r.get("device") != dev:
                continue
            owner = r.get("owner")
            by_owner[owner] = by_owner.get(owner, 0) + int(r.get("size") or 0)
            if owner in TORCH_OWNERS:
                torch_bytes += int(r.get("size") or 0)
        reserved = int(c.get("reserved", -1))
        ok = torch_bytes == reserved
        verdict = "OK" if ok else "MISMATCH"
        if not ok:
            failures.append(name)
        print("-- checkpoint %s (device %s): torch-owned %d (%s) vs reserved %d (%s): %s, diff %s" % (
            name, dev, torch_bytes, mib(torch_bytes), reserved, mib(reserved), verdict,
            signed_bytes(torch_bytes - reserved)))
        if not lives:
            print("   no live records after the stage record")
        parts = ["%s=%d" % (o, b) for o, b in by_owner.items()]
        print("   journal live (device %s, mem device): %s" % (dev, ", ".join(parts) or "-"))
        print("   program: allocated %d, free %d, total %d" % (
            int(c.get("allocated", 0)), int(c.get("free", 0)), int(c.get("total", 0))))

        free = int(c.get("free", 0))
        prog = last_program_meminfo(records, i, dev)
        if prog is not None:
            pf = int(prog.get("arg0") or 0)
            print("   free: program's own %s record %d (%s vs printed)" % (
                prog.get("api"), pf, "equal" if pf == free else signed_bytes(pf - free)))
        else:
            print("   free: no cuMemGetInfo record of the program before the stage record")
        for s in samples:
            if s.get("device") != dev:
                continue
            sf = int(s.get("arg0") or 0)
            print("   free: vramledger_sample after stage %d (%s vs printed), total %s" % (
                sf, signed_bytes(sf - free), s.get("arg1")))
        for s in nvml:
            if s.get("device") != dev:
                continue
            print("   nvml: device free %s, total %s, process used %s" % (
                s.get("arg0"), s.get("arg1"), s.get("arg2")))

        mods = replay.live(device=dev)
        if mods:
            rows = sorted(mods.items(), key=lambda kv: (-kv[1], kv[0]))
            print("   replayed live by module/owner: %s" % ", ".join(
                "%s/%s=%d" % (m, o, b) for (m, o), b in rows if b))
            replay_torch = sum(b for (m, o), b in mods.items() if o in TORCH_OWNERS)
            if replay_torch != torch_bytes:
                print("   note: replayed torch-owned %d differs from the live records by %s" % (
                    replay_torch, signed_bytes(replay_torch - torch_bytes)))

    while applied < len(records):
        replay.apply(records[applied])
        applied += 1

    print("   per-module totals (whole process):")
    for mod in sorted(replay.totals):
        t = replay.totals[mod]
        items = ", ".join("%s=%d" % (k, v) for k, v in sorted(t.items()) if v)
        if items:
            print("     %s: %s" % (mod, items))
    end_live = replay.live(device=None)
    if end_live:
        print("   live at end of journal (all devices): %s" % ", ".join(
            "%s/%s=%d" % (m, o, b) for (m, o), b in sorted(end_live.items()) if b))
    if replay.unmatched_frees:
        print("   note: %d frees of addresses with no alloc record" % replay.unmatched_frees)
    warnings = [r for r in records if r.get("kind") == "warning"]
    for w in warnings[:5]:
        print("   journal warning: %s" % str(w.get("text", ""))[:200])
    if len(warnings) > 5:
        print("   ... %d more warnings" % (len(warnings) - 5))

    if not mine:
        print("VERDICT: NO_CHECKPOINTS (this process printed none)")
        return 0
    if failures:
        print("VERDICT: FAIL (%d of %d checkpoints: %s)" % (len(failures), len(mine), ", ".join(failures)))
        return 1
    print("VERDICT: PASS (%d checkpoints, torch-owned == reserved at each)" % len(mine))
    return 0


if __name__ == "__main__":
    sys.exit(main())
