//! NEON kernels of the int8 path (aarch64), step for step reference.rs (mod.rs's numerics), so
//! their bits equal the portable code's and the x86 kernels' (tests):
//!
//! - a chunk's 16 lanes are four 4-lane registers r = 0..4 (lanes 4r..4r + 4, chunk bytes
//!   16r..16r + 16); registers 0 and 2 hold block b0, 1 and 3 block b1, so each block's scales
//!   are one splat;
//! - each lane's sum of four byte products is one `sdot` where the CPU has the Armv8.2 dot
//!   product, else `smull` and two pairwise adds (the i8 products are exact in i16); both take
//!   signed bytes, so the 8-bit levels (Q8_0's q + 128, NF4's h) go in as u − 128, which folds
//!   their −128·Σq correction into the product, and the others (below 128) as they are. The
//!   lane's integer is then reference.rs's exactly, and the f32 steps are its fused ones;
//! - [`dot_span`] decodes each chunk of four weight rows at a time in registers (decode);
//!   [`batch`] decodes each chunk of one weight row once and meets it with four activation
//!   rows at a time.
//!
//! `sdot` is written as inline assembly (its intrinsic, `vdotq_s32`, is not stable Rust yet), with
//! `.arch_extension dotprod` so that it assembles in any function; it runs only where
//! `isa::dotprod()` holds.

use std::arch::aarch64::*;
use std::arch::asm;
use std::sync::LazyLock;

use super::reference::{f16_at, nf4_planes, unpack_chunk};
use super::tags::{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, dispatch, kind_of};
use super::{Code, Kind, Nibbles, WChunk, XChunk};
use crate::backend::cpu::isa;
use crate::backend::cpu::neon::reduce;

/// Whether this CPU runs these kernels (unless `ULTRA_CPU_DISABLE=neon` turns them off).
pub static AVAILABLE: LazyLock<bool> = LazyLock::new(isa::neon);

/// Whether format K's levels go in as u − 128 (8-bit levels; see the module comment).
const fn signed(k: u8) -> bool {
    k == Q8_0 || kind_of(k).two_planes()
}

/// One chunk of a weight row in registers: `u` the levels as signed bytes (u − 128 where
/// `signed`), `u2` NF4's fine plane, and each lane register's d, m and z.
#[derive(Clone, Copy)]
struct WRegs {
    u: [int8x16_t; 4],
    u2: [int8x16_t; 4],
    dw: [float32x4_t; 4],
    mw: [float32x4_t; 4],
    z: [int32x4_t; 4],
}

/// Each i32 lane's Σ a·b over its four bytes: `sdot` when SDOT, else widening multiplies.
#[inline(always)]
fn dot_bytes<const SDOT: bool>(a: int8x16_t, b: int8x16_t) -> int32x4_t {
    // SAFETY: register arithmetic only; `sdot` runs only from sdot entry points (dotprod checked).
    unsafe {
        if SDOT {
            let mut acc = vdupq_n_s32(0);
            asm!(
                ".arch_extension dotprod",
                "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
                acc = inout(vreg) acc,
                a = in(vreg) a,
                b = in(vreg) b,
                options(pure, nomem, nostack),
            );
            acc
        } else {
            let (lo, hi) = (vmull_s8(vget_low_s8(a), vget_low_s8(b)), vmull_high_s8(a, b));
            vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)) // [p0+p1+p2+p3, p4..p7, p8..p11, p12..p15]
        }
    }
}

/// Each lane's Σ u·(256·q + lo), exact in i32.
#[inline(always)]
fn planes<const SDOT: bool>(u: int8x16_t, q: int8x16_t, lo: int8x16_t) -> int32x4_t {
    // SAFETY: register arithmetic only.
    unsafe { vaddq_s32(vshlq_n_s32::<8>(dot_bytes::<SDOT>(u, q)), dot_bytes::<SDOT>(u, lo)) }
}

