#!/usr/bin/env python3
"""Checks `vramledger report --json` of an SGLang-shaped run against what the program printed.

    check_report.py REPORT_JSON PROGRAM_OUTPUT_TXT

REPORT_JSON is `vramledger report --json RUN_DIR` (schema "vramledger.report/1");
PROGRAM_OUTPUT_TXT is the program's combined stdout/stderr, holding its
`VRAMLEDGER_SGLANG {json}` lines (examples/sglang_shape.py): per rank and SGLang line
(dist_init_end, load_weight_begin, load_weight_end, kv_cache_allocated, memory_pool_end,
capture_begin, capture_end, summary) the exact bytes behind the printed GiB figures.

Report processes are matched to ranks by pid (the JSON lines carry it), else by the report's
rank, else (one rank, one process with stages) by elimination. For every matched process it
prints, per stage of the rank's device, vramledger's device delta against the program's own
mem usage for that stage, and checks:
  (a) the expected stages appear, in order: startup, dist_init, weight_load, kv_pool,
      post_kv_init, graph_capture* (graph_capture or graph_capture_decode), post_capture, and
      serving where that rank printed the summary (SGLang prints it on TP0 only);
  (b) start free == sum of stage deltas + end free, to the byte, on every device of every
      process in the report (and the report's own sum and `balanced` agree with its stages);
  (c) |device delta - printed mem usage| <= 0.01 GiB for dist_init, weight_load and the
      graph capture stage (exact bytes from the JSON lines);
  (d) the kv_pool stage's torch bytes >= the K + V bytes the program allocated;
  (e) torch_graph_pool > 0 in the graph capture stage(s).
Rows marked "derived" (kv_pool, post_kv_init, post_capture) compare with a difference of two
printed avail figures; they are shown, not checked. Boundary free values (the library's sample
at a stage boundary against the avail the program measured just before printing that line)
are shown too, with a warning past 0.01 GiB.

Prints `CHECK_REPORT: PASS` (exit 0) or `CHECK_REPORT: FAIL (n problems)` (exit 1); 2 for a
wrong command line.
"""

import json
import sys

PREFIX = "VRAMLEDGER_SGLANG "
GIB = float(1 << 30)
MIB = float(1 << 20)
TOLERANCE_BYTES = int(0.01 * (1 << 30))
OWNERS = ("torch", "torch_graph_pool", "nccl", "direct", "vmm", "context", "unattributed")
OWNER_SHORT = {"torch": "torch", "torch_graph_pool": "graph", "nccl": "nccl", "direct": "direct",
               "vmm": "vmm", "context": "ctx", "unattributed": "unattr"}
EXPECTED = ["startup", "dist_init", "weight_load", "kv_pool", "post_kv_init", "graph_capture*",
            "post_capture", "serving"]
CHECKED_USAGE = ("dist_init", "weight_load", "graph_capture*")

problems = []
warnings = []


def fail(msg):
    problems.append(msg)
    print("FAIL: " + msg)


def warn(msg):
    warnings.append(msg)
    print("warning: " + msg)


def is_capture(name):
    return isinstance(name, str) and name.startswith("graph_capture")


def matches(pattern, name):
    return is_capture(name) if pattern == "graph_capture*" else pattern == name


def gib(n):
    return "-" if n is None else "%.2f" % (n / GIB)


def sgib(n):
    return "-" if n is None else "%+.4f" % (n / GIB)


def mib(n):
    return "-" if n is None else "%.1f" % (n / MIB)


