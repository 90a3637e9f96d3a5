//! Worked examples for `vllm.rs`.

use super::*;

const G: u64 = 1 << 30;

#[test]
fn block_sizes() {
    // Qwen2.5-1.5B fp16, block 16: 2 B * 28 layers * 16 * (2*128 + 2*128) = 458752 B.
    assert_eq!(cache_block_size(2, 28, 16, 2, 128, false), 458_752);
    // MLA (DeepSeek, bf16): 2 * 61 * 16 * (1 * 576 + 0) = 1124352 B.
    assert_eq!(cache_block_size(2, 61, 16, 1, 576, true), 1_124_352);
    // V1 page for one layer: 2 * 16 * 2 heads * 128 * 2 B = 16384 B (dots.ocr / Qwen2-1.5B).
    assert_eq!(v1_page_size_bytes(16, 2, 128, 2, false), 16_384);
    assert_eq!(v1_page_size_bytes(16, 1, 576, 2, true), 18_432);
}

fn v0(total: u64, util: f64, non_kv: (i64, i64, i64), block: u64, max_len: u64) -> V0Input {
    V0Input {
        total_gpu_memory_bytes: total,
        gpu_memory_utilization: util,
        weights_bytes: non_kv.0,
        non_torch_increase_bytes: non_kv.1,
        torch_peak_increase_bytes: non_kv.2,
        cache_block_size_bytes: block,
        block_size: 16,
        max_model_len: max_len,
        swap_space_bytes: 4 * G,
    }
}

#[test]
fn v0_budget_blocks_and_concurrency() {
    // 16 GiB x 0.5 = 8 GiB; non-KV = 3 GiB weights + 0 + 2 GiB peak = 5 GiB; available 3 GiB;
    // 3221225472 // 458752 = 7021.7 -> 7021 blocks = 112336 tokens; 112336 / 32768 = 3.428x.
    // CPU blocks: 4 GiB // 458752 = 9362 (the T4 log's "# CPU blocks: 9362").
    let r = v0_blocks(&v0(
        16 * G,
        0.5,
        (3 * G as i64, 0, 2 * G as i64),
        458_752,
        32_768,
    ));
    assert_eq!(r.available_kv_cache_bytes, 3.0 * G as f64);
    assert_eq!(
        (r.num_gpu_blocks, r.num_cpu_blocks, r.kv_tokens),
        (7021, 9362, 112_336)
    );
    assert_eq!(r.max_concurrency, 3.42822265625);
    assert_eq!(r.error, None);
}

#[test]
fn v0_negative_remainder_and_smallest_utilization() {
    // Jetson attempt 1 shape: total 29.95 GiB, util 0.4, non-KV 19.81 GiB -> remainder
    // 11.98 - 19.81 = -7.83 GiB -> max(.., 0) = 0 blocks -> "No available memory ...".
    // Qwen2.5-VL-7B block: 2 * 28 * 16 * 1024 = 917504 B; max_model_len 4096 needs 256 blocks
    // (0.21875 GiB): util >= (21270825533 + 234881024) / 32158567628 = 0.66874 -> 0.67.
    let total = (29.95 * G as f64) as u64;
    let non_kv = (19.81 * G as f64) as i64;
    let r = v0_blocks(&v0(total, 0.4, (non_kv, 0, 0), 917_504, 4096));
    assert_eq!(r.num_gpu_blocks, 0);
    let e = r.error.unwrap();
    assert_eq!(
        e.message,
        "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` \
         when initializing the engine."
    );
    assert_eq!(e.smallest_working_utilization, Some(0.67));
    assert_eq!(r.max_concurrency, 0.0);
}