/// reference::step on registers: chunk `x` into the four lane accumulators.
#[inline(always)]
fn step<const K: u8, const SDOT: bool>(acc: [float32x4_t; 4], w: &WRegs, x: &XChunk) -> [float32x4_t; 4] {
    let kind = kind_of(K);
    std::array::from_fn(|r| {
        // SAFETY: every load reads 16 bytes or 4 lanes at 16r or 4r of a 64-byte / 16-lane field.
        unsafe {
            let (q, lo) = (vld1q_s8(x.q.as_ptr().add(16 * r)), vld1q_s8(x.lo.as_ptr().add(16 * r)));
            let sum = vld1q_s32(x.sum4.as_ptr().add(4 * r));
            let mut isum = planes::<SDOT>(w.u[r], q, lo);
            if !signed(K)
                && let Some(shift) = kind.offset_shift()
            {
                isum = vsubq_s32(isum, vshlq_s32(sum, vdupq_n_s32(shift as i32)));
            }
            if kind.zero_point() {
                isum = vsubq_s32(isum, vmulq_s32(w.z[r], sum));
            }
            if kind.two_planes() {
                isum = vaddq_s32(vshlq_n_s32::<5>(isum), planes::<SDOT>(w.u2[r], q, lo));
            }
            let dx = vld1q_f32(x.dx.as_ptr().add(4 * r));
            let acc = vfmaq_f32(acc[r], vcvtq_f32_s32(isum), vmulq_f32(w.dw[r], dx));
            if kind.has_min() { vfmaq_f32(acc, w.mw[r], vld1q_f32(x.s.as_ptr().add(4 * r))) } else { acc }
        }
    })
}

/// Byte p of the result is 0x10 where bit p of `bits` is set, else 0 (Q5's fifth bits).
#[inline(always)]
fn fifth_bits(bits: u16) -> uint8x16_t {
    const BIT: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
    // SAFETY: register arithmetic and a 16-byte load of BIT.
    unsafe {
        let bytes = vcombine_u8(vdup_n_u8(bits as u8), vdup_n_u8((bits >> 8) as u8));
        vandq_u8(vtstq_u8(bytes, vld1q_u8(BIT.as_ptr())), vdupq_n_u8(0x10))
    }
}

/// The levels and scales of chunk `c` of a row at `p`, all 64 values present.
///
/// # Safety
/// Blocks 2c and 2c + 1 of format K exist at `p` (for the 4-bit group-wise formats: chunk c's
/// 64 values lie in the row).
#[inline(always)]
unsafe fn decode<const K: u8>(p: *const u8, c: usize) -> WRegs {
    let kind = kind_of(K);
    if let Kind::Nibbles(n) = kind {
        // SAFETY: the caller's contract.
        return unsafe { decode_nibbles(p, c, n) };
    }
    let bb = kind.block_bytes();
    // SAFETY: every read stays inside blocks 2c and 2c + 1 (offsets per reference.rs).
    unsafe {
        let b = [p.add(2 * c * bb), p.add((2 * c + 1) * bb)];
        let block = |h: usize| std::slice::from_raw_parts(b[h], bb);
        let nibbles = |at: usize| {
            let (q0, q1) = (vld1q_u8(b[0].add(at)), vld1q_u8(b[1].add(at)));
            let m = vdupq_n_u8(0x0f);
            [vandq_u8(q0, m), vandq_u8(q1, m), vshrq_n_u8::<4>(q0), vshrq_n_u8::<4>(q1)]
        };
        // Q5: bit j of qh (at byte `at`) is the fifth bit of value j.
        let fifth = |u: [uint8x16_t; 4], at: usize| {
            let qh = |h: usize| u32::from_le_bytes(block(h)[at..at + 4].try_into().unwrap());
            let (h0, h1) = (qh(0), qh(1));
            let bits = [h0 as u16, h1 as u16, (h0 >> 16) as u16, (h1 >> 16) as u16];
            std::array::from_fn(|r| vorrq_u8(u[r], fifth_bits(bits[r])))
        };
        let u = match K {
            Q4_0 => nibbles(2),
            Q4_1 => nibbles(4),
            Q5_0 => fifth(nibbles(6), 2),
            Q5_1 => fifth(nibbles(8), 4),
            // Q8_0: the stored q is u − 128 already.
            _ => [vld1q_u8(b[0].add(2)), vld1q_u8(b[1].add(2)), vld1q_u8(b[0].add(18)), vld1q_u8(b[1].add(18))],
        };
        let d = [f16_at(block(0), 0), f16_at(block(1), 0)];
        let m = if kind.has_min() { [f16_at(block(0), 2), f16_at(block(1), 2)] } else { [0.0; 2] };
        WRegs {
            u: u.map(|u| vreinterpretq_s8_u8(u)),
            u2: [vdupq_n_s8(0); 4],
            dw: std::array::from_fn(|r| vdupq_n_f32(d[r % 2])),
            mw: std::array::from_fn(|r| vdupq_n_f32(m[r % 2])),
            z: [vdupq_n_s32(0); 4],
        }
    }
}

