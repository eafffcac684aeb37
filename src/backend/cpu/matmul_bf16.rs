//! The AMX path of matmul (AMX activations mode, at least `AMX_MIN_M` rows, on CPUs with AMX):
//! x and each task's dequantized weight rows rounded to bf16 and multiplied on the tile unit with
//! f32 accumulators over the whole of k.
//!
//! Why bf16 and not AMX's int8: ggml's formats scale every 32 values, so an int8 tile product
//! must leave the tile unit after each block for an f32 epilogue (benches/notes/cpu.md: such a
//! kernel ran no faster than the VNNI panels). Dequantized bf16 weights carry their scales, so
//! the accumulators stay in the tiles from the first block to the last.
//!
//! Layouts (amx.rs `product_2x2`): x is the first operand, packed once per matmul as tiles of 16
//! rows × one 32-value slice (row-major inside, each tile 1 KiB contiguous: strided rows of x
//! were slower to load), an even number of 16-row groups; each task's weight rows are the
//! second, packed pair-interleaved. Products come out as 16 activation rows × 16 weight columns,
//! dst's own layout, so whole tiles are stored into dst by the tile unit (a transposed layout
//! cost a copy per row of each tile, 17% of prefill). Rows and k past the ends are zeros.

use std::cell::RefCell;

use super::amx::{self, TILE_K, TILE_ROWS, TILE_VALUES};
use super::columns::Columns;

/// Groups of 16 activation rows (even) and 32-value slices of k in `pack_x`'s output.
pub fn x_shape(m: usize, k: usize) -> (usize, usize) {
    (m.div_ceil(2 * TILE_ROWS) * 2, k.div_ceil(TILE_K))
}

/// x [m, k] as bf16 tiles [group][slice][row r][32]: element (r, e) is x[16 · group + r][32 ·
/// slice + e] (`x_shape`; zeros past m and k). Panics unless amx::AVAILABLE.
pub fn pack_x(x: &[f32], m: usize, k: usize) -> Vec<u16> {
    assert!(*amx::AVAILABLE && x.len() == m * k, "pack_x: CPU or lengths");
    let (groups, slices) = x_shape(m, k);
    let mut out = vec![0u16; groups * slices * TILE_VALUES];
    for (i, row) in x.chunks_exact(k).enumerate() {
        let (g, r) = (i / TILE_ROWS, i % TILE_ROWS);
        for s in 0..slices {
            let at = (g * slices + s) * TILE_VALUES + r * TILE_K;
            // SAFETY: AVAILABLE implies AVX-512 F and BF16.
            unsafe { slice_bf16(row, s, (&mut out[at..at + TILE_K]).try_into().expect("32")) };
        }
    }
    out
}

/// Values 32s..32s + 32 of `row` in bf16 into `dst`, zeros past its end.
///
/// # Safety
/// The CPU has AVX-512 F and BF16.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn slice_bf16(row: &[f32], s: usize, dst: &mut [u16; TILE_K]) {
    let mut padded = [0.0f32; TILE_K];
    let f: &[f32; TILE_K] = match row.get(s * TILE_K..(s + 1) * TILE_K) {
        // A whole slice converts in place (a copy of it was a memmove call per slice).
        Some(whole) => whole.try_into().expect("32"),
        None => {
            let part = &row[(s * TILE_K).min(row.len())..];
            padded[..part.len()].copy_from_slice(part);
            &padded
        }
    };
    let (lo, hi) = f.split_at(16);
    // SAFETY: the features (this function's contract).
    unsafe { amx::store_bf16x32(lo.try_into().expect("16"), hi.try_into().expect("16"), dst) }
}

thread_local! {
    /// The task's weight tiles: [2 groups][slices][16 pairs][16 columns][2].
    static W_TILES: RefCell<Vec<u16>> = const { RefCell::new(Vec::new()) };
}

