//! AVX-512 VNNI kernels of the int8 path, step for step reference.rs (mod.rs's numerics), so
//! their bits equal the portable code's (tests below):
//!
//! - [`dot_span`]: one quantized activation row against a span of weight rows, four at a time, each chunk of two ggml
//!   blocks decoded in registers into lane order (nibbles: one shift and two masks; Q5's fifth
//!   bits: one masked byte add) and met by one `vpdpbusd` per activation plane (the decode
//!   path, m < 4);
//! - [`unpack_row`] + [`gemm`]: the tile's chunks decoded once into memory, then 4 × 4 blocks of
//!   activation rows × weight rows, each chunk loaded once per block (the batched path).

use std::arch::x86_64::*;
use std::sync::LazyLock;

use super::reference::nf4_planes;
use super::reference::{step as step_ref, unpack_chunk};
use super::tags::{Q4_0, Q4_1, Q5_0, Q5_1, dispatch, kind_of};
use super::{Code, Kind, Nibbles, WChunk, XChunk, kquant_avx512};
use crate::backend::cpu::avx512::reduce;

/// Whether this CPU runs these kernels (unless `ULTRA_CPU_DISABLE` turns AVX-512 off).
pub static AVAILABLE: LazyLock<bool> = LazyLock::new(|| {
    *crate::backend::cpu::avx512::AVAILABLE
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512vnni")
        && is_x86_feature_detected!("avx512vbmi")
});

/// For a 4-bit format's byte t of [low nibbles of 32 data bytes, their high nibbles] (values 2j and
/// 2j + 1 of the chunk), the chunk byte each goes to: chunk byte p holds value 32·half + at
/// (reference.rs's `position`), found at t = (v % 2)·32 + v / 2.
const INT4_ORDER: [u8; 64] = {
    let mut order = [0u8; 64];
    let mut p = 0;
    while p < 64 {
        let v = 32 * ((p / 16) % 2) + p % 16 + 16 * (p / 32);
        order[p] = ((v % 2) * 32 + v / 2) as u8;
        p += 1;
    }
    order
};

/// One chunk of a weight row in registers: levels, d, m and z lanes (WChunk's fields).
#[derive(Clone, Copy)]
struct WRegs {
    u: __m512i,
    dw: __m512,
    mw: __m512,
    z: __m512i,
    u2: __m512i,
}

/// One chunk of an activation row in registers, the offset correction already shifted.
struct XRegs {
    q: __m512i,
    lo: __m512i,
    sum: __m512i,
    corr: __m512i,
    dx: __m512,
    s: __m512,
}

#[inline(always)]
unsafe fn load_x<const K: u8>(x: &XChunk) -> XRegs {
    // SAFETY: XChunk is 64-byte aligned and each field is 64 bytes.
    unsafe {
        let sum4 = _mm512_load_si512(x.sum4.as_ptr().cast());
        let corr = match kind_of(K).offset_shift() {
            Some(3) => _mm512_slli_epi32::<3>(sum4),
            Some(4) => _mm512_slli_epi32::<4>(sum4),
            Some(5) => _mm512_slli_epi32::<5>(sum4),
            Some(_) => _mm512_slli_epi32::<7>(sum4),
            None => _mm512_setzero_si512(),
        };
        XRegs {
            sum: sum4,
            q: _mm512_load_si512(x.q.as_ptr().cast()),
            lo: _mm512_load_si512(x.lo.as_ptr().cast()),
            corr,
            dx: _mm512_load_ps(x.dx.as_ptr()),
            s: _mm512_load_ps(x.s.as_ptr()),
        }
    }
}

