//! The inputs of the sizing pass, each with where it came from.
//!
//! Three sources: a **run** (journals: exact free bytes at the stage boundaries, the recorded
//! engine lines, the launch command line, the driver's and NVML's capacity), an engine **log**
//! (the same lines, numbers printed with two decimals, the `server_args` line), and the
//! command's **flags**, which override both. [`LogFacts`] is what a stream of engine lines says
//! (a log file, or the lines a run recorded); [`RunFacts`] adds what only journals know;
//! [`Measured`] is the free memory sizing works on, exact or rounded; [`Settings`] the server
//! settings after flags, logs and defaults are merged, each a [`Sourced`] value.

use std::path::{Path, PathBuf};

use vramledger_engines::log::{classify_each, event as ev, stage, Engine, RankTag};
use vramledger_engines::sizing::defaults::{Disaggregation, Speculative};
use vramledger_engines::sizing::pyfloat::GIB;
use vramledger_engines::sizing::tokens::distributed_min_gib;
use vramledger_format::Kind;

use super::detect::Hints;
use super::server_args::{self, ServerArgs};
use super::vllm::{self as vllm_facts, Attempt, EngineConfig};
use super::SizeArgs;
use crate::journal;
use crate::ledger::{self, StageRow};

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

/// One SGLang rank's printed free memory (GiB, two decimals).
#[derive(Debug, Clone, Default)]
pub struct RankLog {
    pub tag: RankTag,
    pub load_begin_avail: Option<f64>,
    pub load_end_avail: Option<f64>,
    pub load_end_usage: Option<f64>,
    pub pool_end_avail: Option<f64>,
    /// The lowest `avail mem` printed after the pool was built.
    pub later_min_avail: Option<f64>,
    /// `avail mem` at the last graph-capture end (or the summary's `available_gpu_mem`).
    pub after_capture_avail: Option<f64>,
}

/// What the engine reported about the KV pool.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// `#tokens` of the (first, full) "KV Cache is allocated" / VA line, else the summary.
    pub tokens: Option<(i64, String)>,
    /// The profiled value of "max_total_tokens=… is larger than the profiled value P".
    pub profiled: Option<(i64, String)>,
    /// Post-capture KV sizing's final count.
    pub post_capture_tokens: Option<i64>,
    /// A fatal sizing line: (event, the line).
    pub failure: Option<(String, String)>,
}

/// What a stream of engine lines says.
#[derive(Debug, Clone, Default)]
pub struct LogFacts {
    pub origin: String,
    pub sglang_lines: usize,
    pub vllm_lines: usize,
    pub server_args: Option<ServerArgs>,
    pub ranks: Vec<RankLog>,
    pub observed: Observed,
    pub hints: Hints,
    pub nccl_tp: Option<u64>,
    pub summary_context_len: Option<u64>,
    pub vllm_attempts: Vec<Attempt>,
    pub vllm_config: EngineConfig,
}

impl LogFacts {
    pub fn new(origin: impl Into<String>) -> LogFacts {
        LogFacts {
            origin: origin.into(),
            ..LogFacts::default()
        }
    }

    /// Reads a log file.
    pub fn read(path: &Path) -> Result<LogFacts, String> {
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let text = String::from_utf8_lossy(&bytes);
        let mut facts = LogFacts::new(path.display().to_string());
        for line in text.lines() {
            facts.observe_line(line);
        }
        Ok(facts)
    }

    /// The engine that printed most recognised lines.
    pub fn engine(&self) -> Option<Engine> {
        match (self.sglang_lines, self.vllm_lines) {
            (0, 0) => None,
            (s, v) if v > s => Some(Engine::Vllm),
            _ => Some(Engine::Sglang),
        }
    }

    fn rank(&mut self, tag: RankTag) -> &mut RankLog {
        let i = match self.ranks.iter().position(|r| r.tag == tag) {
            Some(i) => i,
            None => {
                self.ranks.push(RankLog {
                    tag,
                    ..RankLog::default()
                });
                self.ranks.len() - 1
            }
        };
        &mut self.ranks[i]
    }

