"""KV token rows: executes SGLang's own KV-sizing functions (wired in by generate.py).

L1/L2 (0.4.6, 0.5.5): `ModelRunner.profile_max_num_token` as it is, and `init_memory_pool`'s
statements from its start to the `max_total_num_tokens <= 0` RuntimeError (dtype choice, profile,
`max_num_reqs` default, spec headroom, `max_total_tokens` cap, page floor, PP MIN, the error),
then the `ReqToTokenPool(size=...)` expression of the same function and `TpModelWorker`'s
`self.max_running_requests = min(...)` statement.

L3 (0.5.12): `ModelRunnerKVCacheMixin._profile_available_bytes`, `_apply_token_constraints`,
`_resolve_max_num_reqs`, `_resolve_memory_pool_config`, and `DefaultPoolConfigurator` (module
`pool_configurator.py` loaded as is, with stub modules for its imports).

L4a/L4 (0.5.18, 0.5.23): `KVCacheConfigurator._profile_available_bytes`,
`_apply_token_constraints`, `resolve_max_num_reqs`, `_resolve_memory_pool_config`,
`config_from_budget`, and `DefaultPoolConfigurator` (as L3).

Stubbed (not arithmetic): torch (dtypes with their itemsize; `_utils._element_size`),
`get_available_gpu_memory` (the grid's GiB float), the world group (world size = TP, one rank:
MIN all-reduces are the identity), logging, the model config (the fields the code reads, from
tests/data/sglang-reference/{llama,deepseek}.json; `head_dim = hidden_size // heads`,
`context_len = max_position_embeddings`; `get_num_kv_heads` is the wheel's own method).
`mem_fraction_static` is the grid's value or, when the grid leaves it unset, the value the
defaults runner (generate.py, SGLang's own default function) derives for the grid's GPU.
"""

from __future__ import annotations

import ast
import itertools
import json
import sys
import types
from pathlib import Path

import generate as G

REPO = Path(__file__).resolve().parent.parent.parent
MODELS = {
    False: json.loads((REPO / "tests/data/sglang-reference/llama.json").read_text()),
    True: json.loads((REPO / "tests/data/sglang-reference/deepseek.json").read_text()),
}


class StubModule(types.ModuleType):
    """A stand-in module for an import: any name is an inert stub (no arithmetic)."""

    def __getattr__(self, k):
        if k.startswith("__"):
            raise AttributeError(k)
        return G.Stub(f"{self.__name__}.{k}")


class NoSpec:
    """`SpeculativeAlgorithm.NONE`: is_none() true, every other is_*() false."""

    def __getattr__(self, k):
        if k.startswith("is_"):
            return lambda: k == "is_none"
        raise AttributeError(k)


class EagleSpec:
    """`SpeculativeAlgorithm.EAGLE`: is_eagle() true, every other is_*() false (not EAGLE3,
    not STANDALONE, not the DFLASH family)."""

    def __getattr__(self, k):
        if k.startswith("is_"):
            return lambda: k == "is_eagle"
        raise AttributeError(k)


def spec_of(p):
    return EagleSpec() if p.get("spec", "none") != "none" else NoSpec()


class Tensor:
    """`torch.tensor(n)` for the PP MIN all-reduce: holds one int."""

    def __init__(self, v, dtype=None):
        self.v = v

    def item(self):
        return self.v


class DType:
    def __init__(self, name, itemsize):
        self.name = name
        self.itemsize = itemsize

    def __repr__(self):
        return f"torch.{self.name}"


def torch_stub():
    t = types.ModuleType("torch")
    for name, size in [
        ("bfloat16", 2), ("float16", 2), ("float32", 4), ("uint8", 1), ("int64", 8),
        ("float8_e4m3fn", 1), ("float8_e5m2", 1), ("float8_e4m3fnuz", 1), ("float8_e5m2fnuz", 1),
    ]:
        setattr(t, name, DType(name, size))
    t._utils = types.SimpleNamespace(_element_size=lambda d: d.itemsize)
    t.tensor = Tensor
    t.iinfo = lambda d: types.SimpleNamespace(max=2**63 - 1)
    t.cuda = types.SimpleNamespace(
        empty_cache=lambda: None, synchronize=lambda *a: None, device_count=lambda: 1,
        get_device_properties=lambda *a: types.SimpleNamespace(total_memory=0),
    )
    return t


