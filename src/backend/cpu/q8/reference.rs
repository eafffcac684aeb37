//! The int8 path in plain Rust: activation quantization (shared by every path), and the weight
//! unpacking and per-chunk step that the AVX-512 kernels reproduce bit for bit (mod.rs states
//! the numerics). The portable fallback runs these directly.

use half::f16;

use super::{Code, Kind, Nibbles, WChunk, XChunk};
use crate::backend::cpu::simd::portable::reduce;

/// The block and the index in it of byte `p` of a chunk (the lane order of mod.rs).
#[inline(always)]
const fn position(p: usize) -> (usize, usize) {
    ((p / 16) % 2, p % 16 + 16 * (p / 32))
}

/// Round half to even for |v| < 2^22, with adds only (the same bits as `round_ties_even`, and
/// it vectorizes): 1.5·2^23 has no fraction bits left, so the add rounds v in the FPU's mode.
#[inline(always)]
fn round_even(v: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    (v + MAGIC) - MAGIC
}

/// One block in two int8 planes and the step of the fine one: with d = max|x| / 127,
/// hi = round-half-even(x / d), lo = round-half-even((x − hi·d) · 256 / d), so that
/// x ≈ (d / 256)·(256·hi + lo).
#[inline(always)]
fn quantize_block(x: &[f32; 32]) -> ([i8; 32], [i8; 32], f32) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = if d > 0.0 { 1.0 / d } else { 0.0 };
    let (mut hi, mut lo) = ([0i8; 32], [0i8; 32]);
    for ((hi, lo), &v) in hi.iter_mut().zip(lo.iter_mut()).zip(x) {
        let h = round_even((v * id).clamp(-127.0, 127.0));
        let residual = (-h).mul_add(d, v);
        *hi = h as i8;
        *lo = round_even((residual * id * 256.0).clamp(-127.0, 127.0)) as i8;
    }
    (hi, lo, d / 256.0)
}

/// One activation row (x.len() a multiple of 32) into its chunks (`out.len() == chunks(x.len())`).
/// The same source runs inside each ISA's target-feature wrapper (avx512.rs, avx2.rs), where
/// LLVM vectorizes it and `mul_add` becomes one instruction instead of a libm call, with the same
/// IEEE results; mod.rs's `quantize_row` picks.
#[inline(always)]
pub fn quantize_row(x: &[f32], out: &mut [XChunk]) {
    let blocks = x.len() / 32;
    for (c, chunk) in out.iter_mut().enumerate() {
        *chunk = XChunk::ZERO;
        for half in 0..2 {
            let b = 2 * c + half;
            if b >= blocks {
                continue;
            }
            let (hi, lo, d) = quantize_block(x[b * 32..(b + 1) * 32].try_into().unwrap());
            // Values 0..16 go to bytes 16·half.., values 16..32 to 32 + 16·half.. (`position`).
            for (at, from) in [(16 * half, 0), (32 + 16 * half, 16)] {
                chunk.q[at..at + 16].copy_from_slice(&hi[from..from + 16]);
                chunk.lo[at..at + 16].copy_from_slice(&lo[from..from + 16]);
                chunk.dx[at / 4..at / 4 + 4].fill(d);
            }
            let sum: i32 = hi.iter().zip(&lo).map(|(&h, &l)| 256 * i32::from(h) + i32::from(l)).sum();
            chunk.s[4 * half] = d * sum as f32;
        }
        let q16 = |p: usize| 256 * i32::from(chunk.q[p]) + i32::from(chunk.lo[p]);
        for l in 0..16 {
            chunk.sum4[l] = (0..4).map(|t| q16(4 * l + t)).sum();
        }
        for j in 0..32 {
            // |256·q + lo| ≤ 256·127 + 127: exact in i16.
            (chunk.even[j], chunk.odd[j]) = (q16(2 * j) as i16, q16(2 * j + 1) as i16);
        }
    }
}

