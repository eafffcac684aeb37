//! The model code against a plain float64 transformer written here from the papers, on tiny
//! random models of every supported architecture (llama: adjacent-pair RoPE; qwen2: q/k/v biases
//! and NeoX RoPE; qwen3: q/k norms; gemma3: scaled embeddings, q/k norms, post-norms, GELU,
//! interleaved sliding-window and global layers with two RoPE bases, tied output), over a
//! multi-token prompt with GQA. Independent of llama.cpp.

mod common;

use common::tiny::{TinySpec, tiny_gguf, tiny_rope_freqs};
use ultra::Cpu;
use ultra::gguf::Gguf;
use ultra::kv_cache::CacheLayout;
use ultra::model::{Batch, Runner};
use ultra::quant::dequantize_row;

/// A tensor as f64 rows.
fn tensor(g: &Gguf, name: &str) -> Vec<Vec<f64>> {
    let t = g.tensor(name).unwrap_or_else(|| panic!("{name}"));
    let mut v = vec![0f32; t.rows() * t.cols()];
    dequantize_row(t.format().unwrap(), g.tensor_bytes(t).bytes(), &mut v);
    v.chunks(t.cols()).map(|r| r.iter().map(|&x| x as f64).collect()).collect()
}

fn matvec(w: &[Vec<f64>], x: &[f64]) -> Vec<f64> {
    w.iter().map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum()).collect()
}

fn rms_norm(x: &[f64], g: &[f64]) -> Vec<f64> {
    let s = 1.0 / (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64 + 1e-5).sqrt();
    x.iter().zip(g).map(|(v, g)| v * s * g).collect()
}

/// Rotates each head of `x` by position `pos` with RoPE base `base` and per-pair frequency
/// factors `ff` (Llama 3's rope_freqs; all 1 without): pairs (2i, 2i+1) for llama, (i, i + hd/2)
/// (NeoX) for the others.
fn rope(x: &mut [f64], hd: usize, pos: usize, base: f64, ff: &[f64], neox: bool) {
    for head in x.chunks_mut(hd) {
        for (i, f) in ff.iter().enumerate().take(hd / 2) {
            let theta = pos as f64 * base.powf(-2.0 * i as f64 / hd as f64) / f;
            let (a, b) = if neox { (i, i + hd / 2) } else { (2 * i, 2 * i + 1) };
            let (x0, x1) = (head[a], head[b]);
            head[a] = x0 * theta.cos() - x1 * theta.sin();
            head[b] = x0 * theta.sin() + x1 * theta.cos();
        }
    }
}

/// Each head of `x` RMS-normed with gain `g` [hd] (qwen3's and gemma3's q/k norms).
fn head_norm(x: &[f64], g: &[f64]) -> Vec<f64> {
    x.chunks(g.len()).flat_map(|head| rms_norm(head, g)).collect()
}

/// The tanh GELU of the Gemma papers and HF's `gelu_pytorch_tanh`.
fn gelu(g: f64) -> f64 {
    0.5 * g * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (g + 0.044715 * g * g * g)).tanh())
}