/// reference::step on registers.
#[inline(always)]
unsafe fn step<const K: u8>(acc: __m512, w: &WRegs, x: &XRegs) -> __m512 {
    let WRegs { u, dw, mw, z, u2 } = *w;
    // SAFETY: register arithmetic only (the caller has the features).
    unsafe {
        let hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, x.q);
        let mut isum =
            _mm512_add_epi32(_mm512_slli_epi32::<8>(hi), _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, x.lo));
        if kind_of(K).offset_shift().is_some() {
            isum = _mm512_sub_epi32(isum, x.corr);
        }
        if kind_of(K).zero_point() {
            isum = _mm512_sub_epi32(isum, _mm512_mullo_epi32(z, x.sum));
        }
        if kind_of(K).two_planes() {
            let h = _mm512_slli_epi32::<5>(_mm512_sub_epi32(isum, _mm512_slli_epi32::<7>(x.sum)));
            let l_hi = _mm512_slli_epi32::<8>(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u2, x.q));
            isum = _mm512_add_epi32(_mm512_add_epi32(h, l_hi), _mm512_dpbusd_epi32(_mm512_setzero_si512(), u2, x.lo));
        }
        let acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, x.dx), acc);
        if kind_of(K).has_min() { _mm512_fmadd_ps(mw, x.s, acc) } else { acc }
    }
}

/// Lanes 0–3, 8–11 from element i of `v`, lanes 4–7, 12–15 from element j.
#[inline(always)]
unsafe fn spread(v: __m128, i: i32, j: i32) -> __m512 {
    // SAFETY: register arithmetic only.
    unsafe {
        let idx = _mm512_setr_epi32(i, i, i, i, j, j, j, j, i, i, i, i, j, j, j, j);
        _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v))
    }
}

/// The levels (lane order), d, m and z lanes of chunk `c` of a row at `p`, all 64 values present.
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
    debug_assert!(!kind_of(K).is_kquant(), "k-quant chunks decode by kquant_chunk, scales once per super-block");
    // SAFETY: every read stays inside blocks 2c and 2c + 1 (offsets per reference.rs).
    unsafe {
        let (b0, b1) = (p.add(2 * c * bb), p.add((2 * c + 1) * bb));
        let (z, u2) = (_mm512_setzero_si512(), _mm512_setzero_si512());
        match K {
            Q4_0 => {
                let (dw, mw) = d_only(b0, b1);
                WRegs { u: nibbles(pair(b0, b1, 2)), dw, mw, z, u2 }
            }
            Q4_1 => {
                let (dw, mw) = d_and_m(b0, b1);
                WRegs { u: nibbles(pair(b0, b1, 4)), dw, mw, z, u2 }
            }
            Q5_0 => {
                let (dw, mw) = d_only(b0, b1);
                WRegs { u: fifth_bits(nibbles(pair(b0, b1, 6)), b0, b1, 2), dw, mw, z, u2 }
            }
            Q5_1 => {
                let (dw, mw) = d_and_m(b0, b1);
                WRegs { u: fifth_bits(nibbles(pair(b0, b1, 8)), b0, b1, 4), dw, mw, z, u2 }
            }
            _ => {
                let (dw, mw) = d_only(b0, b1);
                let lo = _mm512_castsi256_si512(pair(b0, b1, 2));
                let u = _mm512_inserti64x4::<1>(lo, pair(b0, b1, 18));
                WRegs { u: _mm512_xor_si512(u, _mm512_set1_epi8(-128)), dw, mw, z, u2 }
            }
        }
    }
}

// decode's parts, as functions rather than closures: a closure's body does not inherit the
// caller's target features, so where LLVM did not inline one (unpack_row_k) its intrinsics ran
// as calls (benches/notes/cpu.md). Each reads only the two blocks at b0 and b1.

/// 16 bytes at `off` of each block: [b0's, b1's].
#[inline(always)]
unsafe fn pair(b0: *const u8, b1: *const u8, off: usize) -> __m256i {
    // SAFETY: the caller's contract (off + 16 ≤ the block size).
    unsafe {
        _mm256_inserti128_si256::<1>(
            _mm256_castsi128_si256(_mm_loadu_si128(b0.add(off).cast())),
            _mm_loadu_si128(b1.add(off).cast()),
        )
    }
}

/// Two blocks' 16 nibble bytes each into the chunk's lane order: low nibbles, then high.
#[inline(always)]
unsafe fn nibbles(t: __m256i) -> __m512i {
    // SAFETY: register arithmetic only.
    unsafe {
        let mask = _mm256_set1_epi8(0x0f);
        let lo = _mm256_and_si256(t, mask);
        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(t), mask);
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
    }
}

