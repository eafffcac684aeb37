//! Token sampling: one row of logits in, one token id out, in llama.cpp's common sampler order.
//! `distribution` exposes the final processed probabilities, which speculative decoding needs for
//! its accept test and residual draw. Seeded and deterministic; no allocation per token.

use std::cmp::Ordering;

use crate::backend::sanitize;
use crate::error::{Error, Result};

/// How to pick the next token. The default is greedy decoding with every filter off.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// Softmax temperature; 0 means greedy (argmax).
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens; 0 turns it off.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches `top_p`; 1 turns it off.
    pub top_p: f32,
    /// Keep tokens at least `min_p` times as likely as the most likely one; 0 turns it off.
    pub min_p: f32,
    /// Penalty for tokens seen in the last `repeat_last_n` of the history; 1 turns it off.
    pub repeat_penalty: f32,
    /// How many of the most recent history tokens the penalties look at; 0 turns them off.
    pub repeat_last_n: usize,
    /// OpenAI's frequency penalty: subtracted from a logit once per occurrence in the window; 0 is off.
    pub frequency_penalty: f32,
    /// OpenAI's presence penalty: subtracted once from the logit of every token in the window; 0 is off.
    pub presence_penalty: f32,
    /// Seeds the random generator: equal seeds and equal inputs give equal tokens.
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        Self {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            seed: 0,
        }
    }
}

impl SamplerConfig {
    /// Temperature 0: the sampler returns the argmax and never draws a random number.
    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    /// Some penalty moves logits by the history, so the device's argmax or top-k cannot decide.
    pub fn is_penalized(&self) -> bool {
        self.repeat_last_n > 0
            && (self.repeat_penalty != 1.0 || self.frequency_penalty != 0.0 || self.presence_penalty != 0.0)
    }

    /// Checks every field's range, so that sampling itself cannot fail.
    pub fn validate(&self) -> Result<()> {
        let unit = 0.0..=1.0;
        check(self.temperature.is_finite() && self.temperature >= 0.0, "temperature must be ≥ 0", self.temperature)?;
        check(unit.contains(&self.top_p), "top_p must be in [0, 1]", self.top_p)?;
        check(unit.contains(&self.min_p), "min_p must be in [0, 1]", self.min_p)?;
        check(
            self.repeat_penalty.is_finite() && self.repeat_penalty > 0.0,
            "repeat_penalty must be > 0",
            self.repeat_penalty,
        )?;
        let additive = -2.0..=2.0;
        check(
            additive.contains(&self.frequency_penalty),
            "frequency_penalty must be in [-2, 2]",
            self.frequency_penalty,
        )?;
        check(additive.contains(&self.presence_penalty), "presence_penalty must be in [-2, 2]", self.presence_penalty)
    }
}

fn check(ok: bool, rule: &str, value: f32) -> Result<()> {
    if ok { Ok(()) } else { Err(Error::InvalidArgument(format!("sampler: {rule}, got {value}"))) }
}

/// Picks tokens from logits. The transforms run in llama.cpp's common sampler chain order:
///
/// 1. repetition penalty: for each distinct token in the last `repeat_last_n` of the history,
///    a logit > 0 is divided by `repeat_penalty`, any other is multiplied by it (CTRL style);
/// 2. top-k: keep the `top_k` highest logits;
/// 3. top-p: keep the smallest most-likely set whose probability (softmax at temperature 1 over
///    the top-k set) reaches `top_p`, at least one token;
/// 4. min-p: keep tokens with p ≥ `min_p` · p_max;
/// 5. temperature: divide the kept logits by `temperature`;
/// 6. softmax over the kept tokens, then one inverse-CDF draw.
///
/// The draw walks the kept tokens in rank order after top-k or top-p, in id order otherwise.
/// `sample_top_k` (sampler/candidates.rs) gives the same tokens from a row's device top-k.
///
/// Greedy (temperature 0) is the argmax of the penalized logits. Every tie, in greedy, top-k and
/// top-p, goes to the lowest token id. NaN logits count as −∞, +∞ as `f32::MAX`; tokens at −∞
/// get probability 0 and are never drawn, and if every logit is −∞ the result is token 0.
/// Empty logits give token 0 and an empty distribution; history ids outside the vocabulary are
/// ignored.
#[derive(Clone, Debug)]
pub struct Sampler {
    config: SamplerConfig,
    rng: Xoshiro256,
    /// (token id, logit, then probability); up to vocab_size entries, reused across calls.
    candidates: Vec<(u32, f32)>,
    /// The distinct ids in the penalty window; reused across calls.
    recent: Vec<u32>,
    /// A logits row rebuilt from candidates that hold the whole vocabulary; reused across calls.
    dense: Vec<f32>,
}

