//! The SGLang logs in the shared `logs/` folder (real startup logs posted by users), classified line by
//! line: the exact sequence of recognised lines — rank, kind, stage, event and every number — is
//! written out below from reading each log. Header lines (`# …`, `#EDITOR-NOTE …`) are metadata
//! added by whoever collected the log, not output, and are skipped.
//!
//! The logs live outside the repository (`../shared/logs` beside it); without them the tests
//! print a note and pass.

mod log_support;

use log_support::assert_numbers;
use log_support::real::{any, log_lines, run, tp, transitions, Exp};
use vramledger_engines::log::{classify, event as ev, stage as st, Engine, LineKind, LineKind::*};

#[test]
fn sglang_qwq_32b_l4_tp4() {
    const BEGIN: &[(&str, f64)] = &[("avail_mem_gib", 21.63)];
    const END: &[(&str, f64)] = &[("avail_mem_gib", 6.09), ("mem_usage_gib", 15.54)];
    const KV: &[(&str, f64)] = &[
        ("tokens", 46611.0),
        ("k_size_gib", 1.42),
        ("v_size_gib", 1.42),
    ];
    const POOL: &[(&str, f64)] = &[("avail_mem_gib", 2.09)];
    const CAP: &[(&str, f64)] = &[("avail_mem_gib", 1.45)];
    const SUMMARY: &[(&str, f64)] = &[
        ("tokens", 46611.0),
        ("chunked_prefill_size", 2048.0),
        ("max_prefill_tokens", 16384.0),
        ("max_running_requests", 2049.0),
        ("context_len", 131072.0),
    ];
    let want = [
        tp(3, Boundary, st::DIST_INIT, ev::DIST_INIT_BEGIN, &[]),
        tp(1, Boundary, st::DIST_INIT, ev::DIST_INIT_BEGIN, &[]),
        tp(0, Boundary, st::DIST_INIT, ev::DIST_INIT_BEGIN, &[]),
        tp(2, Boundary, st::DIST_INIT, ev::DIST_INIT_BEGIN, &[]),
        tp(
            2,
            Boundary,
            st::DIST_INIT,
            ev::DIST_INIT_END,
            &[("mem_usage_gib", 0.13)],
        ),
        tp(
            3,
            Boundary,
            st::DIST_INIT,
            ev::DIST_INIT_END,
            &[("mem_usage_gib", 0.13)],
        ),
        tp(
            1,
            Boundary,
            st::DIST_INIT,
            ev::DIST_INIT_END,
            &[("mem_usage_gib", 0.13)],
        ),
        tp(
            0,
            Boundary,
            st::DIST_INIT,
            ev::DIST_INIT_END,
            &[("mem_usage_gib", 0.13)],
        ),
        tp(3, Boundary, st::WEIGHT_LOAD, ev::LOAD_WEIGHT_BEGIN, BEGIN),
        tp(0, Boundary, st::WEIGHT_LOAD, ev::LOAD_WEIGHT_BEGIN, BEGIN),
        tp(1, Boundary, st::WEIGHT_LOAD, ev::LOAD_WEIGHT_BEGIN, BEGIN),
        tp(2, Boundary, st::WEIGHT_LOAD, ev::LOAD_WEIGHT_BEGIN, BEGIN),
        tp(1, Boundary, st::KV_POOL, ev::LOAD_WEIGHT_END, END),
        tp(2, Boundary, st::KV_POOL, ev::LOAD_WEIGHT_END, END),
        tp(3, Boundary, st::KV_POOL, ev::LOAD_WEIGHT_END, END),
        tp(0, Boundary, st::KV_POOL, ev::LOAD_WEIGHT_END, END),
        tp(0, Boundary, st::KV_POOL, ev::KV_CACHE_ALLOCATED, KV),
        tp(1, Boundary, st::KV_POOL, ev::KV_CACHE_ALLOCATED, KV),
        tp(2, Boundary, st::KV_POOL, ev::KV_CACHE_ALLOCATED, KV),
        tp(3, Boundary, st::KV_POOL, ev::KV_CACHE_ALLOCATED, KV),
        tp(0, Boundary, st::POST_KV_INIT, ev::MEMORY_POOL_END, POOL),
        tp(1, Boundary, st::POST_KV_INIT, ev::MEMORY_POOL_END, POOL),
        tp(2, Boundary, st::POST_KV_INIT, ev::MEMORY_POOL_END, POOL),
        tp(3, Boundary, st::POST_KV_INIT, ev::MEMORY_POOL_END, POOL),
        tp(0, Boundary, st::GRAPH_CAPTURE, ev::CAPTURE_BEGIN, CAP),
        // TP1's line is glued behind a tqdm bar in the paste.
        tp(1, Boundary, st::GRAPH_CAPTURE, ev::CAPTURE_BEGIN, CAP),
        tp(2, Boundary, st::GRAPH_CAPTURE, ev::CAPTURE_BEGIN, CAP),
        tp(3, Boundary, st::GRAPH_CAPTURE, ev::CAPTURE_BEGIN, CAP),
        tp(
            0,
            Boundary,
            st::POST_CAPTURE,
            ev::CAPTURE_END,
            &[
                ("time_s", 7.23),
                ("avail_mem_gib", 0.53),
                ("mem_usage_gib", 0.93),
            ],
        ),
        tp(
            3,
            Boundary,
            st::POST_CAPTURE,
            ev::CAPTURE_END,
            &[
                ("time_s", 7.22),
                ("avail_mem_gib", 0.53),
                ("mem_usage_gib", 0.93),
            ],
        ),
        tp(
            2,
            Boundary,
            st::POST_CAPTURE,
            ev::CAPTURE_END,
            &[
                ("time_s", 7.24),
                ("avail_mem_gib", 0.53),
                ("mem_usage_gib", 0.93),
            ],
        ),
        tp(
            1,
            Boundary,
            st::POST_CAPTURE,
            ev::CAPTURE_END,
            &[
                ("time_s", 7.25),
                ("avail_mem_gib", 0.53),
                ("mem_usage_gib", 0.93),
            ],
        ),
        tp(0, Boundary, st::SERVING, ev::SUMMARY, SUMMARY),
        tp(3, Boundary, st::SERVING, ev::SUMMARY, SUMMARY),
        tp(2, Boundary, st::SERVING, ev::SUMMARY, SUMMARY),
        tp(1, Boundary, st::SERVING, ev::SUMMARY, SUMMARY),
    ];
    let Some(lines) = run(
        "sglang-qwq-32b-l4-tp4-llmsinclouds.log",
        Engine::Sglang,
        &want,
    ) else {
        return;
    };
    for rank in 0..4 {
        assert_eq!(
            transitions(&lines, Some(rank)),
            [
                st::DIST_INIT,
                st::WEIGHT_LOAD,
                st::KV_POOL,
                st::POST_KV_INIT,
                st::GRAPH_CAPTURE,
                st::POST_CAPTURE,
                st::SERVING
            ],
            "TP{rank}"
        );
    }
}

