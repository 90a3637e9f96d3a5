#!/usr/bin/env python3
"""A PyTorch workload that makes the driver allocate and free, for journal sizes and timing.

    python3 scripts/bench_torch_churn.py [rounds=1500]

Each round takes tensors of a few sizes through PyTorch's caching allocator, frees them and
empties the cache, so every segment is a cudaMalloc and a cudaFree through libcudart (the
runtime path the shim walks past); every tenth round also pins host memory (cudaHostAlloc).
With PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True the segments are VMM instead
(cuMemCreate, cuMemMap, cuMemUnmap, cuMemRelease from libc10_cuda). Prints one line:
    churn: rounds=N seconds=S
"""

import sys
import time

import torch


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
    dev = torch.device("cuda", 0)
    torch.cuda.init()
    sizes = [1 << 20, 3 << 20, 24 << 20, 130 << 20]
    # Warm up: the context, cuBLAS-free kernels, the allocator's own structures.
    x = torch.empty(1 << 20, dtype=torch.uint8, device=dev)
    del x
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for r in range(rounds):
        held = [torch.empty(s, dtype=torch.uint8, device=dev) for s in sizes]
        if r % 10 == 0:
            pinned = torch.empty(2 << 20, dtype=torch.uint8, pin_memory=True)
            del pinned
        del held
        torch.cuda.empty_cache()
    torch.cuda.synchronize()
    print(f"churn: rounds={rounds} seconds={time.perf_counter() - t0:.3f}", flush=True)


if __name__ == "__main__":
    main()
