//! Fuzzing the model config reader and the sizing it feeds (`vramledger size`), seeded with
//! the real `config.json` files in tests/data, and the command line of `size` itself:
//! - `model_config`: config.json documents edited as JSON (absurd layer counts, heads, head
//!   dims, layer lists, nesting, types) and as text (numbers past 64 bits), read by the
//!   bounded reader, and when accepted sized for real (the calculator, defaults, what-ifs);
//! - `size_flags`: argument lists of `vramledger size` built from its flags and edge values,
//!   parsed by the CLI's own clap definition and sized (calculator, the recorded run, a log).
//!
//! See tests/fuzz_support for the method, the counts and how to replay an input.

mod fuzz_support;

use std::path::PathBuf;

use clap::Parser;
use fuzz_support::{count, files, json_mutate, manifest_dir, run_sharded, Rng, INTERESTING};
use vramledger::cli::size::SizeArgs;
use vramledger::output::{size_json, size_text};
use vramledger::sizing;
use vramledger::sizing::model_config;

#[global_allocator]
static GUARD: fuzz_support::Guard = fuzz_support::Guard;

fn seed_configs() -> Vec<Vec<u8>> {
    let data = manifest_dir().join("tests/data");
    let out: Vec<Vec<u8>> = files(&data)
        .into_iter()
        .filter(|(p, b)| {
            p.extension().is_some_and(|x| x == "json")
                && !p.to_string_lossy().contains("budgets")
                && std::str::from_utf8(b).is_ok_and(|t| t.contains("num_hidden_layers"))
        })
        .map(|(_, b)| b)
        .collect();
    assert!(out.len() >= 8, "seed configs: {}", out.len());
    out
}

const KEYS: &[&str] = &[
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "hidden_size",
    "head_dim",
    "v_head_dim",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "num_nextn_predict_layers",
    "sliding_window",
    "sliding_window_pattern",
    "max_position_embeddings",
    "layer_types",
    "layers_block_type",
    "hybrid_override_pattern",
    "text_config",
    "vision_config",
    "torch_dtype",
    "dtype",
    "quantization_config",
    "quant_method",
    "kv_cache_quant_algo",
    "architectures",
    "model_type",
    "audio_config",
];

const WORDS: &[&str] = &[
    "full_attention",
    "sliding_attention",
    "mamba",
    "linear_attention",
    "attention",
    "M-M*-E-M*",
    "bfloat16",
    "float32",
    "float16",
    "fp8",
    "FP8",
    "LlamaForCausalLM",
    "Qwen2VLForConditionalGeneration",
    "DeepseekV3ForCausalLM",
    "gemma3",
    "",
];

/// A per-thread scratch file (the sizing reads its config from a path).
fn scratch(name: &str) -> PathBuf {
    let dir = manifest_dir().join("target/fuzz-scratch");
    let _ = std::fs::create_dir_all(&dir);
    let t = std::thread::current();
    dir.join(format!(
        "{}-{}-{name}",
        std::process::id(),
        t.name().unwrap_or("main")
    ))
}

/// `vramledger size`'s flags, parsed by the CLI's own definition.
#[derive(Parser)]
struct Size {
    #[command(flatten)]
    args: SizeArgs,
}

fn size(args: &SizeArgs) -> bool {
    match sizing::build(&args.request()) {
        Ok(r) => {
            let _ = size_text::render(&r);
            let _ = size_json::render(&r);
            let _ = r.exit_code();
            true
        }
        Err(e) => {
            assert!(!e.is_empty());
            false
        }
    }
}

