//! A vLLM run's journals (and optionally its log), read into the inputs of 0.26's KV budget for
//! every worker, each labelled measured (to the byte, from the journal) or read from a printed
//! line (two decimals of GiB).
//!
//! Measured: the driver readings vLLM itself took — `init_snapshot` (the program's last
//! `cuMemGetInfo` before the weights), `after_profile` (its last before "Available KV cache
//! memory"), and `capture_model`'s two readings around the captures — and torch's reserved bytes
//! at those points (the caching allocator's segments, which the hooks see). So the total, the
//! initial free memory, the non-torch growth and the graphs' size are exact. torch's *allocated*
//! bytes (weights, activation peak) live inside the caching allocator: no driver call shows
//! them, so they come from vLLM's printed lines, or from what the printed budget leaves.

use std::path::Path;

use vramledger_engines::log::vllm_startups::{EngineConfig, WorkerLines};
use vramledger_engines::log::{self, settings, Engine};
use vramledger_format::{Api, Kind};

use super::worker::{self, Worker};
use crate::journal;
use crate::sizing::facts::load_undamaged;

/// What the run says.
#[derive(Debug, Clone, Default)]
pub struct RunLines {
    pub workers: Vec<Worker>,
    pub config: EngineConfig,
    /// A settings line (engine config or non-default args) was seen.
    pub settings_seen: bool,
    /// Lines not tied to a worker (no pid prefix, or the EngineCore's): KV size, concurrency.
    pub global: WorkerLines,
    pub warnings: Vec<String>,
}

/// Does this run folder or journal hold a vLLM run (its recorded lines are vLLM's)? Read under
/// the journal policy ([`journal::load`]); what cannot be read says nothing either way.
pub fn is_vllm_run(path: &Path) -> bool {
    let Ok(loaded) = journal::load(path) else {
        return false;
    };
    let (mut vllm, mut sglang) = (0usize, 0usize);
    for j in &loaded.journals {
        for e in j.events.iter().filter(|e| e.kind() == Some(Kind::Stage)) {
            let line = e.text.split_once('\n').map(|(_, l)| l);
            match line.and_then(log::classify).map(|b| b.engine) {
                Some(Engine::Vllm) => vllm += 1,
                Some(Engine::Sglang) => sglang += 1,
                None => {}
            }
        }
    }
    vllm > sglang
}

/// Reads every journal of the run, and the log's lines (matched to workers by the pid of their
/// prefix; lines without one belong to every worker when there is one, else to the run).
pub fn read(path: &Path, log_text: Option<&str>) -> Result<RunLines, String> {
    let loaded = load_undamaged(path)?;
    let mut out = RunLines::default();
    out.warnings.extend(loaded.messages().cloned());
    for j in loaded.journals {
        let mut parts = settings::Assembler::default();
        let mut recorded = Vec::new();
        for l in j.engine_lines() {
            out.observe_config(l);
        }
        for e in &j.events {
            if e.kind() == Some(Kind::Warning) && e.api() == Some(Api::VramledgerSettings) {
                recorded.extend(parts.push(&e.text))
            }
        }
        recorded.extend(parts.finish());
        for a in recorded {
            out.observe_settings(&a);
        }
        match worker::worker(&j) {
            Some(w) => out.workers.push(w),
            // The EngineCore of TP > 1: its lines (KV size, concurrency) are the run's.
            None => {
                for b in j.engine_lines().filter_map(log::classify) {
                    if b.engine == Engine::Vllm {
                        out.global.observe(&b);
                    }
                }
            }
        }
    }
    out.workers
        .retain(|w| w.lines.lines > 0 || w.init_free.is_some());
    out.workers
        .sort_by_key(|w| (w.rank.unwrap_or(u32::MAX), w.pid));
    if let Some(text) = log_text {
        for line in text.lines() {
            out.observe_config(line);
            for b in log::classify_each(line).filter(|b| b.engine == Engine::Vllm) {
                let pid = b.rank.pid;
                match out.workers.iter_mut().find(|w| pid == Some(w.pid)) {
                    Some(w) => w.lines.observe(&b),
                    None => out.global.observe(&b),
                }
            }
        }
    }
    let global = out.global.clone();
    if out.workers.len() == 1 {
        out.workers[0].lines.fill_from(&global);
    }
    for w in &mut out.workers {
        w.lines.kv_tokens = w.lines.kv_tokens.or(global.kv_tokens);
        w.lines.max_len = w.lines.max_len.or(global.max_len);
    }
    if out.workers.is_empty() {
        return Err(format!(
            "the run {} has no process with device memory and vLLM lines to size",
            path.display()
        ));
    }
    Ok(out)
}

impl RunLines {
    /// A settings record of the journal (the engine config, the non-default args, the model
    /// folder), as the tap kept it.
    fn observe_settings(&mut self, a: &settings::Assembled) {
        match a.kind {
            settings::SettingsKind::VllmNonDefaultArgs
            | settings::SettingsKind::VllmEngineConfig => self.observe_config(&a.line),
            settings::SettingsKind::ModelPath if self.config.model.is_none() => {
                self.config.model = Some(a.line.trim().to_string())
            }
            _ => {}
        }
        if a.cut || a.incomplete {
            self.warnings.push(format!(
                "a recorded {} line is {}: the settings after its end are unknown",
                a.kind.name(),
                if a.cut {
                    "cut at 64 KiB"
                } else {
                    "missing parts"
                }
            ));
        }
    }

    /// The settings lines: the engine config and the non-default args (from the journal's
    /// settings records or a log).
    fn observe_config(&mut self, line: &str) {
        if line.contains(" LLM engine (v") || line.contains("non-default args:") {
            self.settings_seen = true;
        }
        self.config.observe_raw(line);
    }

    /// The observed block count: "GPU KV cache size: N tokens" read back through
    /// `get_kv_cache_capacity` for `max_model_len` and `block_size`.
    pub fn observed_blocks(&self, max_model_len: u64, block_size: u64) -> Option<i64> {
        let tokens = self.workers.iter().find_map(|w| w.lines.kv_tokens)? as i64;
        let l = vramledger_engines::sizing::vllm_budget::Layout {
            page_size_bytes: 1,
            num_layers: 1,
            block_size,
            max_model_len,
        };
        let per_request = max_model_len.div_ceil(block_size.max(1)) as f64;
        let guess = (tokens as f64 * per_request / max_model_len.max(1) as f64).round() as i64;
        (guess - 2..=guess + 2)
            .find(|&b| vramledger_engines::sizing::vllm_budget::capacity(b, &l).0 == tokens)
    }
}
