//! Reference quantizers of the group-wise formats (layout in mod.rs). Rounding, stated:
//!
//! - INT-b (n = 2^b - 1 levels above 0): the (d, z) of least weighted squared error among a few
//!   candidates (weights `rms(x) + |x|`, as llama.cpp's k-quant search), each value then rounded
//!   to its nearest level. Candidate 0 is min/max over the
//!   range widened to hold 0, `lo = min(0, min x)`, `hi = max(0, max x)`,
//!   `d = f16((hi - lo) / n)`, `z = clamp(round(-lo / d), 0, n)`: its error is at most d/2 (plus
//!   n·d·2^-11 at the ends from d's f16 rounding). The others, as llama.cpp's `make_qkx2_quants`
//!   searches its k-quant scales, start from levels `round((x - lo)·(n + δ) / (hi - lo))` for
//!   δ = -1, -0.9, ..., 1, fit `x ≈ a·q + b` by least squares, take `z = clamp(round(-b / a), 0, n)`
//!   and the least-squares d for that z, and reassign the levels twice. For every candidate
//!   `q = clamp(round(x / d) + z, 0, n)` with the stored f16 d; `round` is half away from zero
//!   (`f32::round`); ties in the error keep the earlier candidate. So the squared error is never
//!   above min/max's, and since 0 is always a level no value ends further from its level than
//!   from 0 (the bounds tests/intn.rs checks); a search may clip outliers, min/max never does.
//!   A group of zeros (or one whose d underflows f16) is d = 0, z = 0, q = 0.
//! - NF4: the scale `s = f16(max |x| · (1 - i/32))`, i = 0 … 16, of least weighted squared error (i = 0
//!   is QLoRA's absmax; ties keep the smaller i), and each value's code the nearest level of
//!   `x / s` (division in f32), found against the f32 midpoints of neighbouring levels; a value
//!   exactly on a midpoint takes the lower level. A group of zeros has s = 0 and code 7 (0.0).
//! - NF4_DQ: per group g the NF4 search's scale s_g (before f16); `D = f16(max(s_0, s_1) / 255)`;
//!   `c_g = clamp(round(s_g / D), 1, 255)` (0 only for a group of zeros); the codes as NF4 with
//!   the stored scale `D·c_g`.
//!
//! Scales saturate at f16's largest finite value; non-finite inputs give some bytes, never a panic.

use half::f16;

use super::round::round;
use super::{HEADER_BYTES, Intn, NF4, Scheme, weighted};

/// Midpoints between neighbouring NF4 levels, in f32.
const MIDPOINTS: [f32; 15] = {
    let mut m = [0.0; 15];
    let mut j = 0;
    while j < 15 {
        m[j] = (NF4[j] + NF4[j + 1]) / 2.0;
        j += 1;
    }
    m
};

/// The f16 nearest to `x`, saturated at f16's largest finite value (scales are non-negative).
pub(super) fn scale_f16(x: f32) -> f16 {
    f16::from_f32(x.min(f16::MAX.to_f32()))
}

/// The NF4 code of v (nearest level; a midpoint goes to the lower level).
pub(super) fn nf4_code(v: f32) -> u8 {
    MIDPOINTS.iter().filter(|&&m| v > m).count() as u8
}

/// Writes the b-bit values `q` into `data` (value i at bit b·i, little-endian).
pub(super) fn pack(q: &[u8], bits: usize, data: &mut [u8]) {
    data.fill(0);
    for (i, &q) in q.iter().enumerate() {
        let at = bits * i;
        data[at / 8] |= q << (at % 8);
    }
}

/// Writes the encoding of `src` (whole blocks of `f`) over `dst` (exactly that many bytes).
/// Panics if the lengths disagree.
pub fn quantize_block_row(f: Intn, src: &[f32], dst: &mut [u8]) {
    assert!(
        src.len().is_multiple_of(f.block_len()) && dst.len() == src.len() / f.block_len() * f.block_bytes(),
        "intn quantize: {} values do not fill {} bytes of {}",
        src.len(),
        dst.len(),
        f.name()
    );
    let mut q = vec![0u8; f.block_len()];
    for (x, b) in src.chunks_exact(f.block_len()).zip(dst.chunks_exact_mut(f.block_bytes())) {
        let (header, data) = b.split_at_mut(HEADER_BYTES);
        match f.scheme {
            Scheme::Int8 | Scheme::Int4 | Scheme::Int2 => int_group(x, f.scheme.bits(), header, &mut q),
            Scheme::Nf4 => {
                let s = scale_f16(nf4_scale(x, true));
                header.copy_from_slice(&[s.to_le_bytes()[0], s.to_le_bytes()[1], 0, 0]);
                nf4_codes(x, s.to_f32(), &mut q);
            }
            Scheme::Nf4Dq => {
                let g = f.group.size();
                let a: [f32; 2] = std::array::from_fn(|j| nf4_scale(&x[j * g..(j + 1) * g], false));
                nf4_dq_block(x, a, g, header, &mut q);
            }
        }
        pack(&q, f.scheme.bits(), data);
    }
}

