//! AVX2 kernels of the int8 path, for CPUs without AVX-512 VNNI, step for step reference.rs
//! (mod.rs's numerics), so their bits equal the portable code's and the AVX-512 kernels' (tests):
//!
//! - a chunk's 16 lanes are two ymm halves (lanes 0–7: chunk bytes 0..32, lanes 8–15: bytes
//!   32..64); the per-lane scales repeat across the halves (lanes l and l + 8 hold the same block),
//!   so d, m and z take one register each;
//! - each lane's sum of four byte products is `vpmaddubsw` (unsigned × signed byte pairs into
//!   i16) then `vpmaddwd` (i16 pairs into i32), exact as long as no i16 pair sum saturates:
//!   levels below 64 meet activations of at most 127 unchanged; NF4's 8-bit coarse plane goes in
//!   signed, as |s| against q with s's sign (`vpsignb`), so its pair sums stay within 2·128·127;
//!   Q8_0's signed levels meet 256·q + lo whole, as i16 pairs in one `vpmaddwd` per half of each
//!   lane's bytes (`planes_i16`: two multiplies per 32 bytes instead of four, no sign fix-ups),
//!   and the offset correction is already in the integer;
//! - [`dot_span`] decodes each chunk of four weight rows at a time in registers (decode, m < 4);
//!   [`batch`] decodes each chunk of one weight row in registers and meets it with four
//!   activation rows at a time (batches: with 16 ymm registers an unpacked tile in memory, as
//!   AVX-512 uses, costs more loads than decoding again).

use std::arch::x86_64::*;
use std::sync::LazyLock;

use super::reference::nf4_planes;
use super::reference::{quantize_row as quantize_row_ref, step as step_ref, unpack_chunk};
use super::tags::{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, dispatch, kind_of};
use super::{Code, Kind, Nibbles, WChunk, XChunk};

use crate::backend::cpu::simd::avx2::reduce;

/// Whether this CPU runs these kernels (unless `ULTRA_CPU_DISABLE=avx2` turns them off).
pub static AVAILABLE: LazyLock<bool> =
    LazyLock::new(|| crate::backend::cpu::isa::avx2_fma() && is_x86_feature_detected!("f16c"));

/// Whether format K's levels go in signed (8-bit levels; see the module comment).
const fn signed(k: u8) -> bool {
    k == Q8_0 || kind_of(k).two_planes()
}

/// One chunk of a weight row in registers. `u`: the levels of each half (signed for 8-bit
/// levels: Q8_0's q, NF4's h − 128); `dw`, `mw`, `z`: lanes 0–7, the same for lanes 8–15;
/// `u2`: NF4's fine level plane.
#[derive(Clone, Copy)]
struct WRegs {
    u: [__m256i; 2],
    dw: __m256,
    mw: __m256,
    z: __m256i,
    u2: [__m256i; 2],
}

/// One chunk of an activation row in registers.
struct XRegs {
    q: [__m256i; 2],
    lo: [__m256i; 2],
    /// 256·q + lo at even and odd byte positions, as i16 (XChunk::even, odd).
    even: [__m256i; 2],
    odd: [__m256i; 2],
    sum: [__m256i; 2],
    dx: __m256,
    /// Lanes 0–7 of XChunk::s (lanes 8–15 are zero).
    s: __m256,
}

#[inline(always)]
unsafe fn load_x(x: &XChunk) -> XRegs {
    // SAFETY: XChunk is 64-byte aligned and each field is 64 bytes.
    unsafe {
        let half = |p: *const u8, h: usize| _mm256_load_si256(p.add(32 * h).cast());
        let (q, lo, sum) = (x.q.as_ptr().cast::<u8>(), x.lo.as_ptr().cast::<u8>(), x.sum4.as_ptr().cast::<u8>());
        let (even, odd) = (x.even.as_ptr().cast::<u8>(), x.odd.as_ptr().cast::<u8>());
        XRegs {
            q: [half(q, 0), half(q, 1)],
            lo: [half(lo, 0), half(lo, 1)],
            even: [half(even, 0), half(even, 1)],
            odd: [half(odd, 0), half(odd, 1)],
            sum: [half(sum, 0), half(sum, 1)],
            dx: _mm256_load_ps(x.dx.as_ptr()),
            s: _mm256_load_ps(x.s.as_ptr()),
        }
    }
}

