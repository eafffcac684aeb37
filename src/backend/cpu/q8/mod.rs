//! Int8 activations for the CPU's quantized matmuls: each row of x is quantized per block of 32
//! to two int8 planes (as CUDA's GEMV does: llama.cpp's single plane cost SmolLM2 logits NMSE
//! 4.5e-3 against the f32 path), each weight block's integer levels meet both planes in exact
//! integer dot products (`vpdpbusd` on AVX-512 VNNI), and f32 takes over once per block. Formats:
//! Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, the k-quants Q4_K, Q5_K, Q6_K (AVX-512 only: [`runs`]), and
//! Ultra's INT4, NF4 and NF4_DQ (G = 32/64/128), whose values are d·(u − o) or d·u + m with
//! integer levels u of at most 8 bits, or (NF4) of 13; d and m may change from lane to lane
//! (Q6_K: every 16 values).
//!
//! Numerics: one definition that every path (AVX-512, portable) follows step for step, so the
//! batch size, the tiling and the instruction set never show in the bits (batch invariance):
//! - activations, per block b of 32: with d = max|x| / 127 and id = 1 / d (0 where d = 0),
//!   hi = round-half-even(x · id), lo = round-half-even(fma(−hi, d, x) · id · 256), both
//!   clamped to ±127, and d_x = d / 256, so x ≈ d_x·q with q = 256·hi + lo: error ≤ d_x / 2
//!   (1/65,024 of the block's largest value; lo's clamp at 127 costs at most one more half step);
//! - a chunk is two blocks (64 values) with its bytes in lane order
//!   [b0 0..16, b1 0..16, b0 16..32, b1 16..32]; lane L of 16 holds bytes 4L..4L + 4 (lanes
//!   0–3 and 8–11 block b0, 4–7 and 12–15 block b1), so the nibbles of two ggml blocks unpack
//!   into it with two shifts and no shuffle;
//! - weight levels as unsigned bytes u (Q8_0: q + 128); lane sum in i32, exact:
//!   isum = 256·Σ u·hi + Σ u·lo − o·Σ q = Σ (u − o)·q with o = 8 (Q4_0), 16 (Q5_0), 128 (Q8_0),
//!   0 otherwise (|isum| < 2^26, so f32(isum) rounds above 2^24: the same rounding on every path);
//!   INT4 (quant/intn, values d·(q − z)) subtracts z[L]·Σ q instead, z its group's zero point;
//!   NF4 / NF4_DQ take the integer level L = round(4095·NF4[code]) = 32·(h − 128) + l in two
//!   byte planes (h, l) and d_w = scale / 4095: isum = 32·(Σ h·q − 128·Σ q) + Σ l·q;
//! - acc[L] = fma(f32(isum[L]), d_w[b]·d_x[b], acc[L]); for Q4_1/Q5_1 then
//!   acc[L] = fma(m_w[b], s[L], acc[L]), s holding d_x[b]·Σ q over block b in lane 0 (b0) and
//!   lane 4 (b1), 0 in the others;
//! - the result is simd.rs's lane tree over acc. An odd last block leaves the chunk's second
//!   block empty (zero levels and scales).
//!
//! The f32 path (`Activations::F32`) stays: it is exact to the dequantized weights and serves as
//! the reference the int8 path is measured against (README: CPU activations).

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
mod kquant_avx512;
#[cfg(target_arch = "aarch64")]
mod neon;
pub mod panel_tile;
pub mod panels;
#[cfg(target_arch = "x86_64")]
mod panels_avx512;
#[cfg(target_arch = "x86_64")]
mod quantize_avx512;
mod reference;
#[cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), allow(dead_code, unused_macros, unused_imports))]
mod tags;

#[cfg(target_arch = "x86_64")]
use std::cell::RefCell;
use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::buffer::CpuWeight;
use super::columns::Columns;
use crate::quant::Format;

pub use reference::dot_ref;
#[cfg(test)]
use reference::unpack_chunk;