/// As [`quantize_block_row`], but each group's header is the one of least
/// Σ_j importance_j·(x_j − x̂_j)² (`weighted.rs`), `importance` holding one non-negative weight
/// per value of `src` (calibration's diag(Σ xᵀx) of the input column). Panics if the lengths
/// disagree.
pub fn quantize_block_row_weighted(f: Intn, src: &[f32], importance: &[f32], dst: &mut [u8]) {
    assert_eq!(src.len(), importance.len(), "intn quantize: one importance per value");
    assert!(
        src.len().is_multiple_of(f.block_len()) && dst.len() == src.len() / f.block_len() * f.block_bytes(),
        "intn quantize: {} values do not fill {} bytes of {}",
        src.len(),
        dst.len(),
        f.name()
    );
    let mut q = vec![0u8; f.block_len()];
    let blocks = src.chunks_exact(f.block_len()).zip(importance.chunks_exact(f.block_len()));
    for ((x, h), b) in blocks.zip(dst.chunks_exact_mut(f.block_bytes())) {
        let (header, data) = b.split_at_mut(HEADER_BYTES);
        match f.scheme {
            Scheme::Int8 | Scheme::Int4 | Scheme::Int2 => {
                let n = ((1u32 << f.scheme.bits()) - 1) as f32;
                let Some((d, z)) = weighted::int_header(x, h, n) else {
                    header.fill(0);
                    q.fill(0);
                    pack(&q, f.scheme.bits(), data);
                    continue;
                };
                assign(x, h, d.to_f32(), z, n, &mut q);
                header.copy_from_slice(&[d.to_le_bytes()[0], d.to_le_bytes()[1], z as u8, 0]);
            }
            Scheme::Nf4 => {
                let s = scale_f16(weighted::nf4_scale(x, h, true));
                header.copy_from_slice(&[s.to_le_bytes()[0], s.to_le_bytes()[1], 0, 0]);
                nf4_codes(x, s.to_f32(), &mut q);
            }
            Scheme::Nf4Dq => {
                let g = f.group.size();
                let a: [f32; 2] =
                    std::array::from_fn(|j| weighted::nf4_scale(&x[j * g..(j + 1) * g], &h[j * g..(j + 1) * g], false));
                nf4_dq_block(x, a, g, header, &mut q);
            }
        }
        pack(&q, f.scheme.bits(), data);
    }
}

/// NF4_DQ's header and codes from its two groups' scales `a`.
fn nf4_dq_block(x: &[f32], a: [f32; 2], g: usize, header: &mut [u8], q: &mut [u8]) {
    let d = scale_f16(a[0].max(a[1]) / 255.0);
    let c = a.map(|a| code_scale(a, d.to_f32()));
    header.copy_from_slice(&[d.to_le_bytes()[0], d.to_le_bytes()[1], c[0], c[1]]);
    for j in 0..2 {
        nf4_codes(&x[j * g..(j + 1) * g], d.to_f32() * c[j] as f32, &mut q[j * g..(j + 1) * g]);
    }
}