#[test]
fn sglang_llama_3_1_8b_24gb_tp1() {
    let want = [
        any(
            Boundary,
            st::KV_POOL,
            ev::LOAD_WEIGHT_END,
            &[("avail_mem_gib", 7.37), ("mem_usage_gib", 15.02)],
        ),
        any(
            Boundary,
            st::KV_POOL,
            ev::KV_CACHE_ALLOCATED,
            &[
                ("tokens", 38141.0),
                ("k_size_gib", 2.33),
                ("v_size_gib", 2.33),
            ],
        ),
        any(
            Boundary,
            st::POST_KV_INIT,
            ev::MEMORY_POOL_END,
            &[("avail_mem_gib", 1.46)],
        ),
        any(
            Boundary,
            st::GRAPH_CAPTURE,
            ev::CAPTURE_BEGIN,
            &[("avail_mem_gib", 0.93)],
        ),
        any(
            Progress,
            st::GRAPH_CAPTURE,
            ev::CAPTURE_BATCH_SIZES,
            &[("bs_max", 8.0), ("bs_count", 4.0)],
        ),
        any(
            Progress,
            st::GRAPH_CAPTURE,
            ev::CAPTURE_PROGRESS,
            &[("bs", 1.0), ("avail_mem_gib", 0.86)],
        ),
        any(
            Boundary,
            st::POST_CAPTURE,
            ev::CAPTURE_END,
            &[
                ("time_s", 18.07),
                ("mem_usage_gib", 0.11),
                ("avail_mem_gib", 0.83),
            ],
        ),
        any(
            Boundary,
            st::SERVING,
            ev::SUMMARY,
            &[
                ("tokens", 38141.0),
                ("chunked_prefill_size", 2048.0),
                ("max_prefill_tokens", 16384.0),
                ("max_running_requests", 2048.0),
                ("context_len", 131072.0),
                ("avail_mem_gib", 0.83),
            ],
        ),
    ];
    let Some(lines) = run(
        "sglang-llama-3.1-8b-instruct-24gb-tp1-dockerdesktop.log",
        Engine::Sglang,
        &want,
    ) else {
        return;
    };
    assert_eq!(
        transitions(&lines, None),
        [
            st::KV_POOL,
            st::POST_KV_INIT,
            st::GRAPH_CAPTURE,
            st::POST_CAPTURE,
            st::SERVING
        ]
    );
}