/// NF4's level planes as `tbl` tables: h − 128 as signed bytes, and l.
const NF4_TABLES: [[u8; 16]; 2] = {
    let mut t = [[0u8; 16]; 2];
    let mut q = 0;
    while q < 16 {
        let (h, l) = nf4_planes(q);
        (t[0][q], t[1][q]) = (h ^ 0x80, l);
        q += 1;
    }
    t
};

/// decode for the 4-bit group-wise formats: chunk c's 64 codes are 32 data bytes of one block
/// (blocks of ≥ 64 values) or 16 of each of two (G = 32); byte t holds values 2t and 2t + 1, so
/// interleaving each 16 bytes' low and high nibbles (`zip1`, `zip2`) gives 32 values in order.
///
/// # Safety
/// Chunk c's 64 values lie in the row at `p`.
#[inline(always)]
unsafe fn decode_nibbles(p: *const u8, c: usize, n: Nibbles) -> WRegs {
    let kind = Kind::Nibbles(n);
    let (len, bb) = (kind.block_len(), kind.block_bytes());
    // SAFETY: every read stays inside the blocks holding values 64c..64c + 64.
    unsafe {
        // The scale of value o of the block at b (its group's) and INT4's zero point.
        let scale_of = |b: *const u8, o: usize| -> (f32, i32) {
            let head = std::slice::from_raw_parts(b, 4 + len / 2);
            match n.code {
                Code::Int4 => (f16_at(head, 0), i32::from(head[2])),
                Code::Nf4 => (f16_at(head, 0) / 4095.0, 0),
                Code::Nf4Dq => (f16_at(head, 0) * f32::from(head[2 + o / n.group]) / 4095.0, 0),
            }
        };
        // Data bytes of the chunk's values 0..32 and 32..64, and their scales.
        let (data, s) = if len == 32 {
            let (b0, b1) = (p.add(2 * c * bb), p.add((2 * c + 1) * bb));
            ([vld1q_u8(b0.add(4)), vld1q_u8(b1.add(4))], [scale_of(b0, 0), scale_of(b1, 0)])
        } else {
            let (b, o) = (p.add((64 * c / len) * bb), 64 * c % len);
            ([vld1q_u8(b.add(4 + o / 2)), vld1q_u8(b.add(4 + o / 2 + 16))], [scale_of(b, o), scale_of(b, o + 32)])
        };
        let m = vdupq_n_u8(0x0f);
        let (even, odd) = (data.map(|d| vandq_u8(d, m)), data.map(|d| vshrq_n_u8::<4>(d)));
        let codes = [
            vzip1q_u8(even[0], odd[0]),
            vzip1q_u8(even[1], odd[1]),
            vzip2q_u8(even[0], odd[0]),
            vzip2q_u8(even[1], odd[1]),
        ];
        let dw = std::array::from_fn(|r| vdupq_n_f32(s[r % 2].0));
        let (mw, zero) = ([vdupq_n_f32(0.0); 4], [vdupq_n_s8(0); 4]);
        match n.code {
            Code::Int4 => WRegs {
                u: codes.map(|c| vreinterpretq_s8_u8(c)),
                u2: zero,
                dw,
                mw,
                z: std::array::from_fn(|r| vdupq_n_s32(s[r % 2].1)),
            },
            Code::Nf4 | Code::Nf4Dq => {
                let look =
                    |t: usize| codes.map(|c| vreinterpretq_s8_u8(vqtbl1q_u8(vld1q_u8(NF4_TABLES[t].as_ptr()), c)));
                WRegs { u: look(0), u2: look(1), dw, mw, z: [vdupq_n_s32(0); 4] }
            }
        }
    }
}

/// An unpacked chunk (reference.rs) in registers: the last chunk when it holds one block.
#[inline(always)]
fn load_chunk<const K: u8>(w: &WChunk) -> WRegs {
    let flip = if signed(K) { 0x80 } else { 0 };
    // SAFETY: each load reads 16 bytes or 4 lanes at 16r or 4r of a 64-byte / 16-lane field.
    unsafe {
        let bytes = |a: &[u8; 64], r: usize, f: u8| {
            vreinterpretq_s8_u8(veorq_u8(vld1q_u8(a.as_ptr().add(16 * r)), vdupq_n_u8(f)))
        };
        WRegs {
            u: std::array::from_fn(|r| bytes(&w.u, r, flip)),
            u2: std::array::from_fn(|r| bytes(&w.u2, r, 0)),
            dw: std::array::from_fn(|r| vld1q_f32(w.dw.as_ptr().add(4 * r))),
            mw: std::array::from_fn(|r| vld1q_f32(w.mw.as_ptr().add(4 * r))),
            z: std::array::from_fn(|r| vld1q_s32(w.z.as_ptr().add(4 * r))),
        }
    }
}

