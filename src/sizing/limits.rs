//! Bounds on every number `vramledger size` computes with, checked where it enters: flags,
//! a model's `config.json` (`model_config`), an engine log (its numbers and its `server_args`
//! line), a run's journals (free bytes, the recorded command line; a vLLM run's in
//! `vllm::command`). A number out of its range is bad input (one message naming it and where
//! it came from, exit 2), never an overflow, an allocation of its size, or a loop of its length.
//!
//! The ranges are far beyond any real GPU or model (see each constant) and small enough that
//! the sizing arithmetic cannot overflow: GPU memory below 2^44 bytes (16 TiB), a token count
//! below 2^32, KV bytes per token below 2^30, so bytes = tokens × cell stays below 2^62.

use crate::sizing::inputs::{Measured, Observed, Settings, Sourced};
use crate::sizing::request::SizeRequest;
use vramledger_engines::log::vllm_startups::{Attempt, EngineConfig};

/// TP, PP, DP sizes (GPUs of one server).
pub const MAX_PARALLEL: u64 = 1 << 12;
/// Page size (vLLM: block size), in tokens.
pub const MAX_PAGE: u64 = 1 << 16;
/// Any token or request count: context length, pool size, chunk, batch.
pub const MAX_TOKENS: u64 = 1 << 32;
/// Speculative steps, top-k, draft tokens, draft layers.
pub const MAX_SPECULATIVE: u64 = 1 << 10;
/// GPU capacity in MiB (16 TiB).
pub const MAX_GPU_MIB: f64 = (1u64 << 24) as f64;
/// Any memory figure in GiB, either sign (16 TiB).
pub const MAX_GIB: f64 = (1u64 << 14) as f64;
/// Any memory figure in bytes, either sign (16 TiB).
pub const MAX_BYTES: u64 = 1 << 44;
/// `--attempt` (vLLM startups in one log).
pub const MAX_ATTEMPT: usize = 1 << 16;
/// Values of one repeatable `--what-if-*` flag.
pub const MAX_WHAT_IFS: usize = 64;
/// Decoder layers, and entries of a per-layer list.
pub const MAX_LAYERS: u64 = 1 << 12;
/// Attention or KV heads.
pub const MAX_HEADS: u64 = 1 << 14;
/// Head dimensions and MLA ranks.
pub const MAX_HEAD_DIM: u64 = 1 << 14;
/// `hidden_size` (also the vision tower's).
pub const MAX_HIDDEN: u64 = 1 << 20;
/// (layers + draft layers) × KV heads × (K + V head dims): the KV elements of one token
/// (2^28; × 4 bytes is 1 GiB per token, a thousand times the largest model's).
pub const MAX_KV_ELEMENTS: u64 = 1 << 28;

pub(crate) fn out_of_range(
    what: &str,
    v: impl std::fmt::Display,
    from: &str,
    range: &str,
) -> String {
    format!("{what} {v} ({from}) is out of range: {range}")
}

pub(crate) fn int(what: &str, v: u64, lo: u64, hi: u64, from: &str) -> Result<(), String> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(out_of_range(what, v, from, &format!("{lo} to {hi}")))
    }
}

pub(crate) fn signed(what: &str, v: i64, hi: u64, from: &str) -> Result<(), String> {
    if v.unsigned_abs() <= hi {
        Ok(())
    } else {
        Err(out_of_range(what, v, from, &format!("-{hi} to {hi}")))
    }
}

pub(crate) fn float(what: &str, v: f64, lo: f64, hi: f64, from: &str) -> Result<(), String> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(out_of_range(
            what,
            v,
            from,
            &format!("a number from {lo} to {hi}"),
        ))
    }
}

pub(crate) fn opt<T: Copy>(
    v: Option<T>,
    f: impl Fn(T) -> Result<(), String>,
) -> Result<(), String> {
    v.map_or(Ok(()), f)
}

fn sourced_u64(what: &str, v: &Sourced<u64>, lo: u64, hi: u64) -> Result<(), String> {
    int(what, v.value, lo, hi, &v.detail)
}

