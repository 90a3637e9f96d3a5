use super::*;
use crate::redact::text as redact;

const SGLANG: &str =
    "[2026-02-26 16:30:34] server_args=ServerArgs(model_path='moonshotai/Kimi-K2.5', \
    tokenizer_path='moonshotai/Kimi-K2.5', api_key='sk-live-0123456789abcdefghij', \
    admin_api_key=None, mem_fraction_static=0.8260405859375, max_total_tokens=None, \
    max_prefill_tokens=16384, skip_tokenizer_init=False, tp_size=8, \
    json_model_override_args='{\"hf_token\": \"abc123\"}', ssl_keyfile_password='pw,with)comma', \
    load_format=<LoadFormat.AUTO: 'auto'>, chunked_prefill_size=-1)";

const VLLM_NON_DEFAULT: &str = "2025-11-24 13:54:48.360 | INFO 11-23 22:54:48 [cli_args.py:309] \
    non-default args: {'chat_template_content_format': 'string', 'model': '/workspace/weights/DotsOCR', \
    'trust_remote_code': True, 'hf_token': 'hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345', \
    'gpu_memory_utilization': 0.95, 'api_key': ['k1', 'k2']}";

const VLLM_026: &str = "(EngineCore_DP0 pid=4242) INFO 05-01 12:00:00 [core.py:117] Initializing a V1 \
    LLM engine (v0.26.0) with config: model='/tmp/llama', speculative_config=None, \
    tokenizer='/tmp/llama', skip_tokenizer_init=True, tokenizer_mode=auto, revision=None, \
    max_seq_len=4096, download_dir=None, load_format=dummy, tensor_parallel_size=1, \
    kv_cache_dtype=auto, seed=0, served_model_name=/tmp/llama, \
    compilation_config={'mode': <CompilationMode.VLLM_COMPILE: 3>, 'cudagraph_capture_sizes': [1, 2]}";

#[test]
fn detects_the_three_lines_in_their_wordings() {
    assert_eq!(
        detect(SGLANG.as_bytes()),
        Some(SettingsKind::SglangServerArgs)
    );
    assert_eq!(
        detect(VLLM_NON_DEFAULT.as_bytes()),
        Some(SettingsKind::VllmNonDefaultArgs)
    );
    assert_eq!(
        detect(VLLM_026.as_bytes()),
        Some(SettingsKind::VllmEngineConfig)
    );
    for older in [
        "INFO 10-18 10:00:00 llm_engine.py:237] Initializing an LLM engine (v0.6.3.post1) with config: model='m'",
        "INFO 05-30 06:39:59 llm_engine.py:234] Initializing a V0 LLM engine (v0.7.2) with config: model='Qwen/Qwen2.5-1.5B-Instruct'",
        "INFO 11-23 22:54:52 [core.py:70] Initializing a V1 LLM engine (v0.9.1) with config: model='/w'",
    ] {
        assert_eq!(
            detect(older.as_bytes()),
            Some(SettingsKind::VllmEngineConfig),
            "{older}"
        );
    }
    // A crash dump of the config, a mention, a partial marker: not settings lines.
    for not in [
        "ERROR 01-01 [dump_input.py:73] Dumping input data for V1 LLM engine (v0.26.0) with config: model='m', ",
        "Initializing a V1 LLM engine (v0.26.0)",
        "server_args=ServerArg",
        "[2025-01-01] Load weight begin. avail mem=1.00 GB",
        "",
    ] {
        assert_eq!(detect(not.as_bytes()), None, "{not}");
    }
    // A partial line is recognised once its marker has arrived; the marker must be near the start.
    assert_eq!(
        detect(b"[2026-02-26 16:30:34] server_args=ServerArgs(model_path='x"),
        Some(SettingsKind::SglangServerArgs)
    );
    let late = format!("{}server_args=ServerArgs(", "x".repeat(2000));
    assert_eq!(detect(late.as_bytes()), None);
}

#[test]
fn secrets_are_redacted_and_sizing_settings_are_not() {
    let r = redact(SGLANG);
    assert!(r.contains("api_key='<redacted>'"), "{r}");
    assert!(!r.contains("sk-live"), "{r}");
    assert!(r.contains("admin_api_key=None"), "{r}");
    assert!(r.contains("\"hf_token\": \"<redacted>\""), "{r}");
    assert!(!r.contains("abc123"), "{r}");
    assert!(r.contains("ssl_keyfile_password='<redacted>'"), "{r}");
    assert!(!r.contains("pw,with"), "{r}");
    for kept in [
        "model_path='moonshotai/Kimi-K2.5'",
        "tokenizer_path='moonshotai/Kimi-K2.5'",
        "mem_fraction_static=0.8260405859375",
        "max_total_tokens=None",
        "max_prefill_tokens=16384",
        "skip_tokenizer_init=False",
        "tp_size=8",
        "load_format=<LoadFormat.AUTO: 'auto'>",
        "chunked_prefill_size=-1)",
    ] {
        assert!(r.contains(kept), "{kept} lost in {r}");
    }
    let v = redact(VLLM_NON_DEFAULT);
    assert!(v.contains("'hf_token': '<redacted>'"), "{v}");
    assert!(v.contains("'api_key': <redacted>}"), "{v}");
    assert!(!v.contains("hf_AbCd") && !v.contains("'k1'"), "{v}");
    assert!(v.contains("'gpu_memory_utilization': 0.95"), "{v}");
    assert!(v.contains("'model': '/workspace/weights/DotsOCR'"), "{v}");
    // Nothing secret: unchanged.
    assert_eq!(redact(VLLM_026), VLLM_026);
}

