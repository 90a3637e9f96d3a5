#!/usr/bin/env python3
"""Helpers of scripts/gpu_engines.sh (runs on the GPU machine; standard library only).

    gpu_engines.py trim JOURNAL OUT          copy the committed part of a journal (no zero tail;
                                              format 2: whole blocks)
    gpu_engines.py check --plain P.out --hooked H.out --report R.json --size S.json [--tp N]
                                              the real-engine lane's checks; exit 1 on a failure
    gpu_engines.py summary RESULTS.jsonl...   the A/B: per-arm medians, pair ratios, min/max

A check prints one `PASS name: detail` or `FAIL name: detail` line each.
"""
import json
import statistics
import struct
import sys

STAGES = ["dist_init", "weight_load", "memory_profiling", "kv_cache", "graph_capture",
          "post_capture", "serving"]


def used_size(data):
    """Bytes up to the end of the last committed frame (docs/journal.md)."""
    at = end = 16
    while at + 8 <= len(data):
        head, length = struct.unpack_from("<II", data, at)
        if head == 0:
            break
        kind = head & 0xFFFF
        size = 8 + length + (0 if kind == 0 else 4)
        size = (size + 7) // 8 * 8
        if at + size > len(data):
            break
        at += size
        end = at
    return end


BLOCK = 64 * 1024


