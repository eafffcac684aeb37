//! Sampler tests: each transform against a distribution computed by hand, the whole chain against
//! a naive full-sort oracle on a large vocabulary, and empirical draw frequencies against
//! `distribution`.

use proptest::prelude::*;

use super::*;

const INF: f32 = f32::INFINITY;

/// Temperature 1 with every filter off: the plain softmax.
fn sampling() -> SamplerConfig {
    SamplerConfig { temperature: 1.0, seed: 42, ..SamplerConfig::default() }
}

fn distribution(config: SamplerConfig, logits: &[f32], history: &[u32]) -> Vec<f32> {
    let mut dst = Vec::new();
    Sampler::new(config).unwrap().distribution(logits, history, &mut dst);
    dst
}

/// The expected answer, computed directly: softmax(logits / temperature) over `kept`, 0 elsewhere.
fn softmax_over(logits: &[f64], kept: &[usize], temperature: f64) -> Vec<f32> {
    let max = kept.iter().map(|&id| logits[id]).fold(f64::NEG_INFINITY, f64::max);
    let mut p = vec![0.0; logits.len()];
    for &id in kept {
        p[id] = ((logits[id] - max) / temperature).exp();
    }
    let sum: f64 = p.iter().sum();
    p.iter().map(|x| (x / sum) as f32).collect()
}

fn ln(probs: &[f64]) -> Vec<f64> {
    probs.iter().map(|p| p.ln()).collect()
}

fn f32s(values: &[f64]) -> Vec<f32> {
    values.iter().map(|&x| x as f32).collect()
}

fn assert_close(actual: &[f32], expected: &[f32]) {
    assert_eq!(actual.len(), expected.len(), "length");
    for (id, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!((a - e).abs() <= 1e-6, "token {id}: got {a}, expected {e}\n  got {actual:?}\n  expected {expected:?}");
    }
}

#[test]
fn greedy_picks_the_argmax_and_the_lowest_id_on_ties() {
    let mut greedy = Sampler::new(SamplerConfig::default()).unwrap();
    assert_eq!(greedy.sample(&[1.0, 3.0, 2.0, 3.0], &[]), 1);
    assert_eq!(greedy.sample(&[-1.0, -0.0, 0.0], &[]), 1, "−0.0 and +0.0 tie");
    assert_eq!(greedy.sample(&[f32::NAN, 1.0], &[]), 1, "NaN counts as −∞");
    assert_eq!(greedy.sample(&[-INF, -INF], &[]), 0);
    assert_eq!(greedy.sample(&[1.0, INF, INF], &[]), 1);
}

#[test]
fn greedy_uses_penalized_logits_and_never_draws() {
    let config = SamplerConfig { repeat_penalty: 1.1, ..SamplerConfig::default() };
    let mut greedy = Sampler::new(config.clone()).unwrap();
    assert_eq!(greedy.sample(&[2.0, 1.9], &[]), 0);
    assert_eq!(greedy.sample(&[2.0, 1.9], &[0]), 1, "2 / 1.1 < 1.9");
    assert_eq!(distribution(config.clone(), &[2.0, 1.9], &[0]), [0.0, 1.0]);
    // Greedy sampling leaves the random stream where a fresh sampler's starts.
    assert_eq!(greedy.uniform(), Sampler::new(config).unwrap().uniform());
}

#[test]
fn repeat_penalty_divides_positive_and_multiplies_negative_logits() {
    let logits = [2.0, -1.0, 0.5, 3.0, -2.0];
    // Window of 4: [0, 1, 0, 99]. Token 0 is penalized once, 3 is outside the window, 99 outside
    // the vocabulary.
    let config = SamplerConfig { repeat_penalty: 2.0, repeat_last_n: 4, ..sampling() };
    let penalized = [1.0, -2.0, 0.5, 3.0, -2.0];
    let all = [0, 1, 2, 3, 4];
    assert_close(&distribution(config.clone(), &logits, &[3, 0, 1, 0, 99]), &softmax_over(&penalized, &all, 1.0));
    // A penalty below 1 rewards instead, with the same rule.
    let config = SamplerConfig { repeat_penalty: 0.5, ..config };
    let rewarded = [4.0, -0.5, 0.5, 3.0, -2.0];
    assert_close(&distribution(config, &logits, &[3, 0, 1, 0, 99]), &softmax_over(&rewarded, &all, 1.0));
}

