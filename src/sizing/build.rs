//! The size pass, step by step: check the request, read the run and the log, pick the engine
//! (a vLLM run or log goes to [`super::vllm`]), resolve SGLang's settings (each key from the
//! first source that has it: the log's `server_args` line, the one the run recorded, the run's
//! launch command line; flags override all), size every layout the input allows, keep one.

use vramledger_engines::log::server_args::ServerArgs;
use vramledger_engines::log::Engine;
use vramledger_engines::sizing::defaults::Platform;
use vramledger_engines::sizing::Layout;

use super::inputs::{LogFacts, Measured, Observed, Origin, RunFacts, Settings, Sourced};
use super::report::{DefaultsOnly, SizeReport};
use super::request::SizeRequest;
use super::{cell, evaluate, explain, layouts, limits, model, vllm};

/// Gathers the inputs and computes the report.
pub fn build(args: &SizeRequest) -> Result<SizeReport, String> {
    check_flags(args)?;
    if let Some(p) = args.run.as_ref().filter(|p| vllm::run::is_vllm_run(p)) {
        return vllm::size_run_command(args, p).map(|r| SizeReport::Vllm(Box::new(r)));
    }
    let run = read_run(args)?;
    let log = read_log(args)?;
    match &log {
        Some(l) if l.engine() == Some(Engine::Vllm) => size_vllm_log(args, run.is_some(), l),
        _ => size_sglang(args, run, log),
    }
}

fn check_flags(args: &SizeRequest) -> Result<(), String> {
    let fraction = |name: &str, v: Option<f64>| match v {
        Some(f) if !(f > 0.0 && f <= 1.0) => Err(format!("{name} {f} is outside (0, 1]")),
        _ => Ok(()),
    };
    fraction("--mem-fraction-static", args.mem_fraction_static)?;
    fraction("--gpu-memory-utilization", args.gpu_memory_utilization)?;
    for f in &args.what_if_mem_fraction {
        fraction("--what-if-mem-fraction", Some(*f))?;
    }
    for f in &args.what_if_gpu_memory_utilization {
        fraction("--what-if-gpu-memory-utilization", Some(*f))?;
    }
    let at_least_one = |name: &str, v: Option<u64>| match v {
        Some(0) => Err(format!("{name} 0: it must be at least 1")),
        _ => Ok(()),
    };
    at_least_one("--tp", args.tp)?;
    at_least_one("--pp", args.pp)?;
    at_least_one("--dp", args.dp)?;
    at_least_one("--page-size", args.page_size)?;
    at_least_one("--context-length", args.context_length)?;
    at_least_one("--max-total-tokens", args.max_total_tokens)?;
    for v in &args.what_if_page_size {
        at_least_one("--what-if-page-size", Some(*v))?;
    }
    for v in &args.what_if_tp {
        at_least_one("--what-if-tp", Some(*v))?;
    }
    for v in &args.what_if_context_length {
        at_least_one("--what-if-context-length", Some(*v))?;
    }
    for v in args.gpu_mem_mib.iter().chain(&args.what_if_gpu_mem_mib) {
        if !(*v > 0.0 && v.is_finite()) {
            return Err(format!("GPU capacity {v} MiB must be positive"));
        }
    }
    if !(args.margin_gib >= 0.0 && args.margin_gib.is_finite()) {
        return Err(format!(
            "--margin-gib {} must be 0 or more",
            args.margin_gib
        ));
    }
    for (name, v) in [
        ("--pre-gib", args.pre_gib),
        ("--available-gib", args.available_gib),
    ] {
        if v.is_some_and(|g| !g.is_finite()) {
            return Err(format!("{name} must be a finite number of GiB"));
        }
    }
    if args.pre_gib.is_some() && (args.run.is_some() || args.log.is_some()) {
        // Allowed: the flags override what the run or log measured.
    }
    if args.attempt == Some(0) {
        return Err("--attempt 0: startups are numbered from 1".into());
    }
    if args.gpu_mem_source.is_some() && args.gpu_mem_mib.is_some() {
        return Err(
            "--gpu-mem-source picks the run's capacity; it contradicts --gpu-mem-mib".into(),
        );
    }
    crate::sizing::limits::check_args(args)
}

/// The run folder or journal given, read.
fn read_run(args: &SizeRequest) -> Result<Option<RunFacts>, String> {
    let Some(p) = &args.run else {
        return Ok(None);
    };
    if !p.exists() {
        return Err(format!(
            "cannot read {}: no such file or folder",
            p.display()
        ));
    }
    let r = RunFacts::read(p)?;
    for w in &r.warnings {
        crate::stderr::line("vramledger size", format_args!("warning: {w}"));
    }
    Ok(Some(r))
}

/// The engine log given, read; one without sizing lines is refused.
fn read_log(args: &SizeRequest) -> Result<Option<LogFacts>, String> {
    let Some(p) = &args.log else {
        return Ok(None);
    };
    let l = LogFacts::read(p)?;
    if l.engine().is_none() && l.server_args.is_none() {
        return Err(format!(
            "{} has no SGLang or vLLM sizing lines (no 'Load weight' or memory-profiling \
             line, no server_args)",
            p.display()
        ));
    }
    Ok(Some(l))
}

/// A vLLM log: one startup's budget re-run.
fn size_vllm_log(args: &SizeRequest, with_run: bool, l: &LogFacts) -> Result<SizeReport, String> {
    if with_run {
        return Err("a vLLM log cannot be combined with a run; size the log alone".into());
    }
    if args.mem_fraction_static.is_some() {
        return Err(
            "vLLM has no mem_fraction_static: use --gpu-memory-utilization for a vLLM log".into(),
        );
    }
    limits::check_vllm(&l.vllm_attempts, &l.vllm_config)?;
    let model = model::find_model(args, None, None)?.ok_or(
        "--model-config is needed: the KV bytes per token come from the model's config.json",
    )?;
    let ask = vllm::VllmAsk::of(args, &model.geometry, args.attempt);
    vllm::size(&l.vllm_attempts, &l.vllm_config, &ask).map(|r| SizeReport::Vllm(Box::new(r)))
}

