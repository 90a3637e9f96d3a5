"""Where the packaged CLI and library are: `_bin/` inside this package."""

import os

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin")


def _packaged(name):
    path = os.path.join(_BIN, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{path} is missing: this vramledger package was not built with its binaries "
            "(install it with `pip install <vramledger checkout>`, which runs cargo)"
        )
    return path


def library_path():
    """The path of the packaged `libvramledger.so` (what `vramledger run` preloads)."""
    return _packaged("libvramledger.so")


def cli_path():
    """The path of the packaged `vramledger` CLI binary."""
    return _packaged("vramledger")
