"""Stages of your own: `vramledger.stage(name)`, as a call or a context manager.

The preloaded libvramledger.so exports `void vramledger_stage(const char *name)`: it samples
free memory and starts stage `name` in the journal. Without the preload there is no such
symbol in the process and a stage is a no-op, so code that marks stages runs unchanged without
vramledger.
"""

import ctypes
import threading

_lock = threading.Lock()
_looked_up = False
_fn = None
# Stages entered with `with stage(...)`, innermost last: leaving one resumes the one outside.
_open = []


def _stage_fn():
    """`vramledger_stage` of the preloaded library, or None without the preload."""
    global _looked_up, _fn
    with _lock:
        if not _looked_up:
            _looked_up = True
            try:
                fn = ctypes.CDLL(None).vramledger_stage
            except (AttributeError, OSError):
                fn = None
            else:
                fn.argtypes = [ctypes.c_char_p]
                fn.restype = None
            _fn = fn
        return _fn


def active():
    """Whether the preload library is in this process (stages are recorded)."""
    return _stage_fn() is not None


def _mark(name):
    fn = _stage_fn()
    if fn is not None:
        fn(name.encode("utf-8"))


class Stage:
    """A stage that has started. As a context manager, leaving it starts again the stage that
    was entered with `with` around it, or `post_<name>` when there is none (a stage runs until
    the next one starts: the memory taken after the block is not the block's)."""

    def __init__(self, name):
        if not isinstance(name, str) or not name or "\0" in name or "\n" in name:
            raise ValueError(f"a stage name is a non-empty string without NUL or newline: {name!r}")
        self.name = name
        _mark(name)

    def __enter__(self):
        with _lock:
            _open.append(self.name)
        return self

    def __exit__(self, *exc):
        with _lock:
            if _open and _open[-1] == self.name:
                _open.pop()
            outer = _open[-1] if _open else f"post_{self.name}"
        _mark(outer)
        return False

    def __repr__(self):
        return f"vramledger.Stage({self.name!r})"


def stage(name):
    """Starts stage `name` now (a no-op without the preload); returns a `Stage`, which can also
    be used with `with` to end the stage when the block ends."""
    return Stage(name)