/// The level layout of a format the int8 path runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[allow(non_camel_case_types)] // ggml's names, as quant::Format's
pub enum Kind {
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    /// The k-quants whose sub-blocks are whole lanes (reference.rs's `unpack_kquant_chunk`):
    /// Q4_K and Q5_K as (d·sc)·u − dmin·m per 32 values (a minimum, as Q4_1), Q6_K as
    /// (d·sc)·(u − 32) per 16 (an offset, as Q8_0), 256 values per super-block.
    Q4_K,
    Q5_K,
    Q6_K,
    /// Ultra's 4-bit group-wise formats (quant/intn), codes packed two per byte.
    Nibbles(Nibbles),
}

/// A 4-bit group-wise format of quant/intn: how its codes become values, and its group size.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Nibbles {
    pub code: Code,
    pub group: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Code {
    /// d·(q − z), z an integer per group.
    Int4,
    /// absmax·NF4[q]; the int8 path takes NF4[q] as round(4095·NF4[q]) / 4095 (error ≤ 1.3e-4 of
    /// absmax), split into two byte planes.
    Nf4,
    /// (D·c_g)·NF4[q], two groups per block.
    Nf4Dq,
}

/// round(4095·NF4[q]): the integer NF4 levels of the int8 path.
pub const NF4_LEVELS: [i32; 16] = {
    let mut l = [0i32; 16];
    let mut q = 0;
    while q < 16 {
        let v = crate::quant::intn::NF4[q] as f64 * 4095.0;
        l[q] = if v >= 0.0 { (v + 0.5) as i32 } else { -((-v + 0.5) as i32) };
        q += 1;
    }
    l
};

impl Kind {
    pub fn of(format: Format) -> Option<Kind> {
        use crate::quant::intn::{Intn, Scheme};
        match format {
            Format::Q4_0 => Some(Kind::Q4_0),
            Format::Q4_1 => Some(Kind::Q4_1),
            Format::Q5_0 => Some(Kind::Q5_0),
            Format::Q5_1 => Some(Kind::Q5_1),
            Format::Q8_0 => Some(Kind::Q8_0),
            Format::Q4_K => Some(Kind::Q4_K),
            Format::Q5_K => Some(Kind::Q5_K),
            Format::Q6_K => Some(Kind::Q6_K),
            Format::Intn(Intn { scheme, group }) => {
                let code = match scheme {
                    Scheme::Int4 => Code::Int4,
                    Scheme::Nf4 => Code::Nf4,
                    Scheme::Nf4Dq => Code::Nf4Dq,
                    Scheme::Int8 | Scheme::Int2 => return None,
                };
                Some(Kind::Nibbles(Nibbles { code, group: group.size() }))
            }
            _ => None,
        }
    }

    /// log2 of the level offset o (values d·(u − o)), for the formats that have one.
    pub const fn offset_shift(self) -> Option<u32> {
        match self {
            Kind::Q4_0 => Some(3),
            Kind::Q5_0 => Some(4),
            Kind::Q6_K => Some(5),
            Kind::Q8_0 => Some(7),
            _ => None,
        }
    }

    /// Whether values carry a per-block minimum m (d·u + m).
    pub const fn has_min(self) -> bool {
        matches!(self, Kind::Q4_1 | Kind::Q5_1 | Kind::Q4_K | Kind::Q5_K)
    }

    /// Whether this is a k-quant (super-blocks of 256 values; SIMD kernels on AVX-512 only).
    pub const fn is_kquant(self) -> bool {
        matches!(self, Kind::Q4_K | Kind::Q5_K | Kind::Q6_K)
    }

    /// Whether each group carries its own integer zero point z (values d·(q − z)).
    pub const fn zero_point(self) -> bool {
        matches!(self, Kind::Nibbles(Nibbles { code: Code::Int4, .. }))
    }

    /// Whether levels come in two byte planes (NF4: 32·(h − 128) + l).
    pub const fn two_planes(self) -> bool {
        matches!(self, Kind::Nibbles(Nibbles { code: Code::Nf4 | Code::Nf4Dq, .. }))
    }