/// Each i32 lane's Σ u·(256·q + lo) over its four bytes, u unsigned below 64.
#[inline(always)]
unsafe fn planes(u: __m256i, q: __m256i, lo: __m256i) -> __m256i {
    // SAFETY: register arithmetic only (the caller has the features).
    unsafe {
        let coarse = _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), _mm256_set1_epi16(256));
        _mm256_add_epi32(coarse, _mm256_madd_epi16(_mm256_maddubs_epi16(u, lo), _mm256_set1_epi16(1)))
    }
}

/// The same for signed levels s: |s| against q and lo carrying s's sign.
#[inline(always)]
unsafe fn planes_signed(s: __m256i, q: __m256i, lo: __m256i) -> __m256i {
    // SAFETY: register arithmetic only.
    unsafe { planes(_mm256_abs_epi8(s), _mm256_sign_epi8(q, s), _mm256_sign_epi8(lo, s)) }
}

/// Each i32 lane's Σ s·(256·q + lo) over its four bytes for signed levels s, as i16 products:
/// the even bytes of s sign-extended in place (shift left, arithmetic shift right) meet the
/// even positions' 256·q + lo, the odd bytes (arithmetic shift right) the odd ones, so
/// each i32 lane of the two `vpmaddwd` holds two of its lane's four products. Pair sums stay
/// within 2·128·32,639 < 2^31.
#[inline(always)]
unsafe fn planes_i16(s: __m256i, even: __m256i, odd: __m256i) -> __m256i {
    // SAFETY: register arithmetic only.
    unsafe {
        let s_even = _mm256_srai_epi16::<8>(_mm256_slli_epi16::<8>(s));
        let s_odd = _mm256_srai_epi16::<8>(s);
        _mm256_add_epi32(_mm256_madd_epi16(s_even, even), _mm256_madd_epi16(s_odd, odd))
    }
}

/// reference::step on registers, for half h of the chunk.
#[inline(always)]
unsafe fn step_half<const K: u8>(acc: __m256, w: &WRegs, x: &XRegs, h: usize) -> __m256 {
    let kind = kind_of(K);
    // SAFETY: register arithmetic only.
    unsafe {
        let mut isum = if K == Q8_0 {
            planes_i16(w.u[h], x.even[h], x.odd[h])
        } else if signed(K) {
            planes_signed(w.u[h], x.q[h], x.lo[h])
        } else {
            planes(w.u[h], x.q[h], x.lo[h])
        };
        match kind.offset_shift() {
            Some(3) => isum = _mm256_sub_epi32(isum, _mm256_slli_epi32::<3>(x.sum[h])),
            Some(4) => isum = _mm256_sub_epi32(isum, _mm256_slli_epi32::<4>(x.sum[h])),
            _ => {} // Q8_0: signed levels hold the offset already
        }
        if kind.zero_point() {
            isum = _mm256_sub_epi32(isum, _mm256_mullo_epi32(w.z, x.sum[h]));
        }
        if kind.two_planes() {
            isum = _mm256_add_epi32(_mm256_slli_epi32::<5>(isum), planes(w.u2[h], x.q[h], x.lo[h]));
        }
        let acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(w.dw, x.dx), acc);
        if kind.has_min() && h == 0 { _mm256_fmadd_ps(w.mw, x.s, acc) } else { acc }
    }
}

/// Both halves of a chunk into the two accumulators.
#[inline(always)]
unsafe fn step<const K: u8>(acc: [__m256; 2], w: &WRegs, x: &XRegs) -> [__m256; 2] {
    // SAFETY: register arithmetic only.
    unsafe { [step_half::<K>(acc[0], w, x, 0), step_half::<K>(acc[1], w, x, 1)] }
}

