"""PyTorch's caching allocator with expandable segments (cuMemCreate + cuMemMap from libc10_cuda).

The same steps as torch_default.py; the setting must be in the environment before torch is
imported, so it is set here first (an explicit PYTORCH_CUDA_ALLOC_CONF from outside wins).
"""

import os
import sys

os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")

import torch_default  # noqa: E402  (imports torch after the setting)


def main():
    torch_default.run("torch_expandable")


if __name__ == "__main__":
    sys.exit(main())
