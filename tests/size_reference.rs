//! `vramledger size` against SGLang's own code: every row of tests/data/sglang-reference/*.jsonl
//! was produced by executing the released wheel's functions (scripts/sglang_reference). Each row
//! is run through the size command's library entry (`sizing::build`, the same code as the
//! binary) with the row's inputs as flags; the outputs must be equal, not close: the defaults
//! (fraction, chunk, decode graph batch and the prefill graphs they priced, on CUDA, HIP and NPU,
//! PP 1 to 8) and the token counts.

use std::path::PathBuf;

use serde_json::Value;
use vramledger::exit::DOES_NOT_FIT as EXIT_DOES_NOT_FIT;
use vramledger::sizing::{build, SizeReport, SizeRequest};

const LAYOUTS: [&str; 5] = ["0.4.6", "0.5.5", "0.5.12", "0.5.18", "0.5.23"];

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/sglang-reference")
        .join(name)
}

fn rows(layout: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(data(&format!("{layout}.jsonl"))).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn u(v: &Value, k: &str) -> Option<u64> {
    v.get(k).and_then(Value::as_u64)
}

/// The row's inputs as `vramledger size` flags.
fn args_of(layout: &str, input: &Value) -> SizeRequest {
    let mla = input["mla"].as_bool().unwrap_or(false);
    SizeRequest {
        sglang_version: Some(layout.to_string()),
        platform: input["platform"].as_str().map(str::to_string),
        gpu_mem_mib: input["gpu_mem"].as_f64(),
        tp: u(input, "tp"),
        pp: u(input, "pp"),
        dp: u(input, "dp"),
        enable_dp_attention: input["dp_attention"].as_bool().unwrap_or(false),
        speculative_algorithm: input["spec"]
            .as_str()
            .filter(|s| *s != "none")
            .map(str::to_string),
        post_capture_kv_sizing: input["post_capture"].as_bool().unwrap_or(false),
        model_config: Some(data(
            match (mla, input["multimodal"].as_bool().unwrap_or(false)) {
                (true, _) => "deepseek.json",
                (false, true) => "llama-vision.json",
                (false, false) => "llama.json",
            },
        )),
        page_size: u(input, "page_size"),
        kv_cache_dtype: input["kv_cache_dtype"].as_str().map(str::to_string),
        max_total_tokens: u(input, "max_total_tokens"),
        max_running_requests: u(input, "max_running_requests"),
        chunked_prefill_size: input["chunked_prefill_size"].as_i64(),
        cuda_graph_max_bs: u(input, "cuda_graph_max_bs"),
        context_length: u(input, "context_length"),
        mem_fraction_static: input["mem_fraction_static"].as_f64(),
        pre_gib: input["pre_gib"].as_f64(),
        available_gib: input["available_gib"].as_f64(),
        speculative_num_steps: u(input, "spec_steps"),
        speculative_eagle_topk: u(input, "spec_topk"),
        speculative_num_draft_tokens: u(input, "spec_draft_tokens"),
        speculative_num_draft_layers: u(input, "draft_layers"),
        pp_min_tokens_from_other_stages: input["pp_min_tokens_other"].as_i64(),
        free_after_capture_gib: input["free_after_capture_gib"].as_f64(),
        post_capture_backed_bytes: u(input, "backed_bytes"),
        post_capture_sampling_headroom_bytes: u(input, "sampling_headroom_bytes"),
        margin_gib: 1.0,
        ..SizeRequest::default()
    }
}

fn check_defaults(layout: &str, input: &Value, want: &Value) -> Result<(), String> {
    let report = build(&args_of(layout, input))?;
    let SizeReport::DefaultsOnly(o) = report else {
        return Err("expected the defaults-only report".into());
    };
    let d = &o.defaults.defaults;
    let got = serde_json::json!({
        "mem_fraction_static": d.mem_fraction_static,
        "chunked_prefill_size": d.chunked_prefill_size,
        "cuda_graph_max_bs": d.cuda_graph_max_bs,
        "prefill_graph": d.prefill_graph.map(graph_name),
    });
    for k in [
        "mem_fraction_static",
        "chunked_prefill_size",
        "cuda_graph_max_bs",
        "prefill_graph",
    ] {
        // Rows of layouts without prefill graphs have no `prefill_graph`: nothing to compare.
        if want.get(k).is_none() && got[k].is_null() {
            continue;
        }
        if got[k] != want[k] {
            return Err(format!("{k}: vramledger {} != SGLang {}", got[k], want[k]));
        }
    }
    Ok(())
}

fn check_tokens(layout: &str, input: &Value, want: &Value) -> Result<(), String> {
    let report = build(&args_of(layout, input))?;
    let SizeReport::Sglang(r) = &report else {
        return Err("expected the SGLang report".into());
    };
    if let Some(msg) = want.get("error").and_then(Value::as_str) {
        let Some(e) = &r.result.error else {
            return Err(format!(
                "SGLang raised '{msg}', vramledger sized {} tokens",
                r.result.tokens
            ));
        };
        let ours = format!("{}: {}", error_type(e.check), e.message);
        if ours != msg {
            return Err(format!("failure: vramledger '{ours}' != SGLang '{msg}'"));
        }
        if report.exit_code() != EXIT_DOES_NOT_FIT {
            return Err(format!("exit code {} on a failure", report.exit_code()));
        }
        return Ok(());
    }
    if let Some(e) = &r.result.error {
        return Err(format!("vramledger failed ({}), SGLang did not", e.message));
    }
    // Post-capture rows: the resized pool when SGLang resizes it (else the pre-capture one),
    // and the pre-capture count it was capped by.
    let resized = input["post_capture"].as_bool() == Some(true)
        && input["free_after_capture_gib"].is_number();
    if resized != r.post_capture_resize.is_some() {
        return Err(format!(
            "post-capture resize: SGLang {resized}, vramledger {}",
            r.post_capture_resize.is_some()
        ));
    }
    let (tokens, mrr) = match &r.post_capture_resize {
        Some(p) => (p.tokens, p.max_running_requests),
        None => (r.result.tokens, r.result.max_running_requests),
    };
    let got = serde_json::json!({
        "mem_fraction_static": r.mem_fraction_static.value,
        "tokens": tokens,
        "max_running_requests": mrr,
        "pre_capture_tokens": r.result.tokens,
    });
    for k in [
        "mem_fraction_static",
        "tokens",
        "max_running_requests",
        "pre_capture_tokens",
    ] {
        if want.get(k).is_some() && got[k] != want[k] {
            return Err(format!("{k}: vramledger {} != SGLang {}", got[k], want[k]));
        }
    }
    Ok(())
}

/// SGLang's `Backend` names (0.5.12 rows: `tc_piecewise` when piecewise graphs are on).
fn graph_name(g: vramledger_engines::sizing::defaults::PrefillGraph) -> &'static str {
    use vramledger_engines::sizing::defaults::PrefillGraph;
    match g {
        PrefillGraph::Disabled => "disabled",
        PrefillGraph::Full => "full",
        PrefillGraph::Breakable => "breakable",
        PrefillGraph::TcPiecewise => "tc_piecewise",
    }
}

