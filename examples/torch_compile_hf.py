"""A Hugging Face Llama compiled with torch.compile(mode="reduce-overhead"): CUDA-graph trees.

Plain PyTorch as many people run it: a `LlamaForCausalLM` built from a config (random weights
from a fixed seed, bf16), compiled with inductor's CUDA-graph trees, then a few greedy decode
steps at two batch shapes. CUDA-graph trees warm up and record into a private memory pool of
their own, partly outside any stream-capture window, which is what this workload exercises.

Ground truth, on stdout, from torch's own allocator snapshot (`torch.cuda.memory._snapshot()`):

    VRAMLEDGER_TORCH {"reserved": ..., "allocated": ..., "pools": {"0,0": bytes, "0,1": bytes},
                      "segments": [[address, bytes, "pool"], ...], "checksum": ...}

Pool "0,0" is the default pool; every other id is a private pool (CUDA graphs, MemPool).

    python3 examples/torch_compile_hf.py [--layers 4] [--hidden 1024] [--steps 6] [--seed 1234]
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

PREFIX = "VRAMLEDGER_TORCH "


def build(args):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=32000,
        hidden_size=args.hidden,
        intermediate_size=args.hidden * 4,
        num_hidden_layers=args.layers,
        num_attention_heads=args.hidden // 128,
        num_key_value_heads=max(1, args.hidden // 512),
        max_position_embeddings=2048,
    )
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
    return model


def pool_summary():
    snap = torch.cuda.memory._snapshot()
    pools, segments = {}, []
    for seg in snap["segments"]:
        pid = seg.get("segment_pool_id", (0, 0))
        key = f"{pid[0]},{pid[1]}"
        pools[key] = pools.get(key, 0) + seg["total_size"]
        segments.append([seg["address"], seg["total_size"], key])
    return pools, segments


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--seed", type=int, default=1234)
    args = p.parse_args()

    model = build(args)
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=False)
    checksum = 0
    with torch.inference_mode():
        for batch in (4, 8):
            ids = torch.randint(0, 32000, (batch, 16), device="cuda",
                                generator=torch.Generator("cuda").manual_seed(args.seed + batch))
            for _ in range(args.steps):
                logits = compiled(input_ids=ids).logits
                nxt = logits[:, -1, :].argmax(-1)
                checksum = (checksum * 31 + int(nxt.sum().item())) % (1 << 61)
    torch.cuda.synchronize()
    pools, segments = pool_summary()
    out = {
        "reserved": torch.cuda.memory_reserved(),
        "allocated": torch.cuda.memory_allocated(),
        "pools": pools,
        "segments": segments,
        "checksum": checksum,
    }
    sys.stdout.write(PREFIX + json.dumps(out, sort_keys=True) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
