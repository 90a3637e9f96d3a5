//! The numbers a log line carries, and the small scanners that read them.
//!
//! Owns [`LineNumbers`] (one flat bag of optional values; every field is named with its unit) and
//! the hand-written field readers the grammars use (`key=value`, `key: value`, `[1, 2, 4]` lists,
//! `136,592` thousands separators). Must never panic, allocate, or slice a `&str` anywhere but at
//! an ASCII byte it has just looked at: every input here is untrusted text from someone's server.

macro_rules! line_numbers {
    ($($(#[$doc:meta])* $name:ident: $ty:ty,)*) => {
        /// Every number a recognised line carries; fields a line does not have stay `None`.
        ///
        /// All `_gib` values are GiB (bytes / 2^30) as the engines print them (SGLang says "GB"
        /// but divides by 2^30); `_s` values are seconds.
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        pub struct LineNumbers {
            $($(#[$doc])* pub $name: Option<$ty>,)*
        }

        impl LineNumbers {
            /// Calls `f(name, value)` for every field that is present, in declaration order
            /// (integers converted to `f64`, exact below 2^53). For reports and tests.
            pub fn for_each_present(&self, mut f: impl FnMut(&'static str, f64)) {
                $(if let Some(v) = self.$name { f(stringify!($name), v as f64); })*
            }

            /// The value of the field called `name` as `f64`, if the field exists and is present.
            pub fn get(&self, name: &str) -> Option<f64> {
                match name {
                    $(stringify!($name) => self.$name.map(|v| v as f64),)*
                    _ => None,
                }
            }

            /// Names of all fields, in declaration order.
            pub const FIELD_NAMES: &'static [&'static str] = &[$(stringify!($name),)*];
        }
    };
}

line_numbers! {
    /// `avail mem=` / `available_gpu_mem=` / `avail_mem=` / vLLM "Initial free memory": free device memory.
    avail_mem_gib: f64,
    /// `mem usage=` (SGLang stage delta), vLLM "Model loading took X GiB", "Graph capturing … took X GiB".
    mem_usage_gib: f64,
    /// `elapsed=`, `Time elapsed:`, "took X seconds", "warmup completed in Xs".
    time_s: f64,
    /// `#tokens:`, `max_total_num_tokens=`, vLLM "KV cache size: N tokens".
    tokens: u64,
    /// `K size:`.
    k_size_gib: f64,
    /// `V size:`.
    v_size_gib: f64,
    /// `KV size:` (MLA pools; post-capture K+V physically backed).
    kv_size_gib: f64,
    /// `full_layer_tokens=`.
    full_layer_tokens: u64,
    /// `swa_layer_tokens=` (also the SWA pool size in the "cannot hold even one request" error).
    swa_layer_tokens: u64,
    /// `max_mamba_cache_size` (number of Mamba state slots).
    mamba_cache_size: u64,
    /// Mamba `conv_state size:`.
    conv_state_gib: f64,
    /// Mamba `ssm_state size:`.
    ssm_state_gib: f64,
    /// Mamba `intermediate_ssm_state_cache size:` (speculative decoding).
    intermediate_ssm_gib: f64,
    /// Mamba `intermediate_conv_window_cache size:` (speculative decoding).
    intermediate_conv_gib: f64,
    /// `chunked_prefill_size=` (may be -1; `None` also when printed as `None`).
    chunked_prefill_size: i64,
    /// `max_prefill_tokens=`.
    max_prefill_tokens: u64,
    /// `max_running_requests=` or the value it was reduced/capped to.
    max_running_requests: u64,
    /// The value `max_running_requests` had before a reduction.
    max_running_requests_before: u64,
    /// `context_len=`, vLLM "Maximum concurrency for N tokens per request".
    context_len: u64,
    /// The user's `max_total_tokens=` cap in the "larger than the profiled value" warning.
    max_total_tokens: u64,
    /// The profiled token capacity in that warning (negative when weights left no room).
    profiled_tokens: i64,
    /// Current `bs=` of a capture progress bar.
    bs: u64,
    /// Largest batch size of a captured `bs` list, or `max_bs=`.
    bs_max: u64,
    /// Number of batch sizes in a captured `bs` list.
    bs_count: u64,
    /// `num_tokens=` (the largest entry when the engine prints a list).
    num_tokens: u64,
    /// `num_tokens_per_req=`.
    num_tokens_per_req: u64,
    /// Multi-layer EAGLE `step=` / `(step N)`.
    step: u64,
    /// Memory set aside: multimodal reservation, KV-canary workspace, reserved VA, DeepGEMM
    /// budget, vLLM's CUDA-graph estimate.
    reserve_gib: f64,
    /// `mem_fraction_static` quoted by an error.
    mem_fraction_static: f64,
    /// Suggested `--mem-fraction-static` in the "Loaded weights leave no GPU memory" error.
    suggested_mem_fraction_static: f64,
    /// `minimum viable` `--mem-fraction-static` in that error.
    minimum_mem_fraction_static: f64,
    /// `min_per_gpu_memory=` / `pre_model_load_memory=` in the unbalanced-memory check.
    min_gpu_mem_gib: f64,
    /// `local_gpu_memory=` in the unbalanced-memory check.
    local_gpu_mem_gib: f64,
    /// `tp_size=` (NCCL warm-up).
    tp_size: u64,
    /// `pp_size=` (NCCL warm-up).
    pp_size: u64,
    /// `ep_size=` (NCCL warm-up).
    ep_size: u64,
    /// `device=` (VMM arena).
    device: u64,
    /// `granularity=` KiB (VMM arena).
    granularity_kib: u64,
    /// `state slots per request` (Mamba cap on max_running_requests).
    slots_per_req: u64,
    /// vLLM `total_gpu_memory (X GiB)`.
    total_gpu_gib: f64,
    /// vLLM `gpu_memory_utilization (U)`.
    gpu_memory_utilization: f64,
    /// vLLM `= B GiB` (the instance's budget).
    budget_gib: f64,
    /// vLLM `model weights take` / `weights memory:`.
    weights_gib: f64,
    /// vLLM `non_torch_memory takes`.
    non_torch_gib: f64,
    /// vLLM `PyTorch activation peak memory takes` / `torch peak memory increase:`.
    activation_peak_gib: f64,
    /// vLLM `Total non KV cache memory:`.
    non_kv_cache_gib: f64,
    /// vLLM `total consumed (from mem_get_info):`.
    consumed_gib: f64,
    /// vLLM KV budget: `reserved for KV Cache is`, `Available KV cache memory:`.
    kv_cache_gib: f64,
    /// vLLM `# GPU blocks` / `num_gpu_blocks is:`.
    gpu_blocks: u64,
    /// vLLM `# CPU blocks`.
    cpu_blocks: u64,
    /// vLLM `Maximum concurrency … : X x`.
    concurrency: f64,
    /// vLLM `world_size=` of the distributed environment.
    world_size: u64,
    /// vLLM `rank=` (global rank) of the distributed environment.
    rank: u64,
    /// vLLM `local_rank=`.
    local_rank: u64,
    /// vLLM CUDA-graph memory measured by the capture ("… GiB for CUDAGraph memory",
    /// "CUDA graph pool memory: … GiB (actual)").
    cuda_graph_gib: f64,
    /// vLLM's suggested `--kv-cache-memory=` bytes that fit the requested memory (exact).
    kv_cache_memory_bytes: i64,
    /// vLLM's suggested `--kv-cache-memory=` bytes that use the whole GPU (exact).
    kv_cache_memory_full_bytes: i64,
}

/// True for bytes that may continue an identifier (so a key must not follow one).
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The text right after the first occurrence of `key` in `msg` that starts a word
/// (preceded by the start of `msg` or by a byte that cannot continue an identifier).
/// `after(msg, "type=")` therefore skips the `type=` inside `dtype=`.
pub(crate) fn after<'a>(msg: &'a str, key: &str) -> Option<&'a str> {
    let first = key.as_bytes().first().copied().unwrap_or(b' ');
    let needs_boundary = is_word_byte(first);
    for (pos, _) in msg.match_indices(key) {
        let ok = !needs_boundary
            || pos == 0
            || !msg
                .as_bytes()
                .get(pos - 1)
                .copied()
                .is_some_and(is_word_byte);
        if ok {
            return msg.get(pos + key.len()..);
        }
    }
    None
}

/// Length of the ASCII-digit run at the start of `b`.
fn digits(b: &[u8]) -> usize {
    b.iter().take_while(|c| c.is_ascii_digit()).count()
}

/// A decimal number at the very start of `s`: `-?\d+(\.\d+)?`.
pub(crate) fn f64_at(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let sign = usize::from(b.first() == Some(&b'-'));
    let int = digits(b.get(sign..)?);
    if int == 0 {
        return None;
    }
    let mut end = sign + int;
    if b.get(end) == Some(&b'.') {
        let frac = digits(b.get(end + 1..)?);
        if frac > 0 {
            end += 1 + frac;
        }
    }
    s.get(..end)?.parse().ok()
}

/// An unsigned integer at the start of `s`; accepts `136,592` thousands separators
/// (a comma counts only when exactly three digits follow it).
pub(crate) fn u64_at(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let mut i = digits(b);
    if i == 0 {
        return None;
    }
    let mut value: u64 = 0;
    for &c in b.get(..i)? {
        value = value.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    while b.get(i) == Some(&b',') {
        let group = b.get(i + 1..)?;
        if digits(group) != 3 {
            break;
        }
        for &c in group.get(..3)? {
            value = value.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
        }
        i += 4;
    }
    Some(value)
}

/// A signed integer at the start of `s` (`-?\d+`, thousands separators allowed).
pub(crate) fn i64_at(s: &str) -> Option<i64> {
    match s.strip_prefix('-') {
        Some(rest) => i64::try_from(u64_at(rest)?).ok()?.checked_neg(),
        None => i64::try_from(u64_at(s)?).ok(),
    }
}

/// `[1, 2, 4]` at the start of `s`: (largest entry, number of entries). `None` unless closed.
pub(crate) fn list_at(s: &str) -> Option<(u64, u64)> {
    let inner = s.strip_prefix('[')?;
    let close = inner.find(']')?;
    let inner = inner.get(..close)?;
    let (mut max, mut count) = (0u64, 0u64);
    for item in inner.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let v = u64_at(item)?;
        max = max.max(v);
        count += 1;
    }
    (count > 0).then_some((max, count))
}

/// `key` followed by a decimal number.
pub(crate) fn f64_field(msg: &str, key: &str) -> Option<f64> {
    f64_at(after(msg, key)?)
}

/// `key` followed by an unsigned integer.
pub(crate) fn u64_field(msg: &str, key: &str) -> Option<u64> {
    u64_at(after(msg, key)?)
}

/// `key` followed by a signed integer.
pub(crate) fn i64_field(msg: &str, key: &str) -> Option<i64> {
    i64_at(after(msg, key)?)
}

/// `key` followed by a word: everything up to the next `,` or whitespace (or the end),
/// without a trailing `.`. Empty words give `None`.
pub(crate) fn word_field<'a>(msg: &'a str, key: &str) -> Option<&'a str> {
    let rest = after(msg, key)?;
    let end = rest
        .find(|c: char| c == ',' || c.is_whitespace())
        .unwrap_or(rest.len());
    let word = rest.get(..end)?;
    let word = word.strip_suffix('.').unwrap_or(word);
    (!word.is_empty()).then_some(word)
}

