"""An SGLang-0.5.5-shaped TP worker startup: real numbers, SGLang's own log lines.

One process per GPU (torch.multiprocessing.spawn, world size = min(2, visible GPUs) unless
--tp says otherwise). Each rank goes through the startup of an SGLang 0.5.5 `ModelRunner`
(docs: sglang-memory.md §1 "L2") and logs what SGLang logs, measured the way SGLang measures:

  1. distributed init: NCCL `init_process_group` (file:// rendezvous), a gloo group standing
     for SGLang's world CPU group, the PyNccl warm-up all-reduce (only when world > 1, as in
     SGLang), then the baseline `pre_model_load_memory` = get_available_gpu_memory(
     distributed=world > 1): empty_cache, mem_get_info free, all-reduce MIN over the CPU group
     as a float32 tensor of bytes, / 2^30;
  2. weight load: a decoder-only Llama-shaped model built from a config dict (vocab-parallel
     embedding and LM head, N layers of fused QKV / O / fused gate-up / down, TP-sharded, bf16,
     random weights from a fixed seed);
  3. memory pool: SGLang 0.5.5 `profile_max_num_token` (cell size = kv_heads/tp * head_dim *
     2 * layers * 2 bytes; rest = available after weights - pre * (1 - mem_fraction_static)),
     the max_total_tokens cap, the ReqToTokenPool, per-layer K and V buffers of
     (tokens + page_size) rows (torch.zeros, as SGLang's MHATokenToKVPool) and the token
     allocator's free list;
  4. init_cublas + an attention-backend workspace, then "Capture cuda graph": one
     torch.cuda.CUDAGraph per batch size (largest first), all in one pool from
     torch.cuda.graph_pool_handle(), each a decode step of the whole model (KV write into the
     pool, single-token attention over a window of the KV buffers, MLP, LM head, argmax),
     warmed up twice on the capture stream first, as SGLang does;
  5. the "max_total_num_tokens=..." summary (TP rank 0 only, as SGLang; --summary-on-all-ranks
     prints it on every rank);
  6. decode steps replaying the graphs (batch sizes in rotation), a checksum per rank,
     barrier, destroy_process_group.

Where the lines go (as SGLang): the SGLang lines through Python's logging (one StreamHandler on
the root logger, stderr, one write per record) with SGLang's 0.5.5 prefix
"[%Y-%m-%d %H:%M:%S TP{rank}] " (the TP tag only when tp > 1, exactly as SGLang; with tp = 1 the
prefix is "[%Y-%m-%d %H:%M:%S] "). On stdout: one `VRAMLEDGER_SGLANG {json}` line per rank after
each memory line (the exact bytes behind the printed GiB figures; order between ranks is not
deterministic), and deterministic lines: the cap line, then, after all ranks finished, the
result lines of every rank in rank order. Comparisons of two runs drop the VRAMLEDGER_ lines.

Nothing here uses NVLink multicast (NCCL_NVLS_ENABLE=0 is kept) or cuMulticastCreate; no
collective runs inside a CUDA graph.

    python3 examples/sglang_shape.py [--tp N] [--cuda-graph-bs 1,2,4,8,16]
        [--mem-fraction-static F] [--max-total-tokens N] [--model-layers 8] [--hidden 2048]
        [--kv-heads 8] [--head-dim 128] [--max-steps 8] [--seed 1234]
"""

import argparse
import datetime
import json
import logging
import os
import shutil
import sys
import tempfile
import time

# NVLink multicast must stay off on the shared GPU machines.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

SGLANG_PREFIX = "VRAMLEDGER_SGLANG "
GB = 1 << 30  # SGLang's "GB" is GiB
DTYPE = torch.bfloat16
PAGE_SIZE = 1
MAX_PREFILL_TOKENS = 16384  # ServerArgs default
ATTN_WORKSPACE_BYTES = 128 << 20  # stands for the attention backend's workspace buffer
DEFAULT_KV_CAP_GIB = 8  # keeps the run short: KV pool of at most ~8 GiB per GPU

logger = logging.getLogger("sglang_shape")


# ---------------------------------------------------------------- server args (main process)