/// dst[i, cols.start + j] = Σ_k bf16(x[i, k]) · bf16(w_rows[j][k]) for every i < m, f32 sums in
/// the tile unit's order. `w_rows`: the task's ≤ 32 dequantized rows; `xp`: pack_x of x.
/// Panics unless amx::AVAILABLE and the lengths agree.
///
/// # Safety
/// No other thread may touch columns `cols` of `out` meanwhile.
pub unsafe fn tile(
    w_rows: &[&[f32]],
    xp: &[u16],
    (m, k, n): (usize, usize, usize),
    cols: std::ops::Range<usize>,
    out: &Columns,
) {
    let (groups, slices) = x_shape(m, k);
    assert!(
        *amx::AVAILABLE
            && xp.len() == groups * slices * TILE_VALUES
            && cols.len() == w_rows.len()
            && w_rows.len() <= 2 * TILE_ROWS
            && w_rows.iter().all(|r| r.len() == k),
        "amx tile: CPU or lengths"
    );
    W_TILES.with_borrow_mut(|w| {
        // SAFETY: AVAILABLE implies AVX-512 F and BF16.
        unsafe { pack_w(w_rows, slices, w) };
        let b = [w.as_ptr(), w[slices * TILE_VALUES..].as_ptr()];
        amx::with_tiles(|| {
            for g0 in (0..groups).step_by(2) {
                let a = [xp[g0 * slices * TILE_VALUES..].as_ptr(), xp[(g0 + 1) * slices * TILE_VALUES..].as_ptr()];
                let i0 = g0 * TILE_ROWS;
                // SAFETY: inside with_tiles; each operand holds `slices` tiles (the lengths asserted
                // above, pack_w's size, groups even); the caller's contract for dst.
                unsafe {
                    match i0 + 2 * TILE_ROWS <= m && cols.len() == 2 * TILE_ROWS {
                        true => {
                            let c = std::array::from_fn(|t| {
                                out.block_ptr(i0 + t / 2 * TILE_ROWS, cols.start + t % 2 * TILE_ROWS, n)
                            });
                            amx::product_2x2(a, b, slices, c, 4 * n);
                        }
                        false => edge(a, b, slices, (i0, m, n), cols.clone(), out),
                    }
                }
            }
        });
    });
}

/// A 2 × 2 block that runs past m or past the task's columns: through a buffer, then its valid
/// part into dst.
///
/// # Safety
/// As `tile`, with `a`, `b` as `product_2x2` needs them.
unsafe fn edge(
    a: [*const u16; 2],
    b: [*const u16; 2],
    slices: usize,
    (i0, m, n): (usize, usize, usize),
    cols: std::ops::Range<usize>,
    out: &Columns,
) {
    let mut c = [0.0f32; 4 * TILE_ROWS * TILE_ROWS];
    let at = std::array::from_fn(|t| c[t * TILE_ROWS * TILE_ROWS..].as_mut_ptr());
    // SAFETY: the caller's contract; c holds four 16 × 16 tiles, rows 64 bytes apart.
    unsafe { amx::product_2x2(a, b, slices, at, 4 * TILE_ROWS) };
    for t in 0..4 {
        let (i, j0) = (i0 + t / 2 * TILE_ROWS, cols.start + t % 2 * TILE_ROWS);
        let len = TILE_ROWS.min(cols.end.saturating_sub(j0));
        if len == 0 {
            continue;
        }
        for r in 0..TILE_ROWS.min(m.saturating_sub(i)) {
            let run = &c[(t * TILE_ROWS + r) * TILE_ROWS..][..len];
            // SAFETY: columns j0..j0 + len belong to this task (the caller's contract).
            unsafe { out.write_run((i + r) * n + j0, run) };
        }
    }
}