fn error_type(c: vramledger_engines::sizing::FailedCheck) -> &'static str {
    match c {
        vramledger_engines::sizing::FailedCheck::RestNotPositive => "ValueError",
        _ => "RuntimeError",
    }
}

fn check_layout(layout: &str) {
    let mut failures = Vec::new();
    let all = rows(layout);
    assert!(!all.is_empty(), "{layout}: empty table");
    for row in &all {
        let (input, want) = (&row["input"], &row["sglang"]);
        let r = match row["kind"].as_str() {
            Some("defaults") if want.get("error").is_none() => check_defaults(layout, input, want),
            Some("defaults") => Ok(()),
            Some("tokens") => check_tokens(layout, input, want),
            k => Err(format!("unknown row kind {k:?}")),
        };
        if let Err(e) = r {
            failures.push(format!("{input}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{layout}: {} of {} rows differ from SGLang, e.g.\n{}",
        failures.len(),
        all.len(),
        failures
            .iter()
            .take(8)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn layout_0_4_6() {
    check_layout(LAYOUTS[0]);
}

#[test]
fn layout_0_5_5() {
    check_layout(LAYOUTS[1]);
}

#[test]
fn layout_0_5_12() {
    check_layout(LAYOUTS[2]);
}

#[test]
fn layout_0_5_18() {
    check_layout(LAYOUTS[3]);
}

#[test]
fn layout_0_5_23() {
    check_layout(LAYOUTS[4]);
}

#[test]
fn the_record_names_every_layout() {
    let text = std::fs::read_to_string(data("releases.json")).unwrap();
    let record: Value = serde_json::from_str(&text).unwrap();
    for l in LAYOUTS {
        assert!(
            record[l]["release"].is_string(),
            "{l} missing from releases.json"
        );
    }
}
