//! The inputs of the sizing pass, each with where it came from.
//!
//! Three sources: a **run** (journals: exact free bytes at the stage boundaries, the recorded
//! engine lines, the launch command line, the driver's and NVML's capacity), an engine **log**
//! (the same lines, numbers printed with two decimals, the `server_args` line), and the
//! command's **flags**, which override both. `facts` reads the first two ([`LogFacts`],
//! [`RunFacts`]); here [`Measured`] is the free memory sizing works on, exact or rounded, and
//! [`Settings`] the server settings after flags, logs and defaults are merged, each a
//! [`Sourced`] value.

use vramledger_engines::sizing::defaults::{Disaggregation, Platform, PrefillGraph, Speculative};
use vramledger_engines::sizing::pyfloat::GIB;
use vramledger_engines::sizing::tokens::distributed_min_gib;

pub use super::facts::{
    rank_label, AfterPool, LogFacts, Observed, RankLog, RunFacts, RunRank, StageNeed,
};
use super::request::SizeRequest;
use vramledger_engines::log::server_args::ServerArgs;

/// Where a value came from (the JSON `source` words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A flag of this command.
    Given,
    /// Printed or recorded by the engine (log line, `server_args`, the run's command line).
    Logged,
    /// Computed here: SGLang's default rule, a measurement, a count of ranks.
    Derived,
    /// The engine's fixed default.
    Default,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Given => "given",
            Origin::Logged => "logged",
            Origin::Derived => "derived",
            Origin::Default => "default",
        }
    }
}

/// A value and its provenance.
#[derive(Debug, Clone, PartialEq)]
pub struct Sourced<T> {
    pub value: T,
    pub origin: Origin,
    /// Which flag, line or rule, in words.
    pub detail: String,
}

impl<T> Sourced<T> {
    pub fn new(value: T, origin: Origin, detail: impl Into<String>) -> Sourced<T> {
        Sourced {
            value,
            origin,
            detail: detail.into(),
        }
    }
}

/// The free memory sizing works on.
#[derive(Debug, Clone)]
pub struct Measured {
    pub exact: bool,
    /// "run DIR (2 ranks, exact bytes)" / "log FILE (printed to 0.01 GiB)".
    pub origin: String,
    pub ranks: usize,
    /// `pre_model_load_memory` as SGLang holds it (GiB float).
    pub pre_gib: f64,
    /// Free memory after the weights, as SGLang holds it.
    pub available_gib: f64,
    pub pre_err_gib: f64,
    pub avail_err_gib: f64,
    pub pre_detail: String,
    pub avail_detail: String,
    /// The rank with the least free memory at its low point after the pool.
    pub after_pool: Option<AfterPool>,
    /// Free memory after the graph captures, MIN over ranks (SGLang's distributed reading).
    pub free_after_capture_gib: Option<f64>,
}

impl Measured {
    /// Exact bytes from a run: the `weight_load` stage's boundaries, MIN over ranks as
    /// `get_available_gpu_memory(distributed=True)` computes it.
    pub fn from_run(run: &RunFacts) -> Measured {
        let pre: Vec<u64> = run.ranks.iter().map(|r| r.pre_free).collect();
        let avail: Vec<u64> = run.ranks.iter().map(|r| r.avail_free).collect();
        let n = run.ranks.len();
        let how = if n > 1 {
            "MIN over ranks, float32 as SGLang's all-reduce"
        } else {
            "one rank"
        };
        let after_pool = run
            .ranks
            .iter()
            .filter_map(|r| r.after.clone())
            .min_by_key(|a| a.low_free_bytes);
        let captures: Vec<u64> = run
            .ranks
            .iter()
            .filter_map(|r| r.after_capture_free)
            .collect();
        Measured {
            exact: true,
            origin: format!(
                "run {} ({n} rank{}, exact bytes)",
                run.path.display(),
                if n == 1 { "" } else { "s" }
            ),
            ranks: n,
            pre_gib: distributed_min_gib(&pre),
            available_gib: distributed_min_gib(&avail),
            pre_err_gib: 0.0,
            avail_err_gib: 0.0,
            pre_detail: format!("free memory at 'Load weight begin' (weight_load start), {how}"),
            avail_detail: format!("free memory at 'Load weight end' (weight_load end), {how}"),
            after_pool,
            free_after_capture_gib: (captures.len() == n).then(|| distributed_min_gib(&captures)),
        }
    }