    /// Takes one line of engine output.
    pub fn observe_line(&mut self, line: &str) {
        // Annotated logs (shared/logs) carry `# ` header lines and `#EDITOR-NOTE`s; an engine
        // never starts a line with '#'.
        if line.starts_with('#') {
            return;
        }
        if self.server_args.is_none() {
            self.server_args =
                server_args::from_log_line(line, &format!("server_args line of {}", self.origin));
        }
        self.vllm_config.observe_raw(line);
        for b in classify_each(line) {
            if b.engine == Engine::Vllm {
                self.vllm_lines += 1;
                vllm_facts::observe(&mut self.vllm_attempts, &b);
                continue;
            }
            self.sglang_lines += 1;
            self.hints.observe(&b);
            let n = b.numbers;
            let origin = self.origin.clone();
            let source = |what: &str| format!("{what} in {origin}");
            match b.event {
                ev::KV_CACHE_ALLOCATED | ev::KV_CACHE_VA_RESERVED
                    if self.observed.tokens.is_none() && b.words.pool_label.is_none_or_full() =>
                {
                    if let Some(t) = n.tokens {
                        self.observed.tokens =
                            Some((t as i64, source("'KV Cache is allocated. #tokens'")));
                    }
                }
                ev::SUMMARY => {
                    if let Some(t) = n.tokens {
                        let kv_line = self
                            .observed
                            .tokens
                            .as_ref()
                            .is_some_and(|(_, s)| s.contains("KV Cache"));
                        if !kv_line {
                            self.observed.tokens =
                                Some((t as i64, source("the 'max_total_num_tokens=' summary")));
                        }
                    }
                    self.summary_context_len = n.context_len.or(self.summary_context_len);
                }
                ev::MAX_TOTAL_TOKENS_CAPPED if self.observed.profiled.is_none() => {
                    if let Some(p) = n.profiled_tokens {
                        self.observed.profiled =
                            Some((p, source("'is larger than the profiled value' warning")));
                    }
                }
                ev::POST_CAPTURE_KV_ALLOCATED => {
                    self.observed.post_capture_tokens = n.tokens.map(|t| t as i64)
                }
                ev::NCCL_WARMUP => self.nccl_tp = n.tp_size.or(self.nccl_tp),
                ev::NOT_ENOUGH_MEMORY
                | ev::NO_KV_ROOM
                | ev::MAMBA_CACHE_TOO_SMALL
                | ev::SWA_POOL_TOO_SMALL
                    if self.observed.failure.is_none() =>
                {
                    self.observed.failure = Some((b.event.to_string(), b.text.to_string()))
                }
                _ => {}
            }
            let r = self.rank(b.rank);
            match b.event {
                ev::LOAD_WEIGHT_BEGIN if r.load_begin_avail.is_none() => {
                    r.load_begin_avail = n.avail_mem_gib
                }
                ev::LOAD_WEIGHT_END if r.load_end_avail.is_none() => {
                    r.load_end_avail = n.avail_mem_gib;
                    r.load_end_usage = n.mem_usage_gib;
                }
                ev::MEMORY_POOL_END if r.pool_end_avail.is_none() => {
                    r.pool_end_avail = n.avail_mem_gib
                }
                _ if r.pool_end_avail.is_some() => {
                    if let Some(a) = n.avail_mem_gib {
                        r.later_min_avail = Some(r.later_min_avail.map_or(a, |m: f64| m.min(a)));
                        let capture_end =
                            b.event.starts_with("capture_") && b.event.ends_with("_end");
                        if capture_end || b.event == ev::SUMMARY {
                            r.after_capture_avail = Some(a);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// `None` or "Full": the pool whose count is `max_total_num_tokens`.
trait FullPool {
    fn is_none_or_full(&self) -> bool;
}

impl FullPool for Option<&str> {
    fn is_none_or_full(&self) -> bool {
        matches!(self, None | Some("Full"))
    }
}

/// The run-time memory after the KV pool, from the books of one rank.
#[derive(Debug, Clone)]
pub struct AfterPool {
    /// "rank 0 (pid 2090, device 0)" or the log's rank prefix.
    pub rank: String,
    /// Free memory when the pool was built ("Memory pool end").
    pub pool_end_free_bytes: i64,
    /// The lowest free memory after it.
    pub low_free_bytes: i64,
    /// `pool_end_free − low_free`: what the server took beyond the KV pool.
    pub need_bytes: i64,
    /// The stages up to the low point, with their device deltas and owners (runs only).
    pub stages: Vec<StageNeed>,
    pub exact: bool,
}

/// One stage's part of the run-time need.
#[derive(Debug, Clone)]
pub struct StageNeed {
    pub name: String,
    pub delta_bytes: i64,
    pub owners: Vec<(String, i64)>,
}

/// One rank of a run: the weight-load boundaries and what came after the pool.
#[derive(Debug, Clone)]
pub struct RunRank {
    pub label: String,
    pub pre_free: u64,
    pub avail_free: u64,
    pub after: Option<AfterPool>,
    pub after_capture_free: Option<u64>,
}

/// What a run's journals say.
#[derive(Debug, Clone)]
pub struct RunFacts {
    pub path: PathBuf,
    pub ranks: Vec<RunRank>,
    /// The driver's total (cuMemGetInfo), MiB, minimum over the devices seen.
    pub driver_total_mib: Option<f64>,
    /// NVML's total (what `nvidia-smi --query-gpu=memory.total` prints), MiB, minimum.
    pub nvml_total_mib: Option<f64>,
    pub lines: LogFacts,
    pub cmdline: Option<ServerArgs>,
    pub warnings: Vec<String>,
}

fn after_pool(label: &str, stages: &[StageRow]) -> Option<(AfterPool, Option<u64>)> {
    let pool = stages.iter().position(|s| s.name == stage::KV_POOL)?;
    let pool_end = stages[pool].end_free? as i64;
    let later = &stages[pool + 1..];
    let (mut low, mut low_at) = (pool_end, None);
    for (i, s) in later.iter().enumerate() {
        if let Some(f) = s.end_free {
            if (f as i64) < low {
                low = f as i64;
                low_at = Some(i);
            }
        }
    }
    let listed = low_at.map_or(0, |i| i + 1);
    let need_stages = later[..listed]
        .iter()
        .map(|s| StageNeed {
            name: s.name.clone(),
            delta_bytes: s.device_delta,
            owners: s
                .by_owner
                .iter()
                .filter(|(_, b)| *b != 0)
                .map(|(o, b)| (o.name().to_string(), b))
                .collect(),
        })
        .collect();
    let capture_end = later
        .iter()
        .rfind(|s| s.name.starts_with("graph_capture"))
        .and_then(|s| s.end_free);
    Some((
        AfterPool {
            rank: label.to_string(),
            pool_end_free_bytes: pool_end,
            low_free_bytes: low,
            need_bytes: pool_end - low,
            stages: need_stages,
            exact: true,
        },
        capture_end,
    ))
}

impl RunFacts {
    /// Reads every journal under `path`.
    pub fn read(path: &Path) -> Result<RunFacts, String> {
        let files = journal::find(path).map_err(|e| e.to_string())?;
        let mut warnings = Vec::new();
        let mut journals = Vec::new();
        for f in files {
            match journal::read(&f) {
                Ok(j) => journals.push(j),
                Err(e) => warnings.push(e.to_string()),
            }
        }
        if journals.is_empty() {
            return Err(format!(
                "no readable journals (*.vlj) in {}{}",
                path.display(),
                warnings
                    .first()
                    .map(|w| format!(": {w}"))
                    .unwrap_or_default()
            ));
        }
        let mut lines = LogFacts::new(format!("the run {}", path.display()));
        let mut cmdline = None;
        let (mut driver, mut nvml): (Option<u64>, Option<u64>) = (None, None);
        let min = |slot: &mut Option<u64>, v: u64| *slot = Some(slot.map_or(v, |m| m.min(v)));
        for j in &journals {
            if cmdline.is_none() {
                if let Some(c) = j.header.get("cmdline") {
                    let args: Vec<&str> = c.split('\0').collect();
                    let origin = format!(
                        "the SGLang command line recorded for pid {}",
                        j.header.get("pid").unwrap_or("?")
                    );
                    cmdline = server_args::from_cmdline(&args, &origin);
                }
            }
            for e in &j.events {
                match e.kind() {
                    Some(Kind::Stage) => {
                        if let Some((_, line)) = e.text.split_once('\n') {
                            lines.observe_line(line);
                        }
                    }
                    Some(Kind::MemInfo) if e.device >= 0 && e.arg1 > 0 => min(&mut driver, e.arg1),
                    Some(Kind::NvmlSample) if e.device >= 0 && e.arg1 > 0 => min(&mut nvml, e.arg1),
                    _ => {}
                }
            }
        }
        let books = ledger::build(&journals);
        let mut ranks = Vec::new();
        for p in &books.processes {
            for d in &p.devices {
                let Some(w) = d.stages.iter().find(|s| s.name == stage::WEIGHT_LOAD) else {
                    continue;
                };
                let (Some(pre), Some(avail)) = (w.start_free, w.end_free) else {
                    continue;
                };
                let label = match p.rank {
                    Some(r) => format!("rank {r} (pid {}, device {})", p.pid, d.device),
                    None => format!("pid {}, device {}", p.pid, d.device),
                };
                let (after, after_capture_free) = match after_pool(&label, &d.stages) {
                    Some((a, c)) => (Some(a), c),
                    None => (None, None),
                };
                ranks.push(RunRank {
                    label,
                    pre_free: pre,
                    avail_free: avail,
                    after,
                    after_capture_free,
                });
                break;
            }
        }
        if ranks.is_empty() {
            return Err(format!(
                "the run {} has no weight_load stage with free memory at both ends (no 'Load \
                 weight begin' / 'Load weight end' line was recorded), so there is nothing to size",
                path.display()
            ));
        }
        let mib = |b: u64| b as f64 / 1_048_576.0;
        Ok(RunFacts {
            path: path.to_path_buf(),
            ranks,
            driver_total_mib: driver.map(mib),
            nvml_total_mib: nvml.map(mib),
            lines,
            cmdline,
            warnings,
        })
    }
}

/// "TP3", "DP0 TP0", "gpu_id=1", or "the log" for a line without a rank prefix.
pub fn rank_label(t: &RankTag) -> String {
    let mut parts = Vec::new();
    let mut put = |name: &str, v: Option<u32>| {
        if let Some(v) = v {
            parts.push(format!("{name}{v}"));
        }
    };
    put("DP", t.dp);
    put("PP", t.pp);
    put("TP", t.tp);
    put("EP", t.ep);
    put("gpu_id=", t.gpu_id);
    put("rank=", t.worker_rank);
    put("pid=", t.pid);
    if parts.is_empty() {
        "the log".to_string()
    } else {
        format!("log rank {}", parts.join(" "))
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
    pub swa_full_tokens_ratio: f64,
    pub disable_hybrid_swa_memory: bool,
    pub gpu_mem_mib: Option<Sourced<f64>>,
    /// The other capacity a run recorded (NVML vs driver), when it differs.
    pub gpu_mem_alternative: Option<Sourced<f64>>,
    pub model_path: Option<String>,
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
        args: &SizeArgs,
        server: Option<&ServerArgs>,
        run: Option<&RunFacts>,
        log: Option<&LogFacts>,
    ) -> Settings {
        let empty = ServerArgs::default();
        let sa = server.unwrap_or(&empty);
        let logged = |what: &str| format!("{what} from {}", sa.origin);
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
        let dp = sa.u64("dp_size").unwrap_or(1);
        let dp_attention = sa.bool("enable_dp_attention").unwrap_or(false);
        let (gpu_mem_mib, gpu_mem_alternative) = gpu_capacity(args, run);
        Settings {
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
            chunked_prefill_size: sa.i64("chunked_prefill_size"),
            max_prefill_tokens: sa.i64("max_prefill_tokens").unwrap_or(16384),
            cuda_graph_max_bs: sa.u64("cuda_graph_max_bs"),
            speculative: speculative(sa.str("speculative_algorithm")),
            speculative_num_steps: sa.u64("speculative_num_steps"),
            speculative_eagle_topk: sa.u64("speculative_eagle_topk"),
            speculative_num_draft_tokens: sa.u64("speculative_num_draft_tokens"),
            decode_graph: !sa.bool("disable_cuda_graph").unwrap_or(false),
            disaggregation: match sa.str("disaggregation_mode") {
                Some("prefill") => Disaggregation::Prefill,
                Some("decode") => Disaggregation::Decode,
                _ => Disaggregation::Null,
            },
            deepep: sa.str("moe_a2a_backend") == Some("deepep")
                || sa.bool("enable_deepep_moe").unwrap_or(false),
            swa_full_tokens_ratio: sa.f64("swa_full_tokens_ratio").unwrap_or(0.8),
            disable_hybrid_swa_memory: sa.bool("disable_hybrid_swa_memory").unwrap_or(false),
            gpu_mem_mib,
            gpu_mem_alternative,
            model_path: sa.str("model_path").map(str::to_string),
            server_args_origin: server.map(|s| s.origin.clone()),
        }
    }
}

/// GPU capacity in MiB: the flag, else the run's recorded totals.
///
/// SGLang reads `nvidia-smi --query-gpu=memory.total` (NVML's total) and falls back to
/// `torch.cuda.mem_get_info()[1]` (the driver's total, which is also what
/// `torch.cuda.get_device_properties().total_memory` reports); the two differ by the memory
/// the driver keeps for itself (615 MiB on the H200). `--gpu-mem-source` picks; the default is
/// the driver's total, and the other is kept as the alternative.
fn gpu_capacity(
    args: &SizeArgs,
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
    let (first, second) = if args.gpu_mem_source.as_deref() == Some("nvml") {
        (nvml, driver)
    } else {
        (driver, nvml)
    };
    match (first, second) {
        (Some(a), Some(b)) if a.value != b.value => (Some(a), Some(b)),
        (Some(a), _) => (Some(a), None),
        (None, b) => (b, None),
    }
}
