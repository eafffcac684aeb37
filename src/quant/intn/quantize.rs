//! Reference quantizers of the group-wise formats (layout in mod.rs). Rounding, stated:
//!
//! - INT-b (n = 2^b - 1 levels above 0): min/max asymmetric over the range widened to hold 0,
//!   `lo = min(0, min x)`, `hi = max(0, max x)`; `d = f16(round-to-nearest-even((hi - lo) / n))`,
//!   then with that stored d: `z = clamp(round(-lo / d), 0, n)` and
//!   `q = clamp(round(x / d) + z, 0, n)`, `round` being half away from zero (`f32::round`).
//!   Since the grid d·(q - z) holds 0 and ends within d/2 of lo and hi, the error is at most
//!   d/2, plus n·d·2^-11 at the ends from d's f16 rounding (the bound tests/intn.rs checks).
//!   A group of zeros (or one whose d underflows f16) is d = 0, z = 0, q = 0.
//! - NF4: `absmax = f16(max |x|)`; each value's code is the nearest level of `x / absmax`
//!   (division in f32), found against the f32 midpoints of neighbouring levels; a value exactly
//!   on a midpoint takes the lower level. absmax = 0 gives code 7 (the level 0.0).
//! - NF4_DQ: per group g `a_g = max |x|` over its G values; `D = f16(max(a_0, a_1) / 255)`;
//!   `c_g = clamp(round(a_g / D), 1, 255)` (0 only for a group of zeros); the codes as NF4 with
//!   the stored scale `D·c_g` in place of absmax.
//!
//! Scales saturate at f16's largest finite value; non-finite inputs give some bytes, never a panic.

use half::f16;

use super::{HEADER_BYTES, Intn, NF4, Scheme};

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
fn scale_f16(x: f32) -> f16 {
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
                let absmax = scale_f16(x.iter().fold(0.0f32, |m, v| m.max(v.abs())));
                header.copy_from_slice(&[absmax.to_le_bytes()[0], absmax.to_le_bytes()[1], 0, 0]);
                nf4_codes(x, absmax.to_f32(), &mut q);
            }
            Scheme::Nf4Dq => {
                let g = f.group.size();
                let a: [f32; 2] =
                    std::array::from_fn(|j| x[j * g..(j + 1) * g].iter().fold(0.0f32, |m, v| m.max(v.abs())));
                let d = scale_f16(a[0].max(a[1]) / 255.0);
                let c = a.map(|a| code_scale(a, d.to_f32()));
                header.copy_from_slice(&[d.to_le_bytes()[0], d.to_le_bytes()[1], c[0], c[1]]);
                for j in 0..2 {
                    nf4_codes(&x[j * g..(j + 1) * g], d.to_f32() * c[j] as f32, &mut q[j * g..(j + 1) * g]);
                }
            }
        }
        pack(&q, f.scheme.bits(), data);
    }
}

/// An INT-b group: header = [d: f16][z: u8][0], q = its levels.
fn int_group(x: &[f32], bits: usize, header: &mut [u8], q: &mut [u8]) {
    let n = ((1u32 << bits) - 1) as f32;
    let lo = x.iter().fold(0.0f32, |m, &v| m.min(v));
    let hi = x.iter().fold(0.0f32, |m, &v| m.max(v));
    let d = scale_f16((hi - lo) / n);
    let dq = d.to_f32();
    if dq == 0.0 || !dq.is_finite() {
        header.copy_from_slice(&[0; 4]);
        q.fill(0);
        return;
    }
    let z = (-lo / dq).round().clamp(0.0, n);
    for (q, &v) in q.iter_mut().zip(x) {
        *q = ((v / dq).round() + z).clamp(0.0, n) as u8;
    }
    header.copy_from_slice(&[d.to_le_bytes()[0], d.to_le_bytes()[1], z as u8, 0]);
}

/// The 8-bit multiple of `d` closest to `a` (at least 1 unless `a` is 0).
fn code_scale(a: f32, d: f32) -> u8 {
    if d == 0.0 || a == 0.0 {
        return 0;
    }
    (a / d).round().clamp(1.0, 255.0) as u8
}

/// q = the NF4 codes of x under `scale` (code 7, the level 0, when scale is 0).
fn nf4_codes(x: &[f32], scale: f32, q: &mut [u8]) {
    for (q, &v) in q.iter_mut().zip(x) {
        *q = if scale == 0.0 { 7 } else { nf4_code(v / scale) };
    }
}