/// Lanes 0–3 from element i of `v`, lanes 4–7 from element j.
#[inline(always)]
unsafe fn spread(v: __m128, i: i32, j: i32) -> __m256 {
    // SAFETY: register arithmetic only.
    unsafe { _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v), _mm256_setr_epi32(i, i, i, i, j, j, j, j)) }
}

/// Byte p of the result is 0x10 where bit p of `bits` is set, else 0. (A target-feature fn, not
/// a closure in decode: closures do not inherit the caller's features, and the intrinsics would
/// stay calls.)
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn fifth_bits(bits: u32) -> __m256i {
    let byte_of_bit = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(bits as i32), byte_of_bit);
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
    _mm256_and_si256(set, _mm256_set1_epi8(0x10))
}

/// The levels, d, m and z of chunk `c` of a row at `p`, all 64 values present.
///
/// # Safety
/// Blocks 2c and 2c + 1 of format K exist at `p`.
#[inline(always)]
unsafe fn decode<const K: u8>(p: *const u8, c: usize) -> WRegs {
    let bb = kind_of(K).block_bytes();
    if let Kind::Nibbles(n) = kind_of(K) {
        // SAFETY: the caller's contract (chunk c's values lie in the row).
        return unsafe { decode_nibbles(p, c, n) };
    }
    // SAFETY: every read stays inside blocks 2c and 2c + 1 (offsets per reference.rs).
    unsafe {
        let (b0, b1) = (p.add(2 * c * bb), p.add((2 * c + 1) * bb));
        let u16_at = |b: *const u8, at: usize| u32::from(b.add(at).cast::<u16>().read_unaligned());
        let u32_at = |b: *const u8, at: usize| b.add(at).cast::<u32>().read_unaligned();
        let pair = |off: usize| _mm256_loadu2_m128i(b1.add(off).cast(), b0.add(off).cast());
        let nibbles = |t: __m256i| {
            let mask = _mm256_set1_epi8(0x0f);
            [_mm256_and_si256(t, mask), _mm256_and_si256(_mm256_srli_epi16::<4>(t), mask)]
        };
        let d_only = || {
            let v = _mm_cvtph_ps(_mm_cvtsi32_si128((u16_at(b0, 0) | u16_at(b1, 0) << 16) as i32));
            (spread(v, 0, 1), _mm256_setzero_ps())
        };
        let d_and_m = || {
            let v = _mm_cvtph_ps(_mm_set_epi32(0, 0, u32_at(b1, 0) as i32, u32_at(b0, 0) as i32));
            (spread(v, 0, 2), spread(v, 1, 3))
        };
        let (z, u2) = (_mm256_setzero_si256(), [_mm256_setzero_si256(); 2]);
        let (u, (dw, mw)) = match K {
            Q4_0 => (nibbles(pair(2)), d_only()),
            Q4_1 => (nibbles(pair(4)), d_and_m()),
            Q5_0 => (with_fifth(nibbles(pair(6)), b0, b1, 2), d_only()),
            Q5_1 => (with_fifth(nibbles(pair(8)), b0, b1, 4), d_and_m()),
            _ => ([pair(2), pair(18)], d_only()), // Q8_0: q as signed levels
        };
        WRegs { u, dw, mw, z, u2 }
    }
}

/// Q5's fifth bits (qh at byte `at` of blocks b0 and b1) added to the nibbles: half 0 holds
/// values 0..16 of both blocks, half 1 values 16..32.
///
/// # Safety
/// Both blocks hold 4 bytes at `at`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn with_fifth(u: [__m256i; 2], b0: *const u8, b1: *const u8, at: usize) -> [__m256i; 2] {
    // SAFETY: the caller's contract.
    unsafe {
        let (h0, h1) = (b0.add(at).cast::<u32>().read_unaligned(), b1.add(at).cast::<u32>().read_unaligned());
        let bits = [(h0 & 0xffff) | (h1 & 0xffff) << 16, (h0 >> 16) | (h1 >> 16) << 16];
        [_mm256_or_si256(u[0], fifth_bits(bits[0])), _mm256_or_si256(u[1], fifth_bits(bits[1]))]
    }
}

