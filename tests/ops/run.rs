//! One function per op: make the case's seeded inputs, run them on the backend, and compute the
//! oracle's answer. Returns (expected, actual) for harness::compare.

use ultra::Backend;
use ultra::backend::{AttnBatch, AttnShape, DType, KvLayer, Tensor, kv_q8};

use crate::cases::{AttnCase, Op};
use crate::harness::{Rng, dequantize, f32_tensor, random_weight, read_f32, read_u32, u32_tensor, upload, widen};
use crate::reference;

type Outcome = ultra::Result<(Vec<f64>, Vec<f64>)>;

pub fn run<B: Backend>(b: &B, op: &Op, rng: &mut Rng) -> Outcome {
    match *op {
        Op::Matmul { format, m, k, n } => {
            let x_host = rng.fill(m * k, -1.0, 1.0);
            let bytes = random_weight(rng, format, n, k);
            let expected = reference::matmul(&x_host, &dequantize(format, &bytes, n, k), m, k, n);
            let (x, w) = (f32_tensor(b, m, k, &x_host)?, upload(b, format, n, k, bytes)?);
            let mut dst = b.alloc(DType::F32, m, n)?;
            b.matmul(&x, &w, &mut dst)?;
            Ok((expected, widen(&read_f32(b, &dst)?)))
        }
        Op::SiluMulMatmul { format, m, k, n } => {
            let (gate_host, up_host) = (rng.fill(m * k, -4.0, 4.0), rng.fill(m * k, -2.0, 2.0));
            let bytes = random_weight(rng, format, n, k);
            let hidden_host: Vec<f32> = reference::silu_mul(&gate_host, &up_host).iter().map(|&v| v as f32).collect();
            let expected = reference::matmul(&hidden_host, &dequantize(format, &bytes, n, k), m, k, n);
            let (gate, up) = (f32_tensor(b, m, k, &gate_host)?, f32_tensor(b, m, k, &up_host)?);
            let w = upload(b, format, n, k, bytes)?;
            let (mut hidden, mut dst) = (b.alloc(DType::F32, m, k)?, b.alloc(DType::F32, m, n)?);
            b.silu_mul_matmul(&gate, &up, &w, &mut hidden, &mut dst)?;
            Ok((expected, widen(&read_f32(b, &dst)?)))
        }
        Op::NormMatmuls { format, m, k, n, add } => {
            let (x_host, y_host, gain_host) =
                (rng.fill(m * k, -3.0, 3.0), rng.fill(m * k, -3.0, 3.0), rng.fill(k, 0.5, 1.5));
            // x + y rounded to f32 (the residual stream is f32), then the norm, rounded as xn is.
            let sum: Vec<f32> = x_host.iter().zip(&y_host).map(|(x, y)| if add { x + y } else { *x }).collect();
            let xn_host: Vec<f32> =
                reference::rms_norm(&widen(&sum), &gain_host, 1e-5, k).iter().map(|&v| v as f32).collect();
            let (bytes, bytes2) = (random_weight(rng, format, n, k), random_weight(rng, format, n + 3, k));
            let mut expected = reference::matmul(&xn_host, &dequantize(format, &bytes, n, k), m, k, n);
            expected.extend(reference::matmul(&xn_host, &dequantize(format, &bytes2, n + 3, k), m, k, n + 3));
            let (mut x, y, gain) =
                (f32_tensor(b, m, k, &x_host)?, f32_tensor(b, m, k, &y_host)?, f32_tensor(b, 1, k, &gain_host)?);
            let (w, w2) = (upload(b, format, n, k, bytes)?, upload(b, format, n + 3, k, bytes2)?);
            let (mut xn, mut dst, mut dst2) =
                (b.alloc(DType::F32, m, k)?, b.alloc(DType::F32, m, n)?, b.alloc(DType::F32, m, n + 3)?);
            b.norm_matmuls(&mut x, add.then_some(&y), &gain, 1e-5, &mut xn, &mut [(&w, &mut dst), (&w2, &mut dst2)])?;
            let mut actual = widen(&read_f32(b, &dst)?);
            actual.extend(widen(&read_f32(b, &dst2)?));
            Ok((expected, actual))
        }
        Op::Embed { format, vocab, d, n_tokens, scale } => {
            let bytes = random_weight(rng, format, vocab, d);
            let table_host = dequantize(format, &bytes, vocab, d);
            // The first and last ids, repeats, and random ones.
            let mut ids_host: Vec<u32> = vec![0, vocab as u32 - 1, 0];
            ids_host.extend((3..n_tokens).map(|_| rng.below(vocab) as u32));
            ids_host.truncate(n_tokens);
            let row = |id: u32| widen(&table_host[id as usize * d..][..d]).into_iter().map(|v| v * f64::from(scale));
            let expected = ids_host.iter().flat_map(|&id| row(id)).collect();
            let (table, ids) = (upload(b, format, vocab, d, bytes)?, u32_tensor(b, n_tokens, 1, &ids_host)?);
            let mut dst = b.alloc(DType::F32, n_tokens, d)?;
            b.embed(&table, &ids, scale, &mut dst)?;
            Ok((expected, widen(&read_f32(b, &dst)?)))
        }
        Op::RmsNorm { rows, d, eps } => {
            let (x_host, gain_host) = (rng.fill(rows * d, -10.0, 10.0), rng.fill(d, 0.5, 1.5));
            let expected = reference::rms_norm(&widen(&x_host), &gain_host, eps, d);
            let (x, gain) = (f32_tensor(b, rows, d, &x_host)?, f32_tensor(b, 1, d, &gain_host)?);
            let mut dst = b.alloc(DType::F32, rows, d)?;
            b.rms_norm(&x, &gain, eps, &mut dst)?;
            Ok((expected, widen(&read_f32(b, &dst)?)))
        }
        Op::Rope { n_tokens, n_heads, rope, factors } | Op::RmsNormRope { n_tokens, n_heads, rope, factors, .. } => {
            let cols = n_heads * rope.head_dim;
            let x_host = rng.fill(n_tokens * cols, -10.0, 10.0);
            let gain_host = rng.fill(rope.head_dim, 0.5, 1.5);
            let mut pos_host: Vec<u32> = (0..n_tokens).map(|_| rng.below(5000) as u32).collect();
            pos_host[0] = 0;
            // Llama 3's shape: 1 for the fast pairs, 8 for the slow ones, a smooth ramp between.
            let half = rope.n_rot / 2;
            let ff_host: Vec<f32> = (0..half)
                .map(|i| 1.0 + 7.0 * (i as f32 / half as f32).powi(2) + 0.1 * rng.fill(1, 0.0, 1.0)[0])
                .collect();
            let ff = if factors { Some(f32_tensor(b, 1, half, &ff_host)?) } else { None };
            let ff_ref = if factors { ff_host.clone() } else { vec![1.0; half] };
            let (mut x, pos) = (f32_tensor(b, n_tokens, cols, &x_host)?, u32_tensor(b, n_tokens, 1, &pos_host)?);
            let expected = if let Op::RmsNormRope { eps, .. } = *op {
                let gain = f32_tensor(b, 1, rope.head_dim, &gain_host)?;
                b.rms_norm_rope(&mut x, &gain, eps, &pos, &rope, ff.as_ref())?;
                let normed = reference::rms_norm(&widen(&x_host), &gain_host, eps, rope.head_dim);
                reference::rope(&normed, &pos_host, &rope, &ff_ref)
            } else {
                b.rope(&mut x, &pos, &rope, ff.as_ref())?;
                reference::rope(&widen(&x_host), &pos_host, &rope, &ff_ref)
            };
            Ok((expected, widen(&read_f32(b, &x)?)))
        }
        Op::SiluMul { rows, d } => {
            let (gate_host, up_host) = (rng.fill(rows * d, -10.0, 10.0), rng.fill(rows * d, -10.0, 10.0));
            let (gate, up) = (f32_tensor(b, rows, d, &gate_host)?, f32_tensor(b, rows, d, &up_host)?);
            let mut dst = b.alloc(DType::F32, rows, d)?;
            b.silu_mul(&gate, &up, &mut dst)?;
            Ok((reference::silu_mul(&gate_host, &up_host), widen(&read_f32(b, &dst)?)))
        }
        Op::GeluMul { rows, d } => {
            let (gate_host, up_host) = (rng.fill(rows * d, -10.0, 10.0), rng.fill(rows * d, -2.0, 2.0));
            let (gate, up) = (f32_tensor(b, rows, d, &gate_host)?, f32_tensor(b, rows, d, &up_host)?);
            let mut dst = b.alloc(DType::F32, rows, d)?;
            b.gelu_mul(&gate, &up, &mut dst)?;
            Ok((reference::gelu_mul(&gate_host, &up_host), widen(&read_f32(b, &dst)?)))
        }
        Op::AddAssign { rows, d } | Op::AddBias { rows, d } => {
            let bias = matches!(op, Op::AddBias { .. });
            let x_host = rng.fill(rows * d, -10.0, 10.0);
            let y_host = rng.fill(if bias { d } else { rows * d }, -10.0, 10.0);
            let mut x = f32_tensor(b, rows, d, &x_host)?;
            if bias {
                b.add_bias(&mut x, &f32_tensor(b, 1, d, &y_host)?)?;
            } else {
                b.add_assign(&mut x, &f32_tensor(b, rows, d, &y_host)?)?;
            }
            Ok((reference::add(&x_host, &y_host), widen(&read_f32(b, &x)?)))
        }
        Op::GatherRows { rows, d, n } => {
            let x_host = rng.fill(rows * d, -10.0, 10.0);
            let mut idx: Vec<u32> = (0..n).map(|_| rng.below(rows) as u32).collect();
            idx[0] = rows as u32 - 1;
            let expected = idx.iter().flat_map(|&r| widen(&x_host[r as usize * d..][..d])).collect();
            let (x, idx) = (f32_tensor(b, rows, d, &x_host)?, u32_tensor(b, n, 1, &idx)?);
            let mut dst = b.alloc(DType::F32, n, d)?;
            b.gather_rows(&x, &idx, &mut dst)?;
            Ok((expected, widen(&read_f32(b, &dst)?)))
        }
        Op::KvWrite { n_tokens, n_slots, kv_dim, kv } => {
            let (k_cache, v_cache) = (rng.fill(n_slots * kv_dim, -1.0, 1.0), rng.fill(n_slots * kv_dim, -1.0, 1.0));
            let (k_new, v_new) = (rng.fill(n_tokens * kv_dim, -1.0, 1.0), rng.fill(n_tokens * kv_dim, -1.0, 1.0));
            let mut slots: Vec<u32> = (0..n_slots as u32).collect();
            rng.shuffle(&mut slots);
            slots.truncate(n_tokens);
            let mut expected = [k_cache.clone(), v_cache.clone()];
            for (t, &s) in slots.iter().enumerate() {
                let s = s as usize;
                expected[0][s * kv_dim..][..kv_dim].copy_from_slice(&k_new[t * kv_dim..][..kv_dim]);
                expected[1][s * kv_dim..][..kv_dim].copy_from_slice(&v_new[t * kv_dim..][..kv_dim]);
            }
            let mut cache = kv_layer_as(b, kv, n_slots, kv_dim, &k_cache, &v_cache)?;
            let (k, v) = (f32_tensor(b, n_tokens, kv_dim, &k_new)?, f32_tensor(b, n_tokens, kv_dim, &v_new)?);
            b.kv_write(&k, &v, &u32_tensor(b, n_tokens, 1, &slots)?, &mut cache)?;
            // q8_0: the unquantized values, so the case measures the q8_0 cache's error (cases.rs).
            let expected = if kv == DType::Q8_0 { expected.concat() } else { stored(kv, kv_dim, &expected.concat()) };
            Ok((widen(&expected), read_cache(b, &cache)?))
        }
        Op::CopySlots { n_slots, kv_dim, src, dst, n, kv } => {
            let (k_cache, v_cache) = (rng.fill(n_slots * kv_dim, -1.0, 1.0), rng.fill(n_slots * kv_dim, -1.0, 1.0));
            let mut expected = [k_cache.clone(), v_cache.clone()];
            for side in &mut expected {
                side.copy_within(src * kv_dim..(src + n) * kv_dim, dst * kv_dim);
            }
            let mut cache = kv_layer_as(b, kv, n_slots, kv_dim, &k_cache, &v_cache)?;
            b.copy_slots(&mut cache, src, dst, n)?;
            Ok((widen(&stored(kv, kv_dim, &expected.concat())), read_cache(b, &cache)?))
        }
        Op::Attention(ref a) => {
            let setup = PagedAttention::new(rng, a);
            let all: Vec<usize> = (0..setup.tokens.len()).collect();
            let actual = setup.run(b, &all)?;
            Ok((setup.expected(), widen(&actual)))
        }
        Op::Argmax { rows, vocab } => {
            let mut x_host = rng.fill(rows * vocab, -10.0, 10.0);
            // Row 0 is all ties; the others repeat their maximum at up to three places.
            x_host[..vocab].fill(1.0);
            for row in x_host.chunks_mut(vocab).skip(1) {
                for _ in 0..3 {
                    row[rng.below(vocab)] = 20.0;
                }
            }
            let x = f32_tensor(b, rows, vocab, &x_host)?;
            let mut dst = b.alloc(DType::U32, rows, 1)?;
            b.argmax(&x, &mut dst)?;
            let as_f64 = |v: Vec<u32>| v.into_iter().map(f64::from).collect();
            Ok((as_f64(reference::argmax(&x_host, vocab)), as_f64(read_u32(b, &dst)?)))
        }
        Op::TopK { rows, vocab, k } => {
            let x_host = top_k_logits(rng, rows, vocab);
            let (ids_expected, vals_expected, lse_expected) = reference::top_k(&x_host, vocab, k);
            let x = f32_tensor(b, rows, vocab, &x_host)?;
            let (mut ids, mut vals) = (b.alloc(DType::U32, rows, k)?, b.alloc(DType::F32, rows, k + 1)?);
            b.top_k(&x, &mut ids, &mut vals)?;
            let vals_actual = widen(&read_f32(b, &vals)?);
            // Laid out as the tolerance expects: every exact value first (ids, then the copies), then lse.
            let ids_actual = read_u32(b, &ids)?.into_iter().map(f64::from);
            let mut actual: Vec<f64> = ids_actual.collect();
            actual.extend(vals_actual.chunks(k + 1).flat_map(|row| row[..k].to_vec()));
            actual.extend(vals_actual.chunks(k + 1).map(|row| row[k]));
            let mut expected: Vec<f64> = ids_expected.into_iter().map(f64::from).collect();
            expected.extend(vals_expected);
            expected.extend(lse_expected);
            Ok((expected, actual))
        }
    }
}

