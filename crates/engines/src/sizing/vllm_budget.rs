//! vLLM 0.26's V1 KV budget on bytes that are known exactly or only to an interval.
//!
//! `Worker.determine_available_memory` (0.26, both model runners):
//! `requested = ceil(total × gpu_memory_utilization)`, `non_kv = weights + torch_peak_increase +
//! non_torch_increase`, `available = requested − non_kv − cudagraph_estimate` (the estimate only
//! when the V1 runner profiled graphs and `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS` is on);
//! `get_num_blocks`: `available // page_size // num_layers`; `get_kv_cache_capacity`:
//! `concurrency = blocks / cdiv(max_model_len, block_size)`, `tokens = int(concurrency ×
//! max_model_len)`; `compile_or_warm_up_model`'s suggestion: `requested − (weights + peak +
//! non_torch + cuda_graph) − 150 MiB` (and the same from the initial free memory).
//!
//! A run measures some inputs to the byte (total, initial free, non-torch growth, the captured
//! graphs) while vLLM prints others with two decimals of GiB (weights, activation peak); each is
//! a [`Bytes`] interval, and the printed results (`Available KV cache memory`, the exact
//! `--kv-cache-memory=` integer) narrow the unknown sum. Every result is the tightest interval
//! the inputs allow; an exact input set gives one value.

use super::pyfloat::{py_floordiv_int, GIB};

/// vLLM's `redundancy_buffer_memory` in the `--kv-cache-memory` suggestion.
pub const SUGGESTION_BUFFER_BYTES: i64 = 150 << 20;

/// An integer interval of bytes, `lo ≤ value ≤ hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes {
    pub lo: i64,
    pub hi: i64,
}

impl Bytes {
    pub const ZERO: Bytes = Bytes { lo: 0, hi: 0 };

    pub fn exact(v: i64) -> Bytes {
        Bytes { lo: v, hi: v }
    }

    /// The bytes a `format_gib` value (`round(b / 2^30, 2)`) can stand for.
    pub fn printed_gib(gib: f64) -> Bytes {
        Bytes {
            lo: ((gib - 0.005) * GIB).ceil() as i64,
            hi: ((gib + 0.005) * GIB).floor() as i64,
        }
    }

    pub fn is_exact(self) -> bool {
        self.lo == self.hi
    }

    /// The common part, `None` when they do not meet.
    pub fn meet(self, o: Bytes) -> Option<Bytes> {
        let b = Bytes {
            lo: self.lo.max(o.lo),
            hi: self.hi.min(o.hi),
        };
        (b.lo <= b.hi).then_some(b)
    }

    /// Applies a non-decreasing map to both ends.
    pub fn map(self, f: impl Fn(i64) -> i64) -> Bytes {
        Bytes {
            lo: f(self.lo),
            hi: f(self.hi),
        }
    }
}

impl std::ops::Add for Bytes {
    type Output = Bytes;
    fn add(self, o: Bytes) -> Bytes {
        Bytes {
            lo: self.lo.saturating_add(o.lo),
            hi: self.hi.saturating_add(o.hi),
        }
    }
}

/// The interval of `a − b` for any `a` in `self` and `b` in `o`.
impl std::ops::Sub for Bytes {
    type Output = Bytes;
    fn sub(self, o: Bytes) -> Bytes {
        Bytes {
            lo: self.lo.saturating_sub(o.hi),
            hi: self.hi.saturating_sub(o.lo),
        }
    }
}

/// What `determine_available_memory` and `compile_or_warm_up_model` work on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Inputs {
    /// `init_snapshot.total_memory`.
    pub total: Bytes,
    /// `init_snapshot.free_memory` (after distributed init, before the weights).
    pub init_free: Bytes,
    /// `None` when no settings line says it: the budget is then the printed available memory.
    pub gpu_memory_utilization: Option<f64>,
    /// `model_memory_usage`: torch's allocated bytes across the load.
    pub weights: Bytes,
    /// `torch_peak_increase`: torch's allocated peak in the profile run over its start.
    pub activation: Bytes,
    /// `non_torch_increase`: (used − torch reserved) after profiling minus at the snapshot.
    pub non_torch: Bytes,
    /// The CUDA-graph estimate subtracted from the budget (0 unless it applies).
    pub cudagraph_estimate: Bytes,
    /// The capture's measured size (free before `capture_model` minus after).
    pub cudagraph: Option<Bytes>,
    /// `--kv-cache-memory` bytes: the budget, profiling skipped.
    pub kv_cache_memory: Option<i64>,
}