/// The flags of `vramledger size`.
pub fn check_args(a: &SizeRequest) -> Result<(), String> {
    let flag = "given as a flag";
    let par = |name: &str, v: Option<u64>| opt(v, |v| int(name, v, 1, MAX_PARALLEL, flag));
    par("--tp", a.tp)?;
    par("--pp", a.pp)?;
    par("--dp", a.dp)?;
    opt(a.page_size, |v| int("--page-size", v, 1, MAX_PAGE, flag))?;
    let tokens =
        |name: &str, v: Option<u64>, lo: u64| opt(v, |v| int(name, v, lo, MAX_TOKENS, flag));
    tokens("--max-total-tokens", a.max_total_tokens, 1)?;
    tokens("--max-running-requests", a.max_running_requests, 1)?;
    tokens("--context-length", a.context_length, 1)?;
    tokens("--cuda-graph-max-bs", a.cuda_graph_max_bs, 0)?;
    // -1 disables chunking; otherwise a token count.
    opt(a.chunked_prefill_size, |v| match v {
        -1 => Ok(()),
        v if v >= 1 && v as u64 <= MAX_TOKENS => Ok(()),
        v => Err(out_of_range(
            "--chunked-prefill-size",
            v,
            flag,
            &format!("-1 (no chunking) or 1 to {MAX_TOKENS}"),
        )),
    })?;
    opt(a.pp_min_tokens_from_other_stages, |v| {
        signed("--pp-min-tokens-from-other-stages", v, MAX_TOKENS, flag)
    })?;
    let spec = |name: &str, v: Option<u64>| opt(v, |v| int(name, v, 0, MAX_SPECULATIVE, flag));
    spec("--speculative-num-steps", a.speculative_num_steps)?;
    spec("--speculative-eagle-topk", a.speculative_eagle_topk)?;
    spec(
        "--speculative-num-draft-tokens",
        a.speculative_num_draft_tokens,
    )?;
    spec(
        "--speculative-num-draft-layers",
        a.speculative_num_draft_layers,
    )?;
    let bytes = |name: &str, v: Option<u64>| opt(v, |v| int(name, v, 0, MAX_BYTES, flag));
    bytes("--post-capture-backed-bytes", a.post_capture_backed_bytes)?;
    bytes(
        "--post-capture-sampling-headroom-bytes",
        a.post_capture_sampling_headroom_bytes,
    )?;
    let gib = |name: &str, v: Option<f64>| opt(v, |v| float(name, v, -MAX_GIB, MAX_GIB, flag));
    gib("--pre-gib", a.pre_gib)?;
    gib("--available-gib", a.available_gib)?;
    gib("--free-after-capture-gib", a.free_after_capture_gib)?;
    float("--margin-gib", a.margin_gib, 0.0, MAX_GIB, flag)?;
    let mib = |name: &str, v: f64| {
        if v > 0.0 && v <= MAX_GPU_MIB {
            Ok(())
        } else {
            Err(out_of_range(
                name,
                v,
                flag,
                &format!("more than 0, at most {MAX_GPU_MIB}"),
            ))
        }
    };
    opt(a.gpu_mem_mib, |v| mib("--gpu-mem-mib", v))?;
    opt(a.attempt, |v| {
        if v <= MAX_ATTEMPT {
            Ok(())
        } else {
            Err(out_of_range(
                "--attempt",
                v,
                flag,
                &format!("1 to {MAX_ATTEMPT}"),
            ))
        }
    })?;
    let many = |name: &str, n: usize| {
        if n <= MAX_WHAT_IFS {
            Ok(())
        } else {
            Err(format!("{name} is given {n} times: at most {MAX_WHAT_IFS}"))
        }
    };
    many("--what-if-mem-fraction", a.what_if_mem_fraction.len())?;
    many("--what-if-page-size", a.what_if_page_size.len())?;
    many("--what-if-kv-cache-dtype", a.what_if_kv_cache_dtype.len())?;
    many("--what-if-context-length", a.what_if_context_length.len())?;
    many("--what-if-gpu-mem-mib", a.what_if_gpu_mem_mib.len())?;
    many(
        "--what-if-gpu-memory-utilization",
        a.what_if_gpu_memory_utilization.len(),
    )?;
    many("--what-if-tp", a.what_if_tp.len())?;
    for v in &a.what_if_page_size {
        int("--what-if-page-size", *v, 1, MAX_PAGE, flag)?;
    }
    for v in &a.what_if_context_length {
        int("--what-if-context-length", *v, 1, MAX_TOKENS, flag)?;
    }
    for v in &a.what_if_tp {
        int("--what-if-tp", *v, 1, MAX_PARALLEL, flag)?;
    }
    for v in &a.what_if_gpu_mem_mib {
        mib("--what-if-gpu-mem-mib", *v)?;
    }
    Ok(())
}