/// `key` followed by either a `[..]` list (its largest entry and length) or a single integer
/// (itself, length 1).
pub(crate) fn list_or_u64_field(msg: &str, key: &str) -> Option<(u64, u64)> {
    let rest = after(msg, key)?;
    list_at(rest).or_else(|| u64_at(rest).map(|v| (v, 1)))
}

/// The decimal number that ends right before `suffix` (its first occurrence), reading
/// backwards over `-?\d+(\.\d+)?` — for texts like `reserved 12.00 GiB memory for KV Cache`.
pub(crate) fn f64_before(msg: &str, suffix: &str) -> Option<f64> {
    let end = msg.find(suffix)?;
    let b = msg.as_bytes().get(..end)?;
    let start = b
        .iter()
        .rposition(|c| !(c.is_ascii_digit() || *c == b'.' || *c == b'-'))
        .map_or(0, |p| p + 1);
    f64_at(msg.get(start..end)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals() {
        assert_eq!(f64_at("21.73 GB"), Some(21.73));
        assert_eq!(f64_at("-0.01 GB"), Some(-0.01));
        assert_eq!(f64_at("7 s"), Some(7.0));
        assert_eq!(f64_at("7. s"), Some(7.0));
        assert_eq!(f64_at("-"), None);
        assert_eq!(f64_at(""), None);
        assert_eq!(f64_at("x1"), None);
        assert_eq!(f64_at("1e5"), Some(1.0));
    }

    #[test]
    fn integers() {
        assert_eq!(u64_at("136,592 tokens"), Some(136_592));
        assert_eq!(u64_at("1,2"), Some(1));
        assert_eq!(u64_at("46611, K"), Some(46611));
        assert_eq!(u64_at("99999999999999999999999"), None);
        assert_eq!(i64_at("-561981."), Some(-561_981));
        assert_eq!(i64_at("-"), None);
        assert_eq!(i64_at("-18446744073709551615"), None);
    }

    #[test]
    fn lists() {
        assert_eq!(list_at("[1, 2, 4, 8]"), Some((8, 4)));
        assert_eq!(list_at("[512]"), Some((512, 1)));
        assert_eq!(list_at("[]"), None);
        assert_eq!(list_at("[1, 2"), None);
        assert_eq!(list_at("[1, x]"), None);
    }

    #[test]
    fn fields_respect_word_starts() {
        let m = "type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=6.09 GB";
        assert_eq!(word_field(m, "type="), Some("Qwen2ForCausalLM"));
        assert_eq!(word_field(m, "dtype="), Some("torch.bfloat16"));
        assert_eq!(f64_field(m, "avail mem="), Some(6.09));
        assert_eq!(f64_field("KV size: 1.5 GB", "V size: "), None);
        assert_eq!(u64_field("num_tokens_per_req=1", "num_tokens="), None);
        assert_eq!(
            f64_before("reserved 12.50 GiB memory for KV", " GiB memory"),
            Some(12.5)
        );
        assert_eq!(f64_before("GiB memory", " GiB memory"), None);
    }
}