/// What vLLM printed that constrains the inputs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Printed {
    /// "Available KV cache memory: X GiB".
    pub available_gib: Option<f64>,
    /// The first `--kv-cache-memory=` integer of the after-capture summary (to fit requested).
    pub suggestion_bytes: Option<i64>,
    /// The second one (to use the whole GPU).
    pub suggestion_full_bytes: Option<i64>,
}

/// The KV layout: one uniform full-attention spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// One layer's page: `2 × block_size × kv_heads × head_size × dtype_size` (1× for MLA).
    pub page_size_bytes: u64,
    pub num_layers: u64,
    pub block_size: u64,
    pub max_model_len: u64,
}

/// The budget, as tight as the inputs and prints allow.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    pub requested: Bytes,
    /// `weights + activation + non_torch`, narrowed by the prints.
    pub non_kv: Bytes,
    pub available: Bytes,
    /// `[lo, hi]` of `num_gpu_blocks`.
    pub blocks: (i64, i64),
    /// `[lo, hi]` of "GPU KV cache size: N tokens".
    pub tokens: (i64, i64),
    /// `[lo, hi]` of "Maximum concurrency for L tokens per request: X".
    pub concurrency: (f64, f64),
    /// The suggestion to fit the requested memory, and to use the whole GPU.
    pub suggestion: Option<Bytes>,
    pub suggestion_full: Option<Bytes>,
    /// The activation peak the constraints leave (for a run that cannot see it).
    pub activation: Bytes,
    /// What the prints and the inputs disagree on (the prints then win).
    pub conflicts: Vec<String>,
    /// The startup error vLLM raises with this budget, if any (at the budget's low end).
    pub error: Option<String>,
}

/// `math.ceil(total × utilization)` on the float product, as vLLM computes it.
pub fn requested(total: i64, utilization: f64) -> i64 {
    (total as f64 * utilization).ceil() as i64
}

/// `get_num_blocks`: `max(available // page_size // num_layers, 0)`.
pub fn blocks(available: i64, l: &Layout) -> i64 {
    let per_layer = py_floordiv_int(available, l.page_size_bytes.max(1) as i64);
    py_floordiv_int(per_layer, l.num_layers.max(1) as i64).max(0)
}

/// `get_kv_cache_capacity` for a uniform full-attention spec: (tokens, concurrency).
pub fn capacity(num_blocks: i64, l: &Layout) -> (i64, f64) {
    let per_request = l.max_model_len.div_ceil(l.block_size.max(1)).max(1);
    let concurrency = num_blocks as f64 / per_request as f64;
    ((concurrency * l.max_model_len as f64) as i64, concurrency)
}

fn gib(b: i64) -> String {
    // vLLM's format_gib: str(round(b / 2^30, 2)).
    super::pyfloat::py_repr(super::pyfloat::py_round(b as f64 / GIB, 2))
}