/// The settings after flags, the logged `server_args` and the run's command line are merged:
/// what a log or a journal said is held to the same ranges as a flag.
pub fn check_settings(s: &Settings) -> Result<(), String> {
    let logged = s
        .server_args_origin
        .as_deref()
        .map_or_else(|| "server settings".to_string(), |o| format!("from {o}"));
    sourced_u64("tp_size", &s.tp, 1, MAX_PARALLEL)?;
    sourced_u64("pp_size", &s.pp, 1, MAX_PARALLEL)?;
    int("dp_size", s.dp, 1, MAX_PARALLEL, &logged)?;
    sourced_u64("page_size", &s.page_size, 1, MAX_PAGE)?;
    if let Some(f) = &s.mem_fraction_static {
        if !(f.value > 0.0 && f.value <= 1.0) {
            return Err(out_of_range(
                "mem_fraction_static",
                f.value,
                &f.detail,
                "(0, 1]",
            ));
        }
    }
    if let Some(t) = &s.max_total_tokens {
        if !(1..=MAX_TOKENS as i64).contains(&t.value) {
            return Err(out_of_range(
                "max_total_tokens",
                t.value,
                &t.detail,
                &format!("1 to {MAX_TOKENS}"),
            ));
        }
    }
    opt(s.context_length.as_ref(), |c| {
        sourced_u64("context_length", c, 1, MAX_TOKENS)
    })?;
    let count =
        |what: &str, v: Option<u64>, lo: u64| opt(v, |v| int(what, v, lo, MAX_TOKENS, &logged));
    count("max_running_requests", s.max_running_requests, 1)?;
    count("cuda_graph_max_bs", s.cuda_graph_max_bs, 0)?;
    opt(s.chunked_prefill_size, |v| match v {
        -1 => Ok(()),
        v if v >= 1 && v as u64 <= MAX_TOKENS => Ok(()),
        v => Err(out_of_range(
            "chunked_prefill_size",
            v,
            &logged,
            &format!("-1 (no chunking) or 1 to {MAX_TOKENS}"),
        )),
    })?;
    if !(-1..=MAX_TOKENS as i64).contains(&s.max_prefill_tokens) || s.max_prefill_tokens == 0 {
        return Err(out_of_range(
            "max_prefill_tokens",
            s.max_prefill_tokens,
            &logged,
            &format!("1 to {MAX_TOKENS}"),
        ));
    }
    let spec = |what: &str, v: Option<u64>| opt(v, |v| int(what, v, 0, MAX_SPECULATIVE, &logged));
    spec("speculative_num_steps", s.speculative_num_steps)?;
    spec("speculative_eagle_topk", s.speculative_eagle_topk)?;
    spec(
        "speculative_num_draft_tokens",
        s.speculative_num_draft_tokens,
    )?;
    spec(
        "speculative_num_draft_layers",
        s.speculative_num_draft_layers,
    )?;
    opt(s.pp_min_tokens_from_other_stages, |v| {
        signed("pp_min_tokens_from_other_stages", v, MAX_TOKENS, &logged)
    })?;
    float(
        "swa_full_tokens_ratio",
        s.swa_full_tokens_ratio,
        0.0,
        1000.0,
        &logged,
    )?;
    for g in s.gpu_mem_mib.iter().chain(&s.gpu_mem_alternative) {
        if !(g.value > 0.0 && g.value <= MAX_GPU_MIB) {
            return Err(out_of_range(
                "GPU capacity (MiB)",
                g.value,
                &g.detail,
                &format!("more than 0, at most {MAX_GPU_MIB}"),
            ));
        }
    }
    Ok(())
}

/// The free memory sizing works on (flags, a log's GiB, a run's bytes).
pub fn check_measured(m: &Measured) -> Result<(), String> {
    let gib = |what: &str, v: f64, from: &str| float(what, v, -MAX_GIB, MAX_GIB, from);
    gib(
        "free memory before the weights (GiB)",
        m.pre_gib,
        &m.pre_detail,
    )?;
    gib(
        "free memory after the weights (GiB)",
        m.available_gib,
        &m.avail_detail,
    )?;
    opt(m.free_after_capture_gib, |v| {
        gib("free memory after the captures (GiB)", v, &m.origin)
    })?;
    if let Some(a) = &m.after_pool {
        let b = |what: &str, v: i64| signed(what, v, MAX_BYTES, &m.origin);
        b("free bytes after the KV pool", a.pool_end_free_bytes)?;
        b("lowest free bytes after the KV pool", a.low_free_bytes)?;
        b("bytes needed after the KV pool", a.need_bytes)?;
        for s in &a.stages {
            b("a stage's bytes after the KV pool", s.delta_bytes)?;
            for (_, v) in &s.owners {
                b("an owner's bytes after the KV pool", *v)?;
            }
        }
    }
    Ok(())
}