def sglang_055_gpu_defaults(gpu_mem_mib, tp_size, pp_size=1):
    """SGLang 0.5.5 `_handle_gpu_memory_settings` (GPU tiers, no DP attention, no spec)."""
    g = 1024
    tp_small = tp_size < 4
    if gpu_mem_mib is None:
        cps, graph_max_bs = 4096, 160
    elif gpu_mem_mib < 20 * g:
        cps, graph_max_bs = 2048, 8
    elif gpu_mem_mib < 35 * g:
        cps, graph_max_bs = 2048, 24 if tp_small else 80
    elif gpu_mem_mib < 60 * g:
        cps, graph_max_bs = 4096, 32 if tp_small else 160
    elif gpu_mem_mib < 90 * g:
        cps, graph_max_bs = 8192, 256 if tp_small else 512
    elif gpu_mem_mib < 160 * g:
        cps, graph_max_bs = 8192, 256 if tp_small else 512
    else:
        cps, graph_max_bs = 16384, 512
    reserved_mem = 512
    reserved_mem += max(cps, 2048) * 1.5
    reserved_mem += graph_max_bs * 2
    reserved_mem += tp_size * pp_size / 8 * 1024
    if gpu_mem_mib is not None and gpu_mem_mib > 60 * 1024:
        reserved_mem = max(reserved_mem, 10 * 1024)
    if gpu_mem_mib is not None:
        mfs = round((gpu_mem_mib - reserved_mem) / gpu_mem_mib, 3)
    else:
        mfs = 0.88
    return mfs, cps, graph_max_bs


