"""NCCL all-reduce, one process per GPU (world size = visible GPUs, at most 2; 1 works too).

Processes are started with torch.multiprocessing.spawn (no torchrun); the process group uses
a file:// rendezvous in a fresh temporary folder. Each rank checkpoints on its own device
(device = rank) around init_process_group, the all-reduces, the barrier and
destroy_process_group. NCCL's own buffers (cuMemCreate/cuMemMap from libnccl) are memory
PyTorch never sees.

The deterministic result lines of every rank are written to a file and printed by the parent
in rank order after all ranks finished; VRAMLEDGER_CHECK lines are printed by each rank as
they happen (their order between ranks is not deterministic; comparisons drop them).
"""

import datetime
import os
import shutil
import sys
import tempfile

# NVLink multicast must stay off on the shared GPU machines.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from vramledger_marks import checkpoint, init_cuda  # noqa: E402

SIZES = [1 << 10, 1 << 18, 1 << 24]  # elements per all-reduce
DTYPES = [torch.float32, torch.bfloat16]


def worker(rank, world, init_file, outdir):
    lines = []

    def note(*parts):
        lines.append(" ".join(str(p) for p in parts))

    dev = init_cuda(rank)
    checkpoint("rank_init", rank)

    dist.init_process_group(
        "nccl",
        init_method="file://" + init_file,
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=180),
        device_id=dev,
    )
    note("rank", rank, "world", dist.get_world_size(), "backend", dist.get_backend())
    checkpoint("after_init_process_group", rank)

    rank_sum = world * (world + 1) // 2  # sum over ranks of (r + 1)
    for dtype in DTYPES:
        for n in SIZES:
            base = (torch.arange(n, device=dev, dtype=torch.int64) % 61).to(dtype)
            t = base * 1 + (rank + 1)
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
            expected = base * world + rank_sum
            exact = bool(torch.equal(t, expected))
            total = t.to(torch.float64).sum().item()  # sums of small integers: exact
            note("rank", rank, "all_reduce", str(dtype).replace("torch.", ""), "n=%d" % n,
                 "exact=%s" % exact, "sum=%.1f" % total)
            del base, t, expected
        torch.cuda.synchronize(dev)
        checkpoint("after_allreduce_%s" % str(dtype).replace("torch.", ""), rank)

    dist.barrier(device_ids=[rank])
    note("rank", rank, "barrier", "done")
    checkpoint("after_barrier", rank)

    dist.destroy_process_group()
    note("rank", rank, "destroyed", "yes")
    checkpoint("after_destroy", rank)

    torch.cuda.empty_cache()
    checkpoint("end", rank)
    with open(os.path.join(outdir, "rank%d.txt" % rank), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    count = torch.cuda.device_count()
    if count < 1:
        sys.stderr.write("nccl_allreduce: no CUDA device visible\n")
        return 2
    world = min(count, 2)
    tmp = tempfile.mkdtemp(prefix="nccl_allreduce-")
    try:
        init_file = os.path.join(tmp, "rendezvous")
        outdir = os.path.join(tmp, "out")
        os.mkdir(outdir)
        print("world_size %d" % world, flush=True)
        mp.spawn(worker, args=(world, init_file, outdir), nprocs=world, join=True)
        for rank in range(world):
            with open(os.path.join(outdir, "rank%d.txt" % rank)) as f:
                sys.stdout.write(f.read())
        print("done nccl_allreduce", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
