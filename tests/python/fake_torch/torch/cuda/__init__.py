"""The fake torch.cuda: the names vramledger's hooks and the tests use."""

from torch.cuda import graphs, memory  # noqa: F401
from torch.cuda.graphs import CUDAGraph, graph, graph_pool_handle  # noqa: F401
from torch.cuda.memory import MemPool, memory_snapshot, use_mem_pool  # noqa: F401

_initialized = [False]


def is_initialized():
    return _initialized[0]


def init():
    _initialized[0] = True


def current_device():
    return 0