/// NF4's level planes as `vpshufb` tables (both 128-bit lanes): h − 128 as signed bytes, and l.
const NF4_TABLES: [[u8; 32]; 2] = {
    let mut t = [[0u8; 32]; 2];
    let mut q = 0;
    while q < 32 {
        let (h, l) = nf4_planes(q % 16);
        (t[0][q], t[1][q]) = (h ^ 0x80, l);
        q += 1;
    }
    t
};

/// decode for the 4-bit group-wise formats: chunk c's 64 codes are 32 data bytes of one block
/// (blocks of ≥ 64 values) or of two (G = 32); byte t holds values 2t and 2t + 1, so interleaving
/// the low and high nibbles byte by byte within each 128-bit lane gives lane order directly.
///
/// # Safety
/// Chunk c's 64 values lie in the row at `p`.
#[inline(always)]
unsafe fn decode_nibbles(p: *const u8, c: usize, n: Nibbles) -> WRegs {
    let kind = Kind::Nibbles(n);
    let (len, bb) = (kind.block_len(), kind.block_bytes());
    // SAFETY: every read stays inside the blocks holding values 64c..64c + 64.
    unsafe {
        let f16 =
            |b: *const u8| _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(b.cast::<u16>().read_unaligned()))));
        // The scale of value 64c + o's group and INT4's zero point.
        let scale_of = |b: *const u8, o: usize| -> (f32, i32) {
            match n.code {
                Code::Int4 => (f16(b), i32::from(*b.add(2))),
                Code::Nf4 => (f16(b) / 4095.0, 0),
                Code::Nf4Dq => (f16(b) * f32::from(*b.add(2 + o / n.group)) / 4095.0, 0),
            }
        };
        let (bytes, (s0, z0), (s1, z1)) = if len == 32 {
            let (b0, b1) = (p.add(2 * c * bb), p.add((2 * c + 1) * bb));
            (_mm256_loadu2_m128i(b1.add(4).cast(), b0.add(4).cast()), scale_of(b0, 0), scale_of(b1, 0))
        } else {
            let b = p.add((64 * c / len) * bb);
            let o = 64 * c % len;
            (_mm256_loadu_si256(b.add(4 + o / 2).cast()), scale_of(b, o), scale_of(b, o + 32))
        };
        let mask = _mm256_set1_epi8(0x0f);
        let (even, odd) = (_mm256_and_si256(bytes, mask), _mm256_and_si256(_mm256_srli_epi16::<4>(bytes), mask));
        let codes = [_mm256_unpacklo_epi8(even, odd), _mm256_unpackhi_epi8(even, odd)];
        let dw = _mm256_setr_ps(s0, s0, s0, s0, s1, s1, s1, s1);
        let z = _mm256_setr_epi32(z0, z0, z0, z0, z1, z1, z1, z1);
        let (mw, zero) = (_mm256_setzero_ps(), _mm256_setzero_si256());
        match n.code {
            Code::Int4 => WRegs { u: codes, dw, mw, z, u2: [zero; 2] },
            Code::Nf4 | Code::Nf4Dq => {
                let table = |i: usize| _mm256_loadu_si256(NF4_TABLES[i].as_ptr().cast());
                let look = |i: usize| codes.map(|c| _mm256_shuffle_epi8(table(i), c));
                WRegs { u: look(0), dw, mw, z: zero, u2: look(1) }
            }
        }
    }
}

/// reference::step for the last chunk when it holds one block.
#[inline(always)]
unsafe fn tail_step(kind: Kind, acc: [__m256; 2], w: &WChunk, x: &XChunk) -> [__m256; 2] {
    let mut lanes = [0.0f32; 16];
    // SAFETY: 16 floats each way.
    unsafe {
        _mm256_storeu_ps(lanes.as_mut_ptr(), acc[0]);
        _mm256_storeu_ps(lanes.as_mut_ptr().add(8), acc[1]);
    }
    step_ref(kind, &mut lanes, w, x);
    // SAFETY: as above.
    unsafe { [_mm256_loadu_ps(lanes.as_ptr()), _mm256_loadu_ps(lanes.as_ptr().add(8))] }
}

