"""Signal handlers in a CUDA process under vramledger (which puts them behind trampolines).

CPython installs its C handlers with sigaction; a Python handler runs after the C one returned.
This program holds device memory, enables faulthandler, prints an SGLang stage line from a
Python SIGUSR1 handler (the tap must see it: it runs outside the C handler), allocates more,
and with --crash dies of SIGSEGV (faulthandler must still dump the traceback and re-raise).

    python3 examples/signal_handlers.py [--crash]
"""

import faulthandler
import os
import signal
import sys

import torch

MiB = 1 << 20

faulthandler.enable()
held = [torch.empty(256 * MiB, dtype=torch.uint8, device="cuda")]


def on_usr1(sig, frame):
    free = torch.cuda.mem_get_info()[0] / (1 << 30)
    print(f"[2025-03-08 12:29:21 TP0] Load weight begin. avail mem={free:.2f} GB", flush=True)


signal.signal(signal.SIGUSR1, on_usr1)
assert signal.getsignal(signal.SIGUSR1) is on_usr1
os.kill(os.getpid(), signal.SIGUSR1)
held.append(torch.empty(128 * MiB, dtype=torch.uint8, device="cuda"))
torch.cuda.synchronize()
print("signals: python handler ran, held", sum(t.numel() for t in held), flush=True)
if "--crash" in sys.argv:
    os.kill(os.getpid(), signal.SIGSEGV)