fn calculator(config: &str, rng_bits: u64) -> Vec<String> {
    let mut a: Vec<String> = vec!["size".into(), "--model-config".into(), config.into()];
    let version = ["0.4.6", "0.5.5", "0.5.12", "0.5.18", "0.5.23"][(rng_bits % 5) as usize];
    a.extend(["--sglang-version".into(), version.into()]);
    a.extend(["--gpu-mem-mib".into(), "81559".into()]);
    if rng_bits & 8 != 0 {
        a.extend(["--pre-gib", "78.81", "--available-gib", "63.72"].map(String::from));
        a.extend(["--what-if-tp", "4", "--what-if-page-size", "16"].map(String::from));
    }
    if rng_bits & 16 != 0 {
        a.extend(["--tp", "2", "--kv-cache-dtype", "fp8_e4m3"].map(String::from));
    }
    a
}

#[test]
fn model_config() {
    let seeds = seed_configs();
    let stats = run_sharded(
        "model_config",
        count(25_000),
        |rng| {
            let seed = rng.pick(&seeds).clone();
            json_mutate(rng, &seed, KEYS, WORDS)
        },
        |bytes| {
            let Ok(text) = std::str::from_utf8(bytes) else {
                return false;
            };
            if model_config::from_text(text).is_err() {
                return false;
            }
            // Accepted: size with it, as `vramledger size --model-config` would.
            let path = scratch("config.json");
            std::fs::write(&path, bytes).unwrap();
            let bits = bytes.iter().fold(0u64, |h, b| h.rotate_left(5) ^ *b as u64);
            let argv = calculator(path.to_str().unwrap(), bits);
            let parsed = Size::try_parse_from(&argv).expect("the calculator flags parse");
            size(&parsed.args);
            true
        },
    );
    assert!(stats.inputs >= count(25_000));
    assert!(stats.accepted > stats.inputs / 10, "{stats:?}");
}

/// Values a flag may be given: edges, real ones, and words that are not numbers.
const VALUES: &[&str] = &[
    "0",
    "1",
    "2",
    "4",
    "8",
    "16",
    "64",
    "256",
    "4096",
    "4097",
    "65536",
    "65537",
    "8192",
    "131072",
    "4294967296",
    "4294967297",
    "9223372036854775807",
    "18446744073709551615",
    "-1",
    "-2",
    "0.5",
    "0.9",
    "1.0",
    "1.5",
    "0.0001",
    "1e-300",
    "1e300",
    "NaN",
    "inf",
    "-inf",
    "78.81",
    "63.72",
    "81559",
    "143771",
    "16777216",
    "16777217",
    "16384",
    "auto",
    "fp8_e4m3",
    "fp8_e5m2",
    "bf16",
    "EAGLE",
    "STANDALONE",
    "NGRAM",
    "0.5.5",
    "0.4.6.post5",
    "0.5.23",
    "x",
];

const FLAGS: &[&str] = &[
    "--mem-fraction-static",
    "--page-size",
    "--kv-cache-dtype",
    "--tp",
    "--pp",
    "--gpu-mem-mib",
    "--max-total-tokens",
    "--max-running-requests",
    "--context-length",
    "--sglang-version",
    "--dp",
    "--chunked-prefill-size",
    "--cuda-graph-max-bs",
    "--speculative-algorithm",
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
    "--speculative-num-draft-layers",
    "--pp-min-tokens-from-other-stages",
    "--post-capture-backed-bytes",
    "--post-capture-sampling-headroom-bytes",
    "--gpu-memory-utilization",
    "--attempt",
    "--margin-gib",
    "--what-if-mem-fraction",
    "--what-if-page-size",
    "--what-if-kv-cache-dtype",
    "--what-if-context-length",
    "--what-if-gpu-mem-mib",
    "--what-if-tp",
];

const SWITCHES: &[&str] = &[
    "--enable-dp-attention",
    "--post-capture-kv-sizing",
    "--platform=hip",
    "--gpu-mem-source=driver",
    "--gpu-mem-source=nvml",
    "--json",
];

