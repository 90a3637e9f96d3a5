# vramledger's Python bootstrap. `vramledger run` puts the folder holding this file first on
# PYTHONPATH, so every Python process of the run (spawned workers included) imports it at
# startup. It installs vramledger_pools' PyTorch hooks (lazy: nothing happens unless torch is
# imported; torch is never imported from here), then runs the sitecustomize this file shadows
# (the user's own, or the distribution's) exactly as Python would have without it, errors
# included. The folder is taken off sys.path again, so the program sees its usual path.
#
# Not run by `python -S` (no site), `-I` or `-E` (PYTHONPATH ignored): such processes keep
# vramledger's driver-level view (stream-capture windows) only.
#
# Kept to syntax every Python 3 (and 2.7) parses; does nothing before Python 3.6.
import os
import sys


def _vramledger_boot():
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.version_info >= (3, 6):
        sys.path.insert(0, here)
        try:
            import vramledger_pools

            vramledger_pools.install()
        except Exception:
            pass  # the hooks are optional; the program must start regardless
        finally:
            try:
                sys.path.remove(here)
            except ValueError:
                pass
    _chain(here)


def _same(a, b):
    try:
        return os.path.normcase(os.path.abspath(a or os.curdir)) == os.path.normcase(b)
    except Exception:
        return False


def _chain(here):
    # Forget this module and this folder, then import `sitecustomize` again: Python finds the
    # next one on the path, if any. Its errors propagate to site.py, which reports them as it
    # always does ("Error in sitecustomize; ...").
    # With none to run, this module is put back: the import that is running it expects it.
    me = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if not _same(p, here)]
    try:
        __import__("sitecustomize")
    except ImportError as exc:
        if getattr(exc, "name", "sitecustomize") != "sitecustomize":
            raise
        if me is not None:
            sys.modules["sitecustomize"] = me


_vramledger_boot()
