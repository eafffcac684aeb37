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
use crate::quant::{Format, dequantize_row};

use super::buffer::{CpuWeight, f32s, f32s_mut, weight_storage};
use super::{Cpu, simd};

/// Weight rows per task: enough work to amortize scheduling, small enough to balance 2–64 cores
/// (1536 columns → 192 tasks) and to keep the dequantized tile in L2 (8 · k floats).
const TILE_N: usize = 8;

thread_local! {
    /// Dequantized weight rows of the current tile: [TILE_N, k].
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
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
    scratch: &'a mut Vec<f32>,
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
    if scratch.len() < TILE_N * k {
        scratch.resize(TILE_N * k, 0.0);
    }
    for (chunk, r) in scratch.chunks_exact_mut(k).zip(range.clone()) {
        dequantize_row(w.format(), w.row(r), chunk);
    }
    for (slot, chunk) in rows.iter_mut().zip(scratch.chunks_exact(k)).take(range.len()) {
        *slot = chunk;
    }
    rows
}

/// dst[:, n0 + j] = x · w_rows[j]ᵀ for every row of x.   x: [m, k]; w_rows: ≤ TILE_N rows of k
///
/// # Safety
/// No other thread may touch columns n0..n0 + w_rows.len() of `out` meanwhile.
unsafe fn tile_dots(x: &[f32], m: usize, k: usize, n: usize, n0: usize, w_rows: &[&[f32]], out: &Columns) {
    let x_row = |i: usize| &x[i * k..(i + 1) * k];
    let m4 = m - m % 4;
    // Four activation rows per weight row: each weight chunk is loaded once for four outputs.
    for i in (0..m4).step_by(4) {
        let xs = [x_row(i), x_row(i + 1), x_row(i + 2), x_row(i + 3)];
        for (j, w_row) in w_rows.iter().enumerate() {
            let d = simd::dot4(xs, w_row);
            for (r, value) in d.into_iter().enumerate() {
                // SAFETY: column n0 + j belongs to this task (the caller's contract).
                unsafe { out.write((i + r) * n + n0 + j, value) };
            }
        }
    }
    // Leftover rows (all rows when m < 4, as in decoding): four weight rows per activation row.
    for i in m4..m {
        let x_i = x_row(i);
        let mut groups = w_rows.chunks_exact(4);
        let mut j = 0;
        for g in &mut groups {
            let d = simd::dot4([g[0], g[1], g[2], g[3]], x_i);
            for (r, value) in d.into_iter().enumerate() {
                // SAFETY: as above.
                unsafe { out.write(i * n + n0 + j + r, value) };
            }
            j += 4;
        }
        for w_row in groups.remainder() {
            // SAFETY: as above.
            unsafe { out.write(i * n + n0 + j, simd::dot(x_i, w_row)) };
            j += 1;
        }
    }
}