/// Logits for top_k, never zeros: row 0 has many exact ties (five levels), row 1 non-finite
/// values and extremes (all −∞ and NaN when vocab < 8), row 2 plain U(-10, 10) values.
fn top_k_logits(rng: &mut Rng, rows: usize, vocab: usize) -> Vec<f32> {
    let mut x = rng.fill(rows * vocab, -10.0, 10.0);
    for (r, row) in x.chunks_mut(vocab).enumerate() {
        match r {
            0 => row.iter_mut().for_each(|v| *v = (*v / 4.0).round() * 0.5),
            1 if vocab < 8 => row.iter_mut().enumerate().for_each(|(j, v)| *v = [f32::NEG_INFINITY, f32::NAN][j % 2]),
            1 => {
                let specials = [f32::NEG_INFINITY, f32::NAN, f32::INFINITY, f32::MAX, -f32::MAX, -0.0, 0.0];
                for (i, &s) in specials.iter().cycle().take(3 * specials.len()).enumerate() {
                    row[(i * 7919 + rng.below(vocab)) % vocab] = s;
                }
            }
            _ => {}
        }
    }
    x
}

pub fn kv_layer<B: Backend>(b: &B, n_slots: usize, kv_dim: usize, k: &[f32], v: &[f32]) -> ultra::Result<KvLayer<B>> {
    kv_layer_as(b, DType::F32, n_slots, kv_dim, k, v)
}

