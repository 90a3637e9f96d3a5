"""PyTorch's caching allocator, default settings (cudaMalloc'd segments).

Tensors in the small pool (< 1 MiB requests, 2 MiB segments) and in the large pool, some
freed (reserved stays), empty_cache (reserved shrinks), then fp16/bf16 matrix products
(cuBLAS: the handle and workspace cuBLAS takes itself are memory PyTorch never sees).

torch_expandable.py runs this same body with expandable_segments:True.
"""

import os
import sys

import torch

from vramledger_marks import checkpoint, checksum, init_cuda, say

KiB = 1 << 10
MiB = 1 << 20

# (name, number of float32 elements): small pool (< 1 MiB) first, then the large pool.
TENSORS = [
    ("small_4k", 4 * KiB // 4),
    ("small_100k", 100 * KiB // 4),
    ("small_700k", 700 * KiB // 4),
    ("large_3m", 3 * MiB // 4),
    ("large_24m", 24 * MiB // 4),
    ("large_130m", 130 * MiB // 4),
    ("large_600m", 600 * MiB // 4),
]
FREED_FIRST = ["small_100k", "large_24m", "large_600m"]


def run(label):
    say("workload", label)
    say("alloc_conf", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "<unset>"))
    dev = init_cuda(0)
    checkpoint("init", 0)

    gen = torch.Generator(device=dev)
    gen.manual_seed(1234)
    live = {}
    for name, n in TENSORS:
        t = torch.rand(n, device=dev, generator=gen)
        live[name] = t
        say("tensor", name, checksum(t))
    checkpoint("after_alloc", 0)

    for name in FREED_FIRST:
        del live[name]
    say("freed", ",".join(FREED_FIRST))
    checkpoint("after_free", 0)

    torch.cuda.empty_cache()
    say("empty_cache", "done")
    checkpoint("after_empty_cache", 0)

    # A second round after empty_cache: the segments come back from the driver.
    for name, n in TENSORS:
        if name in FREED_FIRST:
            t = torch.rand(n, device=dev, generator=gen)
            live[name] = t
            say("tensor_again", name, checksum(t))
    checkpoint("after_realloc", 0)

    for dtype in (torch.float16, torch.bfloat16):
        a = torch.randn(2048, 4096, device=dev, generator=gen).to(dtype)
        b = torch.randn(4096, 1024, device=dev, generator=gen).to(dtype)
        c = a @ b
        say("matmul", str(dtype).replace("torch.", ""), checksum(c))
        del a, b, c
    checkpoint("after_matmul", 0)

    live.clear()
    torch.cuda.empty_cache()
    say("released", "all")
    checkpoint("end", 0)
    say("done", label)


def main():
    run("torch_default")


if __name__ == "__main__":
    sys.exit(main())
