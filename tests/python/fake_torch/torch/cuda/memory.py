"""The fake torch.cuda.memory: binds the pool functions at import, as PyTorch 2.11 does."""

import contextlib

import torch
from torch._C import (  # noqa: F401
    _cuda_beginAllocateCurrentThreadToPool,
    _cuda_endAllocateToPool,
    _cuda_releasePool,
)


class MemPool(object):
    def __init__(self):
        self.id = torch._C._graph_pool_handle()


@contextlib.contextmanager
def use_mem_pool(pool, device=None):
    device_index = 0 if device is None else device
    _cuda_beginAllocateCurrentThreadToPool(device_index, pool.id)
    try:
        yield
    finally:
        _cuda_endAllocateToPool(device_index, pool.id)
        _cuda_releasePool(device_index, pool.id)


def memory_snapshot(mempool_id=None, include_traces=True):
    return [
        {"device": 0, "address": a, "total_size": s, "segment_pool_id": p}
        for a, s, p in torch._C._fake_segments()
    ]