#[test]
fn frequency_penalty_counts_repeats_and_presence_penalty_does_not() {
    let logits = [2.0, -1.0, 0.5, 3.0];
    // Window of 4: [0, 0, 0, 2]; token 3 was seen only before the window.
    let history = [3, 0, 0, 0, 2];
    let config = SamplerConfig { frequency_penalty: 0.5, presence_penalty: 0.25, repeat_last_n: 4, ..sampling() };
    let penalized = [2.0 - 3.0 * 0.5 - 0.25, -1.0, 0.5 - 0.5 - 0.25, 3.0];
    let all = [0, 1, 2, 3];
    assert_close(&distribution(config.clone(), &logits, &history), &softmax_over(&penalized, &all, 1.0));
    assert!(config.is_penalized());
    let truncated = Sampler::new(SamplerConfig { top_k: 2, ..config }).unwrap();
    assert_eq!(truncated.top_k_request(4), None, "penalties need the full row");
    let out_of_range = SamplerConfig { frequency_penalty: 2.5, ..SamplerConfig::default() };
    assert!(Sampler::new(out_of_range).is_err());
}

#[test]
fn empty_history_or_window_means_no_penalty() {
    let logits = [2.0, -1.0, 0.5];
    let plain = softmax_over(&[2.0, -1.0, 0.5], &[0, 1, 2], 1.0);
    let config = SamplerConfig { repeat_penalty: 2.0, ..sampling() };
    assert_close(&distribution(config.clone(), &logits, &[]), &plain);
    assert_close(&distribution(SamplerConfig { repeat_last_n: 0, ..config }, &logits, &[0, 1]), &plain);
}

#[test]
fn top_k_keeps_the_k_highest_and_the_lowest_ids_on_ties() {
    let logits = [1.0, 3.0, 2.0, 3.0, 2.0];
    let wide = [1.0, 3.0, 2.0, 3.0, 2.0];
    let top_k = |k| distribution(SamplerConfig { top_k: k, ..sampling() }, &logits, &[]);
    assert_close(&top_k(3), &softmax_over(&wide, &[1, 2, 3], 1.0));
    assert_close(&top_k(1), &[0.0, 1.0, 0.0, 0.0, 0.0]);
    assert_close(&top_k(5), &softmax_over(&wide, &[0, 1, 2, 3, 4], 1.0));
    assert_close(&top_k(99), &softmax_over(&wide, &[0, 1, 2, 3, 4], 1.0));
}

#[test]
fn top_p_keeps_the_smallest_set_reaching_p() {
    let probs = [0.15, 0.5, 0.05, 0.3];
    let logits = ln(&probs);
    let top_p = |p| distribution(SamplerConfig { top_p: p, ..sampling() }, &f32s(&logits), &[]);
    assert_close(&top_p(0.7), &softmax_over(&logits, &[1, 3], 1.0));
    assert_close(&top_p(0.9), &softmax_over(&logits, &[0, 1, 3], 1.0));
    assert_close(&top_p(0.45), &[0.0, 1.0, 0.0, 0.0]);
    assert_close(&top_p(0.0), &[0.0, 1.0, 0.0, 0.0]);
    assert_close(&top_p(1.0), &softmax_over(&logits, &[0, 1, 2, 3], 1.0));
}

#[test]
fn top_p_ties_keep_the_lowest_ids() {
    // Four equal tokens: 0.25 each, exact in binary, so 0.5 is reached at exactly two tokens.
    let top_p = |p, logits: &[f32]| distribution(SamplerConfig { top_p: p, ..sampling() }, logits, &[]);
    assert_close(&top_p(0.5, &[0.0; 4]), &[0.5, 0.5, 0.0, 0.0]);
    assert_close(&top_p(0.51, &[0.0; 4]), &[1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 0.0]);
    // A cut inside a tie of the top tokens keeps the lower id.
    assert_close(&top_p(0.3, &[0.0, 5.0, 0.0, 5.0]), &[0.0, 1.0, 0.0, 0.0]);
}