/// Logits at every position of `tokens`. gemma3 (written from HF's modeling_gemma3.py and the
/// Gemma 3 report): embeddings × sqrt(d_model); q/k norms; attention scale head_dim^-1/2
/// (query_pre_attn_scalar = head_dim); every 6th layer global with RoPE base 1e6, the others
/// local over the last `window` keys with base 1e4; post-attention and post-FFN norms; GELU gate;
/// logits from the embedding matrix.
fn reference_logits(g: &Gguf, spec: &TinySpec, tokens: &[u32]) -> Vec<Vec<f64>> {
    let hd = spec.d_model / spec.n_heads;
    let (neox, biases, qk_norm, gemma) = (
        spec.arch != "llama",
        spec.arch == "qwen2",
        spec.arch != "llama" && spec.arch != "qwen2",
        spec.arch == "gemma3",
    );
    let group = spec.n_heads / spec.n_kv_heads;
    let ff: Vec<f64> = match spec.rope_freqs {
        true => tiny_rope_freqs(hd).iter().map(|&v| f64::from(v)).collect(),
        false => vec![1.0; hd / 2],
    };
    let embed = tensor(g, "token_embd.weight");
    let embed_scale = if gemma { (spec.d_model as f64).sqrt() } else { 1.0 };
    let mut xs: Vec<Vec<f64>> =
        tokens.iter().map(|&t| embed[t as usize].iter().map(|v| v * embed_scale).collect()).collect();
    for l in 0..spec.n_layers {
        let w = |n: &str| tensor(g, &format!("blk.{l}.{n}.weight"));
        let bias = |n: &str, len: usize| {
            if biases { tensor(g, &format!("blk.{l}.{n}.bias"))[0].clone() } else { vec![0.0; len] }
        };
        let local = gemma && l % 6 < 5;
        let base = if gemma && !local { 1e6 } else { 1e4 };
        let first = |t: usize| if local { (t + 1).saturating_sub(spec.window) } else { 0 };
        let (wq, wk, wv, wo) = (w("attn_q"), w("attn_k"), w("attn_v"), w("attn_output"));
        let (bq, bk, bv) = (bias("attn_q", wq.len()), bias("attn_k", wk.len()), bias("attn_v", wv.len()));
        let (mut qs, mut ks, mut vs) = (Vec::new(), Vec::new(), Vec::new());
        for (pos, x) in xs.iter().enumerate() {
            let h = rms_norm(x, &w("attn_norm")[0]);
            let add = |a: Vec<f64>, b: &[f64]| a.iter().zip(b).map(|(x, y)| x + y).collect::<Vec<f64>>();
            let (mut q, mut k) = (add(matvec(&wq, &h), &bq), add(matvec(&wk, &h), &bk));
            if qk_norm {
                q = head_norm(&q, &w("attn_q_norm")[0]);
                k = head_norm(&k, &w("attn_k_norm")[0]);
            }
            rope(&mut q, hd, pos, base, &ff, neox);
            rope(&mut k, hd, pos, base, &ff, neox);
            qs.push(q);
            ks.push(k);
            vs.push(add(matvec(&wv, &h), &bv));
        }
        for (t, x) in xs.iter_mut().enumerate() {
            let mut att = vec![0f64; spec.d_model];
            for h in 0..spec.n_heads {
                let kvh = h / group;
                let q = &qs[t][h * hd..(h + 1) * hd];
                let keys = first(t)..=t;
                let scores: Vec<f64> = keys
                    .clone()
                    .map(|j| {
                        q.iter().zip(&ks[j][kvh * hd..(kvh + 1) * hd]).map(|(a, b)| a * b).sum::<f64>()
                            / (hd as f64).sqrt()
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = scores.iter().map(|s| (s - m).exp()).sum();
                for (j, s) in keys.zip(&scores) {
                    for i in 0..hd {
                        att[h * hd + i] += (s - m).exp() / z * vs[j][kvh * hd + i];
                    }
                }
            }
            let mut o = matvec(&wo, &att);
            if gemma {
                o = rms_norm(&o, &w("post_attention_norm")[0]);
            }
            x.iter_mut().zip(o).for_each(|(a, b)| *a += b);
            let h = rms_norm(x, &w("ffn_norm")[0]);
            let (gate, up) = (matvec(&w("ffn_gate"), &h), matvec(&w("ffn_up"), &h));
            let act: Vec<f64> = match gemma {
                true => gate.iter().zip(&up).map(|(&g, u)| gelu(g) * u).collect(),
                false => gate.iter().zip(&up).map(|(g, u)| g / (1.0 + (-g).exp()) * u).collect(),
            };
            let mut f = matvec(&w("ffn_down"), &act);
            if gemma {
                f = rms_norm(&f, &w("post_ffw_norm")[0]);
            }
            x.iter_mut().zip(f).for_each(|(a, b)| *a += b);
        }
    }
    let norm = tensor(g, "output_norm.weight");
    let out = if gemma { embed } else { tensor(g, "output.weight") };
    xs.iter().map(|x| matvec(&out, &rms_norm(x, &norm[0]))).collect()
}

#[test]
fn the_forward_pass_matches_a_float64_transformer_for_every_architecture() {
    let tokens = [1u32, 7, 3, 15, 0, 9, 9, 4, 12, 2, 5];
    // (arch, with Llama 3's rope_freqs)
    for (arch, rope_freqs) in [("llama", false), ("llama", true), ("qwen2", false), ("qwen3", false), ("gemma3", false)]
    {
        // gemma3: 7 layers (0-4 and 6 local, 5 global), a window of 4 keys over 11 tokens.
        let n_layers = if arch == "gemma3" { 7 } else { 2 };
        let spec = TinySpec { arch, n_layers, n_heads: 4, n_kv_heads: 2, window: 4, rope_freqs, ..TinySpec::default() };
        let g = tiny_gguf(&spec);
        let expected = reference_logits(&g, &spec, &tokens);
        let mut runner = Runner::load(Cpu::exact(), &g, CacheLayout::plain(1, 64), 64).unwrap();
        let seq = runner.cache.add_seq();
        runner.forward(&Batch::sequence(seq, 0, &tokens, true)).unwrap();
        let mut worst = 0f64;
        for (t, want) in expected.iter().enumerate() {
            for (got, want) in runner.logits(t).iter().zip(want) {
                worst = worst.max((*got as f64 - want).abs());
            }
        }
        // f32 arithmetic over two small layers: errors of order 1e-6 of logits of order 1.
        assert!(worst < 1e-4, "{arch} (rope_freqs {rope_freqs}): max |Δ| {worst} vs the f64 transformer");
    }
}