/// Token counts the engine printed.
pub fn check_observed(o: &Observed) -> Result<(), String> {
    for (what, v) in [
        ("the logged token count", o.tokens.as_ref().map(|t| t.0)),
        (
            "the logged profiled token count",
            o.profiled.as_ref().map(|t| t.0),
        ),
        ("the logged post-capture token count", o.post_capture_tokens),
    ] {
        opt(v, |v| signed(what, v, MAX_TOKENS, "the engine's output"))?;
    }
    Ok(())
}

/// A vLLM log's startups and engine line.
pub fn check_vllm(attempts: &[Attempt], cfg: &EngineConfig) -> Result<(), String> {
    let from = "the vLLM log";
    for a in attempts {
        for (what, v) in [
            ("total GPU memory (GiB)", a.total_gib),
            ("weights (GiB)", a.weights_gib),
            ("non-torch memory (GiB)", a.non_torch_gib),
            ("activation peak (GiB)", a.activation_gib),
            ("KV cache memory (GiB)", a.kv_rest_gib),
            ("available KV cache memory (GiB)", a.available_kv_gib),
        ] {
            opt(v, |v| float(what, v, -MAX_GIB, MAX_GIB, from))?;
        }
        opt(a.utilization, |v| {
            float("gpu_memory_utilization", v, 0.0, 1.0, from)
        })?;
        for (what, v) in [
            ("GPU blocks", a.gpu_blocks),
            ("CPU blocks", a.cpu_blocks),
            ("KV cache tokens", a.kv_tokens),
            ("maximum length", a.max_len),
        ] {
            opt(v, |v| int(what, v, 0, MAX_TOKENS, from))?;
        }
    }
    opt(cfg.max_seq_len, |v| {
        int("max_seq_len", v, 1, MAX_TOKENS, from)
    })?;
    opt(cfg.tp, |v| {
        int("tensor_parallel_size", v, 1, MAX_PARALLEL, from)
    })?;
    opt(cfg.utilization, |v| {
        float("gpu_memory_utilization", v, 0.0, 1.0, from)
    })?;
    opt(cfg.max_model_len, |v| {
        int("max_model_len", v, 1, MAX_TOKENS, from)
    })?;
    opt(cfg.block_size, |v| int("block_size", v, 1, MAX_PAGE, from))?;
    opt(cfg.kv_cache_memory_bytes, |v| {
        int("kv_cache_memory_bytes", v, 0, MAX_BYTES, from)
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_out_of_range_are_named() {
        let base = SizeRequest {
            margin_gib: 1.0,
            ..SizeRequest::default()
        };
        assert_eq!(check_args(&base), Ok(()));
        let cases: Vec<(SizeRequest, &str)> = vec![
            (
                SizeRequest {
                    chunked_prefill_size: Some(i64::MAX),
                    ..base.clone()
                },
                "--chunked-prefill-size 9223372036854775807",
            ),
            (
                SizeRequest {
                    chunked_prefill_size: Some(-2),
                    ..base.clone()
                },
                "-1 (no chunking)",
            ),
            (
                SizeRequest {
                    tp: Some(u64::MAX),
                    ..base.clone()
                },
                "--tp 18446744073709551615",
            ),
            (
                SizeRequest {
                    page_size: Some(1 << 40),
                    ..base.clone()
                },
                "--page-size",
            ),
            (
                SizeRequest {
                    gpu_mem_mib: Some(1e300),
                    ..base.clone()
                },
                "--gpu-mem-mib",
            ),
            (
                SizeRequest {
                    pre_gib: Some(1e300),
                    ..base.clone()
                },
                "--pre-gib",
            ),
            (
                SizeRequest {
                    what_if_tp: vec![1; 65],
                    ..base.clone()
                },
                "given 65 times",
            ),
        ];
        for (args, why) in cases {
            let e = check_args(&args).unwrap_err();
            assert!(
                e.contains(why) && e.contains("out of range") || e.contains("times"),
                "{e}"
            );
        }
    }
}