    /// Exact GiB floats given as flags (`--pre-gib`, `--available-gib`): tolerance 0.
    pub fn from_flags(pre_gib: f64, available_gib: f64) -> Measured {
        Measured {
            exact: true,
            origin: "flags --pre-gib / --available-gib (exact GiB floats)".to_string(),
            ranks: 1,
            pre_gib,
            available_gib,
            pre_err_gib: 0.0,
            avail_err_gib: 0.0,
            pre_detail: "--pre-gib".to_string(),
            avail_detail: "--available-gib".to_string(),
            after_pool: None,
            free_after_capture_gib: None,
        }
    }

    /// Rounded numbers from an SGLang log: MIN over ranks of the printed values.
    pub fn from_log(log: &LogFacts) -> Result<Measured, String> {
        let min =
            |f: &dyn Fn(&RankLog) -> Option<f64>| log.ranks.iter().filter_map(f).reduce(f64::min);
        let avail = min(&|r| r.load_end_avail).ok_or_else(|| {
            format!(
                "{} has no 'Load weight end. … avail mem=' line: the free memory after the \
                 weights is missing",
                log.origin
            )
        })?;
        let (pre, pre_err, pre_detail) = match min(&|r| r.load_begin_avail) {
            Some(p) => (p, 0.005, "'Load weight begin. avail mem=', MIN over ranks"),
            None => match min(&|r| Some(r.load_end_avail? + r.load_end_usage?)) {
                Some(p) => (
                    p,
                    0.01,
                    "'Load weight end' avail mem + mem usage, MIN over ranks (no 'Load weight \
                     begin' line)",
                ),
                None => {
                    return Err(format!(
                        "{} has no free memory before the weights: no 'Load weight begin. avail \
                         mem=' line and no 'mem usage=' on 'Load weight end'",
                        log.origin
                    ))
                }
            },
        };
        let n = log
            .ranks
            .iter()
            .filter(|r| r.load_end_avail.is_some())
            .count();
        let after_pool = log
            .ranks
            .iter()
            .filter_map(|r| {
                let pool = r.pool_end_avail?;
                let low = r.later_min_avail?.min(pool);
                let label = rank_label(&r.tag);
                Some(AfterPool {
                    rank: label,
                    pool_end_free_bytes: (pool * GIB).round() as i64,
                    low_free_bytes: (low * GIB).round() as i64,
                    need_bytes: ((pool - low) * GIB).round() as i64,
                    stages: Vec::new(),
                    exact: false,
                })
            })
            .min_by_key(|a| a.low_free_bytes);
        Ok(Measured {
            exact: false,
            origin: format!(
                "log {} ({n} rank{}, printed to 0.01 GiB)",
                log.origin,
                if n == 1 { "" } else { "s" }
            ),
            ranks: n,
            pre_gib: pre,
            available_gib: avail,
            pre_err_gib: pre_err,
            avail_err_gib: 0.005,
            pre_detail: pre_detail.to_string(),
            avail_detail: "'Load weight end. avail mem=', MIN over ranks".to_string(),
            after_pool,
            free_after_capture_gib: min(&|r| r.after_capture_avail),
        })
    }
}