    /// Values per block.
    pub const fn block_len(self) -> usize {
        match self {
            Kind::Nibbles(Nibbles { code: Code::Nf4Dq, group }) => 2 * group,
            Kind::Nibbles(Nibbles { group, .. }) => group,
            Kind::Q4_K | Kind::Q5_K | Kind::Q6_K => crate::quant::kquant::QK_K,
            _ => 32,
        }
    }

    pub const fn block_bytes(self) -> usize {
        match self {
            Kind::Q4_0 => 18,
            Kind::Q4_1 => 20,
            Kind::Q5_0 => 22,
            Kind::Q5_1 => 24,
            Kind::Q8_0 => 34,
            Kind::Q4_K => crate::quant::kquant::Q4_K_BLOCK_BYTES,
            Kind::Q5_K => crate::quant::kquant::Q5_K_BLOCK_BYTES,
            Kind::Q6_K => crate::quant::kquant::Q6_K_BLOCK_BYTES,
            Kind::Nibbles(_) => 4 + self.block_len() / 2,
        }
    }

    /// The values in a row of `bytes` bytes (whole blocks).
    pub const fn row_values(self, bytes: usize) -> usize {
        bytes / self.block_bytes() * self.block_len()
    }
}

/// One chunk (64 values) of one quantized activation row, in lane order.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub struct XChunk {
    /// The coarse plane (steps of 256·d_x).
    pub q: [i8; 64],
    /// The fine plane: the coarse plane's residual in steps of d_x.
    pub lo: [i8; 64],
    /// Σ (256·q + lo) over each lane's 4 bytes (the offset correction).
    pub sum4: [i32; 16],
    /// 256·q + lo (|·| ≤ 32,639) at the chunk's even byte positions 0, 2, ..., 62, and at its odd
    /// ones: for kernels that meet signed 8-bit levels in i16 products (avx2.rs's Q8_0), where an
    /// even/odd split of a register's bytes is one shift pair each.
    pub even: [i16; 32],
    pub odd: [i16; 32],
    /// d_x of the lane's block.
    pub dx: [f32; 16],
    /// d_x·Σ q of block b0 in lane 0 and of b1 in lane 4; 0 elsewhere (the minimum's term).
    pub s: [f32; 16],
}

/// One chunk of one weight row, unpacked: levels in lane order and per-lane scales.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub struct WChunk {
    pub u: [u8; 64],
    pub dw: [f32; 16],
    /// m_w of the lane's block (formats with a minimum), else 0.
    pub mw: [f32; 16],
    /// z of the lane's group (INT4), else 0.
    pub z: [i32; 16],
    /// NF4's second level plane (l of 32·(h − 128) + l; `u` holds h), else 0.
    pub u2: [u8; 64],
}

impl XChunk {
    const ZERO: XChunk =
        XChunk { q: [0; 64], lo: [0; 64], sum4: [0; 16], even: [0; 32], odd: [0; 32], dx: [0.0; 16], s: [0.0; 16] };
}

impl WChunk {
    const ZERO: WChunk = WChunk { u: [0; 64], dw: [0.0; 16], mw: [0.0; 16], z: [0; 16], u2: [0; 64] };
}

/// Chunks of a row of k values (k a multiple of 32).
pub const fn chunks(k: usize) -> usize {
    k.div_ceil(64)
}