/// Q5's fifth bits (the u32 at `at` of each block) added to the levels as 16.
#[inline(always)]
unsafe fn fifth_bits(u: __m512i, b0: *const u8, b1: *const u8, at: usize) -> __m512i {
    // SAFETY: the caller's contract (at + 4 ≤ the block size).
    unsafe {
        let h0 = u64::from(b0.add(at).cast::<u32>().read_unaligned());
        let h1 = u64::from(b1.add(at).cast::<u32>().read_unaligned());
        let bits = (h0 & 0xffff) | (h1 & 0xffff) << 16 | (h0 >> 16) << 32 | (h1 >> 16) << 48;
        _mm512_mask_add_epi8(u, bits, u, _mm512_set1_epi8(0x10))
    }
}

/// d lanes of blocks with a scale only (m lanes 0).
#[inline(always)]
unsafe fn d_only(b0: *const u8, b1: *const u8) -> (__m512, __m512) {
    // SAFETY: the caller's contract (2 bytes at each block).
    unsafe {
        let u16_at = |b: *const u8| u32::from(b.cast::<u16>().read_unaligned());
        let v = _mm_cvtph_ps(_mm_cvtsi32_si128((u16_at(b0) | u16_at(b1) << 16) as i32));
        (spread(v, 0, 1), _mm512_setzero_ps())
    }
}

/// d and m lanes of blocks with a minimum (f16 d, m at bytes 0..4).
#[inline(always)]
unsafe fn d_and_m(b0: *const u8, b1: *const u8) -> (__m512, __m512) {
    // SAFETY: the caller's contract (4 bytes at each block).
    unsafe {
        let u32_at = |b: *const u8| b.cast::<u32>().read_unaligned() as i32;
        let v = _mm_cvtph_ps(_mm_set_epi32(0, 0, u32_at(b1), u32_at(b0)));
        (spread(v, 0, 2), spread(v, 1, 3))
    }
}

/// NF4's two level planes as byte tables for `vpermb` (codes 0..16 index the first 16 bytes).
const NF4_TABLES: [[u8; 64]; 2] = {
    let mut t = [[0u8; 64]; 2];
    let mut q = 0;
    while q < 64 {
        let (h, l) = nf4_planes(q % 16);
        (t[0][q], t[1][q]) = (h, l);
        q += 1;
    }
    t
};

/// decode for the 4-bit group-wise formats: chunk c's 64 codes are 32 data bytes of one block
/// (blocks of ≥ 64 values) or of two (INT4/NF4 at G = 32); one permute puts them in lane order;
/// NF4 then looks each code's two level planes up with one permute each.
///
/// # Safety
/// Chunk c's 64 values lie in the row at `p`.
#[inline(always)]
unsafe fn decode_nibbles(p: *const u8, c: usize, n: Nibbles) -> WRegs {
    let kind = Kind::Nibbles(n);
    let (len, bb) = (kind.block_len(), kind.block_bytes());
    // SAFETY: every read stays inside the blocks holding values 64c..64c + 64.
    unsafe {
        let f16 = |b: *const u8| _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(b.cast::<u16>().read_unaligned())));
        // The scale of value 64c + o's group and INT4's zero point, as f32 / i32 scalars.
        let scale_of = |b: *const u8, o: usize| -> (f32, i32) {
            let d = _mm_cvtss_f32(f16(b));
            match n.code {
                Code::Int4 => (d, i32::from(*b.add(2))),
                Code::Nf4 => (d / 4095.0, 0),
                Code::Nf4Dq => (d * f32::from(*b.add(2 + o / n.group)) / 4095.0, 0),
            }
        };
        let (bytes, (s0, z0), (s1, z1)) = if len == 32 {
            let (b0, b1) = (p.add(2 * c * bb), p.add((2 * c + 1) * bb));
            let t = _mm256_inserti128_si256::<1>(
                _mm256_castsi128_si256(_mm_loadu_si128(b0.add(4).cast())),
                _mm_loadu_si128(b1.add(4).cast()),
            );
            (t, scale_of(b0, 0), scale_of(b1, 0))
        } else {
            let b = p.add((64 * c / len) * bb);
            let o = 64 * c % len;
            let t = _mm256_loadu_si256(b.add(4 + o / 2).cast());
            (t, scale_of(b, o), scale_of(b, o + 32))
        };
        let mask = _mm256_set1_epi8(0x0f);
        let lo = _mm256_and_si256(bytes, mask);
        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(bytes), mask);
        let t = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
        let codes = _mm512_permutexvar_epi8(_mm512_loadu_si512(INT4_ORDER.as_ptr().cast()), t);
        let dw = _mm512_setr_ps(s0, s0, s0, s0, s1, s1, s1, s1, s0, s0, s0, s0, s1, s1, s1, s1);
        let z = _mm512_setr_epi32(z0, z0, z0, z0, z1, z1, z1, z1, z0, z0, z0, z0, z1, z1, z1, z1);
        let (mw, zero) = (_mm512_setzero_ps(), _mm512_setzero_si512());
        match n.code {
            Code::Int4 => WRegs { u: codes, dw, mw, z, u2: zero },
            Code::Nf4 | Code::Nf4Dq => {
                let table = |i: usize| _mm512_loadu_si512(NF4_TABLES[i].as_ptr().cast());
                let u = _mm512_permutexvar_epi8(codes, table(0));
                WRegs { u, dw, mw, z: zero, u2: _mm512_permutexvar_epi8(codes, table(1)) }
            }
        }
    }
}