def model_config(mla: bool, mc_methods: dict, multimodal: bool = False):
    m = MODELS[mla]
    hf = types.SimpleNamespace(**m)
    cls = type("ModelConfigStub", (), dict(mc_methods))
    mc = cls()
    mc.hf_config = hf
    mc.hf_text_config = hf
    mc.context_len = m["max_position_embeddings"]
    mc.head_dim = m["hidden_size"] // m["num_attention_heads"]
    mc.v_head_dim = mc.head_dim if not mla else m["v_head_dim"]
    mc.num_hidden_layers = m["num_hidden_layers"]
    mc.num_attention_layers = m["num_hidden_layers"]
    mc.num_key_value_heads = m["num_key_value_heads"]
    mc.num_attention_heads = m["num_attention_heads"]
    mc.kv_lora_rank = m.get("kv_lora_rank")
    mc.qk_rope_head_dim = m.get("qk_rope_head_dim")
    mc.is_multimodal = bool(multimodal)
    mc.is_hybrid_swa = False
    mc.attention_arch = "MLA" if mla else "MHA"
    mc.is_encoder_decoder = False
    mc.is_draft_model = False
    return mc


def _method_source(path: Path, cls: str, name: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text())
    c = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return next(n for n in c.body if isinstance(n, ast.FunctionDef) and n.name == name)


