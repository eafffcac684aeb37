//! matmul on the CPU: dst[m, n] = Σ_k x[m, k] · w[n, k], weights read in place in any format.
//!
//! Work split: rayon tasks own tiles of TILE_N output columns (weight rows). Ways to compute a
//! tile: with int8 activations (q8/) its kernels, each following q8/'s definitions; otherwise two
//! f32 ways with the same bits (each output is one `dot(x[i], dequantize(w[j]))` in the fixed
//! order of simd.rs, whatever m, the tiling or the path: batch invariant):
//! - few activation rows (decode) with a quantized weight that has a fused kernel (legacy
//!   formats on AVX-512: [`avx512::dot_quant`]; k-quants on AVX-512 or AVX2:
//!   [`kquant::dot_quant`]): each weight block is decoded in registers, so the weights are read
//!   once and never stored;
//! - otherwise the task dequantizes its weight rows once into thread-local scratch (F32 rows
//!   aligned in memory are read directly) and runs every dot product of the tile with
//!   [`simd::dot4x4`] / [`simd::dot4`] / [`simd::dot`], sharing the tile across all m rows.

use std::cell::RefCell;

use rayon::prelude::*;

use crate::backend::{Tensor, Weight, check};
use crate::error::Result;
use crate::quant::Format;

use super::buffer::{CpuWeight, f32s, f32s_mut, weight_storage};
use super::columns::Columns;
use super::dequant::dequantize_row_fast;
use super::{Activations, Cpu, q8, simd};
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use super::{amx, matmul_bf16};
#[cfg(target_arch = "x86_64")]
use super::{avx512, intn, kquant};

/// Weight rows per task: enough work to amortize scheduling (a 576 × 576 decode matmul is little
/// work in all: benches/notes/cpu.md), small enough to balance 2–16 cores (576 columns → 18
/// tasks) and to keep the dequantized tile in L2 (32 · k floats, 192 KiB at k = 1536).
const TILE_N: usize = 32;

/// Below this many activation rows the fused kernel decodes each weight block once per row;
/// from it on, dequantizing the tile once and sharing it across the rows is cheaper.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the fused kernels are AVX-512
const FUSED_MAX_M: usize = 4;

/// With int8 activations, the most rows that take the decode path's int8 kernels (decode, batches
/// of up to 16 rows, speculative verification of up to 15 drafts), whose per-lane f32 work suits
/// few rows. Above it the panel GEMM (q8/panels.rs: f32 work once per block, 16 outputs per
/// instruction) runs where the CPU and format have it, else the f32 tile. The ways sum
/// differently, so with int8, prefill chunks of different sizes are not bit-identical, except
/// chunks of more than `INT8_MAX_M` rows with one another (benches/notes/cpu.md). (The panels
/// started at 64 rows while building them cost as much as their products at 32; with their
/// unpacking inlined, a B = 32 decode batch runs 864 tok/s on them against 666 on the f32 tile.)
pub(super) const INT8_MAX_M: usize = 16;

/// With AMX activations, the fewest rows that take the bf16 tiles (matmul_bf16.rs); between
/// `INT8_MAX_M` and this the int8 panel GEMM runs. Packing a task's weights into bf16 tiles
/// costs as much at 17 rows as at 64, and below ~48–64 rows that fixed cost made the tiles
/// slower than the panels at SmolLM2's shapes (benches/notes/cpu.md).
pub(super) const AMX_MIN_M: usize = 64;

/// 16 floats on a 64-byte boundary: scratch rows start on cache lines, so no SIMD load splits one.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct Line([f32; 16]);

thread_local! {
    /// Dequantized weight rows of the current tile: [TILE_N, stride], stride = k rounded up to 16.
    static SCRATCH: RefCell<Vec<Line>> = const { RefCell::new(Vec::new()) };
}

/// See [`crate::Backend::matmul`].   x: [m, k]; w: [n, k]; dst: [m, n]
pub fn matmul(x: &Tensor<Cpu>, w: &Weight<Cpu>, dst: &mut Tensor<Cpu>, activations: Activations) -> Result<()> {
    matmul_sharing(x, w, dst, activations, &mut None)
}

/// See [`crate::Backend::matmuls`]: the matmuls of one x (q/k/v, gate/up) quantize it once.
pub fn matmuls(
    x: &Tensor<Cpu>,
    parts: &mut [(&Weight<Cpu>, &mut Tensor<Cpu>)],
    activations: Activations,
) -> Result<()> {
    let mut xq = None;
    parts.iter_mut().try_for_each(|(w, dst)| matmul_sharing(x, w, dst, activations, &mut xq))
}