/// A cache of `kv` elements (F32, F16 or Q8_0) holding k and v (write_f32 rounds them to an f16
/// cache, quantizes them to a q8_0 one).
pub fn kv_layer_as<B: Backend>(
    b: &B,
    kv: DType,
    n_slots: usize,
    kv_dim: usize,
    k: &[f32],
    v: &[f32],
) -> ultra::Result<KvLayer<B>> {
    let mut layer = KvLayer { k: b.alloc(kv, n_slots, kv_dim)?, v: b.alloc(kv, n_slots, kv_dim)? };
    b.write_f32(&mut layer.k, k)?;
    b.write_f32(&mut layer.v, v)?;
    Ok(layer)
}

/// The values as a cache of `kv` elements holds them (rows of `kv_dim`): f16 rounds to nearest even
/// (as `half` and the kernels' cvt.rn do), q8_0 as the host's `write_f32` quantizes, f32 keeps them.
fn stored(kv: DType, kv_dim: usize, values: &[f32]) -> Vec<f32> {
    match kv {
        DType::F16 => values.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect(),
        DType::Q8_0 => {
            let mut out = vec![0.0; values.len()];
            kv_q8::decode(&kv_q8::encode(values, kv_dim), kv_dim, &mut out);
            out
        }
        _ => values.to_vec(),
    }
}