#[test]
fn top_p_normalizes_over_the_top_k_set() {
    let logits = ln(&[0.4, 0.3, 0.2, 0.1]);
    let config = SamplerConfig { top_p: 0.5, ..sampling() };
    // Over all four, 0.4 < 0.5 needs a second token; over the top 2, 0.4 / 0.7 ≥ 0.5 does not.
    assert_close(&distribution(config.clone(), &f32s(&logits), &[]), &softmax_over(&logits, &[0, 1], 1.0));
    assert_close(&distribution(SamplerConfig { top_k: 2, ..config }, &f32s(&logits), &[]), &[1.0, 0.0, 0.0, 0.0]);
}

#[test]
fn min_p_keeps_tokens_at_least_min_p_times_the_max() {
    let logits = ln(&[0.5, 0.2, 0.04, 0.26]);
    let min_p = |p, logits: &[f32]| distribution(SamplerConfig { min_p: p, ..sampling() }, logits, &[]);
    assert_close(&min_p(0.5, &f32s(&logits)), &softmax_over(&logits, &[0, 3], 1.0));
    assert_close(&min_p(0.1, &f32s(&logits)), &softmax_over(&logits, &[0, 1, 3], 1.0));
    assert_close(&min_p(1.0, &[2.0, 1.0, 2.0]), &[0.5, 0.0, 0.5]);
}

#[test]
fn top_p_normalizes_before_min_p_cuts() {
    // llama.cpp order: top-p over all four reaches 0.65 at three tokens (0.9); min-p then drops
    // 0.1 < 0.5 · 0.3. Running min-p first would renormalize to thirds and keep only two.
    let logits = ln(&[0.3, 0.3, 0.3, 0.1]);
    let config = SamplerConfig { top_p: 0.65, min_p: 0.5, ..sampling() };
    assert_close(&distribution(config, &f32s(&logits), &[]), &softmax_over(&logits, &[0, 1, 2], 1.0));
}

#[test]
fn temperature_scales_logits_after_truncation() {
    let logits = [1.0, 2.0, 0.5, -1.0];
    for t in [0.05, 0.5, 1.0, 2.0, 100.0] {
        let config = SamplerConfig { temperature: t as f32, ..sampling() };
        assert_close(&distribution(config, &f32s(&logits), &[]), &softmax_over(&logits, &[0, 1, 2, 3], t));
    }
    // Top-p sees temperature-1 probabilities: a hot temperature does not widen the nucleus.
    let logits = ln(&[0.5, 0.3, 0.15, 0.05]);
    let config = SamplerConfig { temperature: 10.0, top_p: 0.7, ..sampling() };
    assert_close(&distribution(config, &f32s(&logits), &[]), &softmax_over(&logits, &[0, 1], 10.0));
}

#[test]
fn infinite_and_nan_logits_give_finite_probabilities() {
    let mut sampler = Sampler::new(SamplerConfig { top_p: 0.99, ..sampling() }).unwrap();
    let logits = [-INF, 1.0, f32::NAN, 0.0, -INF];
    let expected = softmax_over(&[0.0, 1.0, 0.0, 0.0, 0.0], &[1, 3], 1.0);
    let mut dst = Vec::new();
    sampler.distribution(&logits, &[], &mut dst);
    assert_close(&dst, &expected);
    for _ in 0..1000 {
        assert!(matches!(sampler.sample(&logits, &[]), 1 | 3));
    }
    assert_close(&distribution(sampling(), &[-INF, -INF, -INF], &[]), &[1.0, 0.0, 0.0]);
    assert_close(&distribution(sampling(), &[INF, 1.0, INF], &[]), &[0.5, 0.0, 0.5]);
    assert_close(&distribution(sampling(), &[f32::MAX, -f32::MAX, 0.0], &[]), &[1.0, 0.0, 0.0]);
    let tiny = SamplerConfig { temperature: 1e-30, ..sampling() };
    assert_close(&distribution(tiny, &[0.0, 1.0, 1.0 - 1e-6], &[]), &[0.0, 1.0, 0.0]);
}

