//! What the engine's lines and a run's journals say, before any setting is resolved.
//!
//! [`LogFacts`] reads a stream of engine lines (a log file, or the lines a run recorded with
//! its stage records): per-rank printed free memory, the reported token count or failure, the
//! `server_args` line, layout hints and vLLM's startups. [`RunFacts`] adds what only journals
//! know: exact free bytes at the `weight_load` boundaries per rank, the run-time memory after
//! the KV pool per stage and owner (from the books), the recorded launch command line and the
//! GPU capacity the driver and NVML reported.

use std::path::{Path, PathBuf};

use vramledger_engines::log::settings::{Assembler, SettingsKind};
use vramledger_engines::log::{classify_each, event as ev, stage, Engine, RankTag};
use vramledger_format::{Api, Kind};

use super::after_pool::after_pool;
pub use super::after_pool::{AfterPool, StageNeed};
use crate::journal;
use crate::ledger;
use vramledger_engines::log::server_args::{self, ServerArgs};
use vramledger_engines::log::sglang_layout::Hints;
use vramledger_engines::log::vllm_startups::{self as vllm_facts, Attempt, EngineConfig};

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
    /// The weights loaded and nothing after them says a pool was built or sizing failed: a
    /// startup that stopped in KV sizing, or a log cut there.
    pub stopped_after_weights: bool,
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
        let bytes = crate::infile::read(path, crate::infile::Kind::Log)?;
        let text = String::from_utf8_lossy(&bytes);
        let mut facts = LogFacts::new(path.display().to_string());
        for line in text.lines() {
            facts.observe_line(line);
        }
        Ok(facts)
    }

    /// What the engine reported about its pool, with [`Observed::stopped_after_weights`] set.
    pub fn observed(&self) -> Observed {
        let o = &self.observed;
        let mut out = o.clone();
        out.stopped_after_weights = self.ranks.iter().any(|r| r.load_end_avail.is_some())
            && self.ranks.iter().all(|r| r.pool_end_avail.is_none())
            && o.tokens.is_none()
            && o.profiled.is_none()
            && o.failure.is_none()
            && o.post_capture_tokens.is_none();
        out
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

/// One rank of a run: the weight-load boundaries and what came after the pool.
#[derive(Debug, Clone)]
pub struct RunRank {
    pub label: String,
    pub pre_free: u64,
    pub avail_free: u64,
    pub after: Option<AfterPool>,
    pub after_capture_free: Option<u64>,
}

/// One engine settings line the tap recorded (secrets already redacted).
#[derive(Debug, Clone)]
pub struct RecordedSettings {
    pub kind: SettingsKind,
    pub line: String,
    pub pid: String,
    /// Longer than the record bound when printed: only its start was kept.
    pub cut: bool,
    /// Parts of it were lost (a torn journal).
    pub incomplete: bool,
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
    /// The settings lines the tap recorded, in journal order.
    pub settings: Vec<RecordedSettings>,
    /// The model folder the first settings line named, as the tap resolved it, and whose.
    pub model_path: Option<(String, String)>,
    pub warnings: Vec<String>,
}

/// Every journal under `path` under the journal policy (docs/journal.md): sizing claims exact
/// bytes, so a damaged run gives no answer rather than one from part of the records.
pub fn load_undamaged(path: &Path) -> Result<journal::Loaded, String> {
    let loaded = journal::load(path)?;
    if loaded.damaged() {
        let why: Vec<&str> = loaded
            .unreadable
            .iter()
            .chain(
                loaded
                    .journals
                    .iter()
                    .filter(|j| j.corrupt)
                    .flat_map(|j| &j.warnings),
            )
            .map(String::as_str)
            .collect();
        return Err(format!(
            "{} is damaged, so no exact sizing can be taken from it: {}",
            path.display(),
            why.join("; ")
        ));
    }
    Ok(loaded)
}

impl RunFacts {
    /// Reads every journal under `path`.
    pub fn read(path: &Path) -> Result<RunFacts, String> {
        let loaded = load_undamaged(path)?;
        let mut warnings: Vec<String> = loaded.messages().cloned().collect();
        let journals = loaded.journals;
        let mut lines = LogFacts::new(format!("the run {}", path.display()));
        let mut cmdline = None;
        let mut settings = Vec::new();
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
            let pid = j.header.get("pid").unwrap_or("?").to_string();
            let mut parts = Assembler::default();
            for e in &j.events {
                match e.kind() {
                    Some(Kind::Warning) if e.api == Api::VramledgerSettings as u16 => {
                        for a in parts.push(&e.text) {
                            settings.push(recorded(a, &pid));
                        }
                    }
                    // The tap records the engine's fatal sizing lines as warnings.
                    Some(Kind::Warning) if e.api == Api::None as u16 => lines.observe_line(&e.text),
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
            settings.extend(parts.finish().map(|a| recorded(a, &pid)));
        }
        let mut model_path = None;
        for s in &settings {
            if s.cut || s.incomplete {
                warnings.push(format!(
                    "the {} line recorded for pid {} {}; the settings after its end are unknown",
                    s.kind.name(),
                    s.pid,
                    if s.cut {
                        "was longer than 64 KiB: its first 64 KiB were kept"
                    } else {
                        "lost parts (a damaged journal): what remained was read"
                    }
                ));
            }
            match s.kind {
                SettingsKind::ModelPath if !s.incomplete => {
                    model_path.get_or_insert((
                        s.line.clone(),
                        format!("the model path recorded for pid {}", s.pid),
                    ));
                }
                SettingsKind::ModelPath => {}
                _ => lines.observe_line(&s.line),
            }
        }
        if let Some(sa) = lines.server_args.as_mut() {
            sa.origin = format!("the server_args line recorded in {}", path.display());
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
            settings,
            model_path,
            warnings,
        })
    }
}

fn recorded(a: vramledger_engines::log::settings::Assembled, pid: &str) -> RecordedSettings {
    RecordedSettings {
        kind: a.kind,
        line: a.line,
        pid: pid.to_string(),
        cut: a.cut,
        incomplete: a.incomplete,
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
