"""The fake torch._C: pool windows mirroring c10's captures_underway, a CUDAGraph base class,
and the allocator entry the fake uses for every tensor."""

import ctypes
import os
import threading

_lib = ctypes.CDLL(os.environ["FAKE_TORCH_LIB"])
_lib.c10_alloc.restype = ctypes.c_void_p
_lib.c10_alloc.argtypes = [ctypes.c_size_t]
_lib.c10_capture_alloc.restype = ctypes.c_void_p
_lib.c10_capture_alloc.argtypes = [ctypes.c_size_t]

MIB = 1 << 20
_lock = threading.Lock()
_underway = []  # [(device, pool, filter)] in the order the windows opened, as in c10
_segments = []  # [(address, size, pool)]
_capturing = {}  # thread id -> pool of the capture it runs
_ids = {"uid": 0, "uuid": 0}


def _round(n):
    if n <= MIB:
        return 2 * MIB
    if n < 10 * MIB:
        return 20 * MIB
    return (n + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)


def _key(mempool_id):
    a, b = mempool_id
    return (int(a), int(b))


def _begin(device, mempool_id, filt):
    with _lock:
        for d, p, _ in _underway:
            if d == device and p == _key(mempool_id):
                raise RuntimeError("beginAllocateToPool: already recording to mempool_id")
        _underway.append((device, _key(mempool_id), filt))


def _cuda_beginAllocateCurrentThreadToPool(device, mempool_id):
    me = threading.get_ident()
    _begin(device, mempool_id, lambda: threading.get_ident() == me)


def _cuda_beginAllocateToPool(device, mempool_id):
    _begin(device, mempool_id, lambda: True)


def _cuda_endAllocateToPool(device, mempool_id):
    with _lock:
        for i, (d, p, _) in enumerate(_underway):
            if d == device and p == _key(mempool_id):
                del _underway[i]
                return
    raise RuntimeError("endAllocatePool: not currently recording to mempool_id")


def _cuda_releasePool(device, mempool_id):
    pass


def _graph_pool_handle():
    _ids["uid"] += 1
    return (0, _ids["uid"])


def _pool_now(device):
    with _lock:
        for d, p, filt in _underway:
            if d == device and filt():
                return p
    return None


def _fake_alloc(nbytes, device=0):
    """A new segment for `nbytes`, in the pool torch would pick now; returns its address."""
    pool = _pool_now(device)
    capturing = threading.get_ident() in _capturing
    if pool is not None or capturing:  # cudaMallocMaybeCapturing: relaxed mode
        ptr = _lib.c10_capture_alloc(nbytes)
    else:
        ptr = _lib.c10_alloc(nbytes)
    if not ptr:
        raise RuntimeError("CUDA out of memory (fake)")
    with _lock:
        _segments.append((ptr, _round(nbytes), pool or (0, 0)))
    return ptr, pool


def _fake_segments():
    with _lock:
        return list(_segments)


class _CUDAGraph(object):
    def __init__(self):
        self._pool = None
        self._ended = False

    def capture_begin(self, pool=None, capture_error_mode="global"):
        if pool is None or tuple(pool) == (0, 0):
            _ids["uuid"] += 1
            pool = (_ids["uuid"], 0)
        self._pool = _key(pool)
        me = threading.get_ident()
        _begin(0, self._pool, lambda: threading.get_ident() == me and me in _capturing)
        rc = _lib.c10_capture_begin()
        if rc:
            raise RuntimeError("cudaStreamBeginCapture failed: %d" % rc)
        _capturing[me] = self._pool

    def capture_end(self):
        rc = _lib.c10_capture_end()
        _capturing.pop(threading.get_ident(), None)
        if rc:
            raise RuntimeError("cudaStreamEndCapture failed: %d" % rc)
        _cuda_endAllocateToPool(0, self._pool)
        self._ended = True

    def pool(self):
        if not self._ended:
            raise RuntimeError("Called CUDAGraph::pool() without a preceding successful capture.")
        return self._pool