pub(super) fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Levels (unsigned, as the chunk holds them), d and m of one ggml block.
fn unpack_block(kind: Kind, b: &[u8]) -> ([u8; 32], f32, f32) {
    let mut u = [0u8; 32];
    let nibbles = |u: &mut [u8; 32], qs: &[u8]| {
        for j in 0..16 {
            u[j] = qs[j] & 0x0f;
            u[j + 16] = qs[j] >> 4;
        }
    };
    let high_bits = |u: &mut [u8; 32], qh: &[u8]| {
        let qh = u32::from_le_bytes(qh[..4].try_into().unwrap());
        for (j, u) in u.iter_mut().enumerate() {
            *u |= (((qh >> j) & 1) as u8) << 4;
        }
    };
    match kind {
        Kind::Q4_0 => {
            nibbles(&mut u, &b[2..18]);
            (u, f16_at(b, 0), 0.0)
        }
        Kind::Q4_1 => {
            nibbles(&mut u, &b[4..20]);
            (u, f16_at(b, 0), f16_at(b, 2))
        }
        Kind::Q5_0 => {
            nibbles(&mut u, &b[6..22]);
            high_bits(&mut u, &b[2..6]);
            (u, f16_at(b, 0), 0.0)
        }
        Kind::Q5_1 => {
            nibbles(&mut u, &b[8..24]);
            high_bits(&mut u, &b[4..8]);
            (u, f16_at(b, 0), f16_at(b, 2))
        }
        Kind::Q8_0 => {
            for (u, &q) in u.iter_mut().zip(&b[2..34]) {
                *u = q ^ 0x80;
            }
            (u, f16_at(b, 0), 0.0)
        }
        Kind::Nibbles(_) | Kind::Q4_K | Kind::Q5_K | Kind::Q6_K => {
            unreachable!("group-wise and k-quant rows unpack by their own functions")
        }
    }
}

/// NF4 level `code` as its two planes (h, l): round(4095·NF4[code]) = 32·(h − 128) + l.
pub const fn nf4_planes(code: usize) -> (u8, u8) {
    let level = super::NF4_LEVELS[code];
    (((level >> 5) + 128) as u8, (level & 31) as u8)
}

/// Chunk `c` of a 4-bit row of quant/intn (value i of a block in data byte i / 2, the even value
/// in the low nibble; INT4 and NF4 headers: d or absmax at bytes 0..2, INT4's z at byte 2;
/// NF4_DQ: D at bytes 0..2 and c_g at byte 2 + g).
fn unpack_nibble_chunk(n: Nibbles, kind: Kind, row: &[u8], c: usize) -> WChunk {
    let (len, bb) = (kind.block_len(), kind.block_bytes());
    let values = kind.row_values(row.len());
    let mut w = WChunk::ZERO;
    for p in 0..64 {
        let (half, at) = position(p);
        let v = 64 * c + 32 * half + at;
        if v >= values {
            continue;
        }
        let block = &row[(v / len) * bb..(v / len + 1) * bb];
        let i = v % len;
        let code = (block[4 + i / 2] >> (4 * (i % 2))) & 0x0f;
        match n.code {
            Code::Int4 => {
                w.u[p] = code;
                w.dw[p / 4] = f16_at(block, 0);
                w.z[p / 4] = i32::from(block[2]);
            }
            Code::Nf4 | Code::Nf4Dq => {
                (w.u[p], w.u2[p]) = nf4_planes(code as usize);
                let scale = match n.code {
                    Code::Nf4Dq => f16_at(block, 0) * f32::from(block[2 + i / n.group]),
                    _ => f16_at(block, 0),
                };
                w.dw[p / 4] = scale / 4095.0;
            }
        }
    }
    w
}

