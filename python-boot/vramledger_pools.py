"""vramledger's PyTorch pool hooks: which private memory pool each allocation goes to.

PyTorch's caching allocator routes allocations into private pools (CUDA graphs, MemPool)
while a pool window is open: inside a CUDA-graph capture, but also outside any capture
(CUDA-graph trees warm up in their pool, ``use_mem_pool`` routes a thread, engines pause and
resume a graph pool around symmetric-memory buffers). The driver sees none of this, so these
hooks tell libvramledger.so (preloaded; found with ``ctypes.CDLL(None)``) when a window opens
and closes, and at exit what torch's own allocator snapshot says, segment by segment.

Standalone (standard library only) and lazy: ``install()`` puts a finder on ``sys.meta_path``
that waits for ``torch._C``, ``torch.cuda.graphs`` and ``torch`` to be imported, then wraps:

- ``torch._C._cuda_beginAllocateCurrentThreadToPool`` / ``_cuda_beginAllocateToPool`` /
  ``_cuda_beginAllocateCurrentStreamToPool`` and ``_cuda_endAllocateToPool`` /
  ``_cuda_endAllocateCurrentStreamToPool`` (those this torch has; wrapped before
  ``torch.cuda.memory`` binds them, so ``use_mem_pool`` calls the wrappers too);
- ``torch.cuda.graphs.CUDAGraph.capture_begin`` / ``capture_end`` (the capture's pool id).

Each wrapper calls torch first and tells vramledger only after torch returned: an exception
from torch propagates unchanged and tells nothing, as torch's own state did not change.
Nothing is wrapped when libvramledger.so is not loaded or ``VRAMLEDGER_DISABLE=1``; nothing
is imported (not even ctypes) until torch is. torch itself is never imported from here.
"""

import os
import sys

__all__ = ["install", "report_segments"]

SCOPE_THREAD, SCOPE_ALL_THREADS, SCOPE_STREAM, SCOPE_CAPTURE = 1, 2, 3, 4
_UNKNOWN = (1 << 64) - 1
_MASK = (1 << 64) - 1
_MARK = "_vramledger_wrapped"

# torch._C functions that open a pool window, and the scope each one opens.
_BEGIN = (
    ("_cuda_beginAllocateCurrentThreadToPool", SCOPE_THREAD),
    ("_cuda_beginAllocateToPool", SCOPE_ALL_THREADS),
    ("_cuda_beginAllocateCurrentStreamToPool", SCOPE_STREAM),
)
# ... and those that close one (by pool id; torch <= 2.0 closed stream windows by device).
_END = ("_cuda_endAllocateToPool", "_cuda_endAllocateCurrentStreamToPool")

_state = {"installed": False, "lib": None, "wrapped": 0, "snapshots": 0, "announced": False}
# (thread, device) -> pool of the last stream window, for torch's one-argument end.
_stream_pools = {}


def _off(name):
    return os.environ.get(name, "").strip().lower() in ("0", "false", "no", "off")


def _disabled():
    v = os.environ.get("VRAMLEDGER_DISABLE", "").strip().lower()
    return (v not in ("", "0", "false", "no", "off")) or _off("VRAMLEDGER_PYTHON_HOOKS")


def _lib():
    """libvramledger.so's pool API, or None when it is not loaded."""
    lib = _state["lib"]
    if lib is None:
        lib = False
        try:
            import ctypes

            c = ctypes
            h = c.CDLL(None)
            sig = {
                "vramledger_pool_begin": (c.c_int, c.c_uint64, c.c_uint64, c.c_int),
                "vramledger_pool_end": (c.c_int, c.c_uint64, c.c_uint64, c.c_int),
                "vramledger_torch_segment": (
                    c.c_int, c.c_uint64, c.c_uint64, c.c_uint64, c.c_uint64, c.c_uint64,
                ),
                "vramledger_pool_hooks": (c.c_int, c.c_char_p),
            }
            fns = {}
            for name, args in sig.items():
                f = getattr(h, name)
                f.argtypes = args
                f.restype = None
                fns[name] = f
            lib = fns
        except Exception:
            lib = False
        _state["lib"] = lib
    return lib or None