def as_int(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v == v:
        return int(v)
    return None


# ---------------------------------------------------------------- inputs


def read_program(path):
    """{(rank, line): record}, pids {pid: rank}, and the number of JSON lines read."""
    records, pids, count = {}, {}, 0
    with open(path, errors="replace") as f:
        text = f.read()
    decoder = json.JSONDecoder()
    for lineno, line in enumerate(text.splitlines(), 1):
        pos = line.find(PREFIX)
        if pos < 0:
            continue
        try:
            rec, _ = decoder.raw_decode(line[pos + len(PREFIX):])
        except ValueError as e:
            warn("%s:%d: unreadable %sline (%s)" % (path, lineno, PREFIX, e))
            continue
        if not isinstance(rec, dict) or "line" not in rec:
            warn("%s:%d: %sline without 'line'" % (path, lineno, PREFIX))
            continue
        count += 1
        rank = as_int(rec.get("rank"))
        key = (rank, rec["line"])
        if key in records:
            warn("rank %s printed %s twice; the first is used" % key)
            continue
        records[key] = rec
        pid = as_int(rec.get("pid"))
        if pid is not None:
            if pids.get(pid, rank) != rank:
                warn("pid %d printed lines for ranks %s and %s" % (pid, pids[pid], rank))
            pids.setdefault(pid, rank)
    return records, pids, count


def load_report(path):
    with open(path) as f:
        return json.load(f)


# ---------------------------------------------------------------- per device


def stage_list(dev):
    stages = dev.get("stages")
    if not isinstance(stages, list):
        return []
    return [s for s in stages if isinstance(s, dict)]


def owner_bytes(stage, owner):
    by = stage.get("by_owner")
    if not isinstance(by, dict):
        return None
    return as_int(by.get(owner, 0))


def check_reconciliation(label, dev):
    """(b), on every device of every process."""
    stages = stage_list(dev)
    rec = dev.get("reconciliation") if isinstance(dev.get("reconciliation"), dict) else {}
    deltas = [as_int(s.get("device_delta_bytes")) for s in stages]
    computed_sum = sum(d for d in deltas if d is not None)
    start = as_int(rec.get("start_free_bytes"))
    end = as_int(rec.get("end_free_bytes"))
    total = as_int(rec.get("sum_stage_deltas_bytes"))
    if start is None and stages:
        start = as_int(stages[0].get("start_free_bytes"))
    if end is None and stages:
        end = as_int(stages[-1].get("end_free_bytes"))
    if total is None:
        total = computed_sum
    print("  reconciliation: start_free=%s end_free=%s sum_stage_deltas=%s unattributed=%s "
          "balanced=%s" % (start, end, total, rec.get("unattributed_bytes"), rec.get("balanced")))
    if not stages:
        fail("%s: no stages" % label)
        return
    if None in deltas:
        fail("%s: a stage has no device_delta_bytes" % label)
    if start is None or end is None:
        fail("%s: start or end free memory unknown (start_free=%s, end_free=%s)"
             % (label, start, end))
        return
    if start != total + end:
        fail("%s: start_free %d != sum_stage_deltas %d + end_free %d (off by %+d B)"
             % (label, start, total, end, start - total - end))
    if total != computed_sum:
        fail("%s: sum_stage_deltas_bytes %d != sum of the stages' device_delta_bytes %d"
             % (label, total, computed_sum))
    balanced = rec.get("balanced")
    if balanced is not None and bool(balanced) != (start == total + end):
        fail("%s: report says balanced=%s but start_free %s vs sum+end %s"
             % (label, balanced, start, total + end))
    # Stages should chain: one stage's end is the next one's start.
    for a, b in zip(stages, stages[1:]):
        ea, sb = as_int(a.get("end_free_bytes")), as_int(b.get("start_free_bytes"))
        if ea is not None and sb is not None and ea != sb:
            warn("%s: stage %s ends at free %d but %s starts at %d"
                 % (label, a.get("name"), ea, b.get("name"), sb))


def check_order(label, names, expected):
    """(a): `expected` (patterns) appear in `names`, in that order."""
    i = 0
    missing = []
    for pat in expected:
        j = i
        while j < len(names) and not matches(pat, names[j]):
            j += 1
        if j == len(names):
            missing.append(pat)
        else:
            i = j + 1
    if missing:
        fail("%s: expected stages missing or out of order: %s (stages: %s)"
             % (label, ", ".join(missing), " > ".join(names)))
    extra = [n for n in names if not any(matches(p, n) for p in EXPECTED)]
    if extra:
        print("  note: stages not in the expected list: %s" % ", ".join(extra))


def program_usage(rank, recs):
    """{stage pattern: (bytes, source)} from the rank's JSON lines."""
    def get(line, field):
        r = recs.get((rank, line))
        return None if r is None else as_int(r.get(field))

    def diff(a, b):
        return None if a is None or b is None else a - b

    return {
        "dist_init": (get("dist_init_end", "mem_usage_bytes"), "printed"),
        "weight_load": (get("load_weight_end", "mem_usage_bytes"), "printed"),
        "kv_pool": (diff(get("load_weight_end", "avail_bytes"),
                         get("memory_pool_end", "avail_bytes")), "derived"),
        "post_kv_init": (diff(get("memory_pool_end", "avail_bytes"),
                              get("capture_begin", "avail_bytes")), "derived"),
        "graph_capture*": (get("capture_end", "mem_usage_bytes"), "printed"),
        "post_capture": (diff(get("capture_end", "avail_bytes"),
                              get("summary", "avail_bytes")), "derived"),
    }


def sources(stage):
    """Where the library's boundary free values come from (sample / derived / unknown)."""
    a, b = stage.get("start_free_source"), stage.get("end_free_source")
    return "-" if a is None and b is None else "%s/%s" % (a, b)


def usage_for(name, usage):
    for pat, val in usage.items():
        if matches(pat, name):
            return pat, val
    return None, (None, None)


# Program lines whose avail was measured right before a stage boundary of the library.
BOUNDARIES = [
    ("load_weight_begin", "weight_load", "start_free_bytes"),
    ("load_weight_end", "weight_load", "end_free_bytes"),
    ("memory_pool_end", "kv_pool", "end_free_bytes"),
    ("capture_begin", "graph_capture*", "start_free_bytes"),
    ("capture_end", "graph_capture*", "end_free_bytes"),
    ("summary", "post_capture", "end_free_bytes"),
]


def check_rank_device(label, rank, dev, recs):
    stages = stage_list(dev)
    names = [s.get("name") for s in stages]
    expect = [p for p in EXPECTED if p != "serving" or (rank, "summary") in recs]
    check_order(label, names, expect)

    usage = program_usage(rank, recs)
    head = ("  %-22s %9s %9s %10s %10s %10s %-8s" % ("stage", "start", "end", "delta", "program",
                                                      "diff", "source")
            + "".join(" %8s" % OWNER_SHORT[o] for o in OWNERS)
            + "   engine(mem usage GiB)   free start/end from")
    print("  GiB for start/end/delta/program/diff, MiB for owners")
    print(head)
    for s in stages:
        name = s.get("name")
        delta = as_int(s.get("device_delta_bytes"))
        pat, (prog, source) = usage_for(name, usage)
        d = None if prog is None or delta is None else delta - prog
        engine = s.get("engine") if isinstance(s.get("engine"), dict) else {}
        eng_usage = engine.get("mem_usage_gib")
        print("  %-22s %9s %9s %10s %10s %10s %-8s" % (
            name, gib(as_int(s.get("start_free_bytes"))), gib(as_int(s.get("end_free_bytes"))),
            sgib(delta), sgib(prog), sgib(d), source if prog is not None else "")
            + "".join(" %8s" % mib(owner_bytes(s, o)) for o in OWNERS)
            + "   %s" % ("-" if eng_usage is None else eng_usage)
            + "   %s" % sources(s))

    # The parsed engine figure against what the program printed (the parser, not the ledger).
    for s in stages:
        engine = s.get("engine") if isinstance(s.get("engine"), dict) else {}
        eng = engine.get("mem_usage_gib")
        pat, (prog, source) = usage_for(s.get("name"), usage)
        if isinstance(eng, (int, float)) and prog is not None and source == "printed":
            if abs(eng - prog / GIB) > 0.0051:
                warn("%s: stage %s engine mem_usage_gib %s but the program printed %.2f GB"
                     % (label, s.get("name"), eng, prog / GIB))

    # (c)
    for pat in CHECKED_USAGE:
        rows = [s for s in stages if matches(pat, s.get("name"))]
        prog = usage[pat][0]
        if prog is None:
            fail("%s: the program printed no mem usage for %s" % (label, pat))
            continue
        if not rows:
            continue  # reported by (a)
        delta = sum(as_int(s.get("device_delta_bytes")) or 0 for s in rows)
        if abs(delta - prog) > TOLERANCE_BYTES:
            fail("%s: %s device delta %.4f GiB vs program mem usage %.4f GiB: |diff| %.4f > 0.01"
                 % (label, pat.rstrip("*"), delta / GIB, prog / GIB, abs(delta - prog) / GIB))
        else:
            print("  ok (c) %s: device delta %d B, program %d B, diff %+d B (%.2f MiB)"
                  % (pat.rstrip("*"), delta, prog, delta - prog, (delta - prog) / MIB))

    # (d)
    kv = recs.get((rank, "kv_cache_allocated"))
    kv_rows = [s for s in stages if s.get("name") == "kv_pool"]
    if kv is None:
        fail("%s: the program printed no kv_cache_allocated line" % label)
    elif kv_rows:
        want = (as_int(kv.get("k_bytes")) or 0) + (as_int(kv.get("v_bytes")) or 0)
        got = sum(owner_bytes(s, "torch") or 0 for s in kv_rows)
        if got < want:
            fail("%s: kv_pool torch bytes %d (%.2f GiB) < K+V bytes %d (%.2f GiB)"
                 % (label, got, got / GIB, want, want / GIB))
        else:
            print("  ok (d) kv_pool torch %d B >= K+V %d B (tokens %s; extra %.1f MiB)"
                  % (got, want, kv.get("tokens"), (got - want) / MIB))

    # (e)
    cap_rows = [s for s in stages if is_capture(s.get("name"))]
    if cap_rows:
        pool = sum(owner_bytes(s, "torch_graph_pool") or 0 for s in cap_rows)
        if pool <= 0:
            fail("%s: torch_graph_pool is %d in %s" % (label, pool,
                                                        ", ".join(s.get("name") for s in cap_rows)))
        else:
            print("  ok (e) torch_graph_pool %d B (%.1f MiB) in %s"
                  % (pool, pool / MIB, ", ".join(s.get("name") for s in cap_rows)))

    # Boundary free values, shown.
    print("  boundaries: program avail (measured just before its line) vs library free sample")
    for line, pat, field in BOUNDARIES:
        rec = recs.get((rank, line))
        rows = [s for s in stages if matches(pat, s.get("name"))]
        if rec is None or not rows:
            continue
        row = rows[0] if field == "start_free_bytes" else rows[-1]
        prog, lib = as_int(rec.get("avail_bytes")), as_int(row.get(field))
        if prog is None or lib is None:
            continue
        print("    %-18s program %d  library %s.%s %d  diff %+d B" % (
            line, prog, row.get("name"), field.replace("_bytes", ""), lib, lib - prog))
        if abs(lib - prog) > TOLERANCE_BYTES:
            warn("%s: at %s the library's free (%d) and the program's avail (%d) differ by "
                 "%.4f GiB" % (label, line, lib, prog, (lib - prog) / GIB))

    live = dev.get("live_at_end")
    if isinstance(live, dict):
        print("  live_at_end: total %s MiB, by owner %s" % (
            mib(as_int(live.get("total_bytes"))), json.dumps(live.get("by_owner"))))
    if dev.get("peak") is not None:
        print("  peak: %s" % json.dumps(dev.get("peak"))[:400])
    mods = [m for m in (dev.get("modules") or []) if isinstance(m, dict)]
    if mods:
        print("  modules (peak MiB / live MiB at end): %s" % ", ".join(
            "%s[%s] %s/%s" % (m.get("module"), m.get("owner"), mib(as_int(m.get("peak_bytes"))),
                              mib(as_int(m.get("live_bytes")))) for m in mods[:10]))


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: check_report.py REPORT_JSON PROGRAM_OUTPUT_TXT\n")
        return 2
    report_path, output_path = argv[1], argv[2]
    try:
        report = load_report(report_path)
    except (OSError, ValueError) as e:
        fail("cannot read the report %s: %s" % (report_path, e))
        report = None
    try:
        recs, pids, count = read_program(output_path)
    except OSError as e:
        fail("cannot read the program output %s: %s" % (output_path, e))
        recs, pids, count = {}, {}, 0

    if report is not None and not isinstance(report, dict):
        fail("the report is not a JSON object")
        report = None
    ranks = sorted({r for (r, _) in recs if r is not None})
    print("program output: %d %s lines, ranks %s, pids %s" % (
        count, PREFIX.strip(), ranks, ", ".join("%d=rank %s" % kv for kv in sorted(pids.items()))))
    if count == 0:
        fail("no %s lines in %s" % (PREFIX.strip(), output_path))

    if report is not None:
        print("report: schema %s" % report.get("schema"))
        if report.get("schema") != "vramledger.report/1":
            warn("unexpected schema %r" % report.get("schema"))
        procs = report.get("processes")
        if not isinstance(procs, list):
            fail("the report has no 'processes' list")
            procs = []
        procs = [p for p in procs if isinstance(p, dict)]
        matched = {}
        unmatched = []
        for p in procs:
            pid = as_int(p.get("pid"))
            rank = pids.get(pid) if pid is not None else None
            how = "pid"
            if rank is None and as_int(p.get("rank")) in ranks:
                rank, how = as_int(p.get("rank")), "report rank"
            if rank is None:
                unmatched.append(p)
            elif rank in matched:
                warn("rank %s matches pids %s and %s; the first is used"
                     % (rank, matched[rank][0].get("pid"), pid))
                unmatched.append(p)
            else:
                matched[rank] = (p, how)
        # One rank left and one process with stages left: that is it.
        left = [r for r in ranks if r not in matched]
        staged = [p for p in unmatched
                  if any(stage_list(d) and len(stage_list(d)) > 1
                         for d in (p.get("devices") or []) if isinstance(d, dict))]
        if len(left) == 1 and len(staged) == 1:
            matched[left[0]] = (staged[0], "elimination")
            unmatched.remove(staged[0])

        # (b) on every device of every process.
        for p in procs:
            print("")
            print("process pid=%s rank=%s host=%s cmdline=%s" % (
                p.get("pid"), p.get("rank"), p.get("host"), str(p.get("cmdline"))[:160]))
            devs = [d for d in (p.get("devices") or []) if isinstance(d, dict)]
            if not devs:
                print("  no devices")
            for d in devs:
                label = "pid %s device %s" % (p.get("pid"), d.get("device"))
                print(" device %s: stages %s" % (d.get("device"),
                                                 " > ".join(str(s.get("name"))
                                                            for s in stage_list(d))))
                check_reconciliation(label, d)

        for rank in ranks:
            print("")
            if rank not in matched:
                fail("rank %d: no process in the report (pids printed: %s)" % (
                    rank, [pid for pid, r in pids.items() if r == rank]))
                continue
            p, how = matched[rank]
            device = None
            for rec_key, rec in recs.items():
                if rec_key[0] == rank and as_int(rec.get("device")) is not None:
                    device = as_int(rec.get("device"))
                    break
            devs = [d for d in (p.get("devices") or []) if isinstance(d, dict)]
            dev = next((d for d in devs if as_int(d.get("device")) == device), None)
            if dev is None and len(devs) == 1:
                dev = devs[0]
                warn("rank %d: device %s not in the report; using its only device %s"
                     % (rank, device, dev.get("device")))
            print("== rank %d (pid %s, matched by %s, device %s)" % (rank, p.get("pid"), how, device))
            if p.get("rank") is not None and as_int(p.get("rank")) != rank:
                warn("rank %d: the report says rank %s for pid %s" % (rank, p.get("rank"),
                                                                       p.get("pid")))
            others = [d.get("device") for d in devs if d is not dev]
            if others:
                warn("rank %d: the process also holds memory on device(s) %s" % (rank, others))
            if dev is None:
                fail("rank %d: device %s not in the report for pid %s" % (rank, device,
                                                                         p.get("pid")))
                continue
            check_rank_device("rank %d device %s" % (rank, dev.get("device")), rank, dev, recs)

        for p in unmatched:
            print("")
            print("not a worker (no %s lines for its pid): pid %s %s"
                  % (PREFIX.strip(), p.get("pid"), str(p.get("cmdline"))[:120]))
        report_warnings = report.get("warnings")
        if report_warnings:
            print("")
            print("report warnings:")
            for w in report_warnings if isinstance(report_warnings, list) else [report_warnings]:
                print("  %s" % w)
        if report.get("cross_rank") is not None:
            print("")
            print("cross_rank: %s" % json.dumps(report.get("cross_rank"))[:2000])

    print("")
    if warnings:
        print("%d warning(s)" % len(warnings))
    if problems:
        print("CHECK_REPORT: FAIL (%d problems)" % len(problems))
        return 1
    print("CHECK_REPORT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