impl Sampler {
    /// A sampler whose random stream starts from `config.seed`.
    pub fn new(config: SamplerConfig) -> Result<Self> {
        config.validate()?;
        let rng = Xoshiro256::new(config.seed);
        Ok(Self { config, rng, candidates: Vec::new(), recent: Vec::new(), dense: Vec::new() })
    }

    /// The validated settings this sampler runs with.
    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// The next token for `logits` ([vocab_size]) after `history`. Draws one random number unless
    /// greedy.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> u32 {
        if self.config.is_greedy() {
            self.load(logits, history);
            return argmax(&self.candidates);
        }
        let u = self.rng.next_f64();
        pick(self.probs(logits, history).iter().copied(), u)
    }

    /// The kept tokens and their final probabilities (summing to 1), in no particular order.
    /// Greedy gives the argmax with probability 1.
    pub fn probs(&mut self, logits: &[f32], history: &[u32]) -> &[(u32, f32)] {
        self.load(logits, history);
        if self.config.is_greedy() {
            one_hot(&mut self.candidates);
        } else {
            self.truncate();
            self.softmax();
        }
        &self.candidates
    }

    /// The final distribution as a dense vector: `dst[id]` is the probability of token `id`
    /// ([vocab_size], 0 for dropped tokens). Does not touch the random stream; `&mut` is only for
    /// the reused scratch buffers.
    pub fn distribution(&mut self, logits: &[f32], history: &[u32], dst: &mut Vec<f32>) {
        dst.clear();
        dst.resize(logits.len(), 0.0);
        for &(id, p) in self.probs(logits, history) {
            dst[id as usize] = p;
        }
    }

    /// Draws a token id from `weights` ([vocab_size]) with the sampler's random stream. The weights
    /// need not sum to 1 (a speculative residual max(0, p − q) can be passed as is); zero,
    /// negative and NaN weights are never drawn. All-zero weights give token 0.
    pub fn sample_from(&mut self, weights: &[f32]) -> u32 {
        let u = self.rng.next_f64();
        pick(weights.iter().enumerate().map(|(id, &w)| (id as u32, w)), u)
    }

    /// Uniform in [0, 1) from the sampler's random stream, for speculative accept tests.
    pub fn uniform(&mut self) -> f32 {
        // 24 bits: exactly the f32 mantissa, so the result is never rounded up to 1.
        (self.rng.next_u64() >> 40) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    /// Fills `candidates` with every token's sanitized logit, in id order, and applies the penalty.
    fn load(&mut self, logits: &[f32], history: &[u32]) {
        self.candidates.clear();
        self.candidates.extend(logits.iter().enumerate().map(|(id, &logit)| (id as u32, sanitize(logit))));
        self.penalize(history);
    }

    /// The repetition penalty, then the frequency and presence penalties (llama.cpp's order),
    /// over the last `repeat_last_n` history tokens.
    fn penalize(&mut self, history: &[u32]) {
        let SamplerConfig { repeat_penalty: penalty, frequency_penalty, presence_penalty, repeat_last_n, .. } =
            self.config;
        if !self.config.is_penalized() {
            return;
        }
        // llama.cpp applies the repetition penalty once however often a token repeats, so the
        // window is deduplicated; the frequency penalty counts the repeats (runs of the sort).
        let window = &history[history.len().saturating_sub(repeat_last_n)..];
        self.recent.clear();
        self.recent.extend_from_slice(window);
        self.recent.sort_unstable();
        for run in self.recent.chunk_by(|a, b| a == b) {
            if let Some((_, logit)) = self.candidates.get_mut(run[0] as usize) {
                let repeated = if *logit > 0.0 { *logit / penalty } else { *logit * penalty };
                *logit = sanitize(repeated - run.len() as f32 * frequency_penalty - presence_penalty);
            }
        }
    }

    /// Top-k, then top-p, then min-p, all on temperature-1 probabilities. Leaves only the kept
    /// tokens in `candidates`.
    fn truncate(&mut self) {
        let SamplerConfig { top_k, top_p, min_p, .. } = self.config;
        let candidates = &mut self.candidates;
        if top_k > 0 && top_k < candidates.len() {
            candidates.select_nth_unstable_by(top_k - 1, by_rank);
            candidates.truncate(top_k);
            // Rank order rather than select_nth's arbitrary one, so that the sums and the draw
            // below depend only on the kept set: device candidates then reproduce them exactly.
            candidates.sort_unstable_by(by_rank);
        }
        let max = max_logit(candidates);
        if max == f32::NEG_INFINITY {
            return; // Nothing has any mass (or nothing is left); softmax handles it.
        }
        // Top-p normalizes over the top-k set, before min-p removes anything.
        let z: f64 = if top_p < 1.0 { candidates.iter().map(|&(_, logit)| weight(logit, max)).sum() } else { 0.0 };
        if min_p > 0.0 {
            // p ≥ min_p·p_max ⇔ logit ≥ max + ln(min_p). Top-p and min-p each keep a prefix of the
            // same rank order, so cutting min-p first keeps the same set, needs no sort, and
            // shrinks what top-p has to sort.
            let floor = max + min_p.ln();
            candidates.retain(|&(_, logit)| logit >= floor);
        }
        if top_p < 1.0 {
            let n = nucleus_len(candidates, top_p as f64 * z, max);
            candidates.truncate(n);
        }
    }

    /// Kept logits → probabilities at the configured temperature.
    fn softmax(&mut self) {
        let candidates = &mut self.candidates;
        let max = max_logit(candidates);
        if max == f32::NEG_INFINITY {
            one_hot(candidates);
            return;
        }
        let temperature = self.config.temperature;
        let mut sum = 0.0f64;
        for (_, x) in candidates.iter_mut() {
            // Divide, not multiply by 1/T: a tiny T makes 1/T infinite, and 0·∞ is NaN.
            *x = ((*x - max) / temperature).exp();
            sum += *x as f64;
        }
        // sum ≥ 1: the max itself contributes exp(0).
        let scale = (1.0 / sum) as f32;
        candidates.iter_mut().for_each(|(_, x)| *x *= scale);
    }
}