#[test]
fn model_path_of_each_line() {
    let r = redact(SGLANG);
    assert_eq!(
        model_path(SettingsKind::SglangServerArgs, &r).as_deref(),
        Some("moonshotai/Kimi-K2.5")
    );
    assert_eq!(
        model_path(SettingsKind::VllmNonDefaultArgs, VLLM_NON_DEFAULT).as_deref(),
        Some("/workspace/weights/DotsOCR")
    );
    assert_eq!(
        model_path(SettingsKind::VllmEngineConfig, VLLM_026).as_deref(),
        Some("/tmp/llama")
    );
    // tokenizer_path before model_path is not mistaken for it; escapes are read.
    let line = "server_args=ServerArgs(tokenizer_path='t', model_path='a\\'b/c')";
    assert_eq!(
        model_path(SettingsKind::SglangServerArgs, line).as_deref(),
        Some("a'b/c")
    );
    let tag = "non-default args: {'model_tag': 'org/name', 'port': 1}";
    assert_eq!(
        model_path(SettingsKind::VllmNonDefaultArgs, tag).as_deref(),
        Some("org/name")
    );
    assert_eq!(
        model_path(
            SettingsKind::SglangServerArgs,
            "server_args=ServerArgs(model_path='cut"
        ),
        None
    );
    assert_eq!(
        model_path(
            SettingsKind::SglangServerArgs,
            "server_args=ServerArgs(model_path=None)"
        ),
        None
    );
}

#[test]
fn parts_round_trip_and_the_bound() {
    let mut a = Assembler::default();
    // One short line: one part.
    let recs = encode(SettingsKind::SglangServerArgs, SGLANG);
    assert_eq!(recs.len(), 1);
    assert!(recs[0].starts_with("sglang_server_args 1/1\n"));
    let got = a.push(&recs[0]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].line, SGLANG);
    assert!(!got[0].cut && !got[0].incomplete);
    // 20 KiB with multi-byte characters: three parts, each within the journal's text bound,
    // split on character boundaries, reassembled byte for byte.
    let long = format!("server_args=ServerArgs({})", "ü=1, ".repeat(3500));
    let recs = encode(SettingsKind::SglangServerArgs, &long);
    assert_eq!(recs.len(), long.len().div_ceil(PART_BYTES));
    assert!(recs.iter().all(|r| r.len() <= 8 * 1024));
    let mut out = Vec::new();
    for r in &recs {
        out.extend(a.push(r));
        // Other records between the parts change nothing.
        assert!(a.push("an unrelated warning").is_empty());
    }
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].line, long);
    // Past the bound: the first MAX_LINE bytes, marked cut.
    let huge = "x".repeat(MAX_LINE + 10);
    let recs = encode(SettingsKind::VllmEngineConfig, &huge);
    assert!(recs.last().unwrap().contains(" cut\n"));
    let out: Vec<Assembled> = recs.iter().flat_map(|r| a.push(r)).collect();
    assert_eq!(out[0].line.len(), MAX_LINE);
    assert!(out[0].cut);
    let exact = "y".repeat(MAX_LINE);
    let out: Vec<Assembled> = encode(SettingsKind::ModelPath, &exact)
        .iter()
        .flat_map(|r| a.push(r))
        .collect();
    assert!(!out[0].cut && out[0].line.len() == MAX_LINE);
    // A missing middle part: what arrived comes out, marked incomplete.
    let recs = encode(SettingsKind::SglangServerArgs, &long);
    let mut out = a.push(&recs[0]);
    out.extend(a.push(&recs[2]));
    out.extend(a.finish());
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|x| x.incomplete));
    assert!(long.starts_with(&out[0].line));
    assert!(a.finish().is_none());
    // Headers that are not ours.
    for bad in [
        "model_path 0/1\nx",
        "model_path 2/1\nx",
        "nope 1/1\nx",
        "model_path 1/1 hm\nx",
    ] {
        assert_eq!(decode_part(bad), None, "{bad}");
    }
}

#[test]
fn every_settings_line_passes_the_tap_prefilter() {
    // The tap looks only at lines `may_match` accepts: each marker carries an anchor.
    for line in [
        "server_args=ServerArgs(tp_size=1)",
        "non-default args: {'model': '/m'}",
        "Initializing a V1 LLM engine (v0.26.0) with config: model='/m'",
        "Initializing an LLM engine (v0.6.3) with config: model='/m'",
        SGLANG,
        VLLM_NON_DEFAULT,
        VLLM_026,
    ] {
        assert!(detect(line.as_bytes()).is_some(), "{line}");
        assert!(crate::log::may_match(line.as_bytes()), "{line}");
    }
}

#[test]
fn a_line_cut_as_printed_is_marked_cut_whatever_its_length_after_redaction() {
    // Redaction shortened it below the bound: the mark comes from the line as printed.
    let parts = encode_cut(
        SettingsKind::SglangServerArgs,
        "server_args=ServerArgs(tp=2",
        true,
    );
    assert_eq!(parts.len(), 1);
    assert!(
        parts[0].starts_with("sglang_server_args 1/1 cut\n"),
        "{}",
        parts[0]
    );
    assert_eq!(decode_part(&parts[0]).map(|p| p.cut), Some(true));
    let whole = encode_cut(
        SettingsKind::SglangServerArgs,
        "server_args=ServerArgs(tp=2)",
        false,
    );
    assert_eq!(decode_part(&whole[0]).map(|p| p.cut), Some(false));
}