/// [dot(x, row) for row in rows], each x chunk loaded once for all R rows.
///
/// The rows of a weight are contiguous and `tile` walks them in order, so the R rows' bytes are
/// followed by the next R rows': each chunk step asks the cache for its share of those (a hint;
/// the addresses are never dereferenced). A row is only a few hundred bytes, too short for the
/// hardware's stream prefetcher to get ahead of within it.
///
/// # Safety
/// The CPU has the features (AVAILABLE); each row holds the blocks of x.len() chunks' values
/// (2·x.len() blocks, or one less).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_rows_k<const K: u8, const R: usize>(rows: [&[u8]; R], x: &[XChunk]) -> [f32; R] {
    let kind = kind_of(K);
    let full = kind.row_values(rows[0].len()) / 64;
    let next = rows[R - 1].as_ptr_range().end;
    let lines = (R * rows[0].len()).div_ceil(64);
    let per_step = lines.div_ceil(full.max(1));
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    for (c, xc) in x.iter().enumerate().take(full) {
        // SAFETY: chunk c < full has both blocks in every row (the caller's contract); the
        // prefetches are hints only.
        unsafe {
            for t in c * per_step..((c + 1) * per_step).min(lines) {
                _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(64 * t).cast());
            }
            let xr = load_x(xc);
            for r in 0..R {
                let w = decode::<K>(rows[r].as_ptr(), c);
                acc[r] = step::<K>(acc[r], &w, &xr);
            }
        }
    }
    if let Some(xc) = x.get(full) {
        for r in 0..R {
            // SAFETY: register and array moves only.
            acc[r] = unsafe { tail_step(kind, acc[r], &unpack_chunk(kind, rows[r], full), xc) };
        }
    }
    acc.map(|[lo, hi]| reduce(lo, hi))
}

/// dot_rows_k over the rows of `rows` (contiguous, `row_bytes` each), four at a time.
///
/// # Safety
/// The CPU has the features; each row holds the blocks of x.len() chunks' values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_span_k<const K: u8>(rows: &[u8], row_bytes: usize, x: &[XChunk], out: &mut [f32]) {
    let row = |j: usize| &rows[j * row_bytes..(j + 1) * row_bytes];
    let n4 = out.len() / 4 * 4;
    // SAFETY: the caller's contract, for every row.
    unsafe {
        for j in (0..n4).step_by(4) {
            out[j..j + 4].copy_from_slice(&dot_rows_k::<K, 4>([row(j), row(j + 1), row(j + 2), row(j + 3)], x));
        }
        for (j, o) in out.iter_mut().enumerate().skip(n4) {
            *o = dot_rows_k::<K, 1>([row(j)], x)[0];
        }
    }
}

/// out[j] = dot_ref(kind, row j, x) bit for bit, for the out.len() rows that `rows` holds
/// back to back. Panics unless AVAILABLE and every row holds whole blocks for x.len() chunks.
pub fn dot_span(kind: Kind, rows: &[u8], x: &[XChunk], out: &mut [f32]) {
    assert!(*AVAILABLE && !out.is_empty() && rows.len().is_multiple_of(out.len()), "dot_span: rows");
    let row_bytes = rows.len() / out.len();
    assert!(
        row_bytes.is_multiple_of(kind.block_bytes()) && kind.row_values(row_bytes).div_ceil(64) == x.len(),
        "dot_span: row and activation lengths"
    );
    macro_rules! run {
        ($k:expr) => {
            // SAFETY: AVAILABLE and the lengths are checked above.
            unsafe { dot_span_k::<{ $k }>(rows, row_bytes, x, out) }
        };
    }
    dispatch!(kind, run, without_kquants)
}

