#!/usr/bin/env python3
"""Build vramledger's SGLang reference table by executing SGLang's own functions.

For each sizing layout (0.4.6, 0.5.5, 0.5.12, 0.5.18, 0.5.23) this downloads the released wheel
from PyPI (`pip download --no-deps`), unpacks it, and runs the functions that compute the
default `mem_fraction_static`, `chunked_prefill_size` and decode CUDA-graph `max_bs` (and, where
listed, the KV token count and `max_running_requests`) over a grid of inputs. Nothing of SGLang's
arithmetic is re-written here: the function bodies are taken from the wheel's source (Python's
`ast`) and executed as they are. Only what is not arithmetic is stubbed: the device query
(`get_device_memory_capacity` returns the grid's MiB, `get_available_gpu_memory` the grid's GiB),
platform predicates (`is_npu`, `is_cuda`...), logging, the model config object (a namespace with
the config's fields), the post-capture eligibility predicate (the grid's flag), and the memory
pool constructors (no allocation). See README.md.

Usage: python3 generate.py [--out DIR] [--work DIR] [--layouts 0.5.5,0.5.23]
"""

from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import importlib.util
import itertools
import json
import logging
import math
import os
import subprocess
import sys
import types
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

# layout name -> releases to try, first available wins.
LAYOUTS = {
    "0.4.6": ["0.4.6.post5", "0.4.6.post4", "0.4.6"],
    "0.5.5": ["0.5.5", "0.5.5.post1"],
    "0.5.12": ["0.5.12"],
    "0.5.18": ["0.5.18"],
    "0.5.23": ["0.5.23"],
}

GPU_MIBS = [24576, 46068, 81559, 143771, 196608, 294912]
# Capacities per platform: AMD Instinct (MI250 64 GiB, MI300X 192 GiB as nvidia-smi's ROCm
# counterpart reports it, MI325X, MI355X) and Ascend NPUs (both sides of the 32 GiB and 64 GiB
# tier bounds).
PLATFORM_MIBS = {
    "cuda": GPU_MIBS,
    "hip": [65536, 196592, 262144, 294912],
    "npu": [24576, 32768, 46068, 65536, 98304],
}
# Platforms with a memory rule of their own in each layout (HIP rows run everywhere: they check
# that a platform without a rule changes nothing).
PLATFORMS = {
    "0.4.6": ["cuda", "hip"],
    "0.5.5": ["cuda", "hip", "npu"],
    "0.5.12": ["cuda", "hip", "npu"],
    "0.5.18": ["cuda", "hip", "npu"],
    "0.5.23": ["cuda", "hip", "npu"],
}

# The platform of the grid point being run ("cuda", "hip" or "npu"): SGLang's platform
# predicates (`is_cuda()`, `is_hip()`, `is_npu()`, `get_platform()`) read it.
PLATFORM = ["cuda"]


def stub_module(name: str, **attrs) -> types.ModuleType:
    """Registers module `name` holding `attrs` (for a function's own local imports)."""
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


stub_module(
    "sglang.srt.utils",
    is_cuda=lambda: PLATFORM[0] == "cuda",
    is_hip=lambda: PLATFORM[0] == "hip",
    is_npu=lambda: PLATFORM[0] == "npu",
)
# Model-architecture predicates the graph rules import (DeepSeek-V4, KDA, prefill CP): the
# grid's models are none of them.
stub_module("sglang.srt.configs.model_config", is_deepseek_v4=lambda hf: False,
            uses_kda_attention=lambda hf: False)
stub_module("sglang.srt.layers.cp.bcg", supports_prefill_cp_bcg=lambda sa: False)
stub_module("sglang.srt.arg_groups.kimi_k3_hook", disable_kimi_k3_symm_mem=lambda sa: None)
# An in-tree platform: no out-of-tree plugin, nothing to default.
stub_module("sglang.srt.platforms", current_platform=types.SimpleNamespace(
    is_out_of_tree=lambda: False, support_piecewise_cuda_graph=lambda: True,
    apply_server_args_defaults=lambda sa: None, device_name="cuda"))


# --------------------------------------------------------------------------------------------
# Wheels