/// Server settings after flags, logs and defaults.
#[derive(Debug, Clone)]
pub struct Settings {
    pub tp: Sourced<u64>,
    pub pp: Sourced<u64>,
    pub dp: u64,
    pub dp_attention: bool,
    pub page_size: Sourced<u64>,
    pub kv_cache_dtype: Sourced<String>,
    /// Given or logged; `None` means SGLang derived it (see `defaults`).
    pub mem_fraction_static: Option<Sourced<f64>>,
    pub max_total_tokens: Option<Sourced<i64>>,
    pub context_length: Option<Sourced<u64>>,
    pub max_running_requests: Option<u64>,
    pub chunked_prefill_size: Option<i64>,
    pub max_prefill_tokens: i64,
    pub cuda_graph_max_bs: Option<u64>,
    pub speculative: Speculative,
    pub speculative_num_steps: Option<u64>,
    pub speculative_eagle_topk: Option<u64>,
    pub speculative_num_draft_tokens: Option<u64>,
    pub decode_graph: bool,
    pub disaggregation: Disaggregation,
    pub deepep: bool,
    /// 0.5.18+ EAGLE draft KV layers (`--speculative-num-draft-layers`).
    pub speculative_num_draft_layers: Option<u64>,
    /// PP > 1: the other stages' smallest token count (`--pp-min-tokens-from-other-stages`).
    pub pp_min_tokens_from_other_stages: Option<i64>,
    /// 0.5.18+: post-capture KV sizing planned (`--post-capture-kv-sizing`).
    pub post_capture_kv_sizing: bool,
    /// `--platform`: CUDA (default), HIP (ROCm) or NPU (Ascend): their tiers and graph rules.
    pub platform: Platform,
    /// 0.5.18+ prefill graph backend when logged (`cuda_graph_config`, its flags).
    pub prefill_graph: Option<PrefillGraph>,
    /// 0.5.12 piecewise CUDA graphs when logged (`disable_piecewise_cuda_graph`).
    pub piecewise_graph: Option<bool>,
    pub swa_full_tokens_ratio: f64,
    pub disable_hybrid_swa_memory: bool,
    pub gpu_mem_mib: Option<Sourced<f64>>,
    /// The other capacity a run recorded (NVML vs driver), when it differs.
    pub gpu_mem_alternative: Option<Sourced<f64>>,
    pub model_path: Option<String>,
    /// `--sglang-version` before 0.4.7: `ReqToTokenPool(size=max_num_reqs + 1)`.
    pub req_pool_extra_slot: bool,
    pub server_args_origin: Option<String>,
}

fn speculative(name: Option<&str>) -> Speculative {
    match name.map(|s| s.to_ascii_uppercase()) {
        None => Speculative::None,
        Some(s) if s == "NGRAM" || s == "LOOKAHEAD" => Speculative::Ngram,
        Some(s) if s == "STANDALONE" => Speculative::Standalone,
        Some(s) if s.is_empty() || s == "NONE" => Speculative::None,
        Some(_) => Speculative::Eagle,
    }
}