/// [dot(x, row) for row in rows], each x chunk met by the R rows in turn.
///
/// # Safety
/// Each row holds the blocks of x.len() chunks' values (2·x.len() blocks, or one less).
#[inline(always)]
unsafe fn dot_rows<const K: u8, const SDOT: bool, const R: usize>(rows: [&[u8]; R], x: &[XChunk]) -> [f32; R] {
    let kind = kind_of(K);
    let full = kind.row_values(rows[0].len()) / 64;
    // SAFETY: register moves only.
    let mut acc = [[unsafe { vdupq_n_f32(0.0) }; 4]; R];
    for (c, xc) in x.iter().enumerate().take(full) {
        for r in 0..R {
            // SAFETY: chunk c < full has both blocks in every row (the caller's contract).
            let w = unsafe { decode::<K>(rows[r].as_ptr(), c) };
            acc[r] = step::<K, SDOT>(acc[r], &w, xc);
        }
    }
    if let Some(xc) = x.get(full) {
        for r in 0..R {
            acc[r] = step::<K, SDOT>(acc[r], &load_chunk::<K>(&unpack_chunk(kind, rows[r], full)), xc);
        }
    }
    acc.map(reduce)
}

/// dot_rows over the rows of `rows` (contiguous, `row_bytes` each), four at a time.
///
/// # Safety
/// Each row holds the blocks of x.len() chunks' values.
#[inline(always)]
unsafe fn dot_span_k<const K: u8, const SDOT: bool>(rows: &[u8], row_bytes: usize, x: &[XChunk], out: &mut [f32]) {
    let row = |j: usize| &rows[j * row_bytes..(j + 1) * row_bytes];
    let n4 = out.len() / 4 * 4;
    // SAFETY: the caller's contract, for every row.
    unsafe {
        for j in (0..n4).step_by(4) {
            out[j..j + 4].copy_from_slice(&dot_rows::<K, SDOT, 4>([row(j), row(j + 1), row(j + 2), row(j + 3)], x));
        }
        for (j, o) in out.iter_mut().enumerate().skip(n4) {
            *o = dot_rows::<K, SDOT, 1>([row(j)], x)[0];
        }
    }
}

/// dot_span_k with `sdot`.
///
/// # Safety
/// The CPU has the dot product; dot_span_k's contract.
#[target_feature(enable = "dotprod")]
unsafe fn dot_span_sdot<const K: u8>(rows: &[u8], row_bytes: usize, x: &[XChunk], out: &mut [f32]) {
    // SAFETY: the caller's contract.
    unsafe { dot_span_k::<K, true>(rows, row_bytes, x, out) }
}

/// out[j] = dot_ref(kind, row j, x) bit for bit, for the out.len() rows that `rows` holds back
/// to back; with `sdot` when `sdot` (the dot product checked here), else widening multiplies.
/// Panics unless AVAILABLE and every row holds whole blocks for x.len() chunks.
pub fn dot_span_with(sdot: bool, kind: Kind, rows: &[u8], x: &[XChunk], out: &mut [f32]) {
    assert!(*AVAILABLE && !out.is_empty() && rows.len().is_multiple_of(out.len()), "dot_span: rows");
    assert!(!sdot || isa::dotprod(), "dot_span: this CPU has no dot product");
    let row_bytes = rows.len() / out.len();
    assert!(
        row_bytes.is_multiple_of(kind.block_bytes()) && kind.row_values(row_bytes).div_ceil(64) == x.len(),
        "dot_span: row and activation lengths"
    );
    macro_rules! run {
        ($k:expr) => {
            // SAFETY: AVAILABLE, the dot product (when sdot) and the lengths are checked above.
            unsafe {
                if sdot {
                    dot_span_sdot::<{ $k }>(rows, row_bytes, x, out)
                } else {
                    dot_span_k::<{ $k }, false>(rows, row_bytes, x, out)
                }
            }
        };
    }
    dispatch!(kind, run, without_kquants)
}

/// dot_span_with the best this CPU has.
pub fn dot_span(kind: Kind, rows: &[u8], x: &[XChunk], out: &mut [f32]) {
    dot_span_with(isa::dotprod(), kind, rows, x, out)
}

