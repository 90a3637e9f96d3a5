"""A real vLLM engine, offline: dummy weights from a config.json, token-id prompts, greedy decode.

Needs no weights, no tokenizer and no network: the model folder holds only a `config.json`
(written from the Llama-3.1-8B configuration below unless `--model-dir` already has one),
`load_format="dummy"` fills the weights with random numbers from vLLM's fixed seed and
`skip_tokenizer_init=True` lets prompts be token ids. Greedy decoding (temperature 0,
`ignore_eos`) makes the output token ids a function of the weights and the prompts only, so a
plain run and a run under `vramledger run` can be compared id for id.

On stdout, one line each (vLLM's own INFO lines go to stdout too, its tqdm bars to stderr):

    VRAMLEDGER_VLLM {"phase": "ready", "startup_s": ..., "num_gpu_blocks": ..., "block_size": ...}
    VRAMLEDGER_VLLM {"phase": "decode", "requests": ..., "tokens": ..., "seconds": ..., "tok_s": ...,
                     "rounds_tok_s": [...], "tok_s_median": ...}
    VRAMLEDGER_VLLM {"phase": "result", "output_sha256": ..., "first_ids": [...], ...}

`startup_s` runs from the start of this interpreter (the process's own start time) to the
moment `LLM(...)` returned. Decoding is timed after a warm-up batch, `--rounds` times with the
same prompts: `seconds`/`tok_s` are the first round's, `tok_s_median` the median over the rounds
(the in-run figure an A/B compares); `output_sha256` hashes the first round's token ids, and
`rounds_identical` says whether every round produced the same ids.

    python3 examples/engines/vllm_offline.py [--model-dir DIR] [--gpu-memory-utilization 0.5]
        [--requests 512] [--prompt-len 32] [--max-tokens 128] [--warmup 64] [--rounds 1]
        [--layers N] [--max-model-len 4096] [--cudagraph-sizes 1,2,4,8,16,32,64,128]
        [--tp 1] [--enforce-eager]
"""

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time

# NVLink multicast must stay off on the shared GPU machines.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
# flashinfer is not carried to the GPU machine.
os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")

PREFIX = "VRAMLEDGER_VLLM "

# meta-llama/Llama-3.1-8B's config.json (public), the shape the runs used.
LLAMA_31_8B = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 128256,
}


def process_start_time():
    """Wall-clock start of this process (Linux: /proc/self/stat field 22, in clock ticks)."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.time()


def emit(obj):
    sys.stdout.write(PREFIX + json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def model_dir(args):
    path = args.model_dir or tempfile.mkdtemp(prefix="vllm-model-")
    cfg_path = os.path.join(path, "config.json")
    if not os.path.exists(cfg_path):
        os.makedirs(path, exist_ok=True)
        cfg = dict(LLAMA_31_8B)
        if args.layers:
            cfg["num_hidden_layers"] = args.layers
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=2)
    return path


def prompts(n, length, vocab, seed):
    """Deterministic token-id prompts (a linear congruential sequence; no numpy needed)."""
    out, x = [], seed
    for _ in range(n):
        ids = []
        for _ in range(length):
            x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            ids.append(100 + (x >> 33) % (vocab - 200))
        out.append({"prompt_token_ids": ids})
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model-dir")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.5)
    p.add_argument("--requests", type=int, default=512)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--warmup", type=int, default=64)
    p.add_argument("--rounds", type=int, default=1, help="timed decode rounds (median reported)")
    p.add_argument("--layers", type=int, default=0, help="override num_hidden_layers")
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--cudagraph-sizes", default="1,2,4,8,16,32,64,128")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--seed", type=int, default=1234)
    args = p.parse_args()

    t0 = process_start_time()
    from vllm import LLM, SamplingParams  # noqa: E402 (after the environment is set)

    kwargs = dict(
        model=model_dir(args),
        load_format="dummy",
        skip_tokenizer_init=True,
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_model_len=args.max_model_len,
        tensor_parallel_size=args.tp,
        enforce_eager=args.enforce_eager,
        seed=args.seed,
    )
    if not args.enforce_eager and args.cudagraph_sizes:
        sizes = [int(s) for s in args.cudagraph_sizes.split(",") if s]
        kwargs["compilation_config"] = {"cudagraph_capture_sizes": sizes}
    llm = LLM(**kwargs)
    ready = time.time()
    cache = llm.llm_engine.vllm_config.cache_config
    emit(
        {
            "phase": "ready",
            "startup_s": round(ready - t0, 3),
            "num_gpu_blocks": cache.num_gpu_blocks,
            "block_size": cache.block_size,
        }
    )

    vocab = LLAMA_31_8B["vocab_size"]
    greedy = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, ignore_eos=True)
    if args.warmup:
        llm.generate(prompts(args.warmup, args.prompt_len, vocab, args.seed + 1), greedy, use_tqdm=False)
    batch = prompts(args.requests, args.prompt_len, vocab, args.seed)
    rounds, first_ids, identical = [], None, True
    for _ in range(max(1, args.rounds)):
        start = time.perf_counter()
        outs = llm.generate(batch, greedy, use_tqdm=False)
        seconds = time.perf_counter() - start
        ids = [list(o.outputs[0].token_ids) for o in outs]
        tokens = sum(len(x) for x in ids)
        rounds.append((seconds, tokens))
        if first_ids is None:
            first_ids = ids
        else:
            identical = identical and ids == first_ids
    seconds, tokens = rounds[0]
    emit(
        {
            "phase": "decode",
            "requests": len(first_ids),
            "tokens": tokens,
            "seconds": round(seconds, 4),
            "tok_s": round(tokens / seconds, 1),
            "rounds_tok_s": [round(t / s, 1) for s, t in rounds],
            "tok_s_median": round(statistics.median(t / s for s, t in rounds), 1),
        }
    )
    digest = hashlib.sha256(json.dumps(first_ids).encode()).hexdigest()
    emit(
        {
            "phase": "result",
            "output_sha256": digest,
            "first_ids": first_ids[0][:8],
            "requests": len(first_ids),
            "rounds_identical": identical,
        }
    )


if __name__ == "__main__":
    main()
