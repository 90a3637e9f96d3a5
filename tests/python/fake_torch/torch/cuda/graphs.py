"""The fake torch.cuda.graphs: a Python CUDAGraph over the C base class, as in PyTorch."""

import torch


def graph_pool_handle():
    return torch._C._graph_pool_handle()


class CUDAGraph(torch._C._CUDAGraph):
    def capture_begin(self, pool=None, capture_error_mode="global"):
        super(CUDAGraph, self).capture_begin(pool=pool, capture_error_mode=capture_error_mode)

    def capture_end(self):
        super(CUDAGraph, self).capture_end()


class graph(object):
    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        self.cuda_graph = cuda_graph
        self.pool = () if pool is None else (pool,)
        self.capture_error_mode = capture_error_mode

    def __enter__(self):
        self.cuda_graph.capture_begin(*self.pool, capture_error_mode=self.capture_error_mode)

    def __exit__(self, *args):
        self.cuda_graph.capture_end()
