"""The cargo step of the Python package (pyproject.toml has the rest).

`build_py` runs `cargo build --release --locked -p vramledger -p vramledger-shim` into
target/python-wheel/ (its own target folder, so the checkout's target/release is left alone)
and copies the CLI and libvramledger.so into `vramledger/_bin/`. The CLI finds the library
beside it, so this CLI is built without a copy of its own (VRAMLEDGER_EMBED_SHIM=0), and without
debug info. The wheel is for any Python 3 on this platform (`py3-none-<platform>`): the binaries
do not use Python's ABI. `auditwheel repair` turns it into a manylinux wheel (.ci/run does).
"""

import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
BINARIES = ("vramledger", "libvramledger.so")


class build_py_with_cargo(build_py):
    def run(self):
        super().run()
        target_dir = os.environ.get(
            "VRAMLEDGER_WHEEL_TARGET_DIR", os.path.join(ROOT, "target", "python-wheel")
        )
        cargo = os.environ.get("CARGO") or shutil.which("cargo")
        if not cargo:
            raise SystemExit(
                "vramledger: building this package needs Rust's cargo on PATH (https://rustup.rs)"
            )
        env = dict(os.environ, VRAMLEDGER_EMBED_SHIM="0", CARGO_PROFILE_RELEASE_DEBUG="0")
        cmd = [cargo, "build", "--release", "--locked", "-p", "vramledger", "-p",
               "vramledger-shim", "--target-dir", target_dir]
        subprocess.run(cmd, cwd=ROOT, env=env, check=True)
        dest = os.path.join(self.build_lib, "vramledger", "_bin")
        os.makedirs(dest, exist_ok=True)
        for name in BINARIES:
            out = os.path.join(dest, name)
            shutil.copyfile(os.path.join(target_dir, "release", name), out)
            os.chmod(out, 0o755)


class BinaryDistribution(Distribution):
    """Holds platform binaries: installed to platlib, and a platform wheel."""

    def has_ext_modules(self):
        return True


class bdist_wheel_any_python(bdist_wheel):
    def get_tag(self):
        _python, _abi, platform = super().get_tag()
        return "py3", "none", platform


setup(
    distclass=BinaryDistribution,
    cmdclass={"build_py": build_py_with_cargo, "bdist_wheel": bdist_wheel_any_python},
)