#[test]
fn sglang_meta_llama_3_1_8b_80gb_jan_2025() {
    let want = [
        tp(0, Boundary, st::DIST_INIT, ev::DIST_INIT_BEGIN, &[]),
        tp(
            0,
            Boundary,
            st::WEIGHT_LOAD,
            ev::LOAD_WEIGHT_BEGIN,
            &[("avail_mem_gib", 78.81)],
        ),
        tp(
            0,
            Boundary,
            st::KV_POOL,
            ev::LOAD_WEIGHT_END,
            &[("avail_mem_gib", 63.72)],
        ),
        tp(
            0,
            Boundary,
            st::KV_POOL,
            ev::KV_CACHE_ALLOCATED,
            &[("k_size_gib", 27.13), ("v_size_gib", 27.13)],
        ),
        tp(
            0,
            Boundary,
            st::POST_KV_INIT,
            ev::MEMORY_POOL_END,
            &[("avail_mem_gib", 8.34)],
        ),
        tp(0, Boundary, st::GRAPH_CAPTURE, ev::CAPTURE_BEGIN, &[]),
        tp(
            0,
            Boundary,
            st::POST_CAPTURE,
            ev::CAPTURE_END,
            &[("time_s", 6.57)],
        ),
        tp(
            0,
            Boundary,
            st::SERVING,
            ev::SUMMARY,
            &[
                ("tokens", 444500.0),
                ("max_prefill_tokens", 16384.0),
                ("max_running_requests", 2049.0),
                ("context_len", 131072.0),
            ],
        ),
    ];
    run(
        "sglang-meta-llama-3.1-8b-instruct-80gb-tp1-docsquickstart.log",
        Engine::Sglang,
        &want,
    );
}

#[test]
fn sglang_granite_hybrid_mamba() {
    let want = [
        tp(0, Boundary, st::DIST_INIT, ev::DIST_INIT_BEGIN, &[]),
        tp(
            0,
            Boundary,
            st::DIST_INIT,
            ev::DIST_INIT_END,
            &[("time_s", 0.12), ("mem_usage_gib", 0.02)],
        ),
        tp(
            0,
            Boundary,
            st::WEIGHT_LOAD,
            ev::LOAD_WEIGHT_BEGIN,
            &[("avail_mem_gib", 15.24)],
        ),
        tp(
            0,
            Boundary,
            st::KV_POOL,
            ev::LOAD_WEIGHT_END,
            &[
                ("time_s", 1.25),
                ("avail_mem_gib", 9.26),
                ("mem_usage_gib", 5.98),
            ],
        ),
        tp(0, Progress, st::KV_POOL, ev::KV_CACHE_DTYPE, &[]),
        tp(
            0,
            Boundary,
            st::KV_POOL,
            ev::MAMBA_CACHE_ALLOCATED,
            &[
                ("mamba_cache_size", 38.0),
                ("conv_state_gib", 0.03),
                ("ssm_state_gib", 2.74),
            ],
        ),
        tp(
            0,
            Boundary,
            st::KV_POOL,
            ev::KV_CACHE_ALLOCATED,
            &[
                ("tokens", 399740.0),
                ("k_size_gib", 1.52),
                ("v_size_gib", 1.52),
            ],
        ),
        tp(
            0,
            Boundary,
            st::POST_KV_INIT,
            ev::MEMORY_POOL_END,
            &[("avail_mem_gib", 3.42)],
        ),
        tp(0, Boundary, st::POST_KV_INIT, ev::ATTN_BACKEND_BEGIN, &[]),
        tp(
            0,
            Boundary,
            st::POST_KV_INIT,
            ev::ATTN_BACKEND_END,
            &[("time_s", 0.02)],
        ),
        tp(
            0,
            Boundary,
            st::GRAPH_CAPTURE,
            ev::CAPTURE_BEGIN,
            &[("avail_mem_gib", 2.98)],
        ),
        tp(
            0,
            Progress,
            st::GRAPH_CAPTURE,
            ev::CAPTURE_BATCH_SIZES,
            &[("bs_max", 8.0), ("bs_count", 4.0)],
        ),
        any(
            Progress,
            st::GRAPH_CAPTURE,
            ev::CAPTURE_PROGRESS,
            &[("bs", 1.0), ("avail_mem_gib", 2.91)],
        ),
        tp(
            0,
            Boundary,
            st::POST_CAPTURE,
            ev::CAPTURE_END,
            &[
                ("time_s", 1.24),
                ("mem_usage_gib", 0.09),
                ("avail_mem_gib", 2.89),
            ],
        ),
        // bench_one_batch prints the bare summary, without prefix or other fields.
        any(Boundary, st::SERVING, ev::SUMMARY, &[("tokens", 399740.0)]),
    ];
    run(
        "sglang-granite-4.0-h-micro-16gb-tp1-pr18040.log",
        Engine::Sglang,
        &want,
    );
}

