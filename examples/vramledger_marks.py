"""Checkpoint helper shared by the example workloads.

`checkpoint(name, device)` reads PyTorch's own memory figures for `device`, prints one line

    VRAMLEDGER_CHECK {"name": ..., "device": ..., "reserved": ..., "allocated": ...,
                      "free": ..., "total": ..., "pid": ...}

and, in the same instant, calls `vramledger_stage("checkpoint:<name>")` when libvramledger.so
is loaded in this process (LD_PRELOAD). Without the library the call is skipped silently, so
the workloads run the same way with and without the preload.

Every other line a workload prints goes through `say()` and must be deterministic, so that
the stdout of a plain run and of a hooked run can be compared byte for byte once the
VRAMLEDGER_CHECK lines are dropped.
"""

import ctypes
import json
import os
import sys

CHECK_PREFIX = "VRAMLEDGER_CHECK "

_stage_fn = None
_stage_looked_up = False


def _lookup_stage():
    """The library's `vramledger_stage(const char *)`, or None when it is not loaded."""
    global _stage_fn, _stage_looked_up
    if _stage_looked_up:
        return _stage_fn
    _stage_looked_up = True
    try:
        fn = getattr(ctypes.CDLL(None), "vramledger_stage")
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_char_p]
    fn.restype = None
    _stage_fn = fn
    return fn


def library_loaded():
    return _lookup_stage() is not None


def stage(name):
    """Marks a stage in the journal; returns True when the library took it."""
    fn = _lookup_stage()
    if fn is None:
        return False
    fn(name.encode("utf-8"))
    return True


def _write_line(line):
    # One write per line, flushed at once: lines of several processes sharing one stdout
    # (the NCCL example) never interleave inside a line.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def say(*parts):
    """Prints one deterministic line."""
    _write_line(" ".join(str(p) for p in parts))


def checkpoint(name, device=0):
    """Prints a VRAMLEDGER_CHECK line for `device` and marks "checkpoint:<name>"."""
    import torch

    dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    # Let queued work (and the frees the caching allocator defers to events) settle first;
    # nothing below allocates device memory.
    torch.cuda.synchronize(index)
    reserved = torch.cuda.memory_reserved(index)
    allocated = torch.cuda.memory_allocated(index)
    free, total = torch.cuda.mem_get_info(index)
    stage("checkpoint:" + name)
    record = {
        "name": name,
        "device": index,
        "reserved": int(reserved),
        "allocated": int(allocated),
        "free": int(free),
        "total": int(total),
        "pid": os.getpid(),
    }
    _write_line(CHECK_PREFIX + json.dumps(record))
    return record


def checksum(t):
    """A deterministic summary of a tensor: shape, dtype, float64 sums computed on the CPU."""
    import torch

    x = t.detach().to("cpu").to(torch.float64)
    return "shape=%s dtype=%s sum=%.6e abs=%.6e" % (
        "x".join(str(d) for d in t.shape),
        str(t.dtype).replace("torch.", ""),
        x.sum().item(),
        x.abs().sum().item(),
    )


def init_cuda(device=0):
    """Initialises CUDA on `device` (context + one small tensor) and returns the device."""
    import torch

    if not torch.cuda.is_available():
        sys.stderr.write("no CUDA device visible\n")
        sys.exit(2)
    torch.cuda.set_device(device)
    torch.cuda.init()
    torch.ones(1, device=torch.device("cuda", device)).sum().item()
    return torch.device("cuda", device)