def gpu_memory_capacity_mib(count):
    """Min capacity in MiB, as SGLang reads it: nvidia-smi's memory.total over every GPU it
    lists (NVML's total), falling back to torch's total_memory (the driver's, smaller by what
    the driver keeps: 615 MiB on an H200). Neither needs a CUDA context."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            caps = [pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).total / (1 << 20)
                    for i in range(pynvml.nvmlDeviceGetCount())]
        finally:
            pynvml.nvmlShutdown()
        if caps:
            return min(caps)
    except Exception:  # no NVML bindings: the driver's figure
        pass
    caps = [torch.cuda.get_device_properties(i).total_memory / (1 << 20) for i in range(count)]
    return min(caps) if caps else None


def model_config(args, tp):
    num_heads = args.num_heads or args.hidden // args.head_dim
    if num_heads % tp:
        raise SystemExit("sglang_shape: num_heads %d is not divisible by tp %d" % (num_heads, tp))
    if args.intermediate % tp or args.vocab % tp:
        raise SystemExit("sglang_shape: intermediate and vocab must be divisible by tp")
    kv_local = max(1, args.kv_heads // tp)  # SGLang get_num_kv_heads(tp)
    if (num_heads // tp) % kv_local:
        raise SystemExit("sglang_shape: local q heads not a multiple of local kv heads")
    return {
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": args.hidden,
        "num_hidden_layers": args.model_layers,
        "num_attention_heads": num_heads,
        "num_key_value_heads": args.kv_heads,
        "head_dim": args.head_dim,
        "intermediate_size": args.intermediate,
        "vocab_size": args.vocab,
        "max_position_embeddings": args.context_len,
        "rms_norm_eps": 1e-5,
        "torch_dtype": "bfloat16",
    }


def cell_size_bytes(cfg, tp):
    """SGLang 0.5.5 MHA cell: get_num_kv_heads(tp) * head_dim * layers * 2 (K, V) * isz."""
    kv_local = max(1, cfg["num_key_value_heads"] // tp)
    isz = torch.tensor([], dtype=DTYPE).element_size()
    return kv_local * cfg["head_dim"] * cfg["num_hidden_layers"] * 2 * isz


# ---------------------------------------------------------------- SGLang utilities (per rank)


def configure_logger(prefix):
    """SGLang's configure_logger: basicConfig on the root logger (a StreamHandler on stderr)."""
    logging.basicConfig(
        level=logging.INFO,
        format="[%(asctime)s" + prefix + "] %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        force=True,
    )
    for noisy in ("torch", "torch.distributed"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def get_available_gpu_memory(gpu_id, distributed=False, empty_cache=True, cpu_group=None):
    """SGLang's get_available_gpu_memory for cuda; returns (GiB as SGLang, the bytes behind it)."""
    if torch.cuda.current_device() != gpu_id:
        print("WARNING: current device is not %d, but %d, " % (gpu_id, torch.cuda.current_device())
              + "which may cause useless memory allocation for torch CUDA context.", flush=True)
    if empty_cache:
        torch.cuda.empty_cache()
    free_gpu_memory, _ = torch.cuda.mem_get_info(gpu_id)
    if distributed:
        tensor = torch.tensor(free_gpu_memory, dtype=torch.float32)
        dist.all_reduce(tensor, op=dist.ReduceOp.MIN, group=cpu_group)
        free_gpu_memory = tensor.item()
    return free_gpu_memory / (1 << 30), int(free_gpu_memory)


def raw_free(gpu_id):
    """Free bytes now, nothing released first (for the JSON lines only)."""
    return int(torch.cuda.mem_get_info(gpu_id)[0])


def emit(rank, device, line, **fields):
    """One VRAMLEDGER_SGLANG line: one write, flushed (never split between processes)."""
    record = {"pid": os.getpid(), "rank": rank, "device": device, "line": line}
    record.update(fields)
    sys.stdout.write(SGLANG_PREFIX + json.dumps(record) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------- the model


class LlamaForCausalLM(torch.nn.Module):
    """A TP shard of a Llama-shaped decoder; decode step only; weights random (fixed seed)."""

    def __init__(self, cfg, tp, rank, device, seed):
        super().__init__()
        self.hidden = cfg["hidden_size"]
        self.head_dim = cfg["head_dim"]
        self.num_heads = cfg["num_attention_heads"] // tp
        self.num_kv_heads = max(1, cfg["num_key_value_heads"] // tp)
        self.inter = cfg["intermediate_size"] // tp
        self.vocab_local = cfg["vocab_size"] // tp
        self.eps = cfg["rms_norm_eps"]
        self.num_layers = cfg["num_hidden_layers"]
        gen = torch.Generator(device=device)
        gen.manual_seed(seed * 1000 + rank)

        def weight(*shape):
            w = torch.empty(*shape, device=device, dtype=DTYPE)
            w.normal_(0.0, 0.02, generator=gen)
            return torch.nn.Parameter(w, requires_grad=False)

        def norm():
            return torch.nn.Parameter(torch.ones(self.hidden, device=device, dtype=DTYPE),
                                      requires_grad=False)

        qkv_out = (self.num_heads + 2 * self.num_kv_heads) * self.head_dim
        self.embed_tokens = weight(self.vocab_local, self.hidden)
        self.layers = torch.nn.ModuleList()
        for _ in range(self.num_layers):
            layer = torch.nn.Module()
            layer.input_layernorm = norm()
            layer.qkv_proj = weight(qkv_out, self.hidden)
            layer.o_proj = weight(self.hidden, self.num_heads * self.head_dim)
            layer.post_attention_layernorm = norm()
            layer.gate_up_proj = weight(2 * self.inter, self.hidden)
            layer.down_proj = weight(self.hidden, self.inter)
            self.layers.append(layer)
        self.norm = norm()
        self.lm_head = weight(self.vocab_local, self.hidden)

    def rms(self, x, w):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.to(DTYPE) * w

    def forward_decode(self, input_ids, out_cache_loc, window_idx, k_buffers, v_buffers):
        """One decode token per request: returns (next token ids [bs], |hidden| sums [bs])."""
        bs = input_ids.shape[0]
        window = window_idx.shape[1]
        nkv, hd = self.num_kv_heads, self.head_dim
        group = self.num_heads // nkv
        scale = hd ** -0.5
        flat_idx = window_idx.reshape(-1)
        x = self.embed_tokens.index_select(0, input_ids.remainder(self.vocab_local))
        for i, layer in enumerate(self.layers):
            h = self.rms(x, layer.input_layernorm)
            qkv = torch.matmul(h, layer.qkv_proj.t())
            q, k, v = qkv.split([self.num_heads * hd, nkv * hd, nkv * hd], dim=-1)
            k_buffers[i].index_copy_(0, out_cache_loc, k.reshape(bs, nkv, hd))
            v_buffers[i].index_copy_(0, out_cache_loc, v.reshape(bs, nkv, hd))
            kw = k_buffers[i].index_select(0, flat_idx).view(bs, window, nkv, hd)
            vw = v_buffers[i].index_select(0, flat_idx).view(bs, window, nkv, hd)
            qg = q.reshape(bs, nkv, group, hd)
            scores = torch.einsum("bkgd,bwkd->bkgw", qg, kw).float() * scale
            probs = scores.softmax(dim=-1).to(DTYPE)
            attn = torch.einsum("bkgw,bwkd->bkgd", probs, vw).reshape(bs, self.num_heads * hd)
            x = x + torch.matmul(attn, layer.o_proj.t())
            h = self.rms(x, layer.post_attention_layernorm)
            gate, up = torch.matmul(h, layer.gate_up_proj.t()).chunk(2, dim=-1)
            x = x + torch.matmul(torch.nn.functional.silu(gate) * up, layer.down_proj.t())
        h = self.rms(x, self.norm)
        logits = torch.matmul(h, self.lm_head.t())
        return logits.argmax(dim=-1), h.float().abs().sum(dim=-1)


class CudaGraphRunner:
    """SGLang's CudaGraphRunner, reduced: static buffers for max_bs, capture largest bs first
    into one shared pool, two warm-up runs per bs on the capture stream before its capture."""

    def __init__(self, model, k_buffers, v_buffers, capture_bs, window, device, rank,
                 cpu_group, show_bar):
        self.model = model
        self.k_buffers = k_buffers
        self.v_buffers = v_buffers
        self.capture_bs = sorted(capture_bs)
        self.window = window
        self.device = device
        max_bs = self.capture_bs[-1]
        # Static inputs (SGLang allocates them in the runner, inside the capture stage); the
        # zero locations point at the padding row 0 of the KV buffers, as SGLang's do.
        with torch.device(device):
            self.input_ids = torch.zeros((max_bs,), dtype=torch.int64)
            self.out_cache_loc = torch.zeros((max_bs,), dtype=torch.int64)
            self.window_idx = torch.zeros((max_bs, window), dtype=torch.int64)
        self.graphs = {}
        self.output = {}
        self.pool = torch.cuda.graph_pool_handle()
        stream = torch.cuda.Stream(device=device)
        order = list(reversed(self.capture_bs))
        bar = _Bar(len(order)) if show_bar else None
        with torch.no_grad():
            for i, bs in enumerate(order):
                if bar is not None:
                    avail, _ = get_available_gpu_memory(rank, empty_cache=False)
                    bar.show(i, "Capturing batches (bs=%d avail_mem=%.2f GB)" % (bs, avail))
                self.graphs[bs], self.output[bs] = self.capture_one(bs, stream, cpu_group)
            if bar is not None:
                bar.close()

    def run_once(self, bs):
        return self.model.forward_decode(self.input_ids[:bs], self.out_cache_loc[:bs],
                                         self.window_idx[:bs], self.k_buffers, self.v_buffers)

    def capture_one(self, bs, stream, cpu_group):
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(2):
                torch.cuda.synchronize(self.device)
                dist.barrier(group=cpu_group)
                self.run_once(bs)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool, stream=stream):
            out = self.run_once(bs)
        torch.cuda.synchronize(self.device)
        return graph, out

    def replay(self, bs, input_ids, out_cache_loc, window_idx):
        self.input_ids[:bs].copy_(input_ids)
        self.out_cache_loc[:bs].copy_(out_cache_loc)
        self.window_idx[:bs].copy_(window_idx)
        self.graphs[bs].replay()
        return self.output[bs]


class _Bar:
    """tqdm's look on stderr ('\\r'-separated), only with --tqdm (rank 0, as SGLang)."""

    def __init__(self, total):
        self.total = total
        self.desc = ""

    def show(self, n, desc):
        self.desc = desc
        pct = 100 * n // self.total
        sys.stderr.write("\r%s: %3d%%|%-10s| %d/%d" % (desc, pct, "#" * (pct // 10), n, self.total))
        sys.stderr.flush()

    def close(self):
        self.show(self.total, self.desc)
        sys.stderr.write("\n")
        sys.stderr.flush()


# ---------------------------------------------------------------- one TP worker


def worker(rank, world, sargs, cfg, init_file, outdir):
    prefix = (" TP%d" % rank) if world > 1 else ""
    configure_logger(prefix)
    lines = []

    def note(*parts):
        lines.append(" ".join(str(p) for p in parts))

    gpu_id = rank
    device = torch.device("cuda", gpu_id)
    torch.cuda.set_device(gpu_id)
    # The context exists before the first SGLang line, so the library can measure free memory
    # at that line; nothing the program made stays cached.
    torch.ones(1, device=device).sum().item()
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()

    # 1. ModelRunner.init_torch_distributed (0.5.5)
    logger.info("Init torch distributed begin.")
    torch.cuda.set_device(gpu_id)
    before_avail_memory, before_b = get_available_gpu_memory(gpu_id)
    dist.init_process_group(
        "nccl",
        init_method="file://" + init_file,
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=180),
        device_id=device,
    )
    cpu_group = dist.new_group(backend="gloo")  # SGLang's world CPU group
    if world > 1:
        # PyNcclCommunicator's warm-up (disabled for world size 1 in SGLang).
        data = torch.zeros(1, device=device)
        dist.all_reduce(data)
        torch.cuda.synchronize(device)
        del data
    min_per_gpu_memory, pre_b = get_available_gpu_memory(
        gpu_id, distributed=world > 1, cpu_group=cpu_group)
    local_gpu_memory, local_b = get_available_gpu_memory(gpu_id)
    if world > 1 and min_per_gpu_memory < local_gpu_memory * 0.9:
        # SGLang 0.5.5 raises here unless SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK is set.
        logger.warning(
            "The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
            f"{min_per_gpu_memory=}, {local_gpu_memory=}, {local_gpu_memory * 0.9=}")
    logger.info(
        f"Init torch distributed ends. mem usage={(before_avail_memory - local_gpu_memory):.2f} GB")
    emit(rank, gpu_id, "dist_init_end", avail_bytes=local_b, mem_usage_bytes=before_b - local_b,
         before_bytes=before_b, pre_model_load_bytes=pre_b,
         pre_model_load_gib=min_per_gpu_memory)

    # 2. load_model
    before_avail_memory, before_b = get_available_gpu_memory(gpu_id)
    logger.info(f"Load weight begin. avail mem={before_avail_memory:.2f} GB")
    emit(rank, gpu_id, "load_weight_begin", avail_bytes=before_b)
    model = LlamaForCausalLM(cfg, world, rank, device, sargs["random_seed"]).eval()
    torch.cuda.synchronize(device)
    after_avail_memory, after_b = get_available_gpu_memory(gpu_id)
    weight_load_mem_usage = before_avail_memory - after_avail_memory
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    logger.info(
        f"Load weight end. type={type(model).__name__}, dtype={DTYPE}, "
        f"avail mem={after_avail_memory:.2f} GB, mem usage={weight_load_mem_usage:.2f} GB.")
    emit(rank, gpu_id, "load_weight_end", avail_bytes=after_b, mem_usage_bytes=before_b - after_b,
         param_bytes=param_bytes)

    # 3. init_memory_pool(min_per_gpu_memory, ...) with profile_max_num_token (0.5.5)
    mfs = sargs["mem_fraction_static"]
    if rank == 0:
        logger.info(f"Using KV cache dtype: {DTYPE}")
    available_gpu_memory, available_b = get_available_gpu_memory(
        gpu_id, distributed=world > 1, cpu_group=cpu_group)
    cell_size = cell_size_bytes(cfg, world)
    rest_memory = available_gpu_memory - min_per_gpu_memory * (1 - mfs)
    profiled = int(rest_memory * (1 << 30) // cell_size)
    context_len = cfg["max_position_embeddings"]
    max_num_reqs = min(max(int(profiled / context_len * 512), 2048), 4096)
    max_total_num_tokens = profiled
    max_total_tokens = sargs["max_total_tokens"]
    if max_total_tokens is not None:
        if max_total_tokens > max_total_num_tokens:
            logging.warning(
                f"max_total_tokens={max_total_tokens} is larger than the profiled value "
                f"{max_total_num_tokens}. Use the profiled value instead.")
        max_total_num_tokens = min(max_total_num_tokens, max_total_tokens)
    max_total_num_tokens = max_total_num_tokens // PAGE_SIZE * PAGE_SIZE
    if max_total_num_tokens <= 0:
        raise RuntimeError(
            "Not enough memory. Please try to increase --mem-fraction-static. "
            f"Current value: self.server_args.mem_fraction_static={mfs}")
    nkv, hd = model.num_kv_heads, model.head_dim
    with torch.device(device):
        req_to_token = torch.zeros((max_num_reqs, context_len + 4), dtype=torch.int32)
        k_buffers = [torch.zeros((max_total_num_tokens + PAGE_SIZE, nkv, hd), dtype=DTYPE)
                     for _ in range(cfg["num_hidden_layers"])]
        v_buffers = [torch.zeros((max_total_num_tokens + PAGE_SIZE, nkv, hd), dtype=DTYPE)
                     for _ in range(cfg["num_hidden_layers"])]
    k_size = sum(b.numel() * b.element_size() for b in k_buffers)
    v_size = sum(b.numel() * b.element_size() for b in v_buffers)
    logger.info(f"KV Cache is allocated. #tokens: {max_total_num_tokens}, "
                f"K size: {k_size / GB:.2f} GB, V size: {v_size / GB:.2f} GB")
    emit(rank, gpu_id, "kv_cache_allocated", avail_bytes=None, tokens=max_total_num_tokens,
         k_bytes=k_size, v_bytes=v_size, cell_size=cell_size, profiled_tokens=profiled,
         available_gpu_memory_gib=available_gpu_memory, available_bytes=available_b,
         pre_model_load_gib=min_per_gpu_memory, mem_fraction_static=mfs,
         rest_memory_gib=rest_memory, max_total_tokens=max_total_tokens,
         max_num_reqs=max_num_reqs, req_to_token_bytes=req_to_token.numel() * 4,
         free_bytes=raw_free(gpu_id))
    # TokenToKVPoolAllocator's free list.
    free_pages = torch.arange(1, max_total_num_tokens + 1, dtype=torch.int64, device=device)
    torch.cuda.synchronize(device)
    pool_end, pool_end_b = get_available_gpu_memory(gpu_id)
    logger.info(f"Memory pool end. avail mem={pool_end:.2f} GB")
    emit(rank, gpu_id, "memory_pool_end", avail_bytes=pool_end_b)

    # 4. init_cublas, init_attention_backend, init_device_graphs
    a = torch.ones((16, 16), dtype=torch.float16, device=device)
    b = torch.ones((16, 16), dtype=torch.float16, device=device)
    c = a @ b
    del a, b, c
    with torch.device(device):
        attn_workspace = torch.empty((ATTN_WORKSPACE_BYTES,), dtype=torch.uint8)
        kv_indptr = torch.zeros((max(sargs["cuda_graph_bs"]) + 1,), dtype=torch.int32)
    torch.cuda.synchronize(device)

    # The decode steps use KV rows 1..span (row 0 is SGLang's padding slot); the window leaves
    # room for max_bs distinct write locations.
    span = min(max_total_num_tokens, 1 << 16)
    window = max(1, min(sargs["attn_window"], span - max(sargs["cuda_graph_bs"]) - 1))
    tic = time.perf_counter()
    before_mem, before_b = get_available_gpu_memory(gpu_id)
    logger.info(f"Capture cuda graph begin. This can take up to several minutes. "
                f"avail mem={before_mem:.2f} GB")
    emit(rank, gpu_id, "capture_begin", avail_bytes=before_b)
    runner = CudaGraphRunner(model, k_buffers, v_buffers, sargs["cuda_graph_bs"], window, device,
                             gpu_id, cpu_group, sargs["tqdm"] and rank == 0)
    after_mem, after_b = get_available_gpu_memory(gpu_id)
    graph_mem_usage = before_mem - after_mem
    elapsed = time.perf_counter() - tic
    logger.info(f"Capture cuda graph end. Time elapsed: {elapsed:.2f} s. "
                f"mem usage={graph_mem_usage:.2f} GB. avail mem={after_mem:.2f} GB.")
    emit(rank, gpu_id, "capture_end", avail_bytes=after_b, mem_usage_bytes=before_b - after_b,
         elapsed_s=round(elapsed, 3), capture_bs=runner.capture_bs, window=window)

    # 5. TpModelWorker / Scheduler: the summary (tp rank 0 only in SGLang)
    max_running_requests = min(max_total_num_tokens // 2, max_num_reqs)
    if rank == 0 or sargs["summary_on_all_ranks"]:
        avail_mem, avail_b = get_available_gpu_memory(gpu_id, empty_cache=False)
        logger.info(
            f"max_total_num_tokens={max_total_num_tokens}, "
            f"chunked_prefill_size={sargs['chunked_prefill_size']}, "
            f"max_prefill_tokens={MAX_PREFILL_TOKENS}, "
            f"max_running_requests={max_running_requests}, "
            f"context_len={context_len}, available_gpu_mem={avail_mem:.2f} GB")
        emit(rank, gpu_id, "summary", avail_bytes=avail_b, tokens=max_total_num_tokens,
             max_running_requests=max_running_requests, context_len=context_len)

    # 6. decode steps: replay the graphs, batch sizes in rotation
    gen = torch.Generator()
    gen.manual_seed(sargs["random_seed"] * 1000 + 500 + rank)
    room = max(1, span - window)
    stride = max(1, room // runner.capture_bs[-1])
    order = list(reversed(runner.capture_bs))
    used, id_sum, hidden_sum = [], 0, 0.0
    with torch.no_grad():
        for step in range(sargs["max_steps"]):
            bs = order[step % len(order)]
            ids = torch.randint(0, cfg["vocab_size"], (bs,), generator=gen, dtype=torch.int64)
            # Distinct rows per request (writes never collide): step offset + i * stride.
            base = torch.tensor([1 + (step * 104729 + i * stride) % room for i in range(bs)],
                                dtype=torch.int64)
            win = base[:, None] + torch.arange(window, dtype=torch.int64)[None, :]
            next_ids, hsum = runner.replay(bs, ids, base + window, win)
            torch.cuda.synchronize(device)
            id_sum += int(next_ids.sum().item())
            hidden_sum += float(hsum.double().sum().item())
            used.append(bs)
    torch.cuda.synchronize(device)
    note("rank", rank, "tokens", max_total_num_tokens, "cell_size", cell_size,
         "window", window, "capture_bs", ",".join(map(str, runner.capture_bs)))
    note("rank", rank, "decode steps=%d" % len(used), "bs=%s" % ",".join(map(str, used)),
         "token_id_sum=%d" % id_sum, "hidden_abs_sum=%.4e" % hidden_sum)

    dist.barrier(group=cpu_group)
    note("rank", rank, "barrier", "done")
    del runner, free_pages, attn_workspace, kv_indptr, req_to_token, k_buffers, v_buffers, model
    dist.destroy_process_group()
    note("rank", rank, "destroyed", "yes")
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    with open(os.path.join(outdir, "rank%d.txt" % rank), "w") as f:
        f.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------- main process


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--tp", type=int, default=None,
                   help="ranks, one GPU each (default min(2, visible GPUs))")
    p.add_argument("--cuda-graph-bs", default="1,2,4,8,16")
    p.add_argument("--mem-fraction-static", type=float, default=None,
                   help="default: SGLang 0.5.5's formula from GPU capacity and tp")
    p.add_argument("--max-total-tokens", type=int, default=None,
                   help="default: a cap keeping the KV pool at about --kv-cap-gib per GPU")
    p.add_argument("--kv-cap-gib", type=float, default=DEFAULT_KV_CAP_GIB)
    p.add_argument("--model-layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--num-heads", type=int, default=None, help="default hidden / head-dim")
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--intermediate", type=int, default=5632)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--context-len", type=int, default=8192)
    p.add_argument("--attn-window", type=int, default=256,
                   help="KV tokens each decode token attends to")
    p.add_argument("--max-steps", type=int, default=8, help="decode steps")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--summary-on-all-ranks", action="store_true",
                   help="print the max_total_num_tokens summary on every rank, not only TP0")
    p.add_argument("--tqdm", action="store_true",
                   help="print SGLang's 'Capturing batches' bar on TP0's stderr")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    count = torch.cuda.device_count()
    if count < 1:
        sys.stderr.write("sglang_shape: no CUDA device visible\n")
        return 2
    world = args.tp if args.tp is not None else min(2, count)
    if world < 1 or world > count:
        sys.stderr.write("sglang_shape: --tp %d but %d GPU(s) visible\n" % (world, count))
        return 2
    try:
        graph_bs = sorted({int(x) for x in args.cuda_graph_bs.split(",") if x.strip()})
    except ValueError:
        graph_bs = []
    if not graph_bs or graph_bs[0] < 1:
        sys.stderr.write("sglang_shape: bad --cuda-graph-bs %r\n" % args.cuda_graph_bs)
        return 2

    configure_logger("")
    cfg = model_config(args, world)
    gpu_mem = gpu_memory_capacity_mib(count)
    mfs_default, cps, graph_max_bs = sglang_055_gpu_defaults(gpu_mem, world)
    mfs = args.mem_fraction_static if args.mem_fraction_static is not None else mfs_default
    cell = cell_size_bytes(cfg, world)
    if args.max_total_tokens is not None:
        max_total_tokens = args.max_total_tokens
        cap_note = "given"
    else:
        max_total_tokens = int(args.kv_cap_gib * GB) // cell // PAGE_SIZE * PAGE_SIZE
        cap_note = "default cap: KV pool <= %.2f GiB per GPU" % args.kv_cap_gib
    sargs = {
        "mem_fraction_static": mfs,
        "max_total_tokens": max_total_tokens,
        "chunked_prefill_size": cps,
        "cuda_graph_bs": graph_bs,
        "random_seed": args.seed,
        "attn_window": args.attn_window,
        "max_steps": args.max_steps,
        "summary_on_all_ranks": args.summary_on_all_ranks,
        "tqdm": args.tqdm,
    }
    # The main process's line (no rank tag), shaped like SGLang's `server_args=ServerArgs(...)`.
    logger.info(
        "server_args=ServerArgs(model_path='sglang_shape/%s', dtype='bfloat16', "
        "kv_cache_dtype='auto', mem_fraction_static=%r, max_running_requests=None, "
        "max_total_tokens=%r, chunked_prefill_size=%r, max_prefill_tokens=%r, page_size=%r, "
        "tp_size=%r, pp_size=1, random_seed=%r, cuda_graph_max_bs=%r, cuda_graph_bs=%r, "
        "disable_cuda_graph=False, attention_backend=None, context_length=%r)"
        % (cfg["architectures"][0], mfs, max_total_tokens, cps, MAX_PREFILL_TOKENS, PAGE_SIZE,
           world, args.seed, graph_max_bs, graph_bs, cfg["max_position_embeddings"]))
    print("world_size %d" % world, flush=True)
    print("config %s" % json.dumps(cfg, sort_keys=True), flush=True)
    print("sglang_shape: max_total_tokens=%d cell_size=%d (%s)" % (max_total_tokens, cell, cap_note),
          flush=True)

    tmp = tempfile.mkdtemp(prefix="sglang_shape-")
    try:
        init_file = os.path.join(tmp, "rendezvous")
        outdir = os.path.join(tmp, "out")
        os.mkdir(outdir)
        t0 = time.perf_counter()
        mp.spawn(worker, args=(world, sargs, cfg, init_file, outdir), nprocs=world, join=True)
        for rank in range(world):
            with open(os.path.join(outdir, "rank%d.txt" % rank)) as f:
                sys.stdout.write(f.read())
        sys.stdout.flush()
        sys.stderr.write("sglang_shape: workers took %.1f s\n" % (time.perf_counter() - t0))
        print("done sglang_shape", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