def fetch_wheel(layout: str, work: Path) -> tuple[str, Path, str]:
    """Downloads the first available release of `layout`; returns (release, unpacked root, sha)."""
    for release in LAYOUTS[layout]:
        dest = work / "wheels" / release
        wheels = list(dest.glob("sglang-*.whl")) if dest.exists() else []
        if not wheels:
            dest.mkdir(parents=True, exist_ok=True)
            r = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                 "--python-version", "3.11", f"sglang=={release}", "-d", str(dest)],
                capture_output=True, text=True,
            )
            wheels = list(dest.glob("sglang-*.whl"))
            if r.returncode != 0 or not wheels:
                continue
        wheel = wheels[0]
        root = work / "unpacked" / release
        if not (root / "sglang").exists():
            root.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(wheel) as z:
                z.extractall(root)
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
        return release, root, f"{wheel.name} sha256 {sha}"
    raise SystemExit(f"no release of layout {layout} could be downloaded")


# --------------------------------------------------------------------------------------------
# Executing SGLang's own functions out of their modules


class Stub:
    """A stand-in for anything non-arithmetic a function touches but the grid does not set."""

    def __init__(self, name="stub"):
        self._name = name

    def __getattr__(self, k):
        if k.startswith("__"):
            raise AttributeError(k)
        return Stub(f"{self._name}.{k}")

    def __call__(self, *a, **k):
        return Stub(self._name + "()")

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())

    def __repr__(self):
        return f"<stub {self._name}>"


class Globals(dict):
    """Module globals for extracted functions: names not provided become stubs."""

    def __missing__(self, k):
        if hasattr(__builtins__, k) if not isinstance(__builtins__, dict) else k in __builtins__:
            raise KeyError(k)
        return Stub(k)


def base_globals(**extra) -> Globals:
    g = Globals(
        __builtins__=__builtins__,
        __name__="sglang_extracted",
        logger=logging.getLogger("sglang_extracted"),
        logging=logging,
        math=math,
        copy=copy,
        os=os,
        Optional=object,
        is_npu=lambda: PLATFORM[0] == "npu",
        is_hip=lambda: PLATFORM[0] == "hip",
        is_cuda=lambda: PLATFORM[0] == "cuda",
        is_xpu=lambda: False,
        is_cpu=lambda: False,
        is_mps=lambda: False,
    )
    g.update(extra)
    return g


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def extract(path: Path, names, g: Globals, cls: str | None = None) -> dict:
    """Executes the definitions of `names` (functions, or methods of class `cls`) from `path`'s
    source, unchanged but for decorators, in globals `g`; returns them by name."""
    body = _tree(path).body
    if cls is not None:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
    found = {}
    for node in body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            node.decorator_list = []
            mod = ast.Module(body=[node], type_ignores=[])
            exec(compile(mod, str(path), "exec"), g)
            found[node.name] = g[node.name]
    # Module-level constants (simple assignments of literals) the functions may read.
    if cls is None:
        for node in body:
            if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
                try:
                    value = ast.literal_eval(node.value)
                except (ValueError, SyntaxError):
                    continue
                for t in node.targets:
                    g.setdefault(t.id, value)
    missing = set(names) - set(found)
    if missing:
        raise SystemExit(f"{path}: {cls or ''} has no {sorted(missing)}")
    return found


def class_defaults(path: Path, cls: str, g: Globals) -> dict:
    """The dataclass field defaults of `cls` that evaluate without the rest of the module."""
    body = next(
        n for n in _tree(path).body if isinstance(n, ast.ClassDef) and n.name == cls
    ).body
    out = {}
    for node in body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        if node.value is None:
            continue
        v = node.value
        if isinstance(v, ast.Call) and getattr(v.func, "id", None) == "field":
            kw = {k.arg: k.value for k in v.keywords}
            if "default" in kw:
                v = kw["default"]
            else:
                continue
        try:
            out[node.target.id] = eval(compile(ast.Expression(v), str(path), "eval"), g)
        except Exception:
            pass
    return out


class FakeArgs:
    """`self` for ServerArgs methods: the dataclass defaults, then the grid's settings."""

    def __init__(self, defaults: dict, settings: dict):
        self.__dict__.update(defaults)
        self.__dict__.update(settings)

    def __getattr__(self, k):
        if k.startswith("__"):
            raise AttributeError(k)
        return None


def model_config_stub(model: dict):
    hf = types.SimpleNamespace(**{k: v for k, v in model.items()})
    hf.architectures = model.get("architectures", ["LlamaForCausalLM"])
    # A text model outside every architecture list the graph rules consult.
    return types.SimpleNamespace(
        is_multimodal=False,
        is_piecewise_cuda_graph_disabled_model=False,
        is_multimodal_piecewise_cuda_graph_supported=False,
        is_multimodal_breakable_cuda_graph_supported=False,
        hf_config=hf,
        hf_text_config=hf,
    )