fn read_cache<B: Backend>(b: &B, cache: &KvLayer<B>) -> ultra::Result<Vec<f64>> {
    Ok(widen(&[read_f32(b, &cache.k)?, read_f32(b, &cache.v)?].concat()))
}

/// An attention case laid out in a paged cache: each sequence's K/V rows (kept contiguous here
/// for the oracle) sit in blocks given by a shuffled block table. Slots outside every sequence
/// hold NaN and unused table entries u32::MAX, so a read out of place cannot go unnoticed.
pub struct PagedAttention {
    pub case: AttnCase,
    k_seqs: Vec<Vec<f32>>, // per sequence: [seq_len, kv_dim]
    v_seqs: Vec<Vec<f32>>,
    pub tokens: Vec<(usize, usize)>, // (seq, pos) of each batch token, in a shuffled order
    q: Vec<f32>,                     // [n_tokens, n_heads · head_dim]
    table: Vec<u32>,                 // [n_seqs, max_blocks]
    max_blocks: usize,
    cache_k: Vec<f32>, // [n_slots, kv_dim]
    cache_v: Vec<f32>,
}

impl PagedAttention {
    pub fn new(rng: &mut Rng, a: &AttnCase) -> PagedAttention {
        let kv_dim = a.n_kv_heads * a.head_dim;
        let k_seqs: Vec<Vec<f32>> = a.seq_lens.iter().map(|&len| rng.fill(len * kv_dim, -1.0, 1.0)).collect();
        let v_seqs: Vec<Vec<f32>> = a.seq_lens.iter().map(|&len| rng.fill(len * kv_dim, -1.0, 1.0)).collect();
        let (table, max_blocks, cache_k, cache_v) = layout(rng, a, &k_seqs, &v_seqs);
        let mut tokens: Vec<(usize, usize)> = a
            .seq_lens
            .iter()
            .zip(&a.new_tokens)
            .enumerate()
            .flat_map(|(s, (&len, &new))| (len - new..len).map(move |p| (s, p)))
            .collect();
        rng.shuffle(&mut tokens);
        let q = rng.fill(tokens.len() * a.n_heads * a.head_dim, -4.0, 4.0);
        PagedAttention { case: a.clone(), k_seqs, v_seqs, tokens, q, table, max_blocks, cache_k, cache_v }
    }

