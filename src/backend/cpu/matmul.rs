//! matmul on the CPU: dst[m, n] = Σ_k x[m, k] · w[n, k], weights read in place in any format.
//!
//! Work split: rayon tasks own tiles of TILE_N output columns (weight rows). A task dequantizes
//! its weight rows once into thread-local scratch (F32 rows aligned in memory are read directly),
//! then computes every dot product of the tile with [`simd::dot4`] / [`simd::dot`]. Each output is
//! one `dot(x[m], w[n])` in the fixed order of simd.rs, whatever m or the tiling: batch invariant.

use std::cell::RefCell;

use rayon::prelude::*;

use crate::backend::{Tensor, Weight, expect_shape};
use crate::error::Result;
use crate::quant::Format;

use super::buffer::{CpuWeight, f32s, f32s_mut, weight_storage};
use super::dequant::dequantize_row_fast;
use super::{Cpu, simd};

/// Weight rows per task: enough work to amortize scheduling, small enough to balance 2–64 cores
/// (1536 columns → 192 tasks) and to keep the dequantized tile in L2 (8 · k floats).
const TILE_N: usize = 8;

/// 16 floats on a 64-byte boundary: scratch rows start on cache lines, so no SIMD load splits one.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct Line([f32; 16]);

thread_local! {
    /// Dequantized weight rows of the current tile: [TILE_N, stride], stride = k rounded up to 16.
    static SCRATCH: RefCell<Vec<Line>> = const { RefCell::new(Vec::new()) };
}

/// `dst` shared by the tasks; each task writes only its own columns.
struct Columns {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: tasks write disjoint elements (distinct column tiles), and `dst` outlives the parallel
// loop that uses this handle (the loop finishes before `matmul` returns).
unsafe impl Sync for Columns {}

impl Columns {
    /// # Safety
    /// No other thread may access element `i` while this call runs.
    unsafe fn write(&self, i: usize, value: f32) {
        assert!(i < self.len, "matmul: output index out of range");
        // SAFETY: in bounds (checked above); exclusive per the caller's contract.
        unsafe { self.ptr.add(i).write(value) };
    }
}

/// See [`crate::Backend::matmul`].   x: [m, k]; w: [n, k]; dst: [m, n]
pub fn matmul(x: &Tensor<Cpu>, w: &Weight<Cpu>, dst: &mut Tensor<Cpu>) -> Result<()> {
    let op = "matmul";
    let storage = weight_storage(op, w)?;
    let (m, k, n) = (x.rows, w.cols, w.rows);
    expect_shape(op, x, m, k)?;
    expect_shape(op, dst, m, n)?;
    let x = f32s(op, x)?;
    let dst = f32s_mut(op, dst)?;
    if dst.is_empty() {
        return Ok(());
    }
    if k == 0 {
        dst.fill(0.0);
        return Ok(());
    }
    let out = Columns { ptr: dst.as_mut_ptr(), len: dst.len() };
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
/// One activation row against four weight rows at a time: the four weight rows are the streamed
/// operand (64-byte aligned in scratch), the activation row is loaded once per chunk for four
/// outputs. `dot4` is bit-identical to four `dot` calls, so the grouping never shows.
///
/// # Safety
/// No other thread may touch columns n0..n0 + w_rows.len() of `out` meanwhile.
unsafe fn tile_dots(x: &[f32], m: usize, k: usize, n: usize, n0: usize, w_rows: &[&[f32]], out: &Columns) {
    for i in 0..m {
        let x_i = &x[i * k..(i + 1) * k];
        let mut groups = w_rows.chunks_exact(4);
        let mut j = n0;
        for g in &mut groups {
            for (r, value) in simd::dot4([g[0], g[1], g[2], g[3]], x_i).into_iter().enumerate() {
                // SAFETY: column j + r < n0 + w_rows.len() belongs to this task (the caller's contract).
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