/// An argument list of `vramledger size`, as NUL-separated bytes.
fn argv(rng: &mut Rng) -> Vec<u8> {
    let data = manifest_dir().join("tests/data/h200-sglang-shape");
    let config = data.join("config.json").display().to_string();
    let mut a: Vec<String> = vec!["size".into()];
    match rng.below(10) {
        0 => a.push(data.display().to_string()),
        9 if rng.one_in(2) => {
            // A vLLM run (its own sizing path), with its engine output half the time.
            let v = manifest_dir().join("tests/data/h200-vllm-explore");
            a.push(v.display().to_string());
            if rng.one_in(2) {
                a.push("--log".into());
                a.push(v.join("engine-stdout.txt").display().to_string());
            }
        }
        1 => {
            a.push("--log".into());
            a.push(data.join("program-output.txt").display().to_string());
        }
        _ => {
            a.extend(["--pre-gib", "78.81", "--available-gib", "63.72"].map(String::from));
            a.extend(["--gpu-mem-mib".into(), "81559".into()]);
        }
    }
    a.extend(["--model-config".into(), config]);
    for _ in 0..1 + rng.below(6) {
        if rng.one_in(5) {
            a.push(rng.pick(SWITCHES).to_string());
        } else {
            let flag = *rng.pick(FLAGS);
            a.push(flag.to_string());
            // Mostly a value of the flag's type (so clap lets it through to the sizing).
            let v = match flag {
                _ if rng.one_in(8) => rng.pick(VALUES).to_string(),
                "--kv-cache-dtype" | "--what-if-kv-cache-dtype" => rng
                    .pick(&["auto", "fp8_e4m3", "fp8_e5m2", "bf16", "fp4_e2m1", "int8"])
                    .to_string(),
                "--sglang-version" => rng
                    .pick(&[
                        "0.4.6", "0.5.5", "0.5.12", "0.5.18", "0.5.23", "0.3.0", "1.0",
                    ])
                    .to_string(),
                "--speculative-algorithm" => rng
                    .pick(&["EAGLE", "EAGLE3", "STANDALONE", "NGRAM", "NONE"])
                    .to_string(),
                "--mem-fraction-static"
                | "--gpu-memory-utilization"
                | "--what-if-mem-fraction"
                | "--gpu-mem-mib"
                | "--what-if-gpu-mem-mib"
                | "--margin-gib" => rng
                    .pick(&[
                        "0.5", "0.9", "1", "0.0001", "1e-300", "1e300", "81559", "143771",
                        "16777216", "16777217", "0", "-1", "NaN",
                    ])
                    .to_string(),
                "--chunked-prefill-size" | "--pp-min-tokens-from-other-stages" => rng
                    .pick(&[
                        "-1",
                        "-2",
                        "0",
                        "1",
                        "2048",
                        "8192",
                        "4294967296",
                        "4294967297",
                        "9223372036854775807",
                        "-9223372036854775808",
                    ])
                    .to_string(),
                _ if rng.one_in(2) => rng.pick(INTERESTING).to_string(),
                _ => rng
                    .pick(&[
                        "1", "2", "4", "8", "16", "64", "256", "1024", "4096", "4097", "65536",
                        "65537", "131072",
                    ])
                    .to_string(),
            };
            a.push(v);
        }
    }
    if rng.one_in(4) {
        a.extend(
            [
                "--free-after-capture-gib",
                "5.5",
                "--post-capture-backed-bytes",
            ]
            .map(String::from),
        );
        a.push(rng.pick(VALUES).to_string());
    }
    a.join("\0").into_bytes()
}

#[test]
fn size_flags() {
    let data = manifest_dir().join("tests/data").display().to_string();
    let stats = run_sharded("size_flags", count(20_000), argv, |bytes| {
        // Regression inputs name the data folder `@DATA@`, to stay valid on any machine.
        let text = std::str::from_utf8(bytes)
            .unwrap_or("")
            .replace("@DATA@", &data);
        let argv: Vec<&str> = text.split('\0').collect();
        match Size::try_parse_from(&argv) {
            Ok(s) => size(&s.args),
            Err(_) => false, // clap's own refusal: exit 2
        }
    });
    assert!(stats.inputs >= count(20_000));
}
