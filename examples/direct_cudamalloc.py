"""Device memory taken behind PyTorch's back by a third-party library (libdirectalloc.so).

After torch has initialised CUDA, libdirectalloc.so (examples/direct_alloc.c) allocates
64 MiB with cuMemAlloc_v2 (driver, through dlopen("libcuda.so.1") + dlsym) and 48 MiB with
cudaMalloc (through the libcudart that torch itself loaded). memory_reserved does not move;
device free memory drops by both. Then both are freed.

The library is taken from $DIRECTALLOC_LIB, else examples/build/libdirectalloc.so, else it is
compiled into a temporary folder with gcc (needs gcc; no CUDA headers).
"""

import ctypes
import glob
import os
import subprocess
import sys
import tempfile

import torch

from vramledger_marks import checkpoint, checksum, init_cuda, say

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20
CU_BYTES = 64 * MiB
RT_BYTES = 48 * MiB


def build_library():
    """Path of libdirectalloc.so, compiled on the spot when no built copy is found."""
    env_path = os.environ.get("DIRECTALLOC_LIB")
    if env_path:
        return env_path
    built = os.path.join(HERE, "build", "libdirectalloc.so")
    if os.path.exists(built):
        return built
    out_dir = tempfile.mkdtemp(prefix="directalloc-")
    out = os.path.join(out_dir, "libdirectalloc.so")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)  # no journal for the compiler
    subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", "-o", out, os.path.join(HERE, "direct_alloc.c"), "-ldl"],
        check=True, env=env, stdout=sys.stderr,
    )
    return out


def cudart_path():
    """The libcudart this process loaded for torch (from /proc/self/maps), else the wheel's."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and "libcudart.so" in os.path.basename(parts[5]):
                return parts[5]
    candidates = []
    for site in sys.path:
        candidates += glob.glob(os.path.join(site, "nvidia", "cu13", "lib", "libcudart.so*"))
        candidates += glob.glob(os.path.join(site, "nvidia", "cuda_runtime", "lib", "libcudart.so*"))
    if candidates:
        return sorted(candidates)[0]
    return "libcudart.so.13"


def main():
    lib_path = build_library()
    dev = init_cuda(0)
    checkpoint("init", 0)

    gen = torch.Generator(device=dev)
    gen.manual_seed(5)
    t = torch.rand(8 * MiB // 4, device=dev, generator=gen)
    say("torch_tensor", checksum(t))
    checkpoint("after_torch_tensor", 0)

    rt = cudart_path()
    sys.stderr.write("direct_cudamalloc: libdirectalloc=%s cudart=%s\n" % (lib_path, rt))
    lib = ctypes.CDLL(lib_path)
    u64 = ctypes.c_ulonglong
    lib.da_init.argtypes = [ctypes.c_char_p]
    lib.da_error.restype = ctypes.c_char_p
    for fn in (lib.da_cu_alloc, lib.da_rt_alloc):
        fn.argtypes = [ctypes.c_size_t, ctypes.POINTER(u64)]
    for fn in (lib.da_cu_fill_check, lib.da_rt_fill_check):
        fn.argtypes = [u64, ctypes.c_size_t, ctypes.c_uint, ctypes.POINTER(u64)]
    for fn in (lib.da_cu_free, lib.da_rt_free):
        fn.argtypes = [u64]

    rc = lib.da_init(rt.encode())
    say("da_init", rc)
    if rc != 0:
        sys.stderr.write("da_init failed: %s\n" % lib.da_error().decode(errors="replace"))
        return 1

    cu_ptr = u64(0)
    rc = lib.da_cu_alloc(CU_BYTES, ctypes.byref(cu_ptr))
    say("cuMemAlloc_v2", "bytes=%d" % CU_BYTES, "result=%d" % rc, "nonnull=%s" % (cu_ptr.value != 0))
    rt_ptr = u64(0)
    rc2 = lib.da_rt_alloc(RT_BYTES, ctypes.byref(rt_ptr))
    say("cudaMalloc", "bytes=%d" % RT_BYTES, "result=%d" % rc2, "nonnull=%s" % (rt_ptr.value != 0))
    if rc != 0 or rc2 != 0:
        return 1

    s = u64(0)
    say("cu_fill_check", "result=%d" % lib.da_cu_fill_check(cu_ptr, CU_BYTES, 0x5A, ctypes.byref(s)),
        "sum=%d" % s.value)
    say("rt_fill_check", "result=%d" % lib.da_rt_fill_check(rt_ptr, RT_BYTES, 0xA5, ctypes.byref(s)),
        "sum=%d" % s.value)
    checkpoint("after_direct_alloc", 0)

    say("cuMemFree_v2", "result=%d" % lib.da_cu_free(cu_ptr))
    checkpoint("after_cu_free", 0)
    say("cudaFree", "result=%d" % lib.da_rt_free(rt_ptr))
    checkpoint("after_direct_free", 0)

    del t
    torch.cuda.empty_cache()
    checkpoint("end", 0)
    say("done", "direct_cudamalloc")
    return 0


if __name__ == "__main__":
    sys.exit(main())
