#!/usr/bin/env python3
"""Runs PyTorch's own `torch/cuda/_memory_viz.py` on memory_viz pickles, as a user would:

    python3 scripts/viewers/torch_memory_viz.py FILE.pickle [...] [--memory-viz PATH]

PATH is that file (from a torch wheel: `pip download --no-deps torch`, then unzip
`torch/cuda/_memory_viz.py`; it imports only the standard library); without it,
`torch.cuda._memory_viz` is imported from an installed torch. Every function a user calls on a
snapshot is run: `segsum` (the `stats` command), `trace`, `segments` and `memory` (flamegraph
lines: the module's own flamegraph.pl download is replaced by returning the lines), `compare`,
`trace_plot` (allocations, segments, and `filter_freed`, which says "free_completed without
free_requested" for a free the viewer would draw red) and `segment_plot`; then the module's
command line (`stats`, `trace`, `trace_plot`, `segment_plot`) in a subprocess. Prints what
they print (shortened) and `torch _memory_viz: ok`, or the failures; exit 0 only when all pass.
"""

import argparse
import contextlib
import importlib.util
import io
import os
import pickle
import subprocess
import sys
import tempfile


def load(path):
    if path:
        spec = importlib.util.spec_from_file_location("torch_cuda_memory_viz", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod, path
    from torch.cuda import _memory_viz as mod  # an installed torch

    return mod, mod.__file__


def short(text, lines=12):
    rows = text.splitlines()
    more = f"\n      ... ({len(rows) - lines} more lines)" if len(rows) > lines else ""
    return "\n".join("      " + r for r in rows[:lines]) + more


def check_file(mv, mv_path, pickle_path, failures):
    def fail(msg):
        failures.append(f"{os.path.basename(pickle_path)}: {msg}")
        print(f"FAIL {msg}")

    def ok(msg, out=None):
        print(f"ok   {msg}")
        if out:
            print(short(out))

    with open(pickle_path, "rb") as f:
        data = pickle.load(f)
    print(f"== {pickle_path}: {len(data['segments'])} segments, "
          f"{[len(t) for t in data['device_traces']]} trace entries per device")
    identity = lambda lines: lines  # noqa: E731  (instead of downloading flamegraph.pl)
    calls = [
        ("segsum (stats)", lambda: mv.segsum(data)),
        ("trace", lambda: mv.trace(data)),
        ("segments (flamegraph lines)", lambda: mv.segments(data, format_flamegraph=identity)),
        ("memory (flamegraph lines)", lambda: mv.memory(data, format_flamegraph=identity)),
        ("compare (itself)", lambda: mv.compare(data["segments"], data["segments"],
                                                 format_flamegraph=identity)),
        ("trace_plot", lambda: mv.trace_plot(data)),
        ("trace_plot plot_segments", lambda: mv.trace_plot(data, plot_segments=True)),
        ("trace_plot filter_freed", lambda: mv.trace_plot(pickle.loads(pickle.dumps(data)),
                                                          filter_freed=True)),
        ("segment_plot", lambda: mv.segment_plot(data)),
    ]
    for name, call in calls:
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                result = call()
        except Exception as e:  # the module's own asserts included
            fail(f"{name}: {type(e).__name__}: {e}")
            continue
        said = printed.getvalue()
        if "free_completed without free_requested" in said:
            fail(f"{name}: {said.strip().splitlines()[0]}")
            continue
        if name.endswith("plot") or "plot " in name:
            if "add_local_files" not in result:
                fail(f"{name}: no viewer page")
                continue
            ok(f"{name}: a {len(result)}-byte page")
        elif "flamegraph" in name:
            bad = [l for l in result.splitlines() if not l.rsplit(" ", 1)[-1].isdigit()]
            if bad:
                fail(f"{name}: lines without a byte count: {bad[:3]}")
                continue
            ok(f"{name}: {len(result.splitlines())} lines", result)
        else:
            ok(name, said + (result if isinstance(result, str) else ""))
    with tempfile.TemporaryDirectory() as d:
        for cmd in (["stats"], ["trace"], ["trace_plot", "-o", os.path.join(d, "t.html")],
                    ["trace_plot", "-f", "-o", os.path.join(d, "f.html")],
                    ["segment_plot", "-o", os.path.join(d, "s.html")]):
            argv = [sys.executable, mv_path, cmd[0], pickle_path, *cmd[1:]]
            p = subprocess.run(argv, capture_output=True, text=True)
            shown = " ".join(c for c in cmd if not c.endswith(".html") and c != "-o")
            if p.returncode != 0 or "free_completed without free_requested" in p.stdout:
                fail(f"python _memory_viz.py {shown}: exit {p.returncode}\n"
                     f"{p.stdout[-800:]}{p.stderr[-800:]}")
            else:
                ok(f"python _memory_viz.py {shown}: exit 0")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pickles", nargs="+")
    ap.add_argument("--memory-viz", help="torch/cuda/_memory_viz.py (else an installed torch's)")
    args = ap.parse_args()
    mv, mv_path = load(args.memory_viz)
    print(f"torch's memory viz: {mv_path}")
    failures = []
    for p in args.pickles:
        check_file(mv, mv_path, p, failures)
    print(f"torch _memory_viz: {len(failures)} failed" if failures else "torch _memory_viz: ok")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