def used_size_v2(data):
    """Format 2: whole 64 KiB blocks up to the last one holding a nonzero byte. A journal whose
    process was killed has no final seal and keeps its chunk's zero tail; its last block may be
    unsealed, which the reader takes (docs/journal.md), but never a block cut in two."""
    end = len(data.rstrip(b"\0"))
    return min(len(data), (end + BLOCK - 1) // BLOCK * BLOCK)


def trim(src, dst):
    with open(src, "rb") as f:
        data = f.read()
    version = struct.unpack_from("<I", data, 8)[0] if data[:8] == b"VRAMLJNL" else 1
    n = used_size(data) if version == 1 else used_size_v2(data)
    with open(dst, "wb") as f:
        f.write(data[:n])
    print("%s: %d of %d bytes" % (dst, n, len(data)))


def engine_lines(path):
    out = {}
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("VRAMLEDGER_VLLM "):
                v = json.loads(line[len("VRAMLEDGER_VLLM "):])
                out[v["phase"]] = v
    return out


class Checks:
    def __init__(self):
        self.failed = 0

    def __call__(self, name, ok, detail):
        print("%s %s: %s" % ("PASS" if ok else "FAIL", name, detail))
        if not ok:
            self.failed += 1


def check(argv):
    args = dict(zip(argv[::2], argv[1::2]))
    tp = int(args.get("--tp", "1"))
    c = Checks()
    plain, hooked = engine_lines(args["--plain"]), engine_lines(args["--hooked"])
    for phase in ("ready", "result"):
        c("%s lines" % phase, phase in plain and phase in hooked,
          "plain %s, hooked %s" % (phase in plain, phase in hooked))
    if c.failed:
        return 1
    ps, hs = plain["result"]["output_sha256"], hooked["result"]["output_sha256"]
    c("same output token ids", ps == hs, "sha256 %s / %s" % (ps[:16], hs[:16]))
    pb, hb = plain["ready"]["num_gpu_blocks"], hooked["ready"]["num_gpu_blocks"]
    c("same num_gpu_blocks", pb == hb, "%s / %s" % (pb, hb))
    with open(args["--report"]) as f:
        report = json.load(f)
    # Workers load weights; another process may hold only a CUDA context (the EngineCore).
    workers = [p for p in report["processes"]
               if any(s["name"] == "weight_load" for d in p["devices"] for s in d["stages"])]
    others = [p["pid"] for p in report["processes"] if p["devices"] and p not in workers]
    if others:
        print("INFO processes with device memory but no weights: %s" % others)
    c("GPU processes", len(workers) >= tp, "%d with device memory (tp %d)" % (len(workers), tp))
    for p in workers:
        who = "pid %s rank %s" % (p["pid"], p["rank"])
        for d in p["devices"]:
            r = d["reconciliation"]
            c("balanced %s device %s" % (who, d["device"]), r["balanced"],
              "start %s = deltas %s + end %s" % (r["start_free_bytes"], r["sum_stage_deltas_bytes"],
                                                 r["end_free_bytes"]))
            names = [s["name"] for s in d["stages"]]
            # With TP > 1 the EngineCore, not a worker, prints the engine-ready line.
            want = STAGES if tp == 1 else [s for s in STAGES if s != "serving"]
            missing = [s for s in want if s not in names]
            c("stages %s" % who, not missing, "missing %s; have %s" % (missing, names))
            by = {s["name"]: s for s in d["stages"]}
            gp = sum(s["by_owner"]["torch_graph_pool"] for s in d["stages"]
                     if s["name"].startswith("graph_capture"))
            live = d["live_at_end"]["by_owner"]["torch_graph_pool"]
            c("graph pool in the capture stage %s" % who, gp >= live > 0,
              "capture stages %d B, live at end %d B" % (gp, live))
            # graph_capture may open at the first capture: tqdm's 0% bar has no newline and
            # is read only at its next update.
            setters = {s["name"]: s.get("start_set_by") for s in d["stages"]}
            c("stages set by lines %s" % who,
              all(setters.get(s) == "engine_line" for s in STAGES
                  if s in by and s != "graph_capture"),
              json.dumps(setters))
            if tp > 1:
                nccl = sum(s["by_owner"]["nccl"] for s in d["stages"])
                c("nccl bytes %s" % who, nccl > 0, "%d B, %d B in dist_init" % (
                    nccl, by.get("dist_init", {}).get("by_owner", {}).get("nccl", 0)))
                print("INFO owners %s: %s" % (who, json.dumps(d["live_at_end"]["by_owner"])))
    if tp > 1:
        serving = [p["pid"] for p in report["processes"]
                   if any(s["name"] == "serving" for d in p["devices"] for s in d["stages"])
                   or not p["devices"]]
        c("serving in the run", bool(serving), "processes %s" % serving)
        ranks = sorted(p["rank"] for p in workers if p["rank"] is not None)
        c("ranks", ranks == list(range(tp)), "%s" % ranks)
        cross = report["cross_rank"]["stages"]
        c("cross-rank minimum per stage", len(cross) >= len(STAGES) - 1,
          ", ".join("%s %d" % (s["name"], s["min_free_bytes"]) for s in cross))
        bad = [s["name"] for s in cross if any(r["unbalanced"] for r in s["ranks"])]
        c("imbalance rule", True, "stages with a rank above the minimum by > 10%%: %s" % (bad or "none"))
    with open(args["--size"]) as f:
        size = json.load(f)
    b = size.get("blocks_bounds")
    c("size RUN reproduces num_gpu_blocks", b is not None and b[0] <= hb <= b[1],
      "bounds %s, engine %s, reproduced %s" % (b, hb, size.get("reproduced")))
    c("size RUN exact", b is not None and b[0] == b[1] == hb, "bounds %s" % b)
    for r in size.get("run", {}).get("ranks", []):
        s = r["kv_cache_memory_suggestion"]
        c("--kv-cache-memory suggestion %s" % r["label"], s["reproduced"] is True,
          "printed %s" % s["printed"])
    return 1 if c.failed else 0


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def summary(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            rows += [json.loads(l) for l in f if l.strip()]
    ok = [r for r in rows if r.get("rc") == 0 and r.get("startup_s") and r.get("tok_s")]
    triplets = {}
    for r in ok:
        triplets.setdefault((r.get("session", ""), r["triplet"]), {})[r["arm"]] = r
    full = [t for t in triplets.values() if {"plain", "preload", "disabled"} <= set(t)]
    print("A/B of vLLM under the preload: %d complete triplets (%d runs ok of %d)"
          % (len(full), len(ok), len(rows)))
    if rows:
        r0 = rows[0]
        print("  workload: %s" % r0.get("workload", "?"))
    for arm in ("plain", "preload", "disabled"):
        s = [t[arm]["startup_s"] for t in full]
        x = [t[arm]["tok_s"] for t in full]
        if s:
            print("  %-8s startup median %.2f s [min %.2f, max %.2f]; decode median %.0f tok/s "
                  "[min %.0f, max %.0f]" % (arm, med(s), min(s), max(s), med(x), min(x), max(x)))
    for arm in ("preload", "disabled"):
        sr = [t[arm]["startup_s"] / t["plain"]["startup_s"] for t in full]
        xr = [t[arm]["tok_s"] / t["plain"]["tok_s"] for t in full]
        if sr:
            print("  %s/plain per triplet: startup median x%.3f [min %.3f, max %.3f]; decode "
                  "median x%.3f [min %.3f, max %.3f]" % (arm, med(sr), min(sr), max(sr), med(xr),
                                                         min(xr), max(xr)))
    spread = [statistics.pstdev(r["rounds_tok_s"]) / med(r["rounds_tok_s"])
              for r in ok if len(r.get("rounds_tok_s", [])) > 1]
    if spread:
        print("  in-run spread of decode rounds (stdev/median): median %.3f" % med(spread))
    return 0


def main():
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd == "trim":
        trim(rest[0], rest[1])
        return 0
    if cmd == "check":
        return check(rest)
    if cmd == "summary":
        return summary(rest)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
