#!/usr/bin/env python3
"""Scrape `vramledger serve` while a run starts, then compare the scraped series with
`vramledger report --json` (used by scripts/gpu_metrics.sh; needs only Python 3).

    check_metrics.py scrape ADDR DIR --while-pid PID [--interval 1]
        GET http://ADDR/metrics every INTERVAL s while PID runs: DIR/NNNNNN.prom and
        DIR/index.tsv (n, unix time, HTTP status, bytes); then one last scrape, DIR/final.prom.
    check_metrics.py compare --report REPORT.json --final FINAL.prom --scrapes DIR
        Exit 0 when the final scrape equals the report to the byte (live and peak bytes per
        owner, the hooked peak, unattributed, free, per stage x owner deltas, the current
        stage) and the run was seen while it ran; 1 with every mismatch listed otherwise.

The exposition is parsed with prometheus_client when it is installed (vLLM depends on it),
else with the small parser below (the Prometheus text format as vramledger writes it).
"""

import argparse
import glob
import json
import os
import re
import sys
import time
import urllib.request

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def unescape(v):
    return v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")


def parse(text):
    """[(name, {labels}, value)] of an exposition."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        out = []
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            m = SAMPLE.match(line)
            if not m:
                raise ValueError(f"not a sample line: {line!r}")
            labels = {k: unescape(v) for k, v in LABEL.findall(m.group(3) or "")}
            out.append((m.group(1), labels, float(m.group(4))))
        return out
    return [
        (s.name, dict(s.labels), float(s.value))
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    ]


def get(addr):
    req = urllib.request.Request(f"http://{addr}/metrics", headers={"Accept": "text/plain"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except OSError as e:
        return 0, f"# scrape failed: {e}\n"


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of the caller still "exists": read its state.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def scrape(args):
    os.makedirs(args.dir, exist_ok=True)
    n = 0
    with open(os.path.join(args.dir, "index.tsv"), "w") as index:
        while alive(args.while_pid):
            t0 = time.time()
            status, body = get(args.addr)
            with open(os.path.join(args.dir, f"{n:06d}.prom"), "w") as f:
                f.write(body)
            index.write(f"{n}\t{t0:.3f}\t{status}\t{len(body)}\n")
            index.flush()
            n += 1
            time.sleep(max(0.0, args.interval - (time.time() - t0)))
        # The last scrape once every process of the run has ended (a worker may outlive
        # the launcher for a moment), or after 60 s.
        deadline = time.time() + 60
        while True:
            status, body = get(args.addr)
            running = status == 200 and any(
                n == "vramledger_process_running" and v == 1 for n, _, v in parse(body)
            )
            if not running or time.time() > deadline:
                break
            time.sleep(0.5)
        with open(os.path.join(args.dir, "final.prom"), "w") as f:
            f.write(body)
        index.write(f"final\t{time.time():.3f}\t{status}\t{len(body)}\n")
    print(f"{n} scrapes while pid {args.while_pid} ran, then the final one (HTTP {status})")
    return 0 if status == 200 else 1


def value(samples, name, want):
    hits = [v for n, l, v in samples if n == name and all(l.get(k) == x for k, x in want.items())]
    if len(hits) > 1:
        raise ValueError(f"{name} {want} matches {len(hits)} samples")
    return hits[0] if hits else None


def compare_final(samples, report, problems):
    """Every figure shared with the report; returns how many were compared."""
    n = 0

    def eq(name, labels, want):
        nonlocal n
        got = value(samples, name, labels)
        n += 1
        if got is None or got != float(want):
            problems.append(f"{name}{labels}: scraped {got}, report {want}")

    for p in report["processes"]:
        proc = {"pid": str(p["pid"]), "host": p["host"]}
        for d in p["devices"]:
            dev = dict(proc, device=str(d["device"]))
            for owner, live in d["live_at_end"]["by_owner"].items():
                if owner == "unattributed":
                    continue
                eq("vramledger_live_bytes", dict(dev, owner=owner), live)
                peak = d["peak"]["by_owner"].get(owner, {}).get("bytes", 0)
                eq("vramledger_peak_bytes", dict(dev, owner=owner), peak)
            eq("vramledger_hooked_peak_bytes", dev, d["peak"]["total"]["bytes"])
            rec = d["reconciliation"]
            eq("vramledger_unattributed_bytes", dev, rec["unattributed_bytes"])
            if rec["end_free_bytes"] is not None:
                eq("vramledger_free_bytes", dev, rec["end_free_bytes"])
            by_stage, delta = {}, {}
            for s in d["stages"]:
                delta[s["name"]] = delta.get(s["name"], 0) + s["device_delta_bytes"]
                for owner, b in s["by_owner"].items():
                    by_stage[(s["name"], owner)] = by_stage.get((s["name"], owner), 0) + b
            for (stage, owner), b in sorted(by_stage.items()):
                eq("vramledger_stage_delta_bytes", dict(dev, stage=stage, owner=owner), b)
            for stage, b in sorted(delta.items()):
                eq("vramledger_stage_device_delta_bytes", dict(dev, stage=stage), b)
            last = d["stages"][-1]["name"]
            eq("vramledger_current_stage_info", dict(proc, stage=last), 1)
    return n


def compare(args):
    problems = []
    with open(args.report) as f:
        report = json.load(f)
    with open(args.final) as f:
        final = parse(f.read())
    compared = compare_final(final, report, problems)
    devices = sum(len(p["devices"]) for p in report["processes"])
    if devices == 0:
        problems.append("the report has no device: the run allocated nothing the hooks saw")

    # The run as it started: stages seen per process, and whether it was seen running.
    files = sorted(glob.glob(os.path.join(args.scrapes, "[0-9]*.prom")))
    times = {}
    index = os.path.join(args.scrapes, "index.tsv")
    if os.path.exists(index):
        for line in open(index):
            k, t = line.split("\t")[:2]
            times[k] = float(t)
    t_first = min(times.values()) if times else 0.0
    seen_running, transitions, last_stage, records, peaks = set(), [], {}, {}, {}
    excerpt, excerpt_stages = None, -1
    for path in files:
        key = str(int(os.path.basename(path).split(".")[0]))
        text = open(path).read()
        if text.startswith("# scrape failed"):
            continue
        try:
            s = parse(text)
        except Exception as e:
            problems.append(f"{path} does not parse: {e}")
            continue
        t = times.get(key, 0.0) - t_first
        for name, labels, v in s:
            pid = labels.get("pid")
            if name == "vramledger_process_running" and v == 1:
                seen_running.add(pid)
            if name == "vramledger_current_stage_info" and last_stage.get(pid) != labels["stage"]:
                transitions.append((t, pid, last_stage.get(pid), labels["stage"]))
                last_stage[pid] = labels["stage"]
            if name == "vramledger_journal_records_total":
                if v < records.get(pid, 0):
                    problems.append(f"{path}: pid {pid} records went down {records[pid]} -> {v}")
                records[pid] = v
            if name == "vramledger_peak_bytes":
                k = (pid, labels["device"], labels["owner"])
                if v < peaks.get(k, 0):
                    print(f"note: {path}: peak {k} went down {peaks[k]} -> {v} (a late record re-read)")
                peaks[k] = v
        live = [(n, l, v) for n, l, v in s if n == "vramledger_live_bytes" and v > 0]
        if len(transitions) > excerpt_stages and live:
            excerpt, excerpt_stages = (path, t, text), len(transitions)
    ran = {str(p["pid"]) for p in report["processes"] if p["devices"]}
    if not ran & seen_running:
        problems.append("no scrape saw a process with device memory while it ran")
    print(f"{len(files)} scrapes; final scrape vs report: {compared} figures compared, "
          f"{len([p for p in problems if 'scraped' in p])} differ")
    print("stages seen while scraping (seconds after the first scrape):")
    for t, pid, old, new in transitions:
        print(f"  {t:7.1f} s  pid {pid}: {old or '-'} -> {new}")
    if excerpt:
        path, t, text = excerpt
        print(f"one scrape while it started ({os.path.basename(path)}, {t:.1f} s):")
        for line in text.splitlines():
            if line.startswith(("vramledger_live_bytes", "vramledger_current_stage_info",
                                "vramledger_free_bytes", "vramledger_journal_lag")) and not line.endswith(" 0"):
                print("  " + line)
    for p in problems:
        print("MISMATCH: " + p)
    print("ok: the scraped series match the report" if not problems else f"FAILED: {len(problems)} problems")
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("scrape")
    s.add_argument("addr")
    s.add_argument("dir")
    s.add_argument("--while-pid", type=int, required=True)
    s.add_argument("--interval", type=float, default=1.0)
    c = sub.add_parser("compare")
    c.add_argument("--report", required=True)
    c.add_argument("--final", required=True)
    c.add_argument("--scrapes", required=True)
    args = ap.parse_args()
    return scrape(args) if args.cmd == "scrape" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
