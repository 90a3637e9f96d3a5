"""CUDA graphs the way SGLang captures them: one private pool shared by every batch size.

A small bf16 MLP is warmed up on a side stream, then captured with torch.cuda.CUDAGraph for
batch sizes 8, 4, 2, 1 (largest first, as SGLang does) into one pool from
torch.cuda.graph_pool_handle(); the graphs are replayed with fresh inputs and compared with
eager results. Checkpoints before and after each capture show the graph pool inside
memory_reserved.
"""

import sys

import torch

from vramledger_marks import checkpoint, checksum, init_cuda, say

BATCH_SIZES = [8, 4, 2, 1]
HIDDEN = 1024
INNER = 4096
DTYPE = torch.bfloat16


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(HIDDEN, INNER)
        self.down = torch.nn.Linear(INNER, HIDDEN)
        self.norm = torch.nn.LayerNorm(HIDDEN)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.up(self.norm(x)))
        return x + self.down(h)


def main():
    dev = init_cuda(0)
    checkpoint("init", 0)

    torch.manual_seed(7)
    model = MLP().to(device=dev, dtype=DTYPE).eval()
    say("model_params", sum(p.numel() for p in model.parameters()))
    checkpoint("after_model", 0)

    gen = torch.Generator(device=dev)
    gen.manual_seed(99)
    static_in = {bs: torch.zeros(bs, HIDDEN, device=dev, dtype=DTYPE) for bs in BATCH_SIZES}
    static_out = {}

    with torch.no_grad():
        side = torch.cuda.Stream(device=dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(3):
                for bs in BATCH_SIZES:
                    model(static_in[bs])
        torch.cuda.current_stream(dev).wait_stream(side)
        say("warmup", "done")
        checkpoint("after_warmup", 0)

        pool = torch.cuda.graph_pool_handle()
        graphs = {}
        checkpoint("before_capture", 0)
        for bs in BATCH_SIZES:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                static_out[bs] = model(static_in[bs])
            graphs[bs] = g
            say("captured", "bs=%d" % bs, "out_shape=%s" % "x".join(map(str, static_out[bs].shape)))
            checkpoint("after_capture_bs%d" % bs, 0)
        checkpoint("after_capture", 0)

        for round_no in range(2):
            for bs in BATCH_SIZES:
                x = torch.randn(bs, HIDDEN, device=dev, generator=gen).to(DTYPE)
                static_in[bs].copy_(x)
                graphs[bs].replay()
                torch.cuda.synchronize(dev)
                eager = model(x)
                diff = (static_out[bs].float() - eager.float()).abs().max().item()
                say("replay", "round=%d" % round_no, "bs=%d" % bs, checksum(static_out[bs]),
                    "max_abs_diff_vs_eager=%.3e" % diff)
        checkpoint("after_replay", 0)

        del graphs, static_out, g, pool
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()
        say("graphs_released", "done")
        checkpoint("after_release", 0)

    del model, static_in
    torch.cuda.empty_cache()
    checkpoint("end", 0)
    say("done", "torch_graphs")


if __name__ == "__main__":
    sys.exit(main())