/// Higher logit first, then lower id: a total order, so every tie goes to the lowest id.
fn by_rank(a: &(u32, f32), b: &(u32, f32)) -> Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// The top candidate in `by_rank` order, as a plain loop: this is the whole of greedy decoding.
fn argmax(candidates: &[(u32, f32)]) -> u32 {
    let Some(&(mut best_id, mut best)) = candidates.first() else { return 0 };
    for &(id, logit) in candidates {
        // Sanitized logits are never NaN or −0.0, so `>` and `==` agree with `total_cmp`.
        if logit > best || (logit == best && id < best_id) {
            (best_id, best) = (id, logit);
        }
    }
    best_id
}

/// Replaces the candidates with the argmax at probability 1 (nothing, if there are none).
fn one_hot(candidates: &mut Vec<(u32, f32)>) {
    if !candidates.is_empty() {
        let id = argmax(candidates);
        candidates.clear();
        candidates.push((id, 1.0));
    }
}

fn max_logit(candidates: &[(u32, f32)]) -> f32 {
    candidates.iter().fold(f32::NEG_INFINITY, |max, &(_, logit)| max.max(logit))
}

/// exp(logit − max) in f64, so that sums over 10⁵ tokens stay accurate.
fn weight(logit: f32, max: f32) -> f64 {
    ((logit - max) as f64).exp()
}

/// Length of the shortest rank-order prefix whose weight reaches `target`, at least 1 (all of
/// them if rounding keeps the sum short). Sorts only a head that grows ×8 until it holds the
/// nucleus: O(vocab) for the peaked distributions of LLMs, where a full sort is O(vocab·log vocab).
fn nucleus_len(candidates: &mut [(u32, f32)], target: f64, max: f32) -> usize {
    let mut head = candidates.len().min(64);
    loop {
        if head < candidates.len() {
            candidates.select_nth_unstable_by(head - 1, by_rank);
        }
        candidates[..head].sort_unstable_by(by_rank);
        let mut sum = 0.0;
        for (i, &(_, logit)) in candidates[..head].iter().enumerate() {
            sum += weight(logit, max);
            if sum >= target {
                return i + 1;
            }
        }
        if head == candidates.len() {
            return head;
        }
        head = (head * 8).min(candidates.len());
    }
}

/// Inverse-CDF draw: the first entry whose running sum passes `u`·total. The sum must strictly
/// grow past the target, so zero-weight entries are never chosen.
fn pick(weights: impl Iterator<Item = (u32, f32)> + Clone, u: f64) -> u32 {
    // `w > 0.0` is false for NaN too.
    let positive = |w: f32| if w > 0.0 { w as f64 } else { 0.0 };
    let total: f64 = weights.clone().map(|(_, w)| positive(w)).sum();
    let target = u * total;
    let (mut sum, mut last) = (0.0, 0);
    for (id, w) in weights.filter(|&(_, w)| w > 0.0) {
        sum += positive(w);
        last = id;
        if sum > target {
            return id;
        }
    }
    last // Reached only through rounding at the very top (or with no positive weight at all).
}

/// xoshiro256** (Blackman and Vigna, <https://prng.di.unimi.it/>), seeded through splitmix64 as
/// its authors recommend: fast, small, and the same stream on every platform.
#[derive(Clone, Debug)]
struct Xoshiro256 {
    s: [u64; 4],
}

impl Xoshiro256 {
    fn new(seed: u64) -> Self {
        // splitmix64 is a bijection of a counter, so the state is never all zero.
        let mut x = seed;
        Self { s: std::array::from_fn(|_| splitmix64(&mut x)) }
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

mod candidates;
#[cfg(test)]
mod tests;