/// `_check_enough_kv_cache_memory` of 0.26 on `available`.
pub fn check(available: i64, l: &Layout) -> Option<String> {
    if available <= 0 {
        return Some(
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` \
             when initializing the engine (this flag also controls CPU memory reservation on the \
             CPU backend, despite its name). See \
             https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
                .into(),
        );
    }
    let per_block = (l.page_size_bytes * l.num_layers) as i64;
    let needed = l.max_model_len.div_ceil(l.block_size.max(1)) as i64 * per_block;
    if needed <= available {
        return None;
    }
    let estimated = py_floordiv_int(available, per_block.max(1)) * l.block_size as i64;
    let estimated_msg = if estimated > 0 {
        format!(
            "Based on the available memory, the estimated maximum model length is {estimated}. "
        )
    } else {
        String::new()
    };
    Some(format!(
        "To serve at least one request with the model's max seq len ({}), ({} GiB KV cache is \
         needed, which is larger than the available KV cache memory ({} GiB). {estimated_msg}Try \
         increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) \
         or decreasing `max_model_len` when initializing the engine. See \
         https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
        l.max_model_len,
        gib(needed),
        gib(available)
    ))
}

/// The budget of one worker.
pub fn budget(i: &Inputs, printed: &Printed, l: &Layout) -> Budget {
    let mut conflicts = Vec::new();
    let sum = i.weights + i.activation + i.non_torch;
    let printed_available = printed.available_gib.map(Bytes::printed_gib);
    let requested = match (i.kv_cache_memory, i.gpu_memory_utilization) {
        (Some(_), _) => Bytes::ZERO,
        (None, Some(u)) => Bytes {
            lo: requested(i.total.lo, u),
            hi: requested(i.total.hi, u),
        },
        // Unknown utilization: what the printed budget and the non-KV terms add up to.
        (None, None) => {
            let avail = printed_available.unwrap_or(Bytes {
                lo: 0,
                hi: i.total.hi,
            });
            let r = sum + i.cudagraph_estimate + avail;
            r.meet(Bytes {
                lo: 0,
                hi: i.total.hi,
            })
            .unwrap_or(r)
        }
    };
    let mut non_kv = sum;
    let mut narrow = |what: &str, by: Bytes, non_kv: &mut Bytes| match non_kv.meet(by) {
        Some(b) => *non_kv = b,
        None => {
            conflicts.push(format!(
                "{what} puts the non-KV memory in [{}, {}] bytes, outside the inputs' [{}, {}]",
                by.lo, by.hi, non_kv.lo, non_kv.hi
            ));
            *non_kv = by;
        }
    };
    if i.kv_cache_memory.is_none() && i.gpu_memory_utilization.is_some() {
        if let Some(g) = printed.available_gib {
            let by = requested - i.cudagraph_estimate - Bytes::printed_gib(g);
            narrow("the printed 'Available KV cache memory'", by, &mut non_kv);
        }
        if let (Some(s), Some(cg)) = (printed.suggestion_bytes, i.cudagraph) {
            let by = requested - Bytes::exact(SUGGESTION_BUFFER_BYTES + s) - cg;
            narrow("the printed --kv-cache-memory suggestion", by, &mut non_kv);
        }
    }
    let available = match (
        i.kv_cache_memory,
        i.gpu_memory_utilization,
        printed_available,
    ) {
        (Some(b), ..) => Bytes::exact(b),
        (None, Some(_), _) => requested - non_kv - i.cudagraph_estimate,
        (None, None, Some(p)) => p,
        (None, None, None) => Bytes {
            lo: 0,
            hi: i.total.hi,
        },
    };
    let activation = (non_kv - i.weights - i.non_torch)
        .meet(i.activation)
        .unwrap_or(i.activation);
    let buffer = Bytes::exact(SUGGESTION_BUFFER_BYTES);
    let suggestion = i.cudagraph.map(|cg| requested - non_kv - cg - buffer);
    let suggestion_full = i.cudagraph.map(|cg| i.init_free - non_kv - cg - buffer);
    let b = (blocks(available.lo, l), blocks(available.hi, l));
    let (t_lo, c_lo) = capacity(b.0, l);
    let (t_hi, c_hi) = capacity(b.1, l);
    Budget {
        requested,
        non_kv,
        available,
        blocks: b,
        tokens: (t_lo, t_hi),
        concurrency: (c_lo, c_hi),
        suggestion,
        suggestion_full,
        activation,
        conflicts,
        error: check(available.lo, l),
    }
}

/// The smallest `gpu_memory_utilization` (two decimals) whose budget passes the checks with
/// the same non-KV memory; `None` if even 1.0 does not.
pub fn smallest_utilization(i: &Inputs, printed: &Printed, l: &Layout) -> Option<f64> {
    let non_kv = budget(i, printed, l).non_kv;
    (1..=100).map(|k| k as f64 / 100.0).find(|u| {
        let available = requested(i.total.hi, *u) - non_kv.hi - i.cudagraph_estimate.hi;
        check(available, l).is_none()
    })
}

#[cfg(test)]
#[path = "vllm_budget_tests.rs"]
mod tests;