def _pool(value):
    """A torch pool id as two unsigned halves; (0, 0) and anything odd are unknown."""
    try:
        a, b = int(value[0]) & _MASK, int(value[1]) & _MASK
    except Exception:
        return _UNKNOWN, _UNKNOWN
    if a == 0 and b == 0:
        return _UNKNOWN, _UNKNOWN
    return a, b


def _arg(args, kwargs, index, name):
    if len(args) > index:
        return args[index]
    return kwargs.get(name)


def _tell(fn, device, pool, scope):
    lib = _lib()
    if lib is None:
        return
    try:
        d = int(device) if device is not None else -1
        a, b = _pool(pool) if pool is not None else (_UNKNOWN, _UNKNOWN)
        lib[fn](d, a, b, scope)
    except Exception:
        pass  # telling vramledger must never break the program


def _thread():
    try:
        import _thread

        return _thread.get_ident()
    except Exception:
        return 0


def _wrap_begin(orig, scope):
    def wrapper(*args, **kwargs):
        out = orig(*args, **kwargs)
        device = _arg(args, kwargs, 0, "device")
        pool = _arg(args, kwargs, 1, "mempool_id")
        if scope == SCOPE_STREAM:
            _stream_pools[(_thread(), device)] = pool
        _tell("vramledger_pool_begin", device, pool, scope)
        return out

    return _dress(wrapper, orig)


def _wrap_end(orig):
    def wrapper(*args, **kwargs):
        out = orig(*args, **kwargs)
        device = _arg(args, kwargs, 0, "device")
        pool = _arg(args, kwargs, 1, "mempool_id")
        if pool is None:
            pool = _stream_pools.pop((_thread(), device), None)
        _tell("vramledger_pool_end", device, pool, SCOPE_THREAD)
        return out

    return _dress(wrapper, orig)


def _dress(wrapper, orig):
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        try:
            setattr(wrapper, attr, getattr(orig, attr))
        except Exception:
            pass
    wrapper.__wrapped__ = orig
    setattr(wrapper, _MARK, True)
    return wrapper


def _patch_c(mod):
    """Wraps torch._C's pool-window functions; returns {original: wrapper}."""
    done = {}
    if _lib() is None:
        return done
    for name, scope in _BEGIN:
        orig = getattr(mod, name, None)
        if callable(orig) and not getattr(orig, _MARK, False):
            w = _wrap_begin(orig, scope)
            setattr(mod, name, w)
            done[orig] = w
    for name in _END:
        orig = getattr(mod, name, None)
        if callable(orig) and not getattr(orig, _MARK, False):
            w = _wrap_end(orig)
            setattr(mod, name, w)
            done[orig] = w
    _state["wrapped"] += len(done)
    return done


def _current_device():
    try:
        return sys.modules["torch"].cuda.current_device()
    except Exception:
        return -1


def _patch_graphs(mod):
    """Wraps CUDAGraph.capture_begin/capture_end of torch.cuda.graphs."""
    cls = getattr(mod, "CUDAGraph", None)
    if cls is None or _lib() is None:
        return
    begin, end = getattr(cls, "capture_begin", None), getattr(cls, "capture_end", None)
    if not callable(begin) or not callable(end) or getattr(begin, _MARK, False):
        return

    def capture_begin(self, *args, **kwargs):
        out = begin(self, *args, **kwargs)
        _tell("vramledger_pool_begin", _current_device(), _arg(args, kwargs, 0, "pool"),
              SCOPE_CAPTURE)
        return out

    def capture_end(self, *args, **kwargs):
        out = end(self, *args, **kwargs)
        try:
            pool = tuple(self.pool())  # known only once the capture ended
        except Exception:
            pool = None
        _tell("vramledger_pool_end", -1, pool, SCOPE_CAPTURE)
        return out

    try:
        cls.capture_begin = _dress(capture_begin, begin)
        cls.capture_end = _dress(capture_end, end)
        _state["wrapped"] += 2
    except Exception:
        pass  # a C type (very old torch): stream-capture windows still attribute


