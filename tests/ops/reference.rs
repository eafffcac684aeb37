//! The f64 oracle: plain, obviously correct versions of every op, written from the formulas in
//! `Backend`'s docs and independent of any backend's code. Quantized weights are dequantized
//! with `ultra::quant::dequantize_row` by the harness, then everything is computed in f64.

use ultra::backend::{Rope, RopeStyle};

/// dst[i, j] = Σ_l x[i, l] · w[j, l].   x: [m, k]; w: [n, k]
pub fn matmul(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut dst = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            dst[i * n + j] = (0..k).map(|l| f64::from(x[i * k + l]) * f64::from(w[j * k + l])).sum();
        }
    }
    dst
}

/// Each row of d values scaled to unit RMS, times gain.
pub fn rms_norm(x: &[f64], gain: &[f32], eps: f32, d: usize) -> Vec<f64> {
    x.chunks(d)
        .flat_map(|row| {
            let mean_sq = row.iter().map(|v| v * v).sum::<f64>() / d as f64;
            let scale = 1.0 / (mean_sq + f64::from(eps)).sqrt();
            row.iter().zip(gain).map(move |(v, &g)| v * scale * f64::from(g)).collect::<Vec<_>>()
        })
        .collect()
}

/// Rotates each head of each row by its position: pair i turns by
/// pos · freq_scale · theta^(-2i / n_rot) / factors[i].
pub fn rope(x: &[f64], pos: &[u32], r: &Rope, factors: &[f32]) -> Vec<f64> {
    let cols = x.len() / pos.len().max(1);
    let mut y = x.to_vec();
    for (row, &p) in y.chunks_mut(cols.max(1)).zip(pos) {
        for head in row.chunks_mut(r.head_dim) {
            for (i, &ff) in factors.iter().enumerate().take(r.n_rot / 2) {
                let freq = f64::from(r.theta).powf(-2.0 * i as f64 / r.n_rot as f64) / f64::from(ff);
                let angle = f64::from(p) * f64::from(r.freq_scale) * freq;
                let (a, b) = match r.style {
                    RopeStyle::Normal => (2 * i, 2 * i + 1),
                    RopeStyle::Neox => (i, i + r.n_rot / 2),
                };
                let (x0, x1) = (head[a], head[b]);
                head[a] = x0 * angle.cos() - x1 * angle.sin();
                head[b] = x0 * angle.sin() + x1 * angle.cos();
            }
        }
    }
    y
}

pub fn silu_mul(gate: &[f32], up: &[f32]) -> Vec<f64> {
    gate.iter().zip(up).map(|(&g, &u)| f64::from(g) / (1.0 + (-f64::from(g)).exp()) * f64::from(u)).collect()
}

/// gelu_tanh(gate) · up with gelu_tanh(g) = g/2 · (1 + tanh(sqrt(2/π) · (g + 0.044715 g³))), in f64.
pub fn gelu_mul(gate: &[f32], up: &[f32]) -> Vec<f64> {
    let gelu = |g: f64| 0.5 * g * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (g + 0.044715 * g * g * g)).tanh());
    gate.iter().zip(up).map(|(&g, &u)| gelu(f64::from(g)) * f64::from(u)).collect()
}

/// x + y, with y repeated over the rows of x when it is shorter (a bias).
pub fn add(x: &[f32], y: &[f32]) -> Vec<f64> {
    x.iter().enumerate().map(|(i, &a)| f64::from(a) + f64::from(y[i % y.len()])).collect()
}

/// Causal attention for one query head over one sequence's keys and values, laid out
/// contiguously: softmax_j(scale · q · k_j) for j in `keys` (first ..= pos), then Σ_j p_j · v_j.
/// q: [head_dim]; k, v: [seq_len, kv_dim]; the head reads columns kv_col..kv_col + head_dim.
pub fn attention_head(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    kv_dim: usize,
    kv_col: usize,
    keys: std::ops::RangeInclusive<usize>,
    scale: f32,
) -> Vec<f64> {
    let first = *keys.start();
    let head_dim = q.len();
    let row =
        |m: &[f32], j: usize| m[j * kv_dim + kv_col..][..head_dim].iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
    let scores: Vec<f64> =
        keys.map(|j| f64::from(scale) * row(k, j).iter().zip(q).map(|(a, &b)| a * f64::from(b)).sum::<f64>()).collect();
    let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
    let total: f64 = weights.iter().sum();
    let mut out = vec![0.0; head_dim];
    for (j, w) in weights.iter().enumerate() {
        for (o, vj) in out.iter_mut().zip(row(v, first + j)) {
            *o += w / total * vj;
        }
    }
    out
}

/// Index of the first maximum of each row.
pub fn argmax(x: &[f32], vocab: usize) -> Vec<u32> {
    x.chunks(vocab)
        .map(|row| {
            let max = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            row.iter().position(|&v| v == max).unwrap() as u32
        })
        .collect()
}

/// Each row's k best (value desc, index asc) after the sampler's rule (NaN → −∞, +∞ → f32::MAX,
/// −0 → +0), by a full sort, and ln Σ exp of the row by a two-pass f64 sum around the max.
/// Returns ids [rows, k], their values [rows, k] and the log-sum-exps [rows].
pub fn top_k(x: &[f32], vocab: usize, k: usize) -> (Vec<u32>, Vec<f64>, Vec<f64>) {
    let sanitize = |v: f32| if v.is_nan() { f64::NEG_INFINITY } else { f64::from(v.min(f32::MAX)) + 0.0 };
    let (mut ids, mut vals, mut lse) = (Vec::new(), Vec::new(), Vec::new());
    for row in x.chunks(vocab) {
        let v: Vec<f64> = row.iter().map(|&x| sanitize(x)).collect();
        let mut order: Vec<usize> = (0..vocab).collect();
        order.sort_by(|&a, &b| v[b].partial_cmp(&v[a]).unwrap().then(a.cmp(&b)));
        ids.extend(order[..k].iter().map(|&j| j as u32));
        vals.extend(order[..k].iter().map(|&j| v[j]));
        let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = v.iter().map(|&x| (x - max).exp()).sum();
        lse.push(if max == f64::NEG_INFINITY { max } else { max + sum.ln() });
    }
    (ids, vals, lse)
}
