//! The vLLM logs in the shared `logs/` folder (real startup logs posted by users), classified line by
//! line: the exact sequence of recognised lines — rank, kind, stage, event and every number — is
//! written out below from reading each log. Header lines (`# …`, `#EDITOR-NOTE …`) are metadata
//! added by whoever collected the log, not output, and are skipped.
//!
//! The logs live outside the repository (`../shared/logs` beside it); without them the tests
//! print a note and pass.

mod log_support;

use log_support::real::{any, logs_dir, run, transitions};
use vramledger_engines::log::{event as ev, stage as st, Engine, LineKind::*};

#[test]
fn vllm_v0_colab_t4() {
    let want = [
        any(Boundary, st::WEIGHT_LOAD, ev::LOAD_MODEL_BEGIN, &[]),
        any(
            Boundary,
            st::MEMORY_PROFILING,
            ev::LOAD_MODEL_END,
            &[("mem_usage_gib", 2.8884)],
        ),
        any(
            Boundary,
            st::KV_CACHE,
            ev::MEMORY_PROFILING_END,
            &[("time_s", 5.61)],
        ),
        any(
            Progress,
            st::KV_CACHE,
            ev::MEMORY_BUDGET,
            &[
                ("total_gpu_gib", 14.56),
                ("gpu_memory_utilization", 0.5),
                ("budget_gib", 7.28),
            ],
        ),
        any(
            Progress,
            st::KV_CACHE,
            ev::MEMORY_PROFILE_RESULT,
            &[
                ("weights_gib", 2.89),
                ("non_torch_gib", 0.01),
                ("activation_peak_gib", 2.02),
                ("kv_cache_gib", 2.36),
            ],
        ),
        any(
            Progress,
            st::KV_CACHE,
            ev::KV_CACHE_BLOCKS,
            &[("gpu_blocks", 5517.0), ("cpu_blocks", 9362.0)],
        ),
        any(
            Progress,
            st::KV_CACHE,
            ev::MAX_CONCURRENCY,
            &[("context_len", 32768.0), ("concurrency", 2.69)],
        ),
        any(Boundary, st::GRAPH_CAPTURE, ev::CAPTURE_BEGIN, &[]),
        any(Boundary, st::GRAPH_CAPTURE, ev::CAPTURE_PROGRESS, &[]),
        any(
            Boundary,
            st::POST_CAPTURE,
            ev::CAPTURE_END,
            &[("time_s", 49.0), ("mem_usage_gib", 0.17)],
        ),
        any(Boundary, st::SERVING, ev::ENGINE_READY, &[("time_s", 61.8)]),
    ];
    let Some(lines) = run(
        "vllm-qwen2.5-1.5b-instruct-t4-tp1-colabgrpo.log",
        Engine::Vllm,
        &want,
    ) else {
        return;
    };
    assert_eq!(
        transitions(&lines, None),
        [
            st::WEIGHT_LOAD,
            st::MEMORY_PROFILING,
            st::KV_CACHE,
            st::GRAPH_CAPTURE,
            st::POST_CAPTURE,
            st::SERVING
        ]
    );
}

#[test]
fn vllm_v1_dots_ocr_docker() {
    let want = [
        // "Starting to load model …", then "Loading model from scratch..." (same stage).
        any(Boundary, st::WEIGHT_LOAD, ev::LOAD_MODEL_BEGIN, &[]),
        any(Boundary, st::WEIGHT_LOAD, ev::LOAD_MODEL_BEGIN, &[]),
        any(
            Boundary,
            st::MEMORY_PROFILING,
            ev::LOAD_MODEL_END,
            &[("mem_usage_gib", 5.7174), ("time_s", 28.981453)],
        ),
        any(
            Boundary,
            st::KV_CACHE,
            ev::AVAILABLE_KV_CACHE_MEMORY,
            &[("kv_cache_gib", 3.65)],
        ),
        any(
            Boundary,
            st::KV_CACHE,
            ev::KV_CACHE_SIZE,
            &[("tokens", 136592.0)],
        ),
        any(
            Progress,
            st::KV_CACHE,
            ev::MAX_CONCURRENCY,
            &[("context_len", 131072.0), ("concurrency", 1.04)],
        ),
        any(
            Boundary,
            st::POST_CAPTURE,
            ev::CAPTURE_END,
            &[("time_s", 16.0), ("mem_usage_gib", 0.31)],
        ),
        any(
            Boundary,
            st::SERVING,
            ev::ENGINE_READY,
            &[("time_s", 321.72)],
        ),
        any(
            Progress,
            st::SERVING,
            ev::KV_CACHE_BLOCKS,
            &[("gpu_blocks", 8537.0)],
        ),
        any(Boundary, st::SERVING, ev::API_SERVER_START, &[]),
    ];
    run(
        "vllm-dots-ocr-wsl-consumer-tp1-dockerlog.log",
        Engine::Vllm,
        &want,
    );
}

