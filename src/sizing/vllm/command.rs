//! The `vramledger size RUN` entry for vLLM runs: flags, the optional engine output, the model.

use vramledger_engines::sizing::model::ModelGeometry;

use super::log::VllmAsk;
use super::report::VllmReport;
use super::run::RunLines;
use super::{plan, run};
use crate::sizing::limits::{check_vllm, float, int, opt, signed, MAX_BYTES, MAX_GIB, MAX_TOKENS};
use crate::sizing::request::SizeRequest;
use vramledger_engines::log::vllm_startups::WorkerLines;

/// `vramledger size RUN` for a vLLM run (optionally with `--log`, the engine's output).
pub fn size_run_command(args: &SizeRequest, path: &std::path::Path) -> Result<VllmReport, String> {
    if args.mem_fraction_static.is_some() {
        return Err(
            "vLLM has no mem_fraction_static: use --gpu-memory-utilization for a vLLM run".into(),
        );
    }
    if args.attempt.is_some_and(|a| a != 1) {
        return Err("--attempt picks a startup of a vLLM log; a run holds one".into());
    }
    let log_text = match &args.log {
        Some(p) => {
            let bytes = crate::infile::read(p, crate::infile::Kind::Log)?;
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
        None => None,
    };
    let lines = run::read(path, log_text.as_deref())?;
    check_run(&lines)?;
    let model = run_model(args, path, lines.config.model.as_deref())?;
    let ask = plan::RunAsk {
        ask: VllmAsk::of(args, &model, None),
        margin_gib: args.margin_gib,
        what_if_utilization: &args.what_if_gpu_memory_utilization,
        what_if_max_model_len: &args.what_if_context_length,
    };
    let mut r = plan::size_run(&lines, &model, &ask)?;
    r.notes.extend(lines.warnings.iter().cloned());
    Ok(r)
}

/// `--model-config`, else `config.json` in the run folder, else in the logged model folder.
fn run_model(
    args: &SizeRequest,
    run: &std::path::Path,
    logged: Option<&str>,
) -> Result<ModelGeometry, String> {
    let mut candidates = Vec::new();
    match &args.model_config {
        Some(p) => candidates.push(p.clone()),
        None => {
            if run.is_dir() {
                candidates.push(run.join("config.json"));
            }
            if let Some(m) = logged {
                candidates.push(std::path::Path::new(m).join("config.json"));
            }
        }
    }
    let Some(path) = candidates
        .iter()
        .find(|c| args.model_config.is_some() || c.is_file())
    else {
        return Err(
            "--model-config is needed: the KV bytes per token come from the model's config.json"
                .into(),
        );
    };
    crate::sizing::model_config::read(path)
}

/// A vLLM run's recorded readings, lines and settings.
fn check_run(run: &RunLines) -> Result<(), String> {
    check_vllm(&[], &run.config)?;
    let from = "the vLLM run";
    let lines = |l: &WorkerLines| -> Result<(), String> {
        for (what, v) in [
            ("weights (GiB)", l.weights_gib),
            ("available KV cache memory (GiB)", l.available_gib),
            ("activation peak (GiB)", l.activation_gib),
            ("CUDA graph estimate (GiB)", l.estimate_gib),
            ("CUDA graph capture (GiB)", l.capture_took_gib),
        ] {
            opt(v, |v| float(what, v, -MAX_GIB, MAX_GIB, from))?;
        }
        opt(l.kv_tokens, |v| {
            int("KV cache tokens", v, 0, MAX_TOKENS, from)
        })?;
        opt(l.max_len, |v| int("maximum length", v, 0, MAX_TOKENS, from))
    };
    lines(&run.global)?;
    for w in &run.workers {
        lines(&w.lines)?;
        for i in [&w.total, &w.init_free, &w.non_torch, &w.cudagraph]
            .into_iter()
            .flatten()
        {
            signed("a memory reading (bytes)", i.bytes.lo, MAX_BYTES, &i.detail)?;
            signed("a memory reading (bytes)", i.bytes.hi, MAX_BYTES, &i.detail)?;
        }
        opt(w.weights_reserved, |v| {
            signed("weights reserved (bytes)", v, MAX_BYTES, from)
        })?;
        if let Some((v, _)) = &w.low_free {
            int("lowest free memory (bytes)", *v, 0, MAX_BYTES, from)?;
        }
    }
    Ok(())
}