/// matmul, with x's int8 quantization (made on first use) kept in `xq` for the next weight.
fn matmul_sharing(
    x: &Tensor<Cpu>,
    w: &Weight<Cpu>,
    dst: &mut Tensor<Cpu>,
    activations: Activations,
    xq: &mut Option<Vec<q8::XChunk>>,
) -> Result<()> {
    let op = "matmul";
    let storage = weight_storage(op, w)?;
    let (m, k, n) = (x.rows, w.cols, w.rows);
    check::matmul(x, w, dst)?;
    let x = f32s(op, x)?;
    let dst = f32s_mut(op, dst)?;
    if dst.is_empty() {
        return Ok(());
    }
    if k == 0 {
        dst.fill(0.0);
        return Ok(());
    }
    let out = Columns::new(dst);
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    if activations == Activations::Amx && m >= AMX_MIN_M && storage.format().is_quantized() && *amx::AVAILABLE {
        let xp = matmul_bf16::pack_x(x, m, k);
        (0..n.div_ceil(TILE_N)).into_par_iter().for_each(|tile| {
            let (n0, n1) = (tile * TILE_N, ((tile + 1) * TILE_N).min(n));
            SCRATCH.with_borrow_mut(|scratch| {
                let w_rows = weight_rows(storage, n0..n1, k, scratch);
                // SAFETY: this task is the only one writing columns n0..n1 of dst.
                unsafe { matmul_bf16::tile(&w_rows[..n1 - n0], &xp, (m, k, n), n0..n1, &out) };
            });
        });
        return Ok(());
    }
    #[cfg_attr(not(target_arch = "x86_64"), allow(clippy::collapsible_if))] // a second branch on x86-64
    if let (Activations::Int8 | Activations::Amx, Some(kind)) =
        (activations, q8::Kind::of(storage.format()).filter(|&k| q8::runs(k)))
    {
        if m <= INT8_MAX_M {
            let xq: &[q8::XChunk] = xq.get_or_insert_with(|| q8::quantize(x, m, k));
            (0..n.div_ceil(TILE_N)).into_par_iter().for_each(|tile| {
                let (n0, n1) = (tile * TILE_N, ((tile + 1) * TILE_N).min(n));
                // SAFETY: this task is the only one writing columns n0..n1 of dst.
                unsafe { q8::tile(storage, kind, xq, m, n, n0..n1, &out) };
            });
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        if q8::panel_tile::runs(kind) {
            let xq: &[q8::XChunk] = xq.get_or_insert_with(|| q8::quantize(x, m, k));
            let xb = q8::panels::x_blocks(kind, xq, q8::chunks(k), k / 32);
            (0..n.div_ceil(TILE_N)).into_par_iter().for_each(|tile| {
                let (n0, n1) = (tile * TILE_N, ((tile + 1) * TILE_N).min(n));
                // SAFETY: this task is the only one writing columns n0..n1 of dst.
                unsafe { q8::panel_tile::tile(storage, kind, (xq, &xb), (m, n), n0..n1, &out) };
            });
            return Ok(());
        }
    }
    #[cfg(target_arch = "x86_64")]
    let fused = [avx512::handles, kquant::handles, intn::handles].iter().any(|h| h(storage.format()));
    #[cfg(target_arch = "x86_64")]
    if m < FUSED_MAX_M && fused {
        (0..n.div_ceil(TILE_N)).into_par_iter().for_each(|tile| {
            let (n0, n1) = (tile * TILE_N, ((tile + 1) * TILE_N).min(n));
            // SAFETY: this task is the only one writing columns n0..n1 of dst.
            unsafe { fused_tile(storage, x, m, k, n, n0..n1, &out) };
        });
        return Ok(());
    }
    (0..n.div_ceil(TILE_N)).into_par_iter().for_each(|tile| {
        let (n0, n1) = (tile * TILE_N, ((tile + 1) * TILE_N).min(n));
        SCRATCH.with_borrow_mut(|scratch| {
            let w_rows = weight_rows(storage, n0..n1, k, scratch);
            // SAFETY: this task is the only one writing columns n0..n1 of dst.
            unsafe { tile_dots(x, m, k, n, n0, &w_rows[..n1 - n0], &out) };
        });
    });
    Ok(())
}

/// dst[i, j] = dot(x[i], dequantize(w[j])) for j in `cols`, decoding blocks in registers.
///
/// # Safety
/// No other thread may touch columns `cols` of `out` meanwhile.
#[cfg(target_arch = "x86_64")]
unsafe fn fused_tile(
    w: &CpuWeight,
    x: &[f32],
    m: usize,
    k: usize,
    n: usize,
    cols: std::ops::Range<usize>,
    out: &Columns,
) {
    let mut values = [0.0f32; 4];
    for i in 0..m {
        let x_i = &x[i * k..(i + 1) * k];
        for j0 in cols.clone().step_by(4) {
            let group = j0..(j0 + 4).min(cols.end);
            let rows: [&[u8]; 4] = std::array::from_fn(|r| w.row((j0 + r).min(group.end - 1)));
            let values = &mut values[..group.len()];
            if w.format().is_kquant() {
                kquant::dot_quant(w.format(), &rows[..group.len()], x_i, values);
            } else if intn::handles(w.format()) {
                intn::dot_quant(w.format(), &rows[..group.len()], x_i, values);
            } else {
                avx512::dot_quant(w.format(), &rows[..group.len()], x_i, values);
            }
            for (j, &v) in group.zip(values.iter()) {
                // SAFETY: column j belongs to this task (the caller's contract).
                unsafe { out.write(i * n + j, v) };
            }
        }
    }
}

/// The f32 values of weight rows `range` (≤ TILE_N of them): borrowed from the weight bytes
/// for aligned F32, otherwise dequantized into `scratch`.
fn weight_rows<'a>(
    w: &'a CpuWeight,
    range: std::ops::Range<usize>,
    k: usize,
    scratch: &'a mut Vec<Line>,
) -> [&'a [f32]; TILE_N] {
    let mut rows: [&[f32]; TILE_N] = [&[]; TILE_N];
    if w.format() == Format::F32 {
        let all_aligned = range.clone().all(|r| bytemuck::try_cast_slice::<u8, f32>(w.row(r)).is_ok());
        if all_aligned {
            for (slot, r) in rows.iter_mut().zip(range) {
                *slot = bytemuck::cast_slice(w.row(r));
            }
            return rows;
        }
    }
    let lines_per_row = k.div_ceil(16);
    if scratch.len() < TILE_N * lines_per_row {
        scratch.resize(TILE_N * lines_per_row, Line([0.0; 16]));
    }
    let floats: &mut [f32] = bytemuck::cast_slice_mut(scratch.as_mut_slice());
    for (chunk, r) in floats.chunks_exact_mut(lines_per_row * 16).zip(range.clone()) {
        #[cfg(target_arch = "x86_64")]
        if kquant::handles(w.format()) {
            kquant::dequantize_row(w.format(), w.row(r), &mut chunk[..k]);
            continue;
        }
        #[cfg(target_arch = "x86_64")]
        if intn::handles(w.format()) {
            intn::dequantize_row(w.format(), w.row(r), &mut chunk[..k]);
            continue;
        }
        #[cfg(target_arch = "x86_64")]
        if avx512::handles(w.format()) {
            avx512::dequantize_row(w.format(), w.row(r), &mut chunk[..k]);
            continue;
        }
        dequantize_row_fast(w.format(), w.row(r), &mut chunk[..k]);
    }
    let floats: &[f32] = floats;
    for (slot, chunk) in rows.iter_mut().zip(floats.chunks_exact(lines_per_row * 16)).take(range.len()) {
        *slot = &chunk[..k];
    }
    rows
}