/// The task's rows as two groups of weight tiles, pair-interleaved (zeros past the rows and
/// past k): in tile (group h, slice s), pair p of column c is values 2p, 2p + 1 of row 16h + c.
///
/// # Safety
/// The CPU has AVX-512 F and BF16.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn pack_w(w_rows: &[&[f32]], slices: usize, w: &mut Vec<u16>) {
    w.clear();
    w.resize(2 * slices * TILE_VALUES, 0);
    let mut v = [0u16; TILE_K];
    for (j, row) in w_rows.iter().enumerate() {
        let (h, c) = (j / TILE_ROWS, j % TILE_ROWS);
        for s in 0..slices {
            // SAFETY: the features (this function's contract).
            unsafe { slice_bf16(row, s, &mut v) };
            let tile = &mut w[(h * slices + s) * TILE_VALUES..][..TILE_VALUES];
            for p in 0..TILE_K / 2 {
                tile[p * 2 * TILE_ROWS + 2 * c..][..2].copy_from_slice(&v[2 * p..2 * p + 2]);
            }
        }
    }
}

/// The plain reference of `tile` for the tests: bf16-rounded inputs, f64 sums.
#[cfg(test)]
pub fn reference(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k)
                .map(|t| f64::from(amx::bf16_round(x[i * k + t])) * f64::from(amx::bf16_round(w[j * k + t])))
                .sum();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random values in [-1, 1) (xorshift), never zeros.
    fn random(len: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// The tile unit against bf16 inputs summed in f64, on shapes with partial groups, a partial
    /// column tile and a k that is not a multiple of 32. Its f32 accumulation is the only
    /// difference: relative to Σ|x·w|, within k · 2^-24 with room.
    #[test]
    fn amx_tile_matches_bf16_reference() {
        if !*amx::AVAILABLE {
            eprintln!(
                "SKIPPED amx_tile_matches_bf16_reference: this CPU or OS has no AMX (or ULTRA_CPU_DISABLE has amx)"
            );
            return;
        }
        for &(m, k, n) in &[(17, 64, 32), (40, 576, 45), (64, 100, 16), (33, 1536, 70)] {
            let (x, w) = (random(m * k, 7 + m as u64), random(n * k, 11 + n as u64));
            let xp = pack_x(&x, m, k);
            let mut dst = vec![f32::NAN; m * n];
            let out = Columns::new(&mut dst);
            for n0 in (0..n).step_by(32) {
                let cols = n0..(n0 + 32).min(n);
                let rows: Vec<&[f32]> = cols.clone().map(|j| &w[j * k..(j + 1) * k]).collect();
                // SAFETY: one task at a time.
                unsafe { tile(&rows, &xp, (m, k, n), cols, &out) };
            }
            let want = reference(&x, &w, m, k, n);
            for i in 0..m {
                for j in 0..n {
                    let scale: f64 = (0..k).map(|t| f64::from((x[i * k + t] * w[j * k + t]).abs())).sum();
                    let err = (f64::from(dst[i * n + j]) - want[i * n + j]).abs();
                    assert!(
                        err <= 4.0 * k as f64 * f64::from(f32::EPSILON) * scale,
                        "m {m} k {k} n {n} at ({i}, {j}): {} vs {}",
                        dst[i * n + j],
                        want[i * n + j]
                    );
                }
            }
        }
    }

    /// A row's outputs do not depend on the other rows of the batch (batch invariance).
    #[test]
    fn amx_rows_do_not_depend_on_the_batch() {
        if !*amx::AVAILABLE {
            eprintln!("SKIPPED amx_rows_do_not_depend_on_the_batch: this CPU or OS has no AMX");
            return;
        }
        let (k, n) = (256, 32);
        let w = random(n * k, 3);
        let rows: Vec<&[f32]> = (0..n).map(|j| &w[j * k..(j + 1) * k]).collect();
        let run = |x: &[f32], m: usize| {
            let mut dst = vec![0.0f32; m * n];
            let out = Columns::new(&mut dst);
            // SAFETY: one task.
            unsafe { tile(&rows, &pack_x(x, m, k), (m, k, n), 0..n, &out) };
            dst
        };
        let x = random(50 * k, 5);
        let all = run(&x, 50);
        let part = run(&x[20 * k..37 * k], 17);
        assert_eq!(&all[20 * n..37 * n], &part[..], "rows 20..37 alone against within 50");
    }
}