impl Settings {
    /// Merges flags over the logged settings (`server` may combine a log's `server_args`
    /// line and a run's command line) and what the run or log shows.
    pub fn resolve(
        args: &SizeRequest,
        server: Option<&ServerArgs>,
        run: Option<&RunFacts>,
        log: Option<&LogFacts>,
    ) -> Settings {
        let empty = ServerArgs::default();
        let sa = server.unwrap_or(&empty);
        let logged = |what: &str| format!("{what} from {}", sa.origin_of(what));
        let pp = match (args.pp, sa.u64("pp_size")) {
            (Some(v), _) => Sourced::new(v, Origin::Given, "--pp"),
            (None, Some(v)) => Sourced::new(v, Origin::Logged, logged("pp_size")),
            _ => Sourced::new(1, Origin::Default, "SGLang default"),
        };
        let lines = log.or(run.map(|r| &r.lines));
        let tp = if let Some(v) = args.tp {
            Sourced::new(v, Origin::Given, "--tp")
        } else if let Some(v) = sa.u64("tp_size") {
            Sourced::new(v, Origin::Logged, logged("tp_size"))
        } else if let Some(r) = run.filter(|r| r.ranks.len() > 1) {
            let n = r.ranks.len() as u64 / pp.value.max(1);
            Sourced::new(
                n.max(1),
                Origin::Derived,
                format!("{} ranks in the run / pp", r.ranks.len()),
            )
        } else if let Some(v) = lines.and_then(|l| l.nccl_tp) {
            Sourced::new(v, Origin::Logged, "tp_size of the NCCL warm-up line")
        } else if let Some(l) =
            lines.filter(|l| l.ranks.iter().filter(|r| r.tag.tp.is_some()).count() > 1)
        {
            let n = l.ranks.iter().filter_map(|r| r.tag.tp).max().unwrap_or(0) as u64 + 1;
            Sourced::new(n, Origin::Derived, "TP ranks named by the log's prefixes")
        } else {
            Sourced::new(1, Origin::Default, "SGLang default")
        };
        let page_size = match (args.page_size, sa.u64("page_size")) {
            (Some(v), _) => Sourced::new(v, Origin::Given, "--page-size"),
            (None, Some(v)) => Sourced::new(v, Origin::Logged, logged("page_size")),
            _ => Sourced::new(1, Origin::Default, "SGLang default"),
        };
        let kv_cache_dtype = match (&args.kv_cache_dtype, sa.str("kv_cache_dtype")) {
            (Some(v), _) => Sourced::new(v.clone(), Origin::Given, "--kv-cache-dtype"),
            (None, Some(v)) => {
                Sourced::new(v.to_string(), Origin::Logged, logged("kv_cache_dtype"))
            }
            _ => Sourced::new("auto".to_string(), Origin::Default, "SGLang default"),
        };
        let mem_fraction_static = match (args.mem_fraction_static, sa.f64("mem_fraction_static")) {
            (Some(v), _) => Some(Sourced::new(v, Origin::Given, "--mem-fraction-static")),
            (None, Some(v)) => Some(Sourced::new(
                v,
                Origin::Logged,
                logged("mem_fraction_static"),
            )),
            _ => None,
        };
        let max_total_tokens = match (args.max_total_tokens, sa.i64("max_total_tokens")) {
            (Some(v), _) => Some(Sourced::new(v as i64, Origin::Given, "--max-total-tokens")),
            (None, Some(v)) => Some(Sourced::new(v, Origin::Logged, logged("max_total_tokens"))),
            _ => None,
        };
        let context_length = match (args.context_length, sa.u64("context_length")) {
            (Some(v), _) => Some(Sourced::new(v, Origin::Given, "--context-length")),
            (None, Some(v)) => Some(Sourced::new(v, Origin::Logged, logged("context_length"))),
            _ => lines
                .and_then(|l| l.summary_context_len)
                .map(|v| Sourced::new(v, Origin::Logged, "context_len of the summary line")),
        };
        let dp = args.dp.or(sa.u64("dp_size")).unwrap_or(1);
        let dp_attention =
            args.enable_dp_attention || sa.bool("enable_dp_attention").unwrap_or(false);
        let (gpu_mem_mib, gpu_mem_alternative) = gpu_capacity(args, run);
        Settings {
            req_pool_extra_slot: args
                .sglang_version
                .as_deref()
                .is_some_and(vramledger_engines::sizing::layout::req_pool_extra_slot),
            tp,
            pp,
            dp,
            dp_attention,
            page_size,
            kv_cache_dtype,
            mem_fraction_static,
            max_total_tokens,
            context_length,
            max_running_requests: args.max_running_requests.or(sa.u64("max_running_requests")),
            chunked_prefill_size: args.chunked_prefill_size.or(sa.i64("chunked_prefill_size")),
            max_prefill_tokens: sa.i64("max_prefill_tokens").unwrap_or(16384),
            cuda_graph_max_bs: args.cuda_graph_max_bs.or(sa.u64("cuda_graph_max_bs")),
            speculative: speculative(
                args.speculative_algorithm
                    .as_deref()
                    .or(sa.str("speculative_algorithm")),
            ),
            speculative_num_steps: args
                .speculative_num_steps
                .or(sa.u64("speculative_num_steps")),
            speculative_eagle_topk: args
                .speculative_eagle_topk
                .or(sa.u64("speculative_eagle_topk")),
            speculative_num_draft_tokens: args
                .speculative_num_draft_tokens
                .or(sa.u64("speculative_num_draft_tokens")),
            decode_graph: !sa.bool("disable_cuda_graph").unwrap_or(false),
            disaggregation: match sa.str("disaggregation_mode") {
                Some("prefill") => Disaggregation::Prefill,
                Some("decode") => Disaggregation::Decode,
                _ => Disaggregation::Null,
            },
            deepep: sa.str("moe_a2a_backend") == Some("deepep")
                || sa.bool("enable_deepep_moe").unwrap_or(false),
            post_capture_kv_sizing: args.post_capture_kv_sizing,
            speculative_num_draft_layers: args.speculative_num_draft_layers,
            pp_min_tokens_from_other_stages: args.pp_min_tokens_from_other_stages,
            platform: match args.platform.as_deref() {
                Some("hip") => Platform::Hip,
                Some("npu") => Platform::Npu,
                _ => Platform::Cuda,
            },
            prefill_graph: logged_prefill_graph(sa),
            piecewise_graph: sa.bool("disable_piecewise_cuda_graph").map(|d| !d),
            swa_full_tokens_ratio: sa.f64("swa_full_tokens_ratio").unwrap_or(0.8),
            disable_hybrid_swa_memory: sa.bool("disable_hybrid_swa_memory").unwrap_or(false),
            gpu_mem_mib,
            gpu_mem_alternative,
            model_path: sa.str("model_path").map(str::to_string),
            server_args_origin: server.map(|s| s.origin.clone()),
        }
    }
}

