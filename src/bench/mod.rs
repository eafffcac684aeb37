//! Throughput measurements behind `ultra bench`, one file per mode:
//! - `decode`: llama-bench's pp/tg — prefill p tokens in one batch, decode n one at a time;
//! - `batch`: aggregate decode tok/s of B sequences decoded together, one forward pass per step;
//! - `speculative`: acceptance and speedup of each drafter against plain greedy decoding;
//! - `offload`: tok/s with N layers resident and the rest streamed, and the bandwidth achieved;
//! - `serve`: a load generator for `ultra serve` (aggregate tok/s, TTFT, inter-token latency).
//!
//! Every figure is the median of several runs after a warm-up, with min and max, because the
//! machines these run on are shared and noisy.

pub mod batch;
pub mod decode;
pub mod offload;
pub mod prompts;
pub mod serve;
pub mod speculative;

pub use batch::{BatchPoint, BatchReport, bench_batch};
pub use decode::{BenchReport, bench, decode_weight_bytes};
pub use prompts::bench_prompts;
pub use speculative::{DraftSource, SpecPoint, SpecPrompt, SpecReport, bench_speculative, target_layout};

/// Median, min and max of per-run figures (tok/s, rates or ratios).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Throughput {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: Vec<f64>,
}

impl Throughput {
    pub fn from_runs(mut runs: Vec<f64>) -> Throughput {
        runs.sort_by(f64::total_cmp);
        let n = runs.len();
        let median = if n == 0 {
            0.0
        } else if n % 2 == 1 {
            runs[n / 2]
        } else {
            (runs[n / 2 - 1] + runs[n / 2]) / 2.0
        };
        Throughput { median, min: runs.first().copied().unwrap_or(0.0), max: runs.last().copied().unwrap_or(0.0), runs }
    }
}

/// Deterministic pseudo-random token ids (what they are does not change the work done);
/// different seeds give different prompts, so a prefix cache cannot share them.
pub fn prompt_ids(n: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ seed.wrapping_mul(0x2545_f491_4f6c_dd1d);
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % vocab as u64) as u32
        })
        .collect()
}

/// The 1, 5 and 15 minute load averages (Linux), recorded with the figures: on a shared
/// machine they say how much the numbers can be trusted.
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|s| s.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}