/// The dots of activation rows i0..i0 + I (c chunks each) with one weight row: each chunk of the
/// row decoded once in registers and met by the I rows (their chunks come from L1).
///
/// # Safety
/// The CPU has the features; x holds rows i0..i0 + I; `row` holds the blocks of c chunks' values;
/// `next` is a hint only (the following row's bytes).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows_against<const K: u8, const I: usize>(
    row: &[u8],
    x: &[XChunk],
    c: usize,
    i0: usize,
    next: *const u8,
) -> [f32; I] {
    let kind = kind_of(K);
    let full = kind.row_values(row.len()) / 64;
    let lines = row.len().div_ceil(64);
    let per_step = lines.div_ceil(full.max(1));
    let mut acc = [[_mm256_setzero_ps(); 2]; I];
    for ch in 0..full {
        // SAFETY: chunk ch < full has both blocks (the caller's contract); prefetches are hints.
        unsafe {
            for t in ch * per_step..((ch + 1) * per_step).min(lines) {
                _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(64 * t).cast());
            }
            let w = decode::<K>(row.as_ptr(), ch);
            for (i, acc) in acc.iter_mut().enumerate() {
                *acc = step::<K>(*acc, &w, &load_x(&x[(i0 + i) * c + ch]));
            }
        }
    }
    if full < c {
        let w = unpack_chunk(kind, row, full);
        for (i, acc) in acc.iter_mut().enumerate() {
            // SAFETY: register and array moves only.
            *acc = unsafe { tail_step(kind, *acc, &w, &x[(i0 + i) * c + full]) };
        }
    }
    acc.map(|[lo, hi]| reduce(lo, hi))
}

/// batch for format K: weight rows one by one, activation rows four at a time.
///
/// # Safety
/// The CPU has the features; each row of `rows` (`row_bytes` each) holds the blocks of c chunks'
/// values and x holds whole rows of c chunks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn batch_k<const K: u8>(
    rows: &[u8],
    row_bytes: usize,
    x: &[XChunk],
    c: usize,
    mut write: impl FnMut(usize, usize, f32),
) {
    let (m, n) = (x.len() / c, rows.len() / row_bytes);
    let m4 = m / 4 * 4;
    for j in 0..n {
        let row = &rows[j * row_bytes..(j + 1) * row_bytes];
        let next = row.as_ptr_range().end;
        // SAFETY: the caller's contract; i0 + I ≤ m by the loop bounds.
        unsafe {
            for i0 in (0..m4).step_by(4) {
                for (i, v) in rows_against::<K, 4>(row, x, c, i0, next).into_iter().enumerate() {
                    write(i0 + i, j, v);
                }
            }
            for i in m4..m {
                write(i, j, rows_against::<K, 1>(row, x, c, i, next)[0]);
            }
        }
    }
}

/// write(i, j, dot_ref of activation row i and weight row j) for every pair, the weight rows
/// held back to back in `rows`. Panics unless AVAILABLE and the lengths agree.
pub fn batch(kind: Kind, rows: &[u8], n: usize, x: &[XChunk], c: usize, write: impl FnMut(usize, usize, f32)) {
    assert!(
        *AVAILABLE && n > 0 && c > 0 && rows.len().is_multiple_of(n) && x.len().is_multiple_of(c),
        "batch: lengths"
    );
    let row_bytes = rows.len() / n;
    assert!(
        row_bytes.is_multiple_of(kind.block_bytes()) && kind.row_values(row_bytes).div_ceil(64) == c,
        "batch: row and activation lengths"
    );
    macro_rules! go {
        ($k:expr) => {
            // SAFETY: AVAILABLE and the lengths are checked above.
            unsafe { batch_k::<{ $k }>(rows, row_bytes, x, c, write) }
        };
    }
    dispatch!(kind, go, without_kquants)
}

#[target_feature(enable = "avx2,fma")]
unsafe fn quantize_row_k(x: &[f32], out: &mut [XChunk]) {
    quantize_row_ref(x, out)
}

/// reference::quantize_row compiled for this ISA (the same bits). Panics unless AVAILABLE.
pub fn quantize_row(x: &[f32], out: &mut [XChunk]) {
    assert!(*AVAILABLE, "quantize_row: CPU not supported");
    // SAFETY: AVAILABLE implies the features.
    unsafe { quantize_row_k(x, out) }
}