#[test]
fn empty_logits_give_token_zero_and_an_empty_distribution() {
    for config in [SamplerConfig::default(), sampling(), SamplerConfig { top_p: 0.5, min_p: 0.5, ..sampling() }] {
        let mut sampler = Sampler::new(config.clone()).unwrap();
        assert_eq!(sampler.sample(&[], &[1, 2]), 0);
        assert!(sampler.probs(&[], &[]).is_empty());
        assert!(distribution(config, &[], &[]).is_empty());
    }
    assert_eq!(Sampler::new(sampling()).unwrap().sample_from(&[0.0, 0.0]), 0);
}

#[test]
fn equal_seeds_reproduce_and_different_seeds_differ() {
    let config = SamplerConfig { temperature: 1.5, top_k: 40, repeat_penalty: 1.2, seed: 7, ..sampling() };
    let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 100) as f32 / 20.0).collect();
    let run = |config: SamplerConfig| {
        let mut sampler = Sampler::new(config).unwrap();
        let (mut history, mut outputs) = (Vec::new(), Vec::new());
        for _ in 0..500 {
            history.push(sampler.sample(&logits, &history));
            outputs.push((sampler.sample_from(&logits), sampler.uniform().to_bits()));
        }
        (history, outputs)
    };
    assert_eq!(run(config.clone()), run(config.clone()));
    assert_ne!(run(config.clone()), run(SamplerConfig { seed: 8, ..config }));
}

/// Chi-square critical values at α = 0.001 for 1..=9 degrees of freedom.
const CHI_SQUARE_999: [f64; 9] = [10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88];

/// Draws `n` tokens and checks their frequencies against `expected`: every |freq − p| ≤ 0.005
/// (at n = 200_000 one standard deviation is at most 0.5/√n ≈ 0.0011, so that is ≥ 4.5σ), and
/// the chi-square statistic over the tokens with p > 0 stays below its α = 0.001 critical value.
fn check_frequencies(expected: &[f32], n: usize, mut draw: impl FnMut() -> u32) {
    let mut counts = vec![0usize; expected.len()];
    (0..n).for_each(|_| counts[draw() as usize] += 1);
    let mut chi_square = 0.0;
    for (id, (&count, &p)) in counts.iter().zip(expected).enumerate() {
        let freq = count as f64 / n as f64;
        assert!((freq - p as f64).abs() <= 0.005, "token {id}: frequency {freq}, probability {p}");
        if p > 0.0 {
            chi_square += (count as f64 - n as f64 * p as f64).powi(2) / (n as f64 * p as f64);
        } else {
            assert_eq!(count, 0, "token {id} has probability 0");
        }
    }
    let df = expected.iter().filter(|&&p| p > 0.0).count() - 1;
    assert!(chi_square < CHI_SQUARE_999[df - 1], "chi-square {chi_square} with {df} degrees of freedom");
}

#[test]
fn draw_frequencies_match_the_distribution() {
    let logits = [1.0, 2.5, -0.5, 2.0, 0.3, 3.0, 1.5, -2.0, 0.8, 2.2];
    let history = [5, 5, 1];
    let config = SamplerConfig {
        temperature: 0.8,
        top_k: 8,
        top_p: 0.95,
        min_p: 0.02,
        repeat_penalty: 1.3,
        seed: 3,
        ..SamplerConfig::default()
    };
    let expected = distribution(config.clone(), &logits, &history);
    assert!(expected.iter().filter(|&&p| p > 0.0).count() >= 4, "the test should keep several tokens");
    let mut sampler = Sampler::new(config).unwrap();
    check_frequencies(&expected, 200_000, || sampler.sample(&logits, &history));
}