/// The code `quantize_block_row` gives value `x` at index `i` of a block once the block's header
/// is chosen, and the value that code decodes to (what `dequantize_block_row` reads back). GPTQ
/// (`gptq`) fixes the header at a block's start and then rounds its values one at a time.
pub fn code_under_header(f: Intn, header: &[u8], i: usize, x: f32) -> (u8, f32) {
    let d = f16::from_le_bytes([header[0], header[1]]).to_f32();
    match f.scheme {
        Scheme::Int8 | Scheme::Int4 | Scheme::Int2 => {
            if d.is_nan() || d <= 0.0 {
                return (0, 0.0);
            }
            let n = ((1u32 << f.scheme.bits()) - 1) as f32;
            let z = header[2];
            let q = (round(x / d) + z as f32).clamp(0.0, n) as u8;
            (q, d * (q as i32 - z as i32) as f32)
        }
        Scheme::Nf4 | Scheme::Nf4Dq => {
            let scale = if f.scheme == Scheme::Nf4 { d } else { d * header[2 + i / f.group.size()] as f32 };
            let q = if scale == 0.0 { 7 } else { nf4_code(x / scale) };
            (q, scale * NF4[q as usize])
        }
    }
}

/// Packs a block's codes (`block_len` of them) into its data bytes (after the header).
pub fn pack_block(f: Intn, codes: &[u8], data: &mut [u8]) {
    pack(codes, f.scheme.bits(), data);
}

/// An INT-b group: header = [d: f16][z: u8][0], q = its levels (module doc).
fn int_group(x: &[f32], bits: usize, header: &mut [u8], q: &mut [u8]) {
    let n = ((1u32 << bits) - 1) as f32;
    let lo = x.iter().fold(0.0f32, |m, &v| m.min(v));
    let hi = x.iter().fold(0.0f32, |m, &v| m.max(v));
    // Errors weighted as llama.cpp weighs its k-quant scale search: av + |x|, av the rms.
    let av = (x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32).sqrt();
    let w: Vec<f32> = x.iter().map(|v| av + v.abs()).collect();
    let mut best: Option<(f32, f16, f32)> = None;
    let mut consider = |d: f16, z: f32, levels: &mut [u8]| {
        let dq = d.to_f32();
        if !(dq > 0.0 && dq.is_finite()) {
            return;
        }
        let err = assign(x, &w, dq, z, n, levels);
        if best.is_none_or(|(e, _, _)| err < e) {
            best = Some((err, d, z));
        }
    };
    let mut levels = vec![0u8; x.len()];
    let d0 = scale_f16((hi - lo) / n);
    consider(d0, round(-lo / d0.to_f32()).clamp(0.0, n), &mut levels);
    if hi > lo {
        for step in 0..=20 {
            let iscale = (n - 1.0 + 0.1 * step as f32) / (hi - lo);
            for (l, &v) in levels.iter_mut().zip(x) {
                *l = round((v - lo) * iscale).clamp(0.0, n) as u8;
            }
            let Some((a, b)) = fit_line(x, &w, &levels) else { continue };
            if a <= 0.0 {
                continue;
            }
            let z = round(-b / a).clamp(0.0, n);
            for _ in 0..2 {
                let Some(d) = fit_scale(x, &w, &levels, z) else { break };
                let d = scale_f16(d);
                if d.to_f32() <= 0.0 {
                    break;
                }
                consider(d, z, &mut levels);
            }
        }
    }
    let Some((_, d, z)) = best else {
        header.copy_from_slice(&[0; 4]);
        q.fill(0);
        return;
    };
    assign(x, &w, d.to_f32(), z, n, q);
    header.copy_from_slice(&[d.to_le_bytes()[0], d.to_le_bytes()[1], z as u8, 0]);
}

/// Independent partial sums per loop below: one running sum is a chain of dependent adds (4
/// cycles each), which bounded `ultra quantize`'s search; lanes are added in a fixed order, so
/// results stay deterministic.
const LANES: usize = 8;

/// Σ f(q, x, w) over a group's values in `LANES` interleaved partial sums (lane = index mod
/// LANES, fixed-size chunks so that the compiler vectorizes them), added in lane order.
#[inline(always)]
fn lane_sum<const S: usize>(q: &[u8], x: &[f32], w: &[f32], f: impl Fn(f64, f64, f64) -> [f64; S]) -> [f64; S] {
    let mut acc = [[0.0f64; LANES]; S];
    let mut chunks = q.chunks_exact(LANES).zip(x.chunks_exact(LANES).zip(w.chunks_exact(LANES)));
    for (q, (x, w)) in &mut chunks {
        let (q, x, w): (&[u8; LANES], &[f32; LANES], &[f32; LANES]) =
            (q.try_into().unwrap(), x.try_into().unwrap(), w.try_into().unwrap());
        for j in 0..LANES {
            let t = f(q[j] as f64, x[j] as f64, w[j] as f64);
            for s in 0..S {
                acc[s][j] += t[s];
            }
        }
    }
    let tail = q.len() / LANES * LANES;
    for (j, ((&q, &x), &w)) in q[tail..].iter().zip(&x[tail..]).zip(&w[tail..]).enumerate() {
        let t = f(q as f64, x as f64, w as f64);
        for s in 0..S {
            acc[s][j] += t[s];
        }
    }
    acc.map(|a| a.iter().sum())
}