class TokensRunner:
    def __init__(self, layout: str, root: Path):
        self.layout = layout
        self.root = root
        self.srt = root / "sglang" / "srt"
        self.defaults = G.DefaultsRunner(layout, root)
        self.torch = torch_stub()
        self.g = G.base_globals(torch=self.torch, SGLANG_CI_SMALL_KV_SIZE=None)
        self.g["get_available_gpu_memory"] = lambda *a, **k: self._avail
        self.g["get_world_group"] = lambda: types.SimpleNamespace(
            world_size=self._world, cpu_group=None)
        self.g["get_attention_tp_size"] = lambda: self._attn_tp
        self.g["log_info_on_rank0"] = lambda *a, **k: None
        # The PP MIN all-reduce: the other stages' token count is the grid's input.
        self.torch.distributed = types.SimpleNamespace(
            all_reduce=self._all_reduce, ReduceOp=types.SimpleNamespace(MIN="MIN"))
        self.pp_indices = G.extract(self.srt / "distributed" / "utils.py", ["get_pp_indices"],
                                    G.base_globals(os=types.SimpleNamespace(
                                        getenv=lambda *a: None)))["get_pp_indices"]
        mc_path = self.srt / "configs" / "model_config.py"
        self.mc_methods = G.extract(
            mc_path, ["get_total_num_kv_heads", "get_num_kv_heads"], G.base_globals(),
            cls="ModelConfig")
        self.functions = ["ModelConfig.get_total_num_kv_heads", "ModelConfig.get_num_kv_heads",
                          "distributed/utils.py::get_pp_indices (the last PP stage's layers)"]
        if layout in ("0.4.6", "0.5.5"):
            self._init_l12()
        elif layout == "0.5.12":
            self._init_l3()
        else:
            self._init_l4()

    # ---------------------------------------------------------------- L1/L2
    def _init_l12(self):
        mr = self.srt / "model_executor" / "model_runner.py"
        self.mr_methods = G.extract(mr, ["profile_max_num_token"], self.g, cls="ModelRunner")
        imp = _method_source(mr, "ModelRunner", "init_memory_pool")
        end = next(
            i for i, st in enumerate(imp.body)
            if "max_total_num_tokens <= 0" in ast.unparse(st).split("\n")[0]
        )
        body = imp.body[: end + 1] + [ast.parse("return max_num_reqs").body[0]]
        fn = ast.FunctionDef(name="_init_memory_pool_sizing", args=imp.args, body=body,
                             decorator_list=[], returns=None)
        exec(compile(ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[])),
                     str(mr), "exec"), self.g)
        self.sizing = self.g["_init_memory_pool_sizing"]
        # size= of the plain ReqToTokenPool(...) constructor in init_memory_pool
        self.pool_size_expr = next(
            kw.value for n in ast.walk(imp) if isinstance(n, ast.Call)
            and getattr(n.func, "id", None) == "ReqToTokenPool"
            for kw in n.keywords if kw.arg == "size"
        )
        tw = self.srt / "managers" / "tp_worker.py"
        self.mrr_stmt = next(
            n for n in ast.walk(ast.parse(tw.read_text()))
            if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "self.max_running_requests"
        )
        self.functions += [
            "ModelRunner.profile_max_num_token",
            f"ModelRunner.init_memory_pool (statements {imp.body[0].lineno}-{imp.body[end].end_lineno}: "
            "dtype to the 'Not enough memory' RuntimeError)",
            f"ModelRunner.init_memory_pool: ReqToTokenPool size= `{ast.unparse(self.pool_size_expr)}`",
            f"TpModelWorker.__init__: `{ast.unparse(self.mrr_stmt).splitlines()[0]} ...` (line {self.mrr_stmt.lineno})",
        ]

    def _run_l12(self, p, sa, mc, mfs):
        runner = types.SimpleNamespace(
            device="cuda", gpu_id=0, is_draft_worker=False, num_effective_layers=self._n_eff,
            use_mla_backend=p["mla"], model_config=mc, mem_fraction_static=mfs, server_args=sa,
            spec_algorithm=spec_of(p), page_size=p["page_size"],
            pp_size=self._pp, mambaish_config=None, dtype=self.torch.bfloat16,
            model=types.SimpleNamespace(quant_config=None), is_hybrid=False,
            req_to_token_pool=None, start_layer=self._start, end_layer=self._end,
        )
        for n, f in self.mr_methods.items():
            setattr(runner, n, types.MethodType(f, runner))
        max_num_reqs = self.sizing(runner, p["pre_gib"], sa.max_running_requests, sa.max_total_tokens)
        size = eval(compile(ast.Expression(self.pool_size_expr), "size", "eval"),
                    self.g, {"max_num_reqs": max_num_reqs, "self": runner})
        worker = types.SimpleNamespace(
            max_total_num_tokens=runner.max_total_num_tokens,
            model_runner=types.SimpleNamespace(req_to_token_pool=types.SimpleNamespace(size=size)),
        )
        loc = {"self": worker, "server_args": sa}
        exec(compile(ast.fix_missing_locations(ast.Module(body=[self.mrr_stmt], type_ignores=[])),
                     "tp_worker", "exec"), self.g, loc)
        return {"tokens": runner.max_total_num_tokens,
                "max_running_requests": worker.max_running_requests}

    # ---------------------------------------------------------------- L3
    def _stub_modules(self, names, **provided):
        """Stand-in modules for imports: they provide names only (inert stubs), plus the
        non-arithmetic queries in `provided` (module name -> {name: value})."""
        for n in names:
            m = StubModule(n)
            m.__dict__.update(provided.get(n, {}))
            sys.modules[n] = m

    def _load_pool_configurator(self, stub_names, provided):
        self._stub_modules(stub_names, **provided)
        sys.modules["torch"] = self.torch
        path = self.srt / "model_executor" / "pool_configurator.py"
        self.pool_mod = G.load_file_module(
            path, f"pool_configurator_{self.layout.replace('.', '_')}")
        self.functions.append(
            "model_executor/pool_configurator.py loaded as is (MemoryPoolConfig, "
            "DefaultPoolConfigurator, create_memory_pool_configurator)")

    def _activate(self):
        """The deferred `from ...pool_configurator import ...` inside the methods finds this
        layout's module."""
        sys.modules["sglang.srt.model_executor.pool_configurator"] = self.pool_mod
        for k, v in self.deferred.items():
            sys.modules[k] = v

    def _init_l3(self):
        self.deferred = {}
        self._load_pool_configurator(
            ["sglang.srt.configs.model_config", "sglang.srt.environ",
             "sglang.srt.layers.dp_attention", "sglang.srt.mem_cache.deepseek_v4_memory_pool",
             "sglang.srt.mem_cache.memory_pool", "sglang.srt.utils.common"],
            {"sglang.srt.layers.dp_attention": {"get_attention_tp_size": lambda: self._attn_tp}},
        )
        mixin = self.srt / "model_executor" / "model_runner_kv_cache_mixin.py"
        names = ["_profile_available_bytes", "_apply_token_constraints", "_resolve_max_num_reqs",
                 "_resolve_memory_pool_config"]
        self.mr_methods = G.extract(mixin, names, self.g, cls="ModelRunnerKVCacheMixin")
        mr = self.srt / "model_executor" / "model_runner.py"
        self.g.update(_is_hip=False)
        self.mr_methods.update(G.extract(mr, ["configure_kv_cache_dtype"], self.g, cls="ModelRunner"))
        self.dp_stmt = next(
            n for n in ast.walk(ast.parse(mr.read_text()))
            if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "self.dp_size"
        )
        self.functions += [f"ModelRunnerKVCacheMixin.{n}" for n in names] + [
            "ModelRunner.configure_kv_cache_dtype",
            f"ModelRunner.__init__: `{ast.unparse(self.dp_stmt)}` (line {self.dp_stmt.lineno})",
            "TpModelWorker.__init__: `self.max_running_requests = "
            "self.model_runner.max_running_requests` (taken as the config's value)",
        ]

    def _run_l3(self, p, sa, mc, mfs):
        self._activate()
        runner = types.SimpleNamespace(
            device="cuda", gpu_id=0, is_draft_worker=False, num_effective_layers=self._n_eff,
            use_mla_backend=p["mla"], model_config=mc, mem_fraction_static=mfs, server_args=sa,
            spec_algorithm=spec_of(p), page_size=p["page_size"], pp_size=self._pp,
            mambaish_config=None, dtype=self.torch.bfloat16,
            model=types.SimpleNamespace(quant_config=None),
            is_hybrid_swa=False, start_layer=self._start, end_layer=self._end,
        )
        exec(compile(ast.fix_missing_locations(ast.Module(body=[self.dp_stmt], type_ignores=[])),
                     "model_runner", "exec"), self.g, {"self": runner, "server_args": sa})
        for n, f in self.mr_methods.items():
            setattr(runner, n, types.MethodType(f, runner))
        runner.configure_kv_cache_dtype()
        config = runner._resolve_memory_pool_config(p["pre_gib"])
        return {"tokens": config.max_total_num_tokens,
                "max_running_requests": config.max_running_requests}

    # ---------------------------------------------------------------- L4a/L4
    def _init_l4(self):
        l23 = self.layout == "0.5.23"
        kvcf = self.srt / "mem_cache" / "kv_cache_configurator.py"
        sched = lambda: self._sched  # noqa: E731 - parallel/schedule state queries
        par = lambda: self._par  # noqa: E731
        rc = {
            "get_schedule": sched, "get_parallel": par,
            "get_memory": lambda: G.FakeArgs({}, {}), "get_disagg": lambda: G.FakeArgs({}, {}),
            "get_spec": lambda: self._spec_args, "get_exec": lambda: G.Stub("exec"),
            "get_mm": lambda: G.FakeArgs({}, {}), "get_model": lambda: G.FakeArgs({}, {}),
            "configured_pp_size": lambda: self._pp,
        }
        stubs = ["sglang.srt.configs.hybrid_arch", "sglang.srt.configs.model_config",
                 "sglang.srt.environ", "sglang.srt.mem_cache.allocation_sizing",
                 "sglang.srt.mem_cache.deepseek_v4_memory_pool", "sglang.srt.mem_cache.memory_pool",
                 "sglang.srt.runtime_context", "sglang.srt.utils.common",
                 "sglang.srt.speculative.spec_info"]
        provided = {"sglang.srt.runtime_context": rc}
        self.deferred = {}
        # Functions the configurator imports inside its methods: the wheel's own.
        g2 = G.base_globals(torch=self.torch, **rc)
        cp = types.ModuleType("sglang.srt.layers.cp.utils")
        cp.__dict__.update(G.extract(self.srt / "layers" / "cp" / "utils.py",
                                     ["get_glm_dsa_layer_split_effective_num_layers"], g2))
        self.deferred["sglang.srt.layers.cp.utils"] = cp
        kvm = types.ModuleType("sglang.srt.mem_cache.kv_cache_configurator")
        kvm.__dict__.update(G.extract(kvcf, ["calculate_mla_kv_cache_dim"], g2))
        self.deferred["sglang.srt.mem_cache.kv_cache_configurator"] = kvm
        self.functions += [
            "layers/cp/utils.py::get_glm_dsa_layer_split_effective_num_layers",
            "mem_cache/kv_cache_configurator.py::calculate_mla_kv_cache_dim",
        ]
        if l23:
            stubs += ["sglang.srt.arg_groups.overrides", "sglang.srt.mem_cache.page_interleave"]
            pi = G.extract(self.srt / "mem_cache" / "page_interleave.py",
                           ["compute_page_shard_scratch_bytes", "make_page_shard_spec",
                            "get_kv_shard_group_info"], g2)
            provided["sglang.srt.mem_cache.page_interleave"] = pi
            self.functions.append("mem_cache/page_interleave.py::compute_page_shard_scratch_bytes, "
                                  "make_page_shard_spec, get_kv_shard_group_info")
            qsa = types.ModuleType("sglang.srt.layers.attention.qsa.config")
            qsa.__dict__.update(G.extract(
                self.srt / "layers" / "attention" / "qsa" / "config.py",
                ["_text_config", "parse_qsa_profile"], g2))
            self.deferred["sglang.srt.layers.attention.qsa.config"] = qsa
            self.deferred["sglang.srt.mem_cache.qsa_kv_pool"] = StubModule(
                "sglang.srt.mem_cache.qsa_kv_pool")
            self.functions.append("layers/attention/qsa/config.py::parse_qsa_profile (None: no QSA)")
        self._load_pool_configurator(stubs, provided)
        self.g.update(rc)
        self.g.update(gc=types.SimpleNamespace(collect=lambda: None))
        # envs.SGLANG_VLM_CACHE_SIZE_MB / SGLANG_MM_FEATURE_CACHE_MB: the wheel's environ.py
        # defaults (EnvInt(...) literals), unset in the environment.
        env_src = (self.srt / "environ.py").read_text()
        envs = types.SimpleNamespace()
        for node in ast.walk(ast.parse(env_src)):
            if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id in ("SGLANG_VLM_CACHE_SIZE_MB",
                                               "SGLANG_MM_FEATURE_CACHE_MB")):
                v = eval(compile(ast.Expression(node.value.args[0]), "environ", "eval"))
                setattr(envs, node.targets[0].id, types.SimpleNamespace(get=lambda v=v: v))
        self.g["envs"] = envs
        mm = G.extract(kvcf, ["mm_runtime_reservation_gb"], self.g)
        names = ["_profile_available_bytes", "_apply_token_constraints", "resolve_max_num_reqs",
                 "_resolve_memory_pool_config", "config_from_budget"]
        self.kvc_methods = G.extract(kvcf, names, self.g, cls="KVCacheConfigurator")
        self.g.update(mm)
        dt = self.srt / "mem_cache" / "kv_cache_dtype.py"
        self.g.update(_is_hip=False, current_platform=types.SimpleNamespace(is_cpu=lambda: False))
        self.kv_dtype = G.extract(dt, ["configure_kv_cache_dtype"], self.g)["configure_kv_cache_dtype"]
        self.functions += [f"KVCacheConfigurator.{n}" for n in names] + [
            "mem_cache/kv_cache_configurator.py::mm_runtime_reservation_gb",
            "mem_cache/kv_cache_dtype.py::configure_kv_cache_dtype",
        ]
        # Post-capture KV resizing: the wheel's compute_post_capture_kv_resize and the
        # runtime_context activation reserve, in their own globals (the configurator's keep
        # their stubs): decode graph config, disagg mode, device capacity, mambaish_config
        # (None: no Mamba), graph_pool_borrow_enabled (False: SGLANG_ENABLE_GRAPH_POOL_BORROW's
        # EnvBool(False) default).
        self.pc_g = G.base_globals(**{k: v for k, v in self.g.items()
                                      if k not in ("__builtins__", "__name__")})
        self.pc_g.update(
            Backend=self.defaults.cgc.Backend,
            get_exec=lambda: self._pc_exec, get_disagg=lambda: self._pc_disagg,
            get_mm=lambda: types.SimpleNamespace(mm_feature_transport=None),
            get_device_memory_capacity=lambda device: self._gpu_mem,
            get_available_gpu_memory=lambda *a, **k: self._free_after,
            mambaish_config=lambda mc: None, graph_pool_borrow_enabled=lambda: False,
            # 0.5.18's configured-parallel accessor (tp_size / pp_size) and the result
            # struct (a msgspec.Struct: a plain record here).
            _configured_parallel=lambda k: getattr(self._par, k),
            PostCaptureKVResize=types.SimpleNamespace,
        )
        rc_path = self.srt / "runtime_context.py"
        self.pc_g.update(G.extract(rc_path, ["pre_capture_activation_reserve_mb"], self.pc_g))
        kpr = self.srt / "model_executor" / "model_runner_components" / "kv_pool_runtime.py"
        self.post_capture = G.extract(kpr, ["compute_post_capture_kv_resize"],
                                      self.pc_g)["compute_post_capture_kv_resize"]
        self.functions += [
            "model_executor/model_runner_components/kv_pool_runtime.py::"
            "compute_post_capture_kv_resize (post-capture rows)",
            "runtime_context.py::pre_capture_activation_reserve_mb",
        ]

    def _run_l4(self, p, sa, mc, mfs):
        self._activate()
        self._sched = G.FakeArgs({}, dict(
            mem_fraction_static=mfs, max_total_tokens=sa.max_total_tokens,
            max_running_requests=sa.max_running_requests, page_size=p["page_size"]))
        self._par = G.FakeArgs({}, dict(
            attn_tp_size=self._attn_tp, attn_dcp_size=1, attn_cp_size=1, attn_dp_size=self._attn_dp,
            pp_size=self._pp, launch_world_size=self._world,
            world_group=types.SimpleNamespace(cpu_group=None), enable_kv_cache_sharding=False))
        dtype_str, kv_dtype = self.kv_dtype(
            server_args_kv_cache_dtype=p["kv_cache_dtype"], model=None,
            model_dtype=self.torch.bfloat16, is_draft_worker=False, is_dflash=False,
            speculative_draft_attention_backend=None)
        kvc = types.SimpleNamespace(
            device="cuda", gpu_id=0, model_config=mc, server_args=sa, kv_cache_dtype=kv_dtype,
            kv_cache_dtype_str=dtype_str, model_dtype=self.torch.bfloat16, page_size=p["page_size"],
            spec_algorithm=spec_of(p), is_draft_worker=False, post_capture_kv_active=False,
            is_hybrid_swa=False, use_mla_backend=p["mla"], mambaish_config=None,
            layer_info=types.SimpleNamespace(num_effective_layers=self._n_eff,
                                             start_layer=self._start, end_layer=self._end),
            ps=types.SimpleNamespace(pp_size=self._pp, attn_dp_size=self._attn_dp),
            pp_size=self._pp, attn_dp_size=self._attn_dp,
            # What SpecAuxHiddenStateConfig resolves from the draft's config (the grid's
            # draft layer count; the draft config reading is not executed).
            spec_aux_config=types.SimpleNamespace(
                eagle_draft_num_layers=p.get("draft_layers"), dflash_draft_num_layers=None,
                eagle_draft_swa_num_layers=None, draft_kv_num_layers=p.get("draft_layers")),
            fused_entry_bytes=lambda *a, **k: None,
        )
        for name, f in self.kvc_methods.items():
            setattr(kvc, name, types.MethodType(f, kvc))
        # post_capture_kv_sizing_planned (the grid's flag: SGLang's eligibility excludes MLA).
        kvc.post_capture_kv_active = bool(p.get("post_capture"))
        config = kvc._resolve_memory_pool_config(p["pre_gib"])
        out = {"tokens": config.max_total_num_tokens,
               "max_running_requests": config.max_running_requests}
        # Scheduler.init_model_worker: `if model_runner.token_to_kv_pool.post_capture_active:
        # model_runner.post_capture_resize_kv_pool(...)`; a pool without it (MLA) keeps its
        # pre-capture size whatever the free memory after capture.
        if p.get("free_after_capture_gib") is not None and kvc.post_capture_kv_active:
            out = self._post_capture_l4(p, sa, mc, mfs, kvc, config) | {
                "pre_capture_tokens": out["tokens"]}
        return out

    def _post_capture_l4(self, p, sa, mc, mfs, kvc, config):
        """ModelRunner.post_capture_resize_kv_pool: compute_post_capture_kv_resize on a runner
        holding the pre-capture config, then the capped requests assigned if any."""
        self._gpu_mem = float(p["gpu_mem"])
        self._free_after = p["free_after_capture_gib"]
        cgc = self.defaults.cgc
        decode = types.SimpleNamespace(max_bs=self._decode_max_bs, backend=cgc.Backend.FULL)
        prefill = types.SimpleNamespace(backend=cgc.Backend.BREAKABLE, full_prefill_max_req=None)
        cg = types.SimpleNamespace(decode=decode, prefill=prefill)
        self._pc_exec = types.SimpleNamespace(graph=types.SimpleNamespace(cuda_graph_config=cg))
        self._pc_disagg = types.SimpleNamespace(disaggregation_mode="null")
        self._sched.chunked_prefill_size = self._chunked
        self._sched.max_prefill_tokens = 16384
        self._par.tp_size, self._par.pp_size = p["tp"], self._pp
        sa.cuda_graph_config = cg
        sa.disaggregation_mode = "null"
        sa.mm_feature_transport = None
        runner = types.SimpleNamespace(
            token_to_kv_pool=types.SimpleNamespace(
                post_capture_backed_bytes=p["backed_bytes"], post_capture_active=True,
                finalize_backing=lambda c: None, dtype=None),
            device="cuda", gpu_id=0, pre_model_load_memory=p["pre_gib"],
            mem_fraction_static=mfs, server_args=sa, model_config=mc,
            max_running_requests=config.max_running_requests,
            max_total_num_tokens=config.max_total_num_tokens, kv_cache_configurator=kvc,
            token_to_kv_pool_allocator=types.SimpleNamespace(resize=lambda c: None),
            req_to_token_pool=types.SimpleNamespace(reset_aux_cache_allocator=lambda: None),
            sampling_prewarm_result=types.SimpleNamespace(
                sampling_headroom_bytes=p.get("sampling_headroom_bytes", 0)),
            canary_manager=None,
        )
        resize = self.post_capture(runner)
        mrr = config.max_running_requests
        if resize.capped_max_running_requests is not None:
            mrr = resize.capped_max_running_requests
        return {"tokens": resize.max_total_num_tokens, "max_running_requests": mrr}

    # ---------------------------------------------------------------- common
    def _fraction(self, p):
        if p.get("mem_fraction_static") is not None:
            return p["mem_fraction_static"]
        d = self.defaults.run({k: v for k, v in p.items()})
        if "error" in d:
            raise RuntimeError(d["error"])
        return d["mem_fraction_static"]

    def _all_reduce(self, tensor, op=None, group=None):
        assert op == "MIN"
        tensor.v = min(tensor.v, self._pp_other)

    def run(self, p: dict) -> dict:
        mfs = self._fraction(p)
        if p.get("free_after_capture_gib") is not None:
            d = self.defaults.run(dict(p))
            self._decode_max_bs, self._chunked = d["cuda_graph_max_bs"], d["chunked_prefill_size"]
        self._pp = p.get("pp", 1)
        self._pp_other = p.get("pp_min_tokens_other")
        n = MODELS[p["mla"]]["num_hidden_layers"]
        # The last PP stage (the most layers); its token count is MIN-reduced with the others'.
        self._start, self._end = self.pp_indices(n, self._pp - 1, self._pp)
        self._n_eff = self._end - self._start
        spec = p.get("spec", "none") != "none"
        self._spec_args = G.FakeArgs({}, dict(
            speculative_algorithm="EAGLE" if spec else None,
            speculative_num_steps=p.get("spec_steps"), speculative_eagle_topk=p.get("spec_topk"),
            speculative_num_draft_tokens=p.get("spec_draft_tokens")))
        self._avail = p["available_gib"]
        self._world = p["tp"]
        self._attn_tp = p["tp"]
        dp = p.get("dp", 1) if p.get("dp_attention") else 1
        self._attn_tp = p["tp"] // dp
        self._attn_dp = dp
        mc = model_config(p["mla"], self.mc_methods, p.get("multimodal", False))
        sa = G.FakeArgs(self.defaults.defaults, dict(
            tp_size=p["tp"], pp_size=self._pp, dp_size=p.get("dp", 1),
            enable_dp_attention=bool(p.get("dp_attention")),
            page_size=p["page_size"], max_total_tokens=p.get("max_total_tokens"),
            max_running_requests=p.get("max_running_requests"),
            kv_cache_dtype=p["kv_cache_dtype"], mem_fraction_static=mfs,
            speculative_algorithm="EAGLE" if spec else None, device="cuda",
            speculative_num_steps=p.get("spec_steps"), speculative_eagle_topk=p.get("spec_topk"),
            speculative_num_draft_tokens=p.get("spec_draft_tokens"),
        ))
        run = {"0.4.6": self._run_l12, "0.5.5": self._run_l12, "0.5.12": self._run_l3}.get(
            self.layout, self._run_l4)
        try:
            out = run(p, sa, mc, mfs)
        except Exception as e:  # noqa: BLE001 - the table records SGLang's failure
            return {"error": f"{type(e).__name__}: {e}"}
        out["mem_fraction_static"] = mfs
        return out