/// SGLang input (a run, a log, or flags alone): each layout the input allows sized, one kept.
fn size_sglang(
    args: &SizeRequest,
    run: Option<RunFacts>,
    log: Option<LogFacts>,
) -> Result<SizeReport, String> {
    if args.gpu_memory_utilization.is_some() {
        return Err(
            "--gpu-memory-utilization is vLLM's setting; for SGLang use --mem-fraction-static"
                .into(),
        );
    }
    if args.attempt.is_some() {
        return Err("--attempt picks a vLLM startup; it does not apply to SGLang input".into());
    }
    let server = logged_settings(run.as_ref(), log.as_ref());
    let mut settings = Settings::resolve(args, server.as_ref(), run.as_ref(), log.as_ref());
    limits::check_settings(&settings)?;
    let recorded_model = run.as_ref().and_then(|r| r.model_path.clone());
    let model = model::find_model(args, recorded_model, settings.model_path.as_deref())?;
    let facts = log.as_ref().or(run.as_ref().map(|r| &r.lines));
    let measured = match (&run, &log, args.pre_gib.zip(args.available_gib)) {
        (_, _, Some((pre, avail))) => Some(Measured::from_flags(pre, avail)),
        (Some(r), _, None) => Some(Measured::from_run(r)),
        (None, Some(l), None) => Some(Measured::from_log(l)?),
        (None, None, None) => None,
    };
    if let Some(m) = &measured {
        limits::check_measured(m)?;
    }
    let Some(measured) = measured else {
        let layout = layouts::first(args, facts)?;
        npu_page_default(&mut settings, layout.value);
        let gpu = settings.gpu_mem_mib.clone().ok_or(
            "nothing measured: give --pre-gib and --available-gib, a RUN or --log to compute \
             tokens, or --gpu-mem-mib to see the defaults SGLang would derive for that GPU",
        )?;
        let m = model.as_ref().map(|m| &m.geometry);
        let defaults = evaluate::defaults_report(m, &settings, layout.value, gpu, None);
        let cell_bytes = match &model {
            Some(mdl) => Some(cell::cell_only(&mdl.geometry, &settings, layout.value)?),
            None => None,
        };
        return Ok(SizeReport::DefaultsOnly(Box::new(DefaultsOnly {
            layout,
            defaults,
            cell_bytes,
            model,
        })));
    };
    let model = model.ok_or(
        "--model-config is needed: the KV bytes per token come from the model's config.json",
    )?;
    let observed = observed(facts, run.as_ref(), log.as_ref());
    limits::check_observed(&observed)?;
    // Each layout the input allows (one when --sglang-version names it), then the choice.
    let mut reports = Vec::new();
    let mut first_error = None;
    for layout in layouts::to_try(args, facts)? {
        let mut s = settings.clone();
        npu_page_default(&mut s, layout.value);
        let plan = explain::Plan {
            layout,
            model: model.clone(),
            settings: s,
            measured: measured.clone(),
            observed: observed.clone(),
            args,
        };
        match explain::compute(plan) {
            Ok(r) => reports.push(r),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if reports.is_empty() {
        return Err(first_error.unwrap_or_else(|| "no SGLang layout to size with".into()));
    }
    Ok(SizeReport::Sglang(Box::new(layouts::choose(reports))))
}

/// Logged settings, each key from the first source that has it: the log's server_args line,
/// the server_args line the run recorded, the run's launch command line.
fn logged_settings(run: Option<&RunFacts>, log: Option<&LogFacts>) -> Option<ServerArgs> {
    let mut server: Option<ServerArgs> = None;
    for layer in [
        log.and_then(|l| l.server_args.as_ref()),
        run.and_then(|r| r.lines.server_args.as_ref()),
        run.and_then(|r| r.cmdline.as_ref()),
    ]
    .into_iter()
    .flatten()
    {
        match server.as_mut() {
            Some(s) => s.fill_from(layer),
            None => server = Some(layer.clone()),
        }
    }
    server
}

/// What the engine reported: the run's own lines first, the log filling what they lack.
fn observed(facts: Option<&LogFacts>, run: Option<&RunFacts>, log: Option<&LogFacts>) -> Observed {
    let mut observed = facts.map(LogFacts::observed).unwrap_or_default();
    if let (Some(l), Some(r)) = (log, run) {
        observed = r.lines.observed();
        let o = &l.observed;
        observed.tokens = observed.tokens.or(o.tokens.clone());
        observed.profiled = observed.profiled.or(o.profiled.clone());
        observed.failure = observed.failure.or(o.failure.clone());
        observed.post_capture_tokens = observed.post_capture_tokens.or(o.post_capture_tokens);
        observed.stopped_after_weights = (observed.stopped_after_weights
            || l.observed().stopped_after_weights)
            && observed.tokens.is_none()
            && observed.profiled.is_none()
            && observed.failure.is_none()
            && observed.post_capture_tokens.is_none();
    }
    observed
}

/// SGLang 0.5.12+ on an NPU pages the KV cache by 128 tokens unless told otherwise.
fn npu_page_default(settings: &mut Settings, layout: Layout) {
    if settings.platform == Platform::Npu
        && layout >= Layout::V0_5_12
        && settings.page_size.origin == Origin::Default
    {
        settings.page_size = Sourced::new(
            128,
            Origin::Default,
            "SGLang's NPU default (set_default_server_args)",
        );
    }
}