/// The 0.5.18+ prefill graph backend a `server_args` line resolved: its `cuda_graph_config`
/// repr (`prefill=PhaseConfig(backend='breakable', …)`), else the flags that set it.
fn logged_prefill_graph(sa: &ServerArgs) -> Option<PrefillGraph> {
    let named = |b: &str| match b {
        "disabled" => Some(PrefillGraph::Disabled),
        "full" => Some(PrefillGraph::Full),
        "breakable" => Some(PrefillGraph::Breakable),
        "tc_piecewise" | "piecewise" => Some(PrefillGraph::TcPiecewise),
        _ => None,
    };
    if let Some(text) = sa.get("cuda_graph_config").and_then(|v| v.as_str()) {
        if let Some(at) = text.find("prefill=PhaseConfig(backend=") {
            let rest = &text[at + "prefill=PhaseConfig(backend=".len()..];
            let name: String = rest
                .trim_start_matches(['\'', '"'])
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if let Some(b) = named(&name.to_ascii_lowercase()) {
                return Some(b);
            }
        }
    }
    if let Some(b) = sa.str("cuda_graph_backend_prefill").and_then(named) {
        return Some(b);
    }
    (sa.bool("disable_prefill_cuda_graph") == Some(true)
        || sa.bool("disable_cuda_graph") == Some(true))
    .then_some(PrefillGraph::Disabled)
}

/// GPU capacity in MiB: the flag, else the run's recorded totals.
///
/// SGLang reads `nvidia-smi --query-gpu=memory.total` (NVML's total) and falls back to
/// `torch.cuda.mem_get_info()[1]` (the driver's total, which is also what
/// `torch.cuda.get_device_properties().total_memory` reports); the two differ by the memory
/// the driver keeps for itself (615 MiB on the H200). `--gpu-mem-source` picks; the default is
/// NVML's total, as SGLang reads it, and the other is kept as the alternative.
fn gpu_capacity(
    args: &SizeRequest,
    run: Option<&RunFacts>,
) -> (Option<Sourced<f64>>, Option<Sourced<f64>>) {
    if let Some(v) = args.gpu_mem_mib {
        return (Some(Sourced::new(v, Origin::Given, "--gpu-mem-mib")), None);
    }
    let Some(run) = run else {
        return (None, None);
    };
    let driver = run.driver_total_mib.map(|v| {
        Sourced::new(
            v,
            Origin::Derived,
            "the run's driver total (cuMemGetInfo; = torch total_memory, SGLang's mem_get_info fallback)",
        )
    });
    let nvml = run.nvml_total_mib.map(|v| {
        Sourced::new(
            v,
            Origin::Derived,
            "the run's NVML total (what nvidia-smi memory.total prints, SGLang's first choice)",
        )
    });
    let (first, second) = if args.gpu_mem_source.as_deref() == Some("driver") {
        (driver, nvml)
    } else {
        (nvml, driver)
    };
    match (first, second) {
        (Some(a), Some(b)) if a.value != b.value => (Some(a), Some(b)),
        (Some(a), _) => (Some(a), None),
        (None, b) => (b, None),
    }
}