/// Whether this CPU has SIMD kernels of the int8 path (AVX-512 VNNI, AVX2, or NEON); elsewhere the
/// portable code computes the same bits, slowly, so the int8 path is the default only where this
/// holds.
pub fn fast() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        *avx512::AVAILABLE || *avx2::AVAILABLE
    }
    #[cfg(target_arch = "aarch64")]
    {
        *neon::AVAILABLE
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// Whether matmul takes the int8 path for `kind` on this CPU. The k-quants do only where they have
/// SIMD kernels (AVX-512 VNNI): elsewhere their f32 kernels (cpu/kquant/) are faster than the
/// portable int8 code. Every other format does everywhere (portable code where no SIMD kernel is:
/// the same bits).
pub fn runs(kind: Kind) -> bool {
    if !kind.is_kquant() {
        return true;
    }
    #[cfg(target_arch = "x86_64")]
    {
        *avx512::AVAILABLE
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The SIMD kernels of one instruction set (avx512.rs, avx2.rs, neon.rs), each equal to
/// reference.rs bit for bit; every method panics unless its CPU features are there.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
trait Kernels {
    /// Whether these kernels run `kind` (all but the k-quants off AVX-512: [`runs`]).
    fn handles(kind: Kind) -> bool {
        !kind.is_kquant()
    }
    /// out[j] = dot_ref(kind, row j, x) for the out.len() rows held back to back in `rows`.
    fn dot_span(kind: Kind, rows: &[u8], x: &[XChunk], out: &mut [f32]);
    /// write(i, j, dot_ref of activation row i and weight row j) for the n rows held back to
    /// back in `rows` and every activation row of x (c chunks each).
    fn batch(kind: Kind, rows: &[u8], n: usize, x: &[XChunk], c: usize, write: impl FnMut(usize, usize, f32));
}

#[cfg(target_arch = "x86_64")]
struct Avx512;

#[cfg(target_arch = "x86_64")]
impl Kernels for Avx512 {
    fn handles(_: Kind) -> bool {
        true
    }
    fn dot_span(kind: Kind, rows: &[u8], x: &[XChunk], out: &mut [f32]) {
        avx512::dot_span(kind, rows, x, out)
    }
    fn batch(kind: Kind, rows: &[u8], n: usize, x: &[XChunk], c: usize, write: impl FnMut(usize, usize, f32)) {
        // The rows' chunks unpacked once into memory, then met in 4 × 4 blocks (avx512.rs).
        TILE.with_borrow_mut(|tile| {
            // unpack_row writes every field of every chunk that the format reads: no need to clear
            // what is reused.
            if tile.len() < n * c {
                tile.resize(n * c, WChunk::ZERO);
            }
            let tile = &mut tile[..n * c];
            for (dst, row) in tile.chunks_mut(c).zip(rows.chunks_exact(rows.len() / n)) {
                avx512::unpack_row(kind, row, dst);
            }
            avx512::gemm(kind, tile, x, c, write);
        });
    }
}

#[cfg(target_arch = "x86_64")]
struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Kernels for Avx2 {
    fn dot_span(kind: Kind, rows: &[u8], x: &[XChunk], out: &mut [f32]) {
        avx2::dot_span(kind, rows, x, out)
    }
    fn batch(kind: Kind, rows: &[u8], n: usize, x: &[XChunk], c: usize, write: impl FnMut(usize, usize, f32)) {
        avx2::batch(kind, rows, n, x, c, write)
    }
}

#[cfg(target_arch = "aarch64")]
struct Neon;

#[cfg(target_arch = "aarch64")]
impl Kernels for Neon {
    fn dot_span(kind: Kind, rows: &[u8], x: &[XChunk], out: &mut [f32]) {
        neon::dot_span(kind, rows, x, out)
    }
    fn batch(kind: Kind, rows: &[u8], n: usize, x: &[XChunk], c: usize, write: impl FnMut(usize, usize, f32)) {
        neon::batch(kind, rows, n, x, c, write)
    }
}

/// One activation row into its chunks (reference.rs's definition), on the widest ISA this CPU has.
pub fn quantize_row(x: &[f32], out: &mut [XChunk]) {
    #[cfg(target_arch = "x86_64")]
    {
        if *avx512::AVAILABLE {
            return quantize_avx512::quantize_row(x, out);
        }
        if *avx2::AVAILABLE {
            return avx2::quantize_row(x, out);
        }
    }
    reference::quantize_row(x, out)
}

/// Rows at which quantizing x is worth spreading over the thread pool.
const PAR_QUANTIZE_ROWS: usize = 16;

/// x [m, k] quantized row by row: [m · chunks(k)].
///
/// Each row's task zeroes its own chunks before quantizing them: a prompt's chunks are megabytes
/// (448 bytes per 64 values), and `vec![ZERO; ..]` zeroed them on one thread while the others
/// waited (benches/notes/cpu.md).
pub fn quantize(x: &[f32], m: usize, k: usize) -> Vec<XChunk> {
    let c = chunks(k);
    assert_eq!(x.len(), m * k, "q8::quantize: x is not [m, k]");
    if c == 0 || m == 0 {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(m * c);
    let row = |(o, x): (&mut [MaybeUninit<XChunk>], &[f32])| {
        o.fill(MaybeUninit::new(XChunk::ZERO));
        // SAFETY: every element of o was initialized just above.
        let o = unsafe { std::slice::from_raw_parts_mut(o.as_mut_ptr().cast::<XChunk>(), o.len()) };
        quantize_row(x, o);
    };
    let spare = &mut out.spare_capacity_mut()[..m * c];
    if m >= PAR_QUANTIZE_ROWS {
        spare.par_chunks_mut(c).zip(x.par_chunks(k)).for_each(row);
    } else {
        spare.chunks_mut(c).zip(x.chunks(k)).for_each(row);
    }
    // SAFETY: x holds m rows of k (asserted), so each of the m rows of c chunks was initialized.
    unsafe { out.set_len(m * c) };
    out
}

/// Below this many activation rows each row meets the weights alone (`Kernels::dot_span`); from it
/// on, the rows share each decoded weight chunk (`Kernels::batch`; the same steps, so the same bits).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const TILE_MAX_M: usize = 4;

#[cfg(target_arch = "x86_64")]
thread_local! {
    /// The current tile's unpacked weight chunks: [rows, chunks].
    static TILE: RefCell<Vec<WChunk>> = const { RefCell::new(Vec::new()) };
}

/// dst[i, j] for j in `cols` (≤ TILE_N weight rows), every i < m, the int8 way.
///
/// # Safety
/// No other thread may touch columns `cols` of `out` meanwhile.
pub unsafe fn tile(
    w: &CpuWeight,
    kind: Kind,
    x: &[XChunk],
    m: usize,
    n: usize,
    cols: std::ops::Range<usize>,
    out: &Columns,
) {
    let c = x.len() / m;
    let write = |i: usize, j: usize, v: f32| {
        // SAFETY: column j belongs to this task (the caller's contract).
        unsafe { out.write(i * n + j, v) }
    };
    #[cfg(target_arch = "x86_64")]
    {
        if *avx512::AVAILABLE {
            return tile_with::<Avx512>(w, kind, x, m, cols, write);
        }
        if *avx2::AVAILABLE && Avx2::handles(kind) {
            return tile_with::<Avx2>(w, kind, x, m, cols, write);
        }
    }
    #[cfg(target_arch = "aarch64")]
    if *neon::AVAILABLE && Neon::handles(kind) {
        return tile_with::<Neon>(w, kind, x, m, cols, write);
    }
    for i in 0..m {
        let xi = &x[i * c..(i + 1) * c];
        for j in cols.clone() {
            write(i, j, dot_ref(kind, w.row(j), xi));
        }
    }
}

/// tile's body on the kernels of one instruction set.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn tile_with<S: Kernels>(
    w: &CpuWeight,
    kind: Kind,
    x: &[XChunk],
    m: usize,
    cols: std::ops::Range<usize>,
    mut write: impl FnMut(usize, usize, f32),
) {
    let c = x.len() / m;
    if m < TILE_MAX_M {
        let mut v = [0.0f32; 64];
        for i in 0..m {
            for j0 in cols.clone().step_by(v.len()) {
                let part = j0..(j0 + v.len()).min(cols.end);
                let v = &mut v[..part.len()];
                S::dot_span(kind, w.rows(part.clone()), &x[i * c..(i + 1) * c], v);
                for (j, &value) in part.zip(v.iter()) {
                    write(i, j, value);
                }
            }
        }
        return;
    }
    S::batch(kind, w.rows(cols.clone()), cols.len(), x, c, |i, r, v| write(i, cols.start + r, v));
}

#[cfg(test)]
mod tests;