/// levels = clamp(round(x / d) + z, 0, n); returns the weighted squared error of d·(q - z).
pub(super) fn assign(x: &[f32], w: &[f32], d: f32, z: f32, n: f32, levels: &mut [u8]) -> f32 {
    let term = |v: f32, w: f32, l: &mut u8| {
        let q = (round(v / d) + z).clamp(0.0, n);
        *l = q as i32 as u8; // q is in [0, n]: `q as u8`'s byte, through the packed conversion x86 has (f32 → i32)
        let e = d * (q - z) - v;
        w * e * e
    };
    let mut acc = [0.0f32; LANES];
    let mut chunks = levels.chunks_exact_mut(LANES).zip(x.chunks_exact(LANES).zip(w.chunks_exact(LANES)));
    for (l, (x, w)) in &mut chunks {
        let (l, x, w): (&mut [u8; LANES], &[f32; LANES], &[f32; LANES]) =
            (l.try_into().unwrap(), x.try_into().unwrap(), w.try_into().unwrap());
        for j in 0..LANES {
            acc[j] += term(x[j], w[j], &mut l[j]);
        }
    }
    let tail = levels.len() / LANES * LANES;
    for (j, ((l, &v), &w)) in levels[tail..].iter_mut().zip(&x[tail..]).zip(&w[tail..]).enumerate() {
        acc[j] += term(v, w, l);
    }
    acc.iter().sum()
}

/// The least-squares line x ≈ a·q + b, if the levels are not all equal.
pub(super) fn fit_line(x: &[f32], w: &[f32], q: &[u8]) -> Option<(f32, f32)> {
    let [sw, sq, sx, sqq, sqx] = lane_sum(q, x, w, |l, v, w| [w, w * l, w * v, w * l * l, w * l * v]);
    let len = sw;
    let det = len * sqq - sq * sq;
    if det <= 0.0 {
        return None;
    }
    let a = (len * sqx - sq * sx) / det;
    Some((a as f32, ((sx - a * sq) / len) as f32))
}

/// The least-squares d of x ≈ d·(q - z), if some level differs from z.
pub(super) fn fit_scale(x: &[f32], w: &[f32], q: &[u8], z: f32) -> Option<f32> {
    let z = z as f64;
    let [num, den] = lane_sum(q, x, w, |l, v, w| [w * v * (l - z), w * (l - z) * (l - z)]);
    (den > 0.0).then(|| (num / den) as f32)
}

/// The 8-bit multiple of `d` closest to `a` (at least 1 unless `a` is 0).
fn code_scale(a: f32, d: f32) -> u8 {
    if d == 0.0 || a == 0.0 {
        return 0;
    }
    round(a / d).clamp(1.0, 255.0) as u8
}

/// The NF4 scale of least squared error among `max |x| · (1 - i/32)`, i = 0 … 16 (module doc),
/// each candidate rounded to f16 first when `stored`.
fn nf4_scale(x: &[f32], stored: bool) -> f32 {
    let absmax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let av = (x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32).sqrt();
    let mut best = (f32::INFINITY, absmax);
    for i in 0..=16 {
        let s = absmax * (1.0 - i as f32 / 32.0);
        let s = if stored { scale_f16(s).to_f32() } else { s };
        if !(s > 0.0 && s.is_finite()) {
            continue;
        }
        let err: f32 = x.iter().map(|&v| (av + v.abs()) * (s * NF4[nf4_code(v / s) as usize] - v).powi(2)).sum();
        if err < best.0 {
            best = (err, s);
        }
    }
    best.1
}

/// q = the NF4 codes of x under `scale` (code 7, the level 0, when scale is 0).
fn nf4_codes(x: &[f32], scale: f32, q: &mut [u8]) {
    for (q, &v) in q.iter_mut().zip(x) {
        *q = if scale == 0.0 { 7 } else { nf4_code(v / scale) };
    }
}