def _after_torch(mod):
    """torch is imported: announce the hooks, take torch's snapshot at exit."""
    lib = _lib()
    if lib is None or _state["announced"]:
        return
    _state["announced"] = True
    try:
        version = str(getattr(mod, "__version__", "")).encode("utf-8", "replace")
        lib["vramledger_pool_hooks"](_state["wrapped"], version)
    except Exception:
        pass
    if not _off("VRAMLEDGER_TORCH_SNAPSHOT"):
        import atexit

        atexit.register(report_segments)


def report_segments():
    """Writes torch's own allocator snapshot (segment address, size, pool id) into the
    journal, for the report's cross-check. Returns the number of segments written. Never
    initialises CUDA: does nothing before torch did."""
    lib = _lib()
    torch = sys.modules.get("torch")
    if lib is None or torch is None:
        return 0
    try:
        cuda = torch.cuda
        if not cuda.is_initialized():
            return 0
        try:
            segments = cuda.memory_snapshot(include_traces=False)
        except TypeError:
            segments = cuda.memory_snapshot()
    except Exception:
        return 0
    _state["snapshots"] += 1
    n = 0
    for s in segments:
        try:
            a, b = s.get("segment_pool_id") or (0, 0)
            lib["vramledger_torch_segment"](
                int(s.get("device", -1)), int(s["address"]) & _MASK, int(s["total_size"]),
                int(a) & _MASK, int(b) & _MASK, _state["snapshots"],
            )
            n += 1
        except Exception:
            continue
    return n


def _rebind(done):
    """After a late install: module globals bound to an original now name its wrapper."""
    if not done:
        return
    for m in list(sys.modules.values()):
        d = getattr(m, "__dict__", None)
        if not isinstance(d, dict):
            continue
        for k, v in list(d.items()):
            try:
                w = done.get(v)
            except Exception:
                continue  # unhashable, or an odd __eq__
            if w is not None:
                d[k] = w


_AFTER = {"torch._C": _patch_c, "torch.cuda.graphs": _patch_graphs, "torch": _after_torch}


class _Finder(object):
    """Finds nothing itself: for the watched modules it asks the finders after it and runs
    the matching hook once the module has executed."""

    def __init__(self):
        self._busy = set()

    def find_spec(self, name, path=None, target=None):
        hook = _AFTER.get(name)
        if hook is None or name in self._busy:
            return None
        self._busy.add(name)
        try:
            spec = None
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.discard(name)
        loader = getattr(spec, "loader", None)
        real = getattr(loader, "exec_module", None)
        if real is None or isinstance(loader, type):
            return spec  # a class-level loader (builtin, frozen) is shared: left alone
        own = "exec_module" in getattr(loader, "__dict__", {})

        def exec_module(module):
            if not own:
                try:
                    del loader.exec_module  # back to the class's (the loader may be shared)
                except Exception:
                    pass
            real(module)
            # By spec: some extension modules name themselves differently (_decimal).
            spec_name = getattr(getattr(module, "__spec__", None), "name", None)
            if (spec_name or getattr(module, "__name__", None)) == name:
                try:
                    hook(module)
                except Exception:
                    pass

        try:
            loader.exec_module = exec_module
        except Exception:
            pass  # a loader that takes no attributes: imported unhooked
        return spec


def install():
    """Installs the hooks (once). Returns True when they will see torch."""
    if _state["installed"] or _disabled():
        return _state["installed"]
    _state["installed"] = True
    if "torch._C" in sys.modules:  # torch came first: patch now, rebind its importers
        done = _patch_c(sys.modules["torch._C"])
        graphs = sys.modules.get("torch.cuda.graphs")
        if graphs is not None:
            _patch_graphs(graphs)
        _rebind(done)
        if "torch" in sys.modules:
            _after_torch(sys.modules["torch"])
        return True
    sys.meta_path.insert(0, _Finder())
    return True
