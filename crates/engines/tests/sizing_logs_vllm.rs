//! vLLM KV budgets re-run on the real logs in `shared/logs`. Every GiB figure is printed with
//! two decimals (±0.005 GiB); block counts must fall inside the interval that leaves.

mod sizing_support;

use sizing_support::{config, log, numbers_after, the_value, two, HALF_CENTI_GIB};
use vramledger_engines::sizing::vllm::{
    cache_block_size, v0_blocks, v1_blocks, v1_page_size_bytes, V0Input, V1Input, V1Version,
};

const G: f64 = (1u64 << 30) as f64;

fn bytes(gib: f64) -> i64 {
    (gib * G).round() as i64
}

/// A V0 pass whose KV remainder is exactly `rest_gib` (total = remainder, utilization 1.0).
fn v0_from_rest(rest_gib: f64, block: u64, max_len: u64) -> V0Input {
    V0Input {
        total_gpu_memory_bytes: bytes(rest_gib).max(0) as u64,
        gpu_memory_utilization: 1.0,
        weights_bytes: 0,
        non_torch_increase_bytes: 0,
        torch_peak_increase_bytes: 0,
        cache_block_size_bytes: block,
        block_size: 16,
        max_model_len: max_len,
        swap_space_bytes: 4 << 30,
    }
}

#[test]
fn qwen25_15b_t4_v0_profile() {
    let name = "vllm-qwen2.5-1.5b-instruct-t4-tp1-colabgrpo.log";
    let (Some(text), Some(m)) = (log(name), config("Qwen__Qwen2.5-1.5B-Instruct")) else {
        return;
    };
    // fp16 on a T4 (the log casts bf16 to fp16; both are 2 bytes): 2 * 28 * 16 * (2*128 * 2)
    // = 458752 B per block. The CPU pool checks it exactly: 4 GiB swap // 458752 = 9362.
    let block = cache_block_size(
        2,
        m.num_hidden_layers,
        16,
        m.num_key_value_heads,
        m.head_dim,
        false,
    );
    assert_eq!(block, 458_752);
    let cpu = the_value(&text, "# CUDA blocks", "# CPU blocks: ").unwrap() as i64;
    let gpu = the_value(&text, "# CUDA blocks", "# CUDA blocks: ").unwrap() as i64;
    let total = the_value(&text, "total_gpu_memory", "total_gpu_memory (").unwrap(); // 14.56
    let util = the_value(&text, "total_gpu_memory", "gpu_memory_utilization (").unwrap(); // 0.50
    let w = the_value(&text, "model weights take", "model weights take ").unwrap(); // 2.89
    let nt = the_value(&text, "model weights take", "non_torch_memory takes ").unwrap(); // 0.01
    let act = the_value(&text, "model weights take", "activation peak memory takes ").unwrap(); // 2.02
    let rest = the_value(&text, "model weights take", "KV Cache is ").unwrap(); // 2.36
                                                                                // From the components: 14.56 * 0.5 - (2.89 + 0.01 + 2.02) = 2.36 GiB; each figure ±0.005
                                                                                // gives ±(0.0025 + 0.015) GiB = ±41 blocks: [5482, 5564].
    let at = |d: f64| {
        v0_blocks(&V0Input {
            total_gpu_memory_bytes: bytes(total + d) as u64,
            gpu_memory_utilization: util,
            weights_bytes: bytes(w - d),
            non_torch_increase_bytes: bytes(nt - d),
            torch_peak_increase_bytes: bytes(act - d),
            cache_block_size_bytes: block,
            block_size: 16,
            max_model_len: 32_768,
            swap_space_bytes: 4 << 30,
        })
    };
    let (lo, hi) = (at(-HALF_CENTI_GIB), at(HALF_CENTI_GIB));
    println!(
        "T4 V0: blocks in [{}, {}], logged {gpu}",
        lo.num_gpu_blocks, hi.num_gpu_blocks
    );
    assert!(lo.num_gpu_blocks <= gpu && gpu <= hi.num_gpu_blocks);
    assert_eq!(lo.num_cpu_blocks, cpu);
    // From the printed remainder alone: 2.36 ± 0.005 GiB -> [5512, 5535].
    let lo = v0_blocks(&v0_from_rest(rest - HALF_CENTI_GIB, block, 32_768));
    let hi = v0_blocks(&v0_from_rest(rest + HALF_CENTI_GIB, block, 32_768));
    assert!(lo.num_gpu_blocks <= gpu && gpu <= hi.num_gpu_blocks);
    // Concurrency of the logged count: 5517 * 16 / 32768 = 2.6938 -> "2.69x".
    let logged = the_value(&text, "Maximum concurrency", "per request: ").unwrap();
    let exact = v0_blocks(&v0_from_rest(gpu as f64 * block as f64 / G, block, 32_768));
    assert_eq!(exact.num_gpu_blocks, gpu);
    assert_eq!(two(exact.max_concurrency), two(logged));
}