    /// The same sequences, queries and tokens under a freshly shuffled block layout.
    pub fn relayout(&self, rng: &mut Rng) -> PagedAttention {
        let (table, max_blocks, cache_k, cache_v) = layout(rng, &self.case, &self.k_seqs, &self.v_seqs);
        PagedAttention {
            case: self.case.clone(),
            k_seqs: self.k_seqs.clone(),
            v_seqs: self.v_seqs.clone(),
            tokens: self.tokens.clone(),
            q: self.q.clone(),
            table,
            max_blocks,
            cache_k,
            cache_v,
        }
    }

    pub fn shape(&self) -> AttnShape {
        let a = &self.case;
        AttnShape {
            n_heads: a.n_heads,
            n_kv_heads: a.n_kv_heads,
            head_dim: a.head_dim,
            scale: 1.0 / (a.head_dim as f32).sqrt(),
            window: a.window,
        }
    }

    /// The backend's output for the batch tokens `which` (indices into `tokens`), in that order.
    pub fn run<B: Backend>(&self, b: &B, which: &[usize]) -> ultra::Result<Vec<f32>> {
        let (q, cache, batch) = self.inputs(b, which)?;
        let mut dst = b.alloc(DType::F32, q.rows, q.cols)?;
        b.attention(&q, &cache, &batch, &self.shape(), &mut dst)?;
        read_f32(b, &dst)
    }