/// dst[i, n0 + j] = dot(x[i], w_rows[j]) for every row i of x.   x: [m, k]; w_rows: ≤ TILE_N rows of k
///
/// Blocks of 4 activation rows × 4 weight rows go through `dot4x4` (each chunk of the eight rows
/// loaded once for four products; the tile stays in L2, the 4 activation rows in L1); leftover
/// rows and columns use `dot4` / `dot`. All are bit-identical to `dot`, so the grouping never shows.
///
/// # Safety
/// No other thread may touch columns n0..n0 + w_rows.len() of `out` meanwhile.
unsafe fn tile_dots(x: &[f32], m: usize, k: usize, n: usize, n0: usize, w_rows: &[&[f32]], out: &Columns) {
    let x_row = |i: usize| &x[i * k..(i + 1) * k];
    let mut i = 0;
    while i + 4 <= m {
        let xs = [x_row(i), x_row(i + 1), x_row(i + 2), x_row(i + 3)];
        let mut groups = w_rows.chunks_exact(4);
        let mut j = n0;
        for g in &mut groups {
            let values = simd::dot4x4(xs, [g[0], g[1], g[2], g[3]]);
            for (r, row) in values.iter().enumerate() {
                for (c, &value) in row.iter().enumerate() {
                    // SAFETY: column j + c < n0 + w_rows.len() belongs to this task (the caller's contract).
                    unsafe { out.write((i + r) * n + j + c, value) };
                }
            }
            j += 4;
        }
        for w_row in groups.remainder() {
            for (r, value) in simd::dot4(xs, w_row).into_iter().enumerate() {
                // SAFETY: as above.
                unsafe { out.write((i + r) * n + j, value) };
            }
            j += 1;
        }
        i += 4;
    }
    for i in i..m {
        let x_i = x_row(i);
        let mut groups = w_rows.chunks_exact(4);
        let mut j = n0;
        for g in &mut groups {
            for (r, value) in simd::dot4([g[0], g[1], g[2], g[3]], x_i).into_iter().enumerate() {
                // SAFETY: as above.
                unsafe { out.write(i * n + j + r, value) };
            }
            j += 4;
        }
        for w_row in groups.remainder() {
            // SAFETY: as above.
            unsafe { out.write(i * n + j, simd::dot(x_i, w_row)) };
            j += 1;
        }
    }
}