#[test]
fn qwen25_vl_7b_jetson_negative_remainder() {
    let name = "vllm-qwen2.5-vl-7b-instruct-awq-jetson-orin-agx-tp1-kvnegative.log";
    let (Some(text), Some(m)) = (log(name), config("Qwen__Qwen2.5-VL-7B-Instruct-AWQ")) else {
        return;
    };
    // fp16, 28 layers, 4 kv heads, head_dim 3584 / 28 = 128: 2 * 28 * 16 * 1024 = 917504 B.
    let block = cache_block_size(
        2,
        m.num_hidden_layers,
        16,
        m.num_key_value_heads,
        m.head_dim,
        false,
    );
    assert_eq!(block, 917_504);
    let w = numbers_after(&text, "model weights take", "model weights take ");
    let nt = numbers_after(&text, "non_torch_memory", "non_torch_memory takes ");
    let act = numbers_after(&text, "activation peak", "activation peak memory takes ");
    let rest = numbers_after(&text, "reserved for KV Cache", "KV Cache is ");
    let conc = numbers_after(&text, "Maximum concurrency", "per request: ");
    // Attempt 1: budget = -7.83 + 6.59 + 8.29 + 4.93 = 11.98 GiB = 0.4 x 29.95 GiB total.
    let total = (rest[0] + w[0] + nt[0] + act[0]) / 0.4;
    let r = v0_blocks(&V0Input {
        total_gpu_memory_bytes: bytes(total) as u64,
        gpu_memory_utilization: 0.4,
        weights_bytes: bytes(w[0]),
        non_torch_increase_bytes: bytes(nt[0]),
        torch_peak_increase_bytes: bytes(act[0]),
        cache_block_size_bytes: block,
        block_size: 16,
        max_model_len: 4096,
        swap_space_bytes: 4 << 30,
    });
    assert_eq!(r.num_gpu_blocks, 0);
    assert_eq!(two(r.max_concurrency), two(conc[0])); // "0.00x"
    let e = r.error.unwrap();
    // The log wraps the message over three lines; compare with whitespace folded.
    let folded: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(folded.contains(&e.message), "{}", e.message);
    // Way out: total x u >= 19.81 GiB non-KV + 256 blocks (4096 / 16) x 917504 B = 20.029 GiB,
    // u >= 0.6687 -> 0.67 (the 4096-token max_model_len check needs the 256 blocks).
    assert_eq!(e.smallest_working_utilization, Some(0.67));
    // Attempt 2: 0.65 ± 0.005 GiB -> [754, 766] blocks; "2.95x" = blocks * 16 / 4096 means
    // 754..756: the two agree.
    let lo = v0_blocks(&v0_from_rest(rest[1] - HALF_CENTI_GIB, block, 4096)).num_gpu_blocks;
    let hi = v0_blocks(&v0_from_rest(rest[1] + HALF_CENTI_GIB, block, 4096)).num_gpu_blocks;
    let consistent: Vec<i64> = (lo..=hi)
        .filter(|b| {
            let r = v0_blocks(&v0_from_rest(*b as f64 * block as f64 / G, block, 4096));
            r.num_gpu_blocks == *b && two(r.max_concurrency) == two(conc[1])
        })
        .collect();
    println!("Jetson attempt 2: blocks [{lo}, {hi}], matching 2.95x: {consistent:?}");
    assert_eq!(consistent, vec![754, 755, 756]);
}

#[test]
fn dots_ocr_v1_available_to_tokens() {
    // No config in shared/logs/configs; the header gives the LM geometry: 28 layers, 2 kv heads,
    // head 128, bf16, block 16 -> one layer's page 2 * 16 * 2 * 128 * 2 = 16384 B.
    let Some(text) = log("vllm-dots-ocr-wsl-consumer-tp1-dockerlog.log") else {
        return;
    };
    let page = v1_page_size_bytes(16, 2, 128, 2, false);
    let avail = the_value(&text, "Available KV cache memory", "memory: ").unwrap(); // 3.65
    let tokens = the_value(&text, "GPU KV cache size", "size: ").unwrap() as i64; // 136,592
    let blocks = the_value(&text, "num_gpu_blocks is", "num_gpu_blocks is: ").unwrap() as i64;
    let at = |gib: f64| {
        v1_blocks(&V1Input {
            version: V1Version::Newest,
            total_gpu_memory_bytes: 0,
            gpu_memory_utilization: 0.8,
            torch_peak_bytes: 0,
            non_torch_bytes: 0,
            non_kv_cache_bytes: 0,
            cudagraph_estimate_bytes: 0,
            kv_cache_memory_bytes: Some(bytes(gib) as u64),
            page_size_bytes: page,
            num_layers: 28,
            block_size: 16,
            max_model_len: 131_072,
        })
    };
    // 3.65 GiB // 16384 // 28 = 8543; ±0.005 GiB -> [8530, 8553] blocks; logged 8537.
    let (lo, hi) = (at(avail - HALF_CENTI_GIB), at(avail + HALF_CENTI_GIB));
    assert_eq!(at(avail).num_gpu_blocks, 8543);
    assert!(lo.num_gpu_blocks <= blocks && blocks <= hi.num_gpu_blocks);
    assert_eq!(blocks * 16, tokens);
    // Concurrency: 8537 blocks / (131072 / 16 = 8192 per request) = 1.0421 -> "1.04x".
    let exact = at(blocks as f64 * (page * 28) as f64 / G);
    assert_eq!(exact.num_gpu_blocks, blocks);
    let logged = the_value(&text, "Maximum concurrency", "per request: ").unwrap();
    assert_eq!(two(exact.max_concurrency), two(logged));
}