#[test]
fn v0_max_model_len_check() {
    // 3 GiB of KV = 7021 blocks = 112336 tokens < 131072.
    let r = v0_blocks(&v0(
        16 * G,
        0.5,
        (3 * G as i64, 0, 2 * G as i64),
        458_752,
        131_072,
    ));
    let e = r.error.unwrap();
    assert_eq!(
        e.message,
        "The model's max seq len (131072) is larger than the maximum number of tokens that can \
         be stored in KV cache (112336). Try increasing `gpu_memory_utilization` or decreasing \
         `max_model_len` when initializing the engine."
    );
    // 131072 tokens = 8192 blocks = 3.5 GiB, so total x u >= 8.5 GiB: u >= 0.53125 -> 0.54.
    assert_eq!(e.smallest_working_utilization, Some(0.54));
}

fn v1(version: V1Version, util: f64, max_len: u64) -> V1Input {
    V1Input {
        version,
        total_gpu_memory_bytes: 16 * G,
        gpu_memory_utilization: util,
        torch_peak_bytes: 10 * G as i64,
        non_torch_bytes: -(G as i64),
        non_kv_cache_bytes: 10 * G as i64,
        cudagraph_estimate_bytes: 0,
        kv_cache_memory_bytes: None,
        // Llama-3.1-8B bf16: 2 * 16 * 8 * 128 * 2 = 65536 B per layer page, 32 layers.
        page_size_bytes: 65_536,
        num_layers: 32,
        block_size: 16,
        max_model_len: max_len,
    }
}

#[test]
fn v1_0_8_5_and_newest() {
    // 0.8.5: 16 GiB * 0.9 = 15461882265.6; peak = 10 GiB + max(-1 GiB, 0) = 10 GiB;
    // int(15461882265.6 - 10737418240) = 4724464025 B; // 65536 // 32 = 2252 blocks.
    let r = v1_blocks(&v1(V1Version::V0_8_5, 0.9, 8192));
    assert_eq!(r.available_kv_cache_bytes, 4_724_464_025.0);
    assert_eq!((r.num_gpu_blocks, r.kv_tokens), (2252, 36_032));
    // 8192 tokens = 512 blocks per request: 2252 / 512 = 4.3984375x.
    assert_eq!(r.max_concurrency, 4.3984375);
    // Newest: ceil(15461882265.6) = 15461882266; - 10 GiB = 4724464026 B -> same 2252 blocks;
    // a 1 GiB CUDA-graph estimate removes 512 blocks (1 GiB / 2 MiB per block).
    let mut i = v1(V1Version::Newest, 0.9, 8192);
    assert_eq!(v1_blocks(&i).available_kv_cache_bytes, 4_724_464_026.0);
    i.cudagraph_estimate_bytes = G as i64;
    assert_eq!(v1_blocks(&i).num_gpu_blocks, 1740);
    // --kv-cache-memory-bytes 2 GiB: profiling skipped, 1024 blocks.
    i.kv_cache_memory_bytes = Some(2 * G);
    assert_eq!(v1_blocks(&i).num_gpu_blocks, 1024);
}

#[test]
fn v1_not_enough_for_one_request() {
    // 131072 tokens = 8192 blocks x 2 MiB = 16 GiB needed; 4.4 GiB available: 2252 blocks
    // -> estimated max length 2252 * 16 = 36032.
    let r = v1_blocks(&v1(V1Version::V0_8_5, 0.9, 131_072));
    let e = r.error.unwrap();
    assert_eq!(
        e.message,
        "To serve at least one request with the model's max seq len (131072), (16.00 GiB KV \
         cache is needed, which is larger than the available KV cache memory (4.40 GiB). Based \
         on the available memory, the estimated maximum model length is 36032. Try increasing \
         `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    );
    // Even util 1.0 leaves 6 GiB < 16 GiB: no utilization works.
    assert_eq!(e.smallest_working_utilization, None);
    // util 0.6 -> 9.6 - 10 < 0: no memory at all.
    let r = v1_blocks(&v1(V1Version::V0_8_5, 0.6, 8192));
    assert!(r.error.unwrap().message.starts_with("No available memory"));
}