/// Chunk `c` of a k-quant row (quant/kquant's layouts): values 64·(c % 4).. of super-block c / 4.
/// A lane's 4 values share one sub-block (of 32 in Q4_K/Q5_K, of 16 in Q6_K), so its scale and
/// minimum are the sub-block's: d_w = d·sc (exact: an f16 times an integer below 2^8) and, for
/// Q4_K/Q5_K, m_w = −(dmin·m), so that d_w·u + m_w is the dequantizer's (d·sc)·u − dmin·m.
fn unpack_kquant_chunk(kind: Kind, row: &[u8], c: usize) -> WChunk {
    use crate::quant::kquant::q4_k_scale_min as scale_min;
    let bb = kind.block_bytes();
    let b = &row[(c / 4) * bb..(c / 4 + 1) * bb];
    let mut w = WChunk::ZERO;
    for p in 0..64 {
        let (half, at) = position(p);
        let (v, l) = (64 * (c % 4) + 32 * half + at, p / 4);
        if kind == Kind::Q6_K {
            // ql[64h + l + 32·(k % 2)] (low nibble for k < 2), bits 2k of qh[32h + l], scale v / 16.
            let (h, k, i) = (v / 128, (v % 128) / 32, v % 32);
            let ql = b[64 * h + i + 32 * (k % 2)];
            let low = if k < 2 { ql & 0x0f } else { ql >> 4 };
            w.u[p] = low | ((b[128 + 32 * h + i] >> (2 * k)) & 3) << 4;
            w.dw[l] = f16_at(b, 208) * f32::from(b[192 + v / 16] as i8);
            continue;
        }
        // Q4_K / Q5_K: the nibble in byte 32·(v / 64) + v % 32 of qs (low for v % 64 < 32); Q5_K's
        // fifth bit is bit v / 32 of qh[v % 32].
        let qs = if kind == Kind::Q4_K { &b[16..] } else { &b[48..] };
        let byte = qs[32 * (v / 64) + v % 32];
        let mut u = if v % 64 < 32 { byte & 0x0f } else { byte >> 4 };
        if kind == Kind::Q5_K {
            u |= ((b[16 + v % 32] >> (v / 32)) & 1) << 4;
        }
        let (sc, m) = scale_min(&b[4..16], v / 32);
        w.u[p] = u;
        w.dw[l] = f16_at(b, 0) * f32::from(sc);
        w.mw[l] = -(f16_at(b, 2) * f32::from(m));
    }
    w
}

/// Chunk `c` of a weight row (whole blocks of `kind`).
pub fn unpack_chunk(kind: Kind, row: &[u8], c: usize) -> WChunk {
    if let Kind::Nibbles(n) = kind {
        return unpack_nibble_chunk(n, kind, row, c);
    }
    if kind.is_kquant() {
        return unpack_kquant_chunk(kind, row, c);
    }
    let bb = kind.block_bytes();
    let blocks = row.len() / bb;
    let mut w = WChunk::ZERO;
    for half in 0..2 {
        let b = 2 * c + half;
        if b >= blocks {
            continue;
        }
        let (u, d, m) = unpack_block(kind, &row[b * bb..(b + 1) * bb]);
        for p in (0..64).filter(|&p| position(p).0 == half) {
            w.u[p] = u[position(p).1];
        }
        for l in (0..16).filter(|&l| (l / 4) % 2 == half) {
            w.dw[l] = d;
            w.mw[l] = if kind.has_min() { m } else { 0.0 };
        }
    }
    w
}

/// One chunk into the 16 lane accumulators (mod.rs's numerics).
pub fn step(kind: Kind, acc: &mut [f32; 16], w: &WChunk, x: &XChunk) {
    for l in 0..16 {
        let plane = |u: &[u8; 64], q: &[i8; 64]| -> i32 {
            (0..4).map(|t| i32::from(u[4 * l + t]) * i32::from(q[4 * l + t])).sum()
        };
        let mut s = (plane(&w.u, &x.q) << 8) + plane(&w.u, &x.lo);
        if kind.two_planes() {
            s = ((s - (x.sum4[l] << 7)) << 5) + (plane(&w.u2, &x.q) << 8) + plane(&w.u2, &x.lo);
        }
        if let Some(shift) = kind.offset_shift() {
            s -= x.sum4[l] << shift;
        }
        if kind.zero_point() {
            s -= w.z[l] * x.sum4[l];
        }
        acc[l] = (s as f32).mul_add(w.dw[l] * x.dx[l], acc[l]);
        if kind.has_min() {
            acc[l] = w.mw[l].mul_add(x.s[l], acc[l]);
        }
    }
}

/// dot(x, row) the int8 way: the definition the fast kernels equal.
pub fn dot_ref(kind: Kind, row: &[u8], x: &[XChunk]) -> f32 {
    let mut acc = [0.0f32; 16];
    for (c, xc) in x.iter().enumerate() {
        step(kind, &mut acc, &unpack_chunk(kind, row, c), xc);
    }
    reduce(acc)
}