def load_file_module(path: Path, name: str, pre: dict | None = None):
    for k, v in (pre or {}).items():
        sys.modules[k] = v
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# --------------------------------------------------------------------------------------------
# Defaults: mem_fraction_static, chunked_prefill_size, decode graph max_bs


class DefaultsRunner:
    """Runs one layout's default-memory function on a grid point."""

    def __init__(self, layout: str, root: Path):
        self.layout = layout
        self.root = root
        self.srt = root / "sglang" / "srt"
        sa_path = self.srt / "server_args.py"
        self.sa_path = sa_path
        self.g = base_globals()
        self.functions = []
        # SGLang's own platform and graph resolution that runs before the memory function in
        # __post_init__ / the 0.5.23 resolution pipeline (names of methods, or functions).
        self.prepare = []
        if layout == "0.4.6":
            self._init_l1()
        elif layout in ("0.5.5", "0.5.12"):
            names = [
                "_handle_gpu_memory_settings",
                "_generate_cuda_graph_batch_sizes",
                "_generate_piecewise_cuda_graph_tokens",
            ]
            if layout == "0.5.12":
                names.append("_generate_cpu_graph_batch_sizes")
                # __post_init__: NPU defaults, then the piecewise-graph rules, then memory.
                self.prepare = ["_handle_npu_backends", "_handle_piecewise_cuda_graph"]
                self._npu_defaults()
            self.methods = extract(sa_path, names + self.prepare, self.g, cls="ServerArgs")
            self.functions = [f"ServerArgs.{n}" for n in self.prepare + names]
            self.defaults = class_defaults(sa_path, "ServerArgs", self.g)
        elif layout == "0.5.18":
            cgc = load_file_module(
                self.srt / "model_executor" / "cuda_graph_config.py",
                f"cgc_{layout.replace('.', '_')}",
            )
            self.cgc = cgc
            self._cgc_globals()
            self.g.update(resolved_view=lambda x: x)
            names = [
                "_handle_gpu_memory_settings",
                "_generate_decode_cuda_graph_batch_sizes",
                "_generate_prefill_cuda_graph_batch_sizes",
                "_generate_cpu_graph_batch_sizes",
                "reserve_for_graph_mb",
                "reserve_for_deepep_a2a_mb",
            ]
            # __post_init__: the CUDA-graph config (defaults per platform, compatibility rules,
            # disaggregation roles), the NPU defaults, then memory.
            self.prepare = ["_handle_cuda_graph_config", "_handle_npu_backends"]
            helpers = [
                "_parse_cuda_graph_config",
                "_apply_cuda_graph_compatibility",
                "_disable_tc_piecewise_cudagraph_if_incompatible",
                "_disable_breakable_cudagraph_if_incompatible",
                "_disable_full_prefill_cudagraph_if_incompatible",
                "_apply_deepep_adjustments",
                "_apply_cuda_graph_disaggregation_roles",
                "_validate_cuda_graph_config",
            ]
            self._npu_defaults()
            self.methods = extract(sa_path, names + self.prepare + helpers, self.g, cls="ServerArgs")
            self.functions = [f"ServerArgs.{n}" for n in self.prepare + helpers + names]
            self.defaults = class_defaults(sa_path, "ServerArgs", self.g)
        else:
            rc = types.ModuleType("sglang.srt.runtime_context")
            rc.get_exec = lambda *a, **k: None
            cgc = load_file_module(
                self.srt / "model_executor" / "cuda_graph_config.py",
                f"cgc_{layout.replace('.', '_')}",
                pre={"sglang.srt.runtime_context": rc},
            )
            self.cgc = cgc
            self._cgc_globals()
            hook = self.srt / "arg_groups" / "cuda_graph_hook.py"
            mem = self.srt / "arg_groups" / "memory_hook.py"
            gens = extract(
                hook,
                [
                    "generate_prefill_cuda_graph_batch_sizes",
                    "generate_decode_cuda_graph_batch_sizes",
                    "generate_cpu_graph_batch_sizes",
                ],
                self.g,
            )
            cgh = types.ModuleType("sglang.srt.arg_groups.cuda_graph_hook")
            cgh.__dict__.update(gens)
            sys.modules["sglang.srt.arg_groups.cuda_graph_hook"] = cgh
            qvl = types.ModuleType("sglang.srt.arg_groups.model_overrides.qwen3_vl")
            # Qwen3-VL only; the grid's models are text models.
            qvl.expand_multimodal_decode_graph_to_running_limit = lambda *a, **k: None
            sys.modules["sglang.srt.arg_groups.model_overrides.qwen3_vl"] = qvl
            self.g.update(
                Backend=cgc.Backend,
                Phase=cgc.Phase,
                resolving_view=lambda x: x,
                resolved_view=lambda x: x,
                declare_resolution=lambda sa, _where, **kw: sa.__dict__.update(kw),
                model_config_of=lambda sa: sa._model_config,
                use_mla_backend=lambda sa: sa._mla,
                post_capture_kv_sizing_planned=lambda sa: sa._post_capture,
                attn_dp_enabled_of=lambda sa: bool(sa.enable_dp_attention),
                get_platform=lambda: types.SimpleNamespace(
                    is_xpu=False, is_cuda=PLATFORM[0] == "cuda", is_hip=PLATFORM[0] == "hip",
                    is_npu=PLATFORM[0] == "npu"),
                get_device_memory_capacity=lambda device: self._gpu_mem,
                envs=Stub("envs"),
            )
            names = ["handle_gpu_memory_settings", "reserve_for_graph_mb", "reserve_for_deepep_a2a_mb"]
            self.methods = extract(mem, names, self.g)
            # The pipeline (arg_groups/pipeline.py): handle_cuda_graph_config, the platform
            # hooks (NPU defaults), then handle_gpu_memory_settings.
            graph = [
                "handle_cuda_graph_config",
                "parse_cuda_graph_config",
                "apply_cuda_graph_compatibility",
                "disable_breakable_cudagraph_if_incompatible",
                "disable_full_prefill_cudagraph_if_incompatible",
                "apply_deepep_adjustments",
                "apply_cuda_graph_disaggregation_roles",
                "validate_cuda_graph_config",
            ]
            self.graph_functions = extract(hook, graph, self.g)
            self._npu_defaults()
            self.platform_functions = extract(
                self.srt / "arg_groups" / "platform_hook.py", ["handle_npu_backends"], self.g)
            self.prepare = [self.graph_functions["handle_cuda_graph_config"],
                            self.platform_functions["handle_npu_backends"]]
            self.functions = [
                *(f"arg_groups/cuda_graph_hook.py::{n}" for n in graph),
                "arg_groups/platform_hook.py::handle_npu_backends",
                "hardware_backend/npu/utils.py::set_default_server_args",
                *(f"arg_groups/memory_hook.py::{n}" for n in names),
                "arg_groups/cuda_graph_hook.py::generate_{prefill,decode}_cuda_graph_batch_sizes",
            ]
            # 0.5.23 declares its fields in arg_groups/fields/*.py (one class per group).
            self.defaults = {}
            for f in sorted((self.srt / "arg_groups" / "fields").glob("*.py")):
                for node in _tree(f).body:
                    if isinstance(node, ast.ClassDef):
                        self.defaults.update(class_defaults(f, node.name, self.g))
            self.defaults.update(class_defaults(sa_path, "ServerArgs", self.g))

    def _cgc_globals(self):
        cgc = self.cgc
        self.g.update(
            Backend=cgc.Backend,
            Phase=cgc.Phase,
            CudaGraphConfig=cgc.CudaGraphConfig,
            default_cuda_graph_config=cgc.default_cuda_graph_config,
            ALLOWED_BACKENDS_PER_PHASE=cgc.ALLOWED_BACKENDS_PER_PHASE,
            current_platform=sys.modules["sglang.srt.platforms"].current_platform,
        )
        if hasattr(cgc, "with_phase"):
            self.g["with_phase"] = cgc.with_phase

    def _npu_defaults(self):
        """hardware_backend/npu/utils.py::set_default_server_args, run by the NPU backend hook
        (imported there from its module): the NPU capacity is the grid's."""
        path = self.srt / "hardware_backend" / "npu" / "utils.py"
        self.g["get_npu_memory_capacity"] = lambda: self._gpu_mem
        self.npu_defaults = extract(path, ["set_default_server_args"], self.g)[
            "set_default_server_args"]
        self.functions.append("hardware_backend/npu/utils.py::set_default_server_args")

    # L1: the default block of ServerArgs.__post_init__, from the capacity query to the
    # cuda_graph_max_bs default, executed as one function.
    def _init_l1(self):
        tree = _tree(self.sa_path)
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
        post = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__post_init__")
        start = end = None
        for i, st in enumerate(post.body):
            src = ast.unparse(st)
            if start is None and src.startswith("gpu_mem = get_device_memory_capacity"):
                start = i
            if start is not None and src.startswith("if self.cuda_graph_max_bs is None"):
                end = i
                break
        fn = ast.FunctionDef(
            name="_l1_memory_defaults",
            args=ast.arguments(posonlyargs=[], args=[ast.arg("self")], kwonlyargs=[],
                               kw_defaults=[], defaults=[]),
            body=post.body[start: end + 1],
            decorator_list=[],
            returns=None,
        )
        mod = ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[]))
        self.g["get_device_memory_capacity"] = lambda device=None: self._gpu_mem
        exec(compile(mod, str(self.sa_path), "exec"), self.g)
        self.methods = {"_l1_memory_defaults": self.g["_l1_memory_defaults"]}
        self.functions = [
            f"ServerArgs.__post_init__ (statements {post.body[start].lineno}-{post.body[end].end_lineno}: "
            "capacity query to the cuda_graph_max_bs default)"
        ]
        self.defaults = class_defaults(self.sa_path, "ServerArgs", self.g)

    def run(self, p: dict) -> dict:
        """p: gpu_mem, tp, pp, dp, dp_attention, spec, mla, post_capture, platform, page_size,
        max_total_tokens, max_running_requests, chunked_prefill_size, cuda_graph_max_bs."""
        self._gpu_mem = float(p["gpu_mem"])
        spec = None if p["spec"] == "none" else p["spec"]
        settings = dict(
            model_path="example/model",
            tp_size=p["tp"],
            pp_size=p["pp"],
            dp_size=p["dp"],
            enable_dp_attention=p["dp_attention"],
            page_size=p["page_size"],
            max_total_tokens=p.get("max_total_tokens"),
            max_running_requests=p.get("max_running_requests"),
            chunked_prefill_size=p.get("chunked_prefill_size"),
            cuda_graph_max_bs=p.get("cuda_graph_max_bs"),
            mem_fraction_static=None,
            speculative_algorithm=spec,
            speculative_num_draft_tokens=p.get("spec_draft_tokens"),
            device="npu" if p["platform"] == "npu" else "cuda",
            disaggregation_mode="null",
            kv_cache_dtype=p.get("kv_cache_dtype", "auto"),
            max_prefill_tokens=16384,
        )
        sa = FakeArgs(self.defaults, settings)
        mc = model_config_stub({})
        sa.get_model_config = lambda: mc
        sa._model_config = mc
        sa._mla = p["mla"]
        sa._post_capture = p["post_capture"]
        sa.use_mla_backend = lambda: p["mla"]
        sa.post_capture_kv_sizing_planned = lambda: p["post_capture"]
        sa._resolved = lambda: sa
        sa.attn_dp_size = p["dp"] if p["dp_attention"] else 1
        PLATFORM[0] = p["platform"]
        if hasattr(self, "npu_defaults"):
            # The NPU hook imports it from its module: this runner's, with this grid's capacity.
            stub_module("sglang.srt.hardware_backend.npu.utils",
                        set_default_server_args=self.npu_defaults)
        if self.layout in ("0.5.18", "0.5.23"):
            # The legacy --cuda-graph-max-bs is --cuda-graph-max-bs-decode there; the config
            # itself is built by SGLang's parser below.
            sa.cuda_graph_max_bs_decode = p.get("cuda_graph_max_bs")
            sa.cuda_graph_config = None
        for name, f in self.methods.items():
            if self.layout != "0.5.23":
                setattr(sa, name, types.MethodType(f, sa))
        try:
            for step in self.prepare:
                if isinstance(step, str):
                    getattr(sa, step)()
                else:
                    step(sa)
            if self.layout == "0.4.6":
                sa._l1_memory_defaults()
            elif self.layout == "0.5.23":
                self.methods["handle_gpu_memory_settings"](sa)
            else:
                sa._handle_gpu_memory_settings(self._gpu_mem)
        except Exception as e:  # noqa: BLE001 - the table records SGLang's failure
            if os.environ.get("SGLANG_REFERENCE_RAISE"):
                raise
            return {"error": f"{type(e).__name__}: {e}"}
        out = {
            "mem_fraction_static": sa.mem_fraction_static,
            "chunked_prefill_size": sa.chunked_prefill_size,
        }
        if self.layout in ("0.5.18", "0.5.23"):
            out["cuda_graph_max_bs"] = sa.cuda_graph_config.decode.max_bs
            out["prefill_graph"] = sa.cuda_graph_config.prefill.backend
        else:
            out["cuda_graph_max_bs"] = sa.cuda_graph_max_bs
        if self.layout == "0.5.12":
            out["prefill_graph"] = "disabled" if sa.disable_piecewise_cuda_graph else "tc_piecewise"
        return out


