"""vramledger: where every byte of GPU memory went, who holds it, and when it was taken.

This package carries the `vramledger` CLI and the preload library `libvramledger.so`:

    vramledger run -- python -m vllm.entrypoints.openai.api_server ...   # the console script

and, from Python:

    import vramledger
    with vramledger.stage("warmup"):      # a stage of your own (a no-op without the preload)
        ...
    vramledger.stage("serving")            # or as a call
    vramledger.library_path()              # the libvramledger.so for LD_PRELOAD by hand
    books = vramledger.report("vramledger-out")   # `vramledger report --json`, as Python objects
"""

from ._paths import cli_path, library_path
from ._report import VramledgerError, diff, report, snapshot
from ._stage import Stage, stage

__version__ = "0.1.0"

__all__ = [
    "Stage",
    "VramledgerError",
    "cli_path",
    "diff",
    "library_path",
    "report",
    "snapshot",
    "stage",
]