/// reference::step for the last chunk when it holds one block.
#[inline(always)]
unsafe fn tail_step(kind: Kind, acc: __m512, w: &WChunk, x: &XChunk) -> __m512 {
    let mut lanes = [0.0f32; 16];
    // SAFETY: 16 floats each way.
    unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), acc) };
    step_ref(kind, &mut lanes, w, x);
    // SAFETY: as above.
    unsafe { _mm512_loadu_ps(lanes.as_ptr()) }
}

/// How far ahead in a span of weight rows `dot_rows_k` asks the cache for bytes: with rows of
/// 360–680 bytes (SmolLM2, Gemma 3) distances of 3–11 KiB measured alike, 1.5 KiB lost 20%.
const PREFETCH_BYTES: usize = 6 << 10;

/// [dot(x, row) for row in rows], each x chunk loaded once for all R rows.
///
/// # Safety
/// The CPU has the features (AVAILABLE); each row holds the blocks of x.len() chunks' values
/// (2·x.len() blocks, or one less).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,f16c")]
unsafe fn dot_rows_k<const K: u8, const R: usize>(rows: [&[u8]; R], x: &[XChunk]) -> [f32; R] {
    let kind = kind_of(K);
    if kind.is_kquant() {
        // SAFETY: the caller's contract.
        return unsafe { dot_rows_kquant::<K, R>(rows, x) };
    }
    let full = kind.row_values(rows[0].len()) / 64;
    let chunk_bytes = 64 * kind.block_bytes() / kind.block_len();
    let mut acc = [_mm512_setzero_ps(); R];
    for (c, xc) in x.iter().enumerate().take(full) {
        // SAFETY: chunk c < full has both blocks in every row (the caller's contract).
        unsafe {
            let xr = load_x::<K>(xc);
            for r in 0..R {
                // The span's rows lie back to back, so the R streams' hints together cover the
                // R rows' bytes PREFETCH_BYTES further on, rows of later calls: a decode row is
                // short (a few hundred bytes), too short for prefetching within it to be early
                // enough (benches/notes/cpu.md). A hint: an address past the span is never
                // dereferenced.
                let ahead = rows[r].as_ptr().wrapping_add(c * chunk_bytes + PREFETCH_BYTES);
                _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
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
    acc.map(|v| reduce(v))
}

/// Chunk j of the k-quant super-block at `b` in registers, its scales from
/// [`kquant_avx512::scales`] (decoded once for the super-block's 4 chunks).
///
/// # Safety
/// A super-block of format K lies at `b`; j < 4; the CPU has the features.
#[inline(always)]
unsafe fn kquant_chunk<const K: u8>(b: *const u8, j: usize, (dl, ml): (__m512, __m512)) -> WRegs {
    // SAFETY: the caller's contract.
    unsafe {
        let zero = _mm512_setzero_si512();
        let (dw, mw) = (kquant_avx512::chunk_lanes::<K>(dl, j), kquant_avx512::chunk_lanes::<K>(ml, j));
        WRegs { u: kquant_avx512::levels::<K>(b, j), dw, mw, z: zero, u2: zero }
    }
}

/// dot_rows_k for the k-quants, the same steps: each super-block's scales and minima decoded once
/// per row for its 4 chunks (per chunk they cost as much as the levels: Q4_K decoded 17 tok/s
/// that way against 24 this way on a llama-1b shape, Q4_0 23).
///
/// # Safety
/// As dot_rows_k (a k-quant row has whole super-blocks: 4 chunks each, no tail).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,f16c")]
unsafe fn dot_rows_kquant<const K: u8, const R: usize>(rows: [&[u8]; R], x: &[XChunk]) -> [f32; R] {
    let bb = kind_of(K).block_bytes();
    let mut acc = [_mm512_setzero_ps(); R];
    for (s, xs) in x.chunks_exact(4).enumerate() {
        // SAFETY: super-block s lies in every row (the caller's contract); the rest is registers.
        unsafe {
            let at: [*const u8; R] = std::array::from_fn(|r| rows[r].as_ptr().add(s * bb));
            let scales: [(__m512, __m512); R] = std::array::from_fn(|r| kquant_avx512::scales::<K>(at[r]));
            for (j, xc) in xs.iter().enumerate() {
                let xr = load_x::<K>(xc);
                for r in 0..R {
                    // As dot_rows_k: a hint PREFETCH_BYTES further on in the span.
                    _mm_prefetch::<_MM_HINT_T0>(at[r].wrapping_add(j * bb / 4 + PREFETCH_BYTES).cast());
                    acc[r] = step::<K>(acc[r], &kquant_chunk::<K>(at[r], j, scales[r]), &xr);
                }
            }
        }
    }
    acc.map(|v| reduce(v))
}

/// dot_rows_k over the rows of `rows` (contiguous, `row_bytes` each), four at a time.
///
/// # Safety
/// The CPU has the features; each row holds the blocks of x.len() chunks' values.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,f16c")]
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
    dispatch!(kind, run)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,f16c")]
unsafe fn unpack_row_k<const K: u8>(row: &[u8], dst: &mut [WChunk]) {
    let kind = kind_of(K);
    if kind.is_kquant() {
        let bb = kind.block_bytes();
        for (s, ws) in dst.chunks_exact_mut(4).enumerate() {
            // SAFETY: super-block s lies in the row (unpack_row checked the lengths).
            unsafe {
                let b = row.as_ptr().add(s * bb);
                let scales = kquant_avx512::scales::<K>(b);
                for (j, w) in ws.iter_mut().enumerate() {
                    store::<K>(w, &kquant_chunk::<K>(b, j, scales));
                }
            }
        }
        return;
    }
    let full = kind.row_values(row.len()) / 64;
    for (c, w) in dst.iter_mut().enumerate() {
        if c >= full {
            *w = unpack_chunk(kind, row, c);
            continue;
        }
        // SAFETY: chunk c < full has both blocks.
        unsafe { store::<K>(w, &decode::<K>(row.as_ptr(), c)) };
    }
}

/// A chunk's registers into `w`, only the fields format K reads (`step`): writing all five was
/// ~40% of a B = 8 step (320 bytes per chunk of 40 for Q4_1; benches/notes/cpu.md).
///
/// # Safety
/// The CPU has AVX-512 F (WChunk's fields are 64 aligned bytes each).
#[inline(always)]
unsafe fn store<const K: u8>(w: &mut WChunk, r: &WRegs) {
    let kind = kind_of(K);
    // SAFETY: aligned 64-byte fields; the caller has the features.
    unsafe {
        _mm512_store_si512(w.u.as_mut_ptr().cast(), r.u);
        _mm512_store_ps(w.dw.as_mut_ptr(), r.dw);
        if kind.has_min() {
            _mm512_store_ps(w.mw.as_mut_ptr(), r.mw);
        }
        if kind.zero_point() {
            _mm512_store_si512(w.z.as_mut_ptr().cast(), r.z);
        }
        if kind.two_planes() {
            _mm512_store_si512(w.u2.as_mut_ptr().cast(), r.u2);
        }
    }
}

/// dst = unpack_chunk(kind, row, c) for every chunk c < dst.len(), in the fields `kind` reads (u
/// and d_w always, m_w, z and u2 where its `step` uses them; the others keep what they held).
/// Panics unless AVAILABLE and the row holds the blocks of dst.len() chunks.
pub fn unpack_row(kind: Kind, row: &[u8], dst: &mut [WChunk]) {
    assert!(*AVAILABLE && kind.row_values(row.len()).div_ceil(64) == dst.len(), "unpack_row: lengths");
    macro_rules! go {
        ($k:expr) => {
            // SAFETY: AVAILABLE and the lengths are checked above.
            unsafe { unpack_row_k::<{ $k }>(row, dst) }
        };
    }
    dispatch!(kind, go)
}

/// The I × J dots of activation rows i0.. and tile rows j0.., each over c chunks.
///
/// # Safety
/// The CPU has the features; x holds rows i0..i0 + I and the tile rows j0..j0 + J, c chunks each.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,f16c")]
unsafe fn block<const K: u8, const I: usize, const J: usize>(
    tile: &[WChunk],
    x: &[XChunk],
    c: usize,
    i0: usize,
    j0: usize,
) -> [[f32; J]; I] {
    let mut acc = [[_mm512_setzero_ps(); J]; I];
    for ch in 0..c {
        // SAFETY: indices within the rows the caller vouches for; the chunks are 64-byte aligned.
        unsafe {
            let xr: [XRegs; I] = std::array::from_fn(|i| load_x::<K>(&x[(i0 + i) * c + ch]));
            for j in 0..J {
                let t = &tile[(j0 + j) * c + ch];
                let w = WRegs {
                    u: _mm512_load_si512(t.u.as_ptr().cast()),
                    dw: _mm512_load_ps(t.dw.as_ptr()),
                    mw: _mm512_load_ps(t.mw.as_ptr()),
                    z: _mm512_load_si512(t.z.as_ptr().cast()),
                    u2: _mm512_load_si512(t.u2.as_ptr().cast()),
                };
                for i in 0..I {
                    acc[i][j] = step::<K>(acc[i][j], &w, &xr[i]);
                }
            }
        }
    }
    let mut out = [[0.0f32; J]; I];
    for i in 0..I {
        for j in 0..J {
            out[i][j] = reduce(acc[i][j]);
        }
    }
    out
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,f16c")]
unsafe fn gemm_k<const K: u8>(tile: &[WChunk], x: &[XChunk], c: usize, mut write: impl FnMut(usize, usize, f32)) {
    let (m, n) = (x.len() / c, tile.len() / c);
    let mut emit = |i0: usize, j0: usize, v: &[&[f32]]| {
        for (i, row) in v.iter().enumerate() {
            for (j, &value) in row.iter().enumerate() {
                write(i0 + i, j0 + j, value);
            }
        }
    };
    let (m4, n4) = (m / 4 * 4, n / 4 * 4);
    // SAFETY: every block's rows are < m and < n (the loop bounds); the caller has the features.
    unsafe {
        for i0 in (0..m4).step_by(4) {
            for j0 in (0..n4).step_by(4) {
                let v = block::<K, 4, 4>(tile, x, c, i0, j0);
                emit(i0, j0, &v.each_ref().map(|r| &r[..]));
            }
            for j0 in n4..n {
                let v = block::<K, 4, 1>(tile, x, c, i0, j0);
                emit(i0, j0, &v.each_ref().map(|r| &r[..]));
            }
        }
        for i0 in m4..m {
            for j0 in (0..n4).step_by(4) {
                let v = block::<K, 1, 4>(tile, x, c, i0, j0);
                emit(i0, j0, &[&v[0][..]]);
            }
            for j0 in n4..n {
                let v = block::<K, 1, 1>(tile, x, c, i0, j0);
                emit(i0, j0, &[&v[0][..]]);
            }
        }
    }
}

/// write(i, r, dot_ref of activation row i and tile row r) for every pair. Panics unless
/// AVAILABLE and both x and tile hold whole rows of c chunks.
pub fn gemm(kind: Kind, tile: &[WChunk], x: &[XChunk], c: usize, write: impl FnMut(usize, usize, f32)) {
    assert!(*AVAILABLE && c > 0 && x.len().is_multiple_of(c) && tile.len().is_multiple_of(c), "gemm: lengths");
    macro_rules! go {
        ($k:expr) => {
            // SAFETY: AVAILABLE and the lengths are checked above.
            unsafe { gemm_k::<{ $k }>(tile, x, c, write) }
        };
    }
    dispatch!(kind, go)
}