def defaults_grid(layout: str):
    has_pc = layout in ("0.5.18", "0.5.23")
    for platform in PLATFORMS[layout]:
        for gpu, tp, pp, (dp, dpa), spec, mla, pc in itertools.product(
            PLATFORM_MIBS[platform],
            [1, 2, 4, 8],
            [1, 2],
            [(1, False), (2, False), (2, True)],
            ["none", "EAGLE"],
            [False, True],
            [False, True] if has_pc else [False],
        ):
            if dpa and tp < dp:
                continue
            if pc and (mla or platform != "cuda"):
                continue  # SGLang's eligibility excludes MLA and non-CUDA devices
            yield dict(gpu_mem=gpu, tp=tp, pp=pp, dp=dp, dp_attention=dpa, spec=spec, mla=mla,
                       post_capture=pc, platform=platform, page_size=1)
    # PP 3 to 8 on every platform (pp > 1 turns piecewise / prefill graphs off where SGLang
    # says so; the reserve grows with tp * pp), with and without DP attention and post-capture.
    for platform in PLATFORMS[layout]:
        for gpu, pp, mla, (tp, dp, dpa), pc in itertools.product(
            PLATFORM_MIBS[platform],
            [3, 4, 5, 6, 7, 8],
            [False, True],
            [(1, 1, False), (2, 2, True)],
            [False, True] if has_pc else [False],
        ):
            if pc and (mla or platform != "cuda"):
                continue
            yield dict(gpu_mem=gpu, tp=tp, pp=pp, dp=dp, dp_attention=dpa, spec="none", mla=mla,
                       post_capture=pc, platform=platform, page_size=1)
    # Explicit settings and caps on a few capacities.
    for gpu, extra in itertools.product(
        [24576, 81559, 196608],
        [
            dict(max_total_tokens=4096),
            dict(max_total_tokens=200000),
            dict(max_running_requests=64),
            dict(max_running_requests=1024),
            dict(chunked_prefill_size=4096),
            dict(chunked_prefill_size=-1),
            dict(cuda_graph_max_bs=96),
            dict(page_size=64, chunked_prefill_size=8192),
        ],
    ):
        for mla in (False, True):
            p = dict(gpu_mem=gpu, tp=1, pp=1, dp=1, dp_attention=False, spec="none", mla=mla,
                     post_capture=False, platform="cuda", page_size=1)
            p.update(extra)
            yield p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(REPO / "tests" / "data" / "sglang-reference"))
    ap.add_argument("--work", default="/tmp/sglang-reference-work")
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work)
    rec_path = out / "releases.json"
    # Layouts not regenerated this time keep their record.
    record = json.loads(rec_path.read_text()) if rec_path.exists() else {}
    logging.disable(logging.CRITICAL)
    for layout in args.layouts.split(","):
        release, root, wheel = fetch_wheel(layout, work)
        rows = []
        d = DefaultsRunner(layout, root)
        for p in defaults_grid(layout):
            res = d.run(p)
            # SGLang's default functions raise for none of these points: an error here is a
            # stub missing, not SGLang's answer.
            if "error" in res:
                raise SystemExit(f"{layout} {p}: {res['error']}")
            rows.append({"kind": "defaults", "input": p, "sglang": res})
        try:
            from tokens import TokensRunner, tokens_grid  # noqa: WPS433 (same folder)

            t = TokensRunner(layout, root)
            for p in tokens_grid(layout):
                rows.append({"kind": "tokens", "input": p, "sglang": t.run(p)})
            token_functions = t.functions
        except ImportError:
            token_functions = []
        path = out / f"{layout}.jsonl"
        with path.open("w") as f:
            for r in rows:
                f.write(json.dumps(r, sort_keys=True) + "\n")
        record[layout] = {
            "release": release,
            "wheel": wheel,
            "rows": len(rows),
            "defaults_functions": d.functions,
            "tokens_functions": token_functions,
        }
        print(f"{layout}: {release}: {len(rows)} rows -> {path}", file=sys.stderr)
    (out / "releases.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    # One module instance: tokens.py imports `generate`, and the platform the stub modules
    # read (PLATFORM) must be the one the runners set.
    import generate  # noqa: E402

    generate.main()