def tokens_grid(layout: str):
    base = dict(dp=1, dp_attention=False, spec="none", post_capture=False, platform="cuda", pp=1)
    for mla, tp, dtype, page, (gpu, pre, avail) in itertools.product(
        [False, True],
        [1, 2, 8],
        ["auto", "fp8_e4m3"],
        [1, 16, 64],
        [
            (81559, 78.81, 63.72),
            (143771, 139.2, 120.37),
            (143771, 139.2, 10.5),    # big weights: rest <= 0 at the default fraction
            (24576, 23.3, 2.01),
        ],
    ):
        if mla and tp == 2:
            continue
        yield dict(base, gpu_mem=gpu, mla=mla, tp=tp, kv_cache_dtype=dtype, page_size=page,
                   pre_gib=pre, available_gib=avail)
    # Caps, explicit requests and fractions on one capacity.
    for mla, extra in itertools.product(
        [False, True],
        [
            dict(max_total_tokens=4096),
            dict(max_total_tokens=100000),
            dict(max_total_tokens=100000000),
            dict(max_running_requests=64),
            dict(max_running_requests=5000),
            dict(max_running_requests=64, max_total_tokens=100),
            dict(mem_fraction_static=0.85),
            dict(mem_fraction_static=0.5),
            dict(mem_fraction_static=0.95, max_running_requests=10000),
            dict(max_total_tokens=10),  # page 64: the re-floor leaves 0 tokens
            # rest = 0.005 GiB > 0 but less than one 64-token page of KV
            dict(mem_fraction_static=0.85, available_gib=11.8265),
        ],
    ):
        for page in (1, 64):
            yield dict(base, gpu_mem=81559, mla=mla, tp=1, kv_cache_dtype="auto", page_size=page,
                       pre_gib=78.81, available_gib=63.72) | extra
    # DP attention (0.5.12+): attention TP = TP / DP; requests are per DP worker.
    if layout not in ("0.4.6", "0.5.5"):
        for mla, page, extra in itertools.product(
            [False, True],
            [1, 64],
            [dict(), dict(max_running_requests=64), dict(max_running_requests=5000),
             dict(max_running_requests=64, max_total_tokens=100)],
        ):
            yield dict(base, gpu_mem=81559, mla=mla, tp=8, kv_cache_dtype="auto", page_size=page,
                       pre_gib=78.81, available_gib=63.72, **extra) | dict(dp=2, dp_attention=True)
    # Speculative decoding (EAGLE): L1/L2 headroom (steps × topk + draft tokens per request +
    # 100), 0.5.18+ draft KV layers priced into the cell; the default fraction changes too.
    for mla, tp, page, (gpu, pre, avail), (steps, topk, draft, layers) in itertools.product(
        [False, True],
        [1, 8],
        [1, 64],
        [(81559, 78.81, 63.72), (143771, 139.2, 120.37)],
        [(3, 1, 4, 1), (5, 4, 8, 2)],
    ):
        yield dict(base, gpu_mem=gpu, mla=mla, tp=tp, kv_cache_dtype="auto", page_size=page,
                   pre_gib=pre, available_gib=avail) | dict(
            spec="EAGLE", spec_steps=steps, spec_topk=topk, spec_draft_tokens=draft,
            draft_layers=layers)
    for mla, extra in itertools.product(
        [False, True],
        [dict(max_running_requests=64), dict(max_total_tokens=100000),
         dict(kv_cache_dtype="fp8_e4m3"), dict(available_gib=10.5)],
    ):
        yield dict(base, gpu_mem=81559, mla=mla, tp=1, kv_cache_dtype="auto", page_size=16,
                   pre_gib=78.81, available_gib=63.72) | dict(
            spec="EAGLE", spec_steps=3, spec_topk=1, spec_draft_tokens=4, draft_layers=1) | extra
    # PP > 1: the last stage's layers (get_pp_indices), then the MIN with the other stages'
    # token count (the grid's input; not in 0.4.6, whose init_memory_pool has no all-reduce).
    # 0.4.6 asserts pp_size == 1 with MLA: no MLA PP rows there.
    for mla, tp, pp, other, page in itertools.product(
        [False, True], [1, 2], [2, 3, 4], [100003, 10**8], [1, 64],
    ):
        if mla and layout == "0.4.6":
            continue
        yield dict(base, gpu_mem=81559, mla=mla, tp=tp, kv_cache_dtype="auto", page_size=page,
                   pre_gib=78.81, available_gib=63.72) | dict(pp=pp, pp_min_tokens_other=other)
    # EAGLE with PP: the draft term over the stage's layers (MLA at PP 6: 11 layers on the last
    # stage from 0.5.12, where 0.5.18's float `cell * (1 + 1/11)` truncates one byte low).
    for mla, pp, page in itertools.product([False, True], [2, 6], [1, 64]):
        if mla and layout == "0.4.6":
            continue
        yield dict(base, gpu_mem=81559, mla=mla, tp=1, kv_cache_dtype="auto", page_size=page,
                   pre_gib=78.81, available_gib=63.72) | dict(
            pp=pp, pp_min_tokens_other=10**8, spec="EAGLE", spec_steps=3, spec_topk=1,
            spec_draft_tokens=4, draft_layers=1)
    # Multimodal (0.5.18+): mm_runtime_reservation_gb takes SGLANG_VLM_CACHE_SIZE_MB (100 MB;
    # transport unset = cpu) off the budget. A Llama text config with a vision_config; the
    # fraction is given (the defaults runner's model stub is a text model).
    if layout in ("0.5.18", "0.5.23"):
        for tp, page, (pre, avail), f in itertools.product(
            [1, 8], [1, 64], [(78.81, 63.72), (78.81, 11.85)], [0.85, None],
        ):
            yield dict(base, gpu_mem=81559, mla=False, tp=tp, kv_cache_dtype="auto",
                       page_size=page, pre_gib=pre, available_gib=avail, multimodal=True,
                       mem_fraction_static=f or 0.88)
    # Other platforms, with their default fraction (HIP / NPU: no piecewise or prefill graph
    # reserve where SGLang turns those graphs off; NPU's own chunk and batch tiers).
    for platform, (gpu, pre, avail), mla, pp, tp, page in itertools.product(
        [p for p in G.PLATFORMS[layout] if p != "cuda"],
        [(65536, 61.3, 45.02), (196592, 190.1, 160.4)],
        [False, True],
        [1, 2],
        [1, 8],
        [1, 128],
    ):
        if mla and pp > 1 and layout == "0.4.6":
            continue
        extra = dict(pp_min_tokens_other=10**8) if pp > 1 else {}
        yield dict(base, gpu_mem=gpu, mla=mla, tp=tp, kv_cache_dtype="auto", page_size=page,
                   pre_gib=pre, available_gib=avail, platform=platform, pp=pp) | extra
    # Post-capture KV resizing (0.5.18+, SGLANG_ENABLE_POST_CAPTURE_KV_SIZING): pre-capture
    # sizing with the post-capture default fraction, then compute_post_capture_kv_resize with
    # the free GiB measured after capture and the pool's already-backed prefix (an input: it is
    # a VMM-granularity quantity). Free points: plenty (clamped by the pre-capture cap), a
    # shrink, just above the headroom, and below it (budget clamps to 0 + backed).
    if layout in ("0.5.18", "0.5.23"):
        for mla, tp, page, free, extra in itertools.product(
            [False, True], [1, 8], [1, 64], [70.0, 30.0, 12.5, 2.0, 0.5],
            [dict(), dict(max_running_requests=4096), dict(max_total_tokens=100000)],
        ):
            yield dict(base, gpu_mem=81559, mla=mla, tp=tp, kv_cache_dtype="auto",
                       page_size=page, pre_gib=78.81, available_gib=63.72) | dict(
                post_capture=not mla, free_after_capture_gib=free,
                backed_bytes=(2 << 20) * (1 if tp == 8 else 4)) | extra
        for f, mrr, sh in [(None, 64, 0), (0.85, None, 3 << 30), (0.5, 3000, 0)]:
            yield dict(base, gpu_mem=143771, mla=False, tp=1, kv_cache_dtype="auto",
                       page_size=16, pre_gib=139.2, available_gib=120.37) | dict(
                post_capture=True, free_after_capture_gib=20.25, backed_bytes=64 << 20,
                mem_fraction_static=f, max_running_requests=mrr, sampling_headroom_bytes=sh)