#[test]
fn sample_from_draws_in_proportion_to_positive_weights() {
    let weights = [0.0, 3.0, -1.0, 1.0, f32::NAN, 4.0];
    let expected = [0.0, 3.0 / 8.0, 0.0, 1.0 / 8.0, 0.0, 4.0 / 8.0];
    let mut sampler = Sampler::new(sampling()).unwrap();
    check_frequencies(&expected, 200_000, || sampler.sample_from(&weights));
}

#[test]
fn uniform_is_in_the_unit_interval_with_mean_one_half() {
    let mut sampler = Sampler::new(sampling()).unwrap();
    let n = 100_000;
    let draws: Vec<f32> = (0..n).map(|_| sampler.uniform()).collect();
    assert!(draws.iter().all(|u| (0.0..1.0).contains(u)));
    // One standard deviation of the mean is 0.289/√n ≈ 0.0009.
    let mean = draws.iter().map(|&u| u as f64).sum::<f64>() / n as f64;
    assert!((mean - 0.5).abs() < 0.005, "mean {mean}");
}

#[test]
fn xoshiro256_matches_the_reference_stream() {
    // State [1, 2, 3, 4], as in the reference implementation's known outputs.
    let mut rng = Xoshiro256 { s: [1, 2, 3, 4] };
    let first: Vec<u64> = (0..4).map(|_| rng.next_u64()).collect();
    assert_eq!(first, [11520, 0, 1509978240, 1215971899390074240]);
}

/// The whole chain the obvious way, in f64, with a full sort: the oracle for large vocabularies.
fn reference(logits: &[f32], history: &[u32], config: &SamplerConfig) -> Vec<f32> {
    let mut l: Vec<f64> = logits.iter().map(|&x| x as f64).collect();
    let window = &history[history.len().saturating_sub(config.repeat_last_n)..];
    let penalty = config.repeat_penalty as f64;
    for (id, x) in l.iter_mut().enumerate() {
        if window.contains(&(id as u32)) {
            *x = if *x > 0.0 { *x / penalty } else { *x * penalty };
        }
    }
    let mut order: Vec<usize> = (0..l.len()).collect();
    order.sort_by(|&a, &b| l[b].total_cmp(&l[a]).then(a.cmp(&b)));
    if config.top_k > 0 {
        order.truncate(config.top_k);
    }
    let p = softmax_over(&l, &order, 1.0);
    let mut sum = 0.0;
    let nucleus = order.iter().position(|&id| {
        sum += p[id] as f64;
        sum >= config.top_p as f64
    });
    order.truncate(nucleus.map_or(order.len(), |i| i + 1));
    let p_max = p[order[0]] as f64;
    order.retain(|&id| p[id] as f64 >= config.min_p as f64 * p_max);
    softmax_over(&l, &order, config.temperature as f64)
}

#[test]
fn large_vocabulary_matches_the_full_sort_oracle() {
    // 50k logits, roughly normal with σ ≈ 2: the nucleus holds thousands of tokens, so top-p's
    // sorted head has to grow several times.
    let mut rng = Xoshiro256::new(11);
    let logits: Vec<f32> =
        (0..50_000).map(|_| (0..4).map(|_| rng.next_f64() as f32).sum::<f32>() * 3.5 - 7.0).collect();
    let history: Vec<u32> = (0..100).map(|i| i * 499).collect();
    let base = SamplerConfig { temperature: 0.7, repeat_penalty: 1.5, ..sampling() };
    let configs = [
        SamplerConfig { top_p: 0.9, ..base.clone() },
        SamplerConfig { top_p: 0.3, ..base.clone() },
        SamplerConfig { top_k: 2000, top_p: 0.8, ..base.clone() },
        SamplerConfig { top_p: 0.95, min_p: 0.05, ..base.clone() },
        SamplerConfig { top_k: 40, min_p: 0.5, ..base.clone() },
    ];
    let mut sampler = Sampler::new(base).unwrap();
    let mut actual = Vec::new();
    for config in configs {
        sampler.config = config.clone();
        sampler.distribution(&logits, &history, &mut actual);
        let expected = reference(&logits, &history, &config);
        assert_close(&actual, &expected);
        let kept = |p: &[f32]| p.iter().filter(|&&x| x > 0.0).count();
        assert_eq!(kept(&actual), kept(&expected), "{config:?}");
    }
}