#[test]
fn sglang_kimi_k2_5_mi355x_tp8_mla() {
    // (rank, elapsed, mem usage) of "Init torch distributed ends", in log order.
    const DIST: [(u32, f64, f64); 8] = [
        (0, 17.24, 3.81),
        (7, 17.82, 3.69),
        (6, 17.69, 3.70),
        (5, 17.31, 3.76),
        (4, 17.52, 3.69),
        (3, 17.44, 3.83),
        (2, 17.50, 3.83),
        (1, 17.21, 3.41),
    ];
    const BEGIN: [(u32, f64); 8] = [
        (7, 283.68),
        (1, 283.96),
        (3, 283.53),
        (2, 283.54),
        (5, 283.60),
        (6, 283.66),
        (0, 283.56),
        (4, 283.68),
    ];
    const END: [(u32, f64, f64); 8] = [
        (1, 605.50, 210.38),
        (3, 606.34, 209.96),
        (6, 606.43, 210.08),
        (5, 606.46, 210.02),
        (2, 606.47, 209.96),
        (7, 609.07, 210.10),
        (4, 614.45, 210.10),
        (0, 618.04, 209.98),
    ];
    const POOL: [(u32, f64); 8] = [
        (6, 45.36),
        (2, 45.24),
        (5, 45.30),
        (0, 45.25),
        (4, 45.38),
        (3, 45.23),
        (7, 45.37),
        (1, 45.65),
    ];
    const CAPTURE: [(u32, f64); 8] = [
        (2, 45.01),
        (4, 45.15),
        (1, 45.43),
        (0, 45.03),
        (6, 45.14),
        (3, 45.01),
        (7, 45.15),
        (5, 45.07),
    ];
    const KV: &[(&str, f64)] = &[("tokens", 2454421.0), ("kv_size_gib", 160.63)];
    let Some(lines) = log_lines("sglang-kimi-k2.5-mi355x-tp8-rocmtestlog.log") else {
        return;
    };
    // Numbers vary per rank, so the expectation is built row by row.
    /// (tp, kind, stage, event, numbers)
    type Row = (
        Option<u32>,
        LineKind,
        &'static str,
        &'static str,
        Vec<(&'static str, f64)>,
    );
    let mut want: Vec<Row> = Vec::new();
    for (r, t, u) in DIST {
        want.push((
            Some(r),
            Boundary,
            st::DIST_INIT,
            ev::DIST_INIT_END,
            vec![("time_s", t), ("mem_usage_gib", u)],
        ));
    }
    for (r, a) in BEGIN {
        want.push((
            Some(r),
            Boundary,
            st::WEIGHT_LOAD,
            ev::LOAD_WEIGHT_BEGIN,
            vec![("avail_mem_gib", a)],
        ));
    }
    for (r, t, a) in END {
        want.push((
            Some(r),
            Boundary,
            st::KV_POOL,
            ev::LOAD_WEIGHT_END,
            vec![
                ("time_s", t),
                ("avail_mem_gib", a),
                ("mem_usage_gib", 73.58),
            ],
        ));
    }
    want.push((Some(0), Progress, st::KV_POOL, ev::KV_CACHE_DTYPE, vec![]));
    for (r, a) in POOL {
        want.push((
            Some(r),
            Boundary,
            st::KV_POOL,
            ev::KV_CACHE_ALLOCATED,
            KV.to_vec(),
        ));
        want.push((
            Some(r),
            Boundary,
            st::POST_KV_INIT,
            ev::MEMORY_POOL_END,
            vec![("avail_mem_gib", a)],
        ));
    }
    for (i, (r, a)) in CAPTURE.into_iter().enumerate() {
        want.push((
            Some(r),
            Boundary,
            st::GRAPH_CAPTURE,
            ev::CAPTURE_BEGIN,
            vec![("avail_mem_gib", a)],
        ));
        if i == 3 {
            // TP0 prints its batch-size list right after its begin line.
            let bs = vec![("bs_max", 512.0), ("bs_count", 52.0)];
            want.push((
                Some(0),
                Progress,
                st::GRAPH_CAPTURE,
                ev::CAPTURE_BATCH_SIZES,
                bs,
            ));
        }
    }
    want.push((
        None,
        Progress,
        st::GRAPH_CAPTURE,
        ev::CAPTURE_PROGRESS,
        vec![("bs", 512.0), ("avail_mem_gib", 43.46)],
    ));

    let got: Vec<_> = lines.iter().filter_map(|l| classify(l)).collect();
    assert_eq!(got.len(), want.len(), "kimi: number of recognised lines");
    for (b, (r, kind, stage, event, nums)) in got.iter().zip(&want) {
        let ctx = format!("kimi: {:?}", b.text);
        assert_eq!(
            (b.rank.tp, b.kind, b.stage, b.event),
            (*r, *kind, *stage, *event),
            "{ctx}"
        );
        assert_numbers(&ctx, &b.numbers, nums);
        assert_eq!(b.engine, Engine::Sglang);
    }
}

#[test]
fn sglang_qwen2_5_0_5b_docs_ci_capped_pool() {
    let want = [
        any(Boundary, st::DIST_INIT, ev::DIST_INIT_BEGIN, &[]),
        any(
            Boundary,
            st::DIST_INIT,
            ev::DIST_INIT_END,
            &[("time_s", 0.26), ("mem_usage_gib", 0.09)],
        ),
        any(
            Boundary,
            st::WEIGHT_LOAD,
            ev::LOAD_WEIGHT_BEGIN,
            &[("avail_mem_gib", 78.43)],
        ),
        any(
            Boundary,
            st::KV_POOL,
            ev::LOAD_WEIGHT_END,
            &[
                ("time_s", 0.38),
                ("avail_mem_gib", 77.45),
                ("mem_usage_gib", 0.98),
            ],
        ),
        any(Progress, st::KV_POOL, ev::KV_CACHE_DTYPE, &[]),
        any(
            Boundary,
            st::KV_POOL,
            ev::KV_CACHE_ALLOCATED,
            &[
                ("tokens", 20480.0),
                ("k_size_gib", 0.12),
                ("v_size_gib", 0.12),
            ],
        ),
        any(
            Boundary,
            st::POST_KV_INIT,
            ev::MEMORY_POOL_END,
            &[("avail_mem_gib", 77.12)],
        ),
        any(Boundary, st::POST_KV_INIT, ev::ATTN_BACKEND_BEGIN, &[]),
        any(
            Boundary,
            st::POST_KV_INIT,
            ev::ATTN_BACKEND_END,
            &[("time_s", 0.03)],
        ),
        any(
            Boundary,
            st::GRAPH_CAPTURE,
            ev::CAPTURE_BEGIN,
            &[("avail_mem_gib", 77.02)],
        ),
        any(
            Progress,
            st::GRAPH_CAPTURE,
            ev::CAPTURE_BATCH_SIZES,
            &[("bs_max", 4.0), ("bs_count", 3.0)],
        ),
        any(
            Progress,
            st::GRAPH_CAPTURE,
            ev::CAPTURE_PROGRESS,
            &[("bs", 1.0), ("avail_mem_gib", 76.96)],
        ),
        any(
            Boundary,
            st::POST_CAPTURE,
            ev::CAPTURE_END,
            &[
                ("time_s", 1.01),
                ("mem_usage_gib", 0.07),
                ("avail_mem_gib", 76.95),
            ],
        ),
        any(
            Boundary,
            st::SERVING,
            ev::SUMMARY,
            &[
                ("tokens", 20480.0),
                ("chunked_prefill_size", 8192.0),
                ("max_prefill_tokens", 16384.0),
                ("max_running_requests", 128.0),
                ("context_len", 32768.0),
                ("avail_mem_gib", 76.95),
            ],
        ),
    ];
    run(
        "sglang-qwen2.5-0.5b-instruct-80gb-tp1-docsci-maxtotaltokens.log",
        Engine::Sglang,
        &want,
    );
}

#[test]
fn sglang_gemma_3_27b_not_enough_memory() {
    let want = [tp(
        0,
        Boundary,
        st::KV_POOL,
        ev::LOAD_WEIGHT_END,
        &[("avail_mem_gib", 3.64), ("mem_usage_gib", 18.82)],
    )];
    run(
        "sglang-gemma-3-27b-it-int4-awq-rtx4090-tp1-issue4895.log",
        Engine::Sglang,
        &want,
    );
}

#[test]
fn sglang_qwen2_7b_2024_gpu_id_prefixes() {
    const fn gpu(
        n: u32,
        stage: &'static str,
        event: &'static str,
        nums: &'static [(&'static str, f64)],
    ) -> Exp {
        Exp {
            rank: (None, None, Some(n)),
            kind: Boundary,
            stage,
            event,
            nums,
        }
    }
    let want = [
        gpu(
            0,
            st::KV_POOL,
            ev::LOAD_WEIGHT_END,
            &[("avail_mem_gib", 15.61)],
        ),
        gpu(
            1,
            st::KV_POOL,
            ev::LOAD_WEIGHT_END,
            &[("avail_mem_gib", 15.95)],
        ),
        gpu(
            0,
            st::POST_KV_INIT,
            ev::MEMORY_POOL_END,
            &[("avail_mem_gib", 6.12)],
        ),
        gpu(
            1,
            st::POST_KV_INIT,
            ev::MEMORY_POOL_END,
            &[("avail_mem_gib", 6.46)],
        ),
        gpu(1, st::GRAPH_CAPTURE, ev::CAPTURE_BEGIN, &[]),
        // Truncated in the dump ("… begin. This"): still a capture begin.
        gpu(0, st::GRAPH_CAPTURE, ev::CAPTURE_BEGIN, &[]),
    ];
    run(
        "sglang-qwen2-7b-instruct-gpu-tp2-issue744-oldformat.log",
        Engine::Sglang,
        &want,
    );
}

#[test]
fn sglang_deepseek_r1_dp_attention_negative_profile() {
    const fn dp_tp(
        n: u32,
        kind: LineKind,
        stage: &'static str,
        event: &'static str,
        nums: &'static [(&'static str, f64)],
    ) -> Exp {
        Exp {
            rank: (Some(n), Some(n), None),
            kind,
            stage,
            event,
            nums,
        }
    }
    const CAP: &[(&str, f64)] = &[
        ("max_total_tokens", 131072.0),
        ("profiled_tokens", -561981.0),
    ];
    let mut want = vec![dp_tp(
        0,
        Boundary,
        st::KV_POOL,
        ev::LOAD_WEIGHT_END,
        &[("avail_mem_gib", 21.73), ("mem_usage_gib", 166.59)],
    )];
    for r in [0, 7, 6, 4, 5, 3, 1, 2] {
        want.push(dp_tp(
            r,
            Progress,
            st::KV_POOL,
            ev::MAX_TOTAL_TOKENS_CAPPED,
            CAP,
        ));
    }
    run(
        "sglang-deepseek-r1-mi300x-tp8-dp8-issue7691-negative.log",
        Engine::Sglang,
        &want,
    );
}