    /// q, the cache and the batch of the tokens `which` (indices into `tokens`), in that order.
    pub fn inputs<B: Backend>(&self, b: &B, which: &[usize]) -> ultra::Result<(Tensor<B>, KvLayer<B>, AttnBatch<B>)> {
        let a = &self.case;
        let (q_dim, kv_dim, n) = (a.n_heads * a.head_dim, a.n_kv_heads * a.head_dim, which.len());
        let q_host: Vec<f32> = which.iter().flat_map(|&t| self.q[t * q_dim..][..q_dim].to_vec()).collect();
        let seq: Vec<u32> = which.iter().map(|&t| self.tokens[t].0 as u32).collect();
        let pos: Vec<u32> = which.iter().map(|&t| self.tokens[t].1 as u32).collect();
        let cache = kv_layer_as(b, a.kv, self.cache_k.len() / kv_dim, kv_dim, &self.cache_k, &self.cache_v)?;
        let batch = AttnBatch {
            seq: u32_tensor(b, n, 1, &seq)?,
            pos: u32_tensor(b, n, 1, &pos)?,
            slot: u32_tensor(b, n, 1, &vec![0; n])?, // attention does not read it
            block_table: u32_tensor(b, a.seq_lens.len(), self.max_blocks, &self.table)?,
            block_size: a.block_size,
            decode: seq.iter().collect::<std::collections::HashSet<_>>().len() == n,
        };
        Ok((f32_tensor(b, n, q_dim, &q_host)?, cache, batch))
    }

    /// The oracle over the contiguous K/V of each sequence, for every batch token.
    pub fn expected(&self) -> Vec<f64> {
        let a = &self.case;
        let (q_dim, kv_dim, group) = (a.n_heads * a.head_dim, a.n_kv_heads * a.head_dim, a.n_heads / a.n_kv_heads);
        let mut out = Vec::new();
        for (t, &(s, p)) in self.tokens.iter().enumerate() {
            for h in 0..a.n_heads {
                let q = &self.q[t * q_dim + h * a.head_dim..][..a.head_dim];
                let kv_col = (h / group) * a.head_dim;
                out.extend(reference::attention_head(
                    q,
                    &self.k_seqs[s],
                    &self.v_seqs[s],
                    kv_dim,
                    kv_col,
                    a.window.map_or(0, |w| (p + 1).saturating_sub(w))..=p, // keys p - w < j ≤ p
                    self.shape().scale,
                ));
            }
        }
        out
    }
}

/// A shuffled block table for the sequences and the cache it describes:
/// (table [n_seqs, max_blocks], max_blocks, cache k, cache v [n_slots, kv_dim]). With a window,
/// the blocks wholly before the first key any batch token of a sequence sees are not there
/// (u32::MAX in the table, NaN in the cache), as a cache that freed them would leave them.
fn layout(
    rng: &mut Rng,
    a: &AttnCase,
    k_seqs: &[Vec<f32>],
    v_seqs: &[Vec<f32>],
) -> (Vec<u32>, usize, Vec<f32>, Vec<f32>) {
    let (kv_dim, bs) = (a.n_kv_heads * a.head_dim, a.block_size);
    let blocks_per_seq: Vec<usize> = a.seq_lens.iter().map(|len| len.div_ceil(bs)).collect();
    let n_blocks = blocks_per_seq.iter().sum::<usize>() + 2; // two spare blocks stay NaN
    let mut block_ids: Vec<u32> = (0..n_blocks as u32).collect();
    rng.shuffle(&mut block_ids);
    let max_blocks = blocks_per_seq.iter().max().unwrap() + 1;
    let mut table = vec![u32::MAX; a.seq_lens.len() * max_blocks];
    let (mut cache_k, mut cache_v) = (vec![f32::NAN; n_blocks * bs * kv_dim], vec![f32::NAN; n_blocks * bs * kv_dim]);
    let mut next = block_ids.into_iter();
    for (s, &len) in a.seq_lens.iter().enumerate() {
        let first = a.window.map_or(0, |w| (len - a.new_tokens[s] + 1).saturating_sub(w));
        for b in first / bs..blocks_per_seq[s] {
            table[s * max_blocks + b] = next.next().unwrap();
        }
        for p in first / bs * bs..len {
            let slot = table[s * max_blocks + p / bs] as usize * bs + p % bs;
            cache_k[slot * kv_dim..][..kv_dim].copy_from_slice(&k_seqs[s][p * kv_dim..][..kv_dim]);
            cache_v[slot * kv_dim..][..kv_dim].copy_from_slice(&v_seqs[s][p * kv_dim..][..kv_dim]);
        }
    }
    (table, max_blocks, cache_k, cache_v)
}