#[test]
fn vllm_jetson_negative_kv_then_retry() {
    let want = [
        // attempt 1: KV remainder negative
        any(
            Boundary,
            st::MEMORY_PROFILING,
            ev::LOAD_MODEL_END,
            &[("mem_usage_gib", 6.5935), ("time_s", 7.243515)],
        ),
        any(
            Boundary,
            st::KV_CACHE,
            ev::MEMORY_PROFILING_END,
            &[("time_s", 257.11)],
        ),
        // the breakdown, wrapped onto three lines by the document's author
        any(
            Progress,
            st::KV_CACHE,
            ev::MEMORY_PROFILE_RESULT,
            &[("weights_gib", 6.59), ("non_torch_gib", 8.29)],
        ),
        any(
            Progress,
            st::KV_CACHE,
            ev::MEMORY_PROFILE_RESULT,
            &[("activation_peak_gib", 4.93)],
        ),
        any(
            Progress,
            st::KV_CACHE,
            ev::MEMORY_PROFILE_RESULT,
            &[("kv_cache_gib", -7.83)],
        ),
        any(
            Progress,
            st::KV_CACHE,
            ev::MAX_CONCURRENCY,
            &[("context_len", 4096.0), ("concurrency", 0.0)],
        ),
        // attempt 2
        any(
            Boundary,
            st::MEMORY_PROFILING,
            ev::LOAD_MODEL_END,
            &[("mem_usage_gib", 6.4689), ("time_s", 8.315042)],
        ),
        any(
            Boundary,
            st::KV_CACHE,
            ev::MEMORY_PROFILING_END,
            &[("time_s", 221.8)],
        ),
        any(
            Progress,
            st::KV_CACHE,
            ev::MEMORY_PROFILE_RESULT,
            &[("weights_gib", 6.47), ("non_torch_gib", -0.05)],
        ),
        any(
            Progress,
            st::KV_CACHE,
            ev::MEMORY_PROFILE_RESULT,
            &[("activation_peak_gib", 4.92)],
        ),
        any(
            Progress,
            st::KV_CACHE,
            ev::MEMORY_PROFILE_RESULT,
            &[("kv_cache_gib", 0.65)],
        ),
        any(
            Progress,
            st::KV_CACHE,
            ev::MAX_CONCURRENCY,
            &[("context_len", 4096.0), ("concurrency", 2.95)],
        ),
        any(
            Boundary,
            st::SERVING,
            ev::ENGINE_READY,
            &[("time_s", 225.02)],
        ),
    ];
    run(
        "vllm-qwen2.5-vl-7b-instruct-awq-jetson-orin-agx-tp1-kvnegative.log",
        Engine::Vllm,
        &want,
    );
}

#[test]
fn every_log_is_covered() {
    let Some(dir) = logs_dir() else { return };
    let covered = [
        "sglang-deepseek-r1-mi300x-tp8-dp8-issue7691-negative.log",
        "sglang-gemma-3-27b-it-int4-awq-rtx4090-tp1-issue4895.log",
        "sglang-granite-4.0-h-micro-16gb-tp1-pr18040.log",
        "sglang-kimi-k2.5-mi355x-tp8-rocmtestlog.log",
        "sglang-llama-3.1-8b-instruct-24gb-tp1-dockerdesktop.log",
        "sglang-meta-llama-3.1-8b-instruct-80gb-tp1-docsquickstart.log",
        "sglang-qwen2-7b-instruct-gpu-tp2-issue744-oldformat.log",
        "sglang-qwen2.5-0.5b-instruct-80gb-tp1-docsci-maxtotaltokens.log",
        "sglang-qwq-32b-l4-tp4-llmsinclouds.log",
        "vllm-dots-ocr-wsl-consumer-tp1-dockerlog.log",
        "vllm-qwen2.5-1.5b-instruct-t4-tp1-colabgrpo.log",
        "vllm-qwen2.5-vl-7b-instruct-awq-jetson-orin-agx-tp1-kvnegative.log",
    ];
    for entry in std::fs::read_dir(&dir).expect("logs dir") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name.ends_with(".log") {
            assert!(
                covered.contains(&name.as_str()),
                "new log {name} has no test here"
            );
        }
    }
}
