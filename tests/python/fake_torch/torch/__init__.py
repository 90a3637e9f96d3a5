"""A fake `torch` for vramledger's tests: the pool-window API of PyTorch 2.11 (same names,
same arguments, same semantics for which allocation lands in which pool), backed by the fake
caching allocator of tests/clients/c10_cuda.c (libc10_cuda.so, `FAKE_TORCH_LIB`) over the
fake driver, so that allocations reach libvramledger.so the way PyTorch's do."""

__version__ = "2.11.0+fake"

from torch import _C  # noqa: E402,F401  (the real torch imports torch._C first, too)
from torch import cuda  # noqa: E402,F401
