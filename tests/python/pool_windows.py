"""Every way PyTorch 2.11 routes allocations into a private pool, driven through the fake torch
(tests/python/fake_torch) under libvramledger.so. Each allocation prints the pool the fake
allocator put it in, from torch's own rules:

    EXPECT <address> <a>,<b>        (0,0 = the default pool)

tests/python_pools.rs checks every one against the journal's owner and pool id, and the
report against torch's snapshot (taken by the hook at exit).
"""

import sys
import threading

MIB = 1 << 20


def alloc(nbytes, prefix="EXPECT"):
    import torch

    ptr, pool = torch._C._fake_alloc(nbytes)
    a, b = pool or (0, 0)
    print("%s %d %d,%d" % (prefix, ptr, a, b))
    sys.stdout.flush()


def on_thread(fn):
    t = threading.Thread(target=fn)
    t.start()
    t.join()


def spawned_child():
    """A multiprocessing spawn child: it inherits PYTHONPATH, so it gets the hooks too."""
    import torch

    torch.cuda.init()
    trees = torch.cuda.graph_pool_handle()
    torch._C._cuda_beginAllocateCurrentThreadToPool(0, trees)
    alloc(30 * MIB, "CHILD_EXPECT")
    torch._C._cuda_endAllocateToPool(0, trees)


def scenarios():
    import torch

    torch.cuda.init()
    C = torch._C
    wrapped = getattr(C._cuda_beginAllocateCurrentThreadToPool, "_vramledger_wrapped", False)
    print("WRAPPED %s" % wrapped)

    # 1. The default pool.
    alloc(64 * MIB)
    alloc(4 * MIB)

    # 2. CUDA-graph trees warm up in their pool outside any capture: this thread only.
    trees = torch.cuda.graph_pool_handle()
    C._cuda_beginAllocateCurrentThreadToPool(0, trees)
    alloc(2 * MIB)
    alloc(32 * MIB)
    on_thread(lambda: alloc(20 * MIB))  # another thread: the default pool
    C._cuda_endAllocateToPool(0, trees)
    C._cuda_releasePool(0, trees)
    alloc(2 * MIB)

    # 3. A window for every thread.
    everyone = torch.cuda.graph_pool_handle()
    C._cuda_beginAllocateToPool(0, everyone)
    on_thread(lambda: alloc(6 * MIB))
    C._cuda_endAllocateToPool(0, everyone)

    # 4. use_mem_pool, through the names torch.cuda.memory bound at its import.
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        alloc(8 * MIB)

    # 5. A capture sharing a pool, paused inside (vLLM's symmetric-memory context) and resumed.
    shared = torch.cuda.graph_pool_handle()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=shared):
        alloc(12 * MIB)
        C._cuda_endAllocateToPool(0, shared)
        alloc(3 * MIB)  # the default pool, inside the capture
        C._cuda_beginAllocateCurrentThreadToPool(0, shared)
        alloc(14 * MIB)
    alloc(1 * MIB)

    # 6. A capture without a pool: its id is known only after capture_end.
    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2):
        alloc(16 * MIB)
    print("CAPTURE_POOL %d,%d" % tuple(g2.pool()))

    # 7. Nested windows on one thread: the first one opened wins, as in torch.
    outer, inner = torch.cuda.graph_pool_handle(), torch.cuda.graph_pool_handle()
    C._cuda_beginAllocateCurrentThreadToPool(0, outer)
    C._cuda_beginAllocateCurrentThreadToPool(0, inner)
    alloc(18 * MIB)
    C._cuda_endAllocateToPool(0, outer)
    alloc(22 * MIB)
    C._cuda_endAllocateToPool(0, inner)

    # 8. torch refuses a second window on the same pool: the exception reaches the caller
    #    unchanged and the window stays as torch has it (one).
    again = torch.cuda.graph_pool_handle()
    C._cuda_beginAllocateCurrentThreadToPool(0, again)
    try:
        C._cuda_beginAllocateCurrentThreadToPool(0, again)
        print("RAISED False")
    except RuntimeError as exc:
        print("RAISED %s %s" % (True, "already recording" in str(exc)))
    alloc(24 * MIB)
    C._cuda_endAllocateToPool(0, again)
    alloc(26 * MIB)

    print("DONE")


def main():
    if "--no-torch" in sys.argv:
        # A Python program that never imports torch: the hooks must cost nothing.
        print("CTYPES_LOADED %s" % ("ctypes" in sys.modules))
        print("HOOK_MODULE %s" % ("vramledger_pools" in sys.modules))
        return 0
    if "--spawn" in sys.argv:
        import multiprocessing

        child = multiprocessing.get_context("spawn").Process(target=spawned_child)
        child.start()
        child.join()
        return child.exitcode
    if "--late" in sys.argv:
        # torch first, the hooks after (as a package that installs them at run time would):
        # torch.cuda.memory bound the originals, the late install rebinds them.
        import os

        import torch  # noqa: F401

        sys.path.insert(0, os.environ["BOOT_DIR"])
        import vramledger_pools

        print("LATE_INSTALL %s" % vramledger_pools.install())
    scenarios()
    return 0


if __name__ == "__main__":
    sys.exit(main())
