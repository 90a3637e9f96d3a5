"""A run's books as Python objects, through the CLI's JSON outputs."""

import json
import os
import subprocess

from ._paths import cli_path


class VramledgerError(RuntimeError):
    """The CLI refused its input (exit 2): the message is its own."""


def _json(args):
    proc = subprocess.run([cli_path(), *args], capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise VramledgerError(proc.stderr.strip() or f"vramledger {args[0]} exited {proc.returncode}")
    return json.loads(proc.stdout)


def report(path):
    """`vramledger report --json PATH`: the books of a run folder or one journal, as dicts and
    lists (schema `vramledger.report/1`, docs/report-schema.md)."""
    return _json(["report", "--json", os.fspath(path)])


def diff(a, b):
    """`vramledger diff --json A B` (schema `vramledger.diff/1`)."""
    return _json(["diff", "--json", os.fspath(a), os.fspath(b)])


def snapshot(path, at="end"):
    """`vramledger snapshot --format json`: what was live at `at` ("end", "peak", "oom" or a
    stage name), schema `vramledger.snapshot/1`."""
    import tempfile

    where = {"end": ["--at-end"], "peak": ["--at-peak"], "oom": ["--at-oom"]}.get(at, ["--at", at])
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "snapshot.json")
        proc = subprocess.run(
            [cli_path(), "snapshot", os.fspath(path), *where, "--format", "json", "-o", out],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise VramledgerError(proc.stderr.strip() or f"vramledger snapshot exited {proc.returncode}")
        with open(out) as f:
            return json.load(f)