/// The dots of activation rows i0..i0 + I (c chunks each) with one weight row: each chunk of the
/// row decoded once in registers and met by the I rows.
///
/// # Safety
/// x holds rows i0..i0 + I; `row` holds the blocks of c chunks' values.
#[inline(always)]
unsafe fn rows_against<const K: u8, const SDOT: bool, const I: usize>(
    row: &[u8],
    x: &[XChunk],
    c: usize,
    i0: usize,
) -> [f32; I] {
    let kind = kind_of(K);
    let full = kind.row_values(row.len()) / 64;
    // SAFETY: register moves only.
    let mut acc = [[unsafe { vdupq_n_f32(0.0) }; 4]; I];
    for ch in 0..full {
        // SAFETY: chunk ch < full has both blocks (the caller's contract).
        let w = unsafe { decode::<K>(row.as_ptr(), ch) };
        for (i, acc) in acc.iter_mut().enumerate() {
            *acc = step::<K, SDOT>(*acc, &w, &x[(i0 + i) * c + ch]);
        }
    }
    if full < c {
        let w = load_chunk::<K>(&unpack_chunk(kind, row, full));
        for (i, acc) in acc.iter_mut().enumerate() {
            *acc = step::<K, SDOT>(*acc, &w, &x[(i0 + i) * c + full]);
        }
    }
    acc.map(reduce)
}

/// batch for format K: weight rows one by one, activation rows four at a time.
///
/// # Safety
/// Each row of `rows` (`row_bytes` each) holds the blocks of c chunks' values and x holds whole
/// rows of c chunks.
#[inline(always)]
unsafe fn batch_k<const K: u8, const SDOT: bool>(
    rows: &[u8],
    row_bytes: usize,
    x: &[XChunk],
    c: usize,
    write: &mut impl FnMut(usize, usize, f32),
) {
    let (m, n) = (x.len() / c, rows.len() / row_bytes);
    let m4 = m / 4 * 4;
    for j in 0..n {
        let row = &rows[j * row_bytes..(j + 1) * row_bytes];
        // SAFETY: the caller's contract; i0 + I ≤ m by the loop bounds.
        unsafe {
            for i0 in (0..m4).step_by(4) {
                for (i, v) in rows_against::<K, SDOT, 4>(row, x, c, i0).into_iter().enumerate() {
                    write(i0 + i, j, v);
                }
            }
            for i in m4..m {
                write(i, j, rows_against::<K, SDOT, 1>(row, x, c, i)[0]);
            }
        }
    }
}

/// batch_k with `sdot`.
///
/// # Safety
/// The CPU has the dot product; batch_k's contract.
#[target_feature(enable = "dotprod")]
unsafe fn batch_sdot<const K: u8>(
    rows: &[u8],
    row_bytes: usize,
    x: &[XChunk],
    c: usize,
    write: &mut impl FnMut(usize, usize, f32),
) {
    // SAFETY: the caller's contract.
    unsafe { batch_k::<K, true>(rows, row_bytes, x, c, write) }
}

/// write(i, j, dot_ref of activation row i and weight row j) for every pair, the n weight rows
/// held back to back in `rows`; with `sdot` when `sdot`. Panics unless AVAILABLE (and the dot
/// product, when sdot) and the lengths agree.
pub fn batch_with(
    sdot: bool,
    kind: Kind,
    rows: &[u8],
    n: usize,
    x: &[XChunk],
    c: usize,
    mut write: impl FnMut(usize, usize, f32),
) {
    assert!(
        *AVAILABLE && n > 0 && c > 0 && rows.len().is_multiple_of(n) && x.len().is_multiple_of(c),
        "batch: lengths"
    );
    assert!(!sdot || isa::dotprod(), "batch: this CPU has no dot product");
    let row_bytes = rows.len() / n;
    assert!(
        row_bytes.is_multiple_of(kind.block_bytes()) && kind.row_values(row_bytes).div_ceil(64) == c,
        "batch: row and activation lengths"
    );
    macro_rules! go {
        ($k:expr) => {
            // SAFETY: AVAILABLE, the dot product (when sdot) and the lengths are checked above.
            unsafe {
                if sdot {
                    batch_sdot::<{ $k }>(rows, row_bytes, x, c, &mut write)
                } else {
                    batch_k::<{ $k }, false>(rows, row_bytes, x, c, &mut write)
                }
            }
        };
    }
    dispatch!(kind, go, without_kquants)
}

/// batch_with the best this CPU has.
pub fn batch(kind: Kind, rows: &[u8], n: usize, x: &[XChunk], c: usize, write: impl FnMut(usize, usize, f32)) {
    batch_with(isa::dotprod(), kind, rows, n, x, c, write)
}
