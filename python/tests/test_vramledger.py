"""The installed `vramledger` package: its binaries, stages, reports and console script.

Run against an installed package from the checkout's root:

    python -m unittest discover -s python/tests -v
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import vramledger

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECORDED = os.path.join(ROOT, "tests", "data", "h200-sglang-shape")


def cargo_version():
    with open(os.path.join(ROOT, "Cargo.toml")) as f:
        for line in f:
            if line.startswith("version = "):
                return line.split('"')[1]
    raise AssertionError("no version in Cargo.toml")


class Installed(unittest.TestCase):
    def test_the_package_is_the_installed_one_with_its_binaries(self):
        here = os.path.dirname(vramledger.__file__)
        self.assertNotEqual(os.path.dirname(here), os.path.join(ROOT, "python"),
                            "testing the source folder, not the installed package")
        for path in (vramledger.cli_path(), vramledger.library_path()):
            with open(path, "rb") as f:
                self.assertEqual(f.read(4), b"\x7fELF", path)
            self.assertTrue(os.access(path, os.X_OK), path)
        self.assertEqual(os.path.dirname(vramledger.cli_path()),
                         os.path.dirname(vramledger.library_path()))

    def test_versions_agree(self):
        self.assertEqual(vramledger.__version__, cargo_version())
        out = subprocess.run([vramledger.cli_path(), "--version"], capture_output=True, text=True)
        self.assertEqual(out.stdout.strip(), f"vramledger {cargo_version()}")

    def test_the_console_script_runs_the_packaged_cli(self):
        script = shutil.which("vramledger", path=os.path.dirname(sys.executable))
        self.assertIsNotNone(script, "no vramledger console script beside this python")
        out = subprocess.run([script, "lib-path"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), vramledger.library_path())
        # Exit codes pass through: bad input is 2.
        bad = subprocess.run([script, "report", "/nonexistent/run"], capture_output=True, text=True)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("vramledger:", bad.stderr)


class Stages(unittest.TestCase):
    def test_without_the_preload_a_stage_is_a_no_op(self):
        self.assertFalse(vramledger._stage.active())
        s = vramledger.stage("warmup")
        self.assertEqual(s.name, "warmup")
        with vramledger.stage("inner") as inner:
            self.assertEqual(inner.name, "inner")
        for bad in ("", "a\0b", "two\nlines", None, b"bytes"):
            with self.assertRaises(ValueError):
                vramledger.stage(bad)

    def test_under_the_preload_stages_reach_the_journal(self):
        with tempfile.TemporaryDirectory() as out:
            program = textwrap.dedent("""
                import vramledger
                assert vramledger._stage.active()
                vramledger.stage("warmup")
                with vramledger.stage("outer"):
                    with vramledger.stage("inner"):
                        pass
                vramledger.stage("serving")
            """)
            env = dict(os.environ, LD_PRELOAD=vramledger.library_path(), VRAMLEDGER_OUT=out)
            run = subprocess.run([sys.executable, "-c", program], env=env,
                                 capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stderr)
            journals = [f for f in os.listdir(out) if f.endswith(".vlj")]
            self.assertEqual(len(journals), 1, journals)
            dump = subprocess.run([vramledger.cli_path(), "dump", os.path.join(out, journals[0])],
                                  capture_output=True, text=True)
            self.assertEqual(dump.returncode, 0, dump.stderr)
            stages = [r["text"] for r in map(json.loads, dump.stdout.splitlines())
                      if r.get("kind") == "stage"]
            self.assertEqual(stages, ["startup", "warmup", "outer", "inner", "outer",
                                      "post_outer", "serving"])


class Reports(unittest.TestCase):
    def test_a_recorded_run_as_python_objects(self):
        books = vramledger.report(RECORDED)
        self.assertEqual(books["schema"], "vramledger.report/1")
        self.assertEqual(len(books["processes"]), 3)
        ranks = sorted(p["rank"] for p in books["processes"] if p["rank"] is not None)
        self.assertEqual(ranks, [0, 1])
        snap = vramledger.snapshot(RECORDED, at="peak")
        self.assertEqual(snap["schema"], "vramledger.snapshot/1")
        d = vramledger.diff(RECORDED, RECORDED)
        self.assertEqual(d["schema"], "vramledger.diff/1")

    def test_bad_input_raises_with_the_cli_message(self):
        with self.assertRaises(vramledger.VramledgerError) as e:
            vramledger.report("/nonexistent/run")
        self.assertIn("/nonexistent/run", str(e.exception))
        with self.assertRaises(vramledger.VramledgerError) as e:
            vramledger.snapshot(RECORDED, at="no_such_stage")
        self.assertIn("no_such_stage", str(e.exception))


if __name__ == "__main__":
    unittest.main()