#[test]
fn buffers_are_reused_after_the_first_call() {
    let logits: Vec<f32> = (0..1000).map(|i| (i % 17) as f32).collect();
    let history: Vec<u32> = (0..64).collect();
    let config = SamplerConfig { top_k: 50, top_p: 0.9, repeat_penalty: 1.1, ..sampling() };
    let mut sampler = Sampler::new(config).unwrap();
    sampler.sample(&logits, &history);
    let buffers = (sampler.candidates.as_ptr(), sampler.recent.as_ptr());
    for _ in 0..10 {
        sampler.sample(&logits, &history);
    }
    assert_eq!((sampler.candidates.as_ptr(), sampler.recent.as_ptr()), buffers);
}

#[test]
fn out_of_range_settings_are_errors() {
    let bad = [
        SamplerConfig { temperature: -1.0, ..sampling() },
        SamplerConfig { temperature: f32::NAN, ..sampling() },
        SamplerConfig { top_p: 1.5, ..sampling() },
        SamplerConfig { min_p: -0.1, ..sampling() },
        SamplerConfig { repeat_penalty: 0.0, ..sampling() },
        SamplerConfig { repeat_penalty: INF, ..sampling() },
    ];
    for config in bad {
        assert!(matches!(Sampler::new(config.clone()), Err(Error::InvalidArgument(_))), "{config:?}");
    }
    assert!(SamplerConfig::default().is_greedy() && !sampling().is_greedy());
}

fn any_logit() -> impl Strategy<Value = f32> {
    prop_oneof![
        8 => -30.0f32..30.0,
        2 => prop::num::f32::NORMAL | prop::num::f32::SUBNORMAL | prop::num::f32::ZERO,
        1 => prop_oneof![Just(-INF), Just(INF), Just(f32::NAN)],
    ]
}

fn any_config() -> impl Strategy<Value = SamplerConfig> {
    let temperature = prop_oneof![Just(0.0f32), 1e-30f32..1e-3, 1e-3f32..20.0];
    let additive = prop_oneof![Just(0.0f32), -2.0f32..=2.0];
    let penalties = (0.01f32..4.0, additive.clone(), additive);
    (temperature, 0usize..12, 0.0f32..=1.0, 0.0f32..=1.0, penalties, 0usize..8, any::<u64>()).prop_map(
        |(
            temperature,
            top_k,
            top_p,
            min_p,
            (repeat_penalty, frequency_penalty, presence_penalty),
            repeat_last_n,
            seed,
        )| {
            SamplerConfig {
                temperature,
                top_k,
                top_p,
                min_p,
                repeat_penalty,
                repeat_last_n,
                frequency_penalty,
                presence_penalty,
                seed,
            }
        },
    )
}

proptest! {
    /// Any logits: the distribution is finite and sums to 1, and a draw has positive probability.
    #[test]
    fn any_logits_give_a_valid_distribution(
        logits in prop::collection::vec(any_logit(), 1..300),
        history in prop::collection::vec(0u32..400, 0..20),
        config in any_config(),
    ) {
        let mut sampler = Sampler::new(config).unwrap();
        let mut dst = Vec::new();
        sampler.distribution(&logits, &history, &mut dst);
        prop_assert!(dst.iter().all(|p| p.is_finite() && (0.0..=1.0).contains(p)), "{dst:?}");
        let sum: f32 = dst.iter().sum();
        prop_assert!((sum - 1.0).abs() < 1e-4, "sum {sum}");
        let token = sampler.sample(&logits, &history) as usize;
        prop_assert!(dst[token] > 0.0, "drew token {token} with probability {}", dst[token]);
    }
}
