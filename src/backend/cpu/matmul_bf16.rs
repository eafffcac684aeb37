//! The AMX path of matmul (int8 activations mode, more than `INT8_MAX_M` rows, on CPUs with AMX):
//! x and each task's dequantized weight rows rounded to bf16 and multiplied on the tile unit with
//! f32 accumulators over the whole of k.
//!
//! Why bf16 and not AMX's int8: ggml's formats scale every 32 values, so an int8 tile product
//! must leave the tile unit after each block for an f32 epilogue (benches/notes/cpu.md: such a
//! kernel ran no faster than the VNNI panels). Dequantized bf16 weights carry their scales, so
//! the accumulators stay in the tiles from the first block to the last.
//!
//! Layouts (amx.rs `product_2x2`): the weight tile is the first operand, 16 weight rows × 32
//! values of one k slice, row-major as dequantized; x is the second, 16 activation rows of a
//! slice pair-interleaved. Products come out transposed (16 weight rows × 16 activation rows)
//! and are written to dst per activation row. Rows and k past the ends are zeros.

use std::cell::RefCell;

use super::amx::{self, TILE_K, TILE_ROWS, TILE_VALUES};
use super::columns::Columns;

/// Groups of 16 activation rows and 32-value slices of k in `pack_x`'s output.
pub fn x_shape(m: usize, k: usize) -> (usize, usize) {
    (m.div_ceil(2 * TILE_ROWS) * 2, k.div_ceil(TILE_K))
}

/// x [m, k] as bf16 tiles [group][slice][pair p][row r][2]: element (p, r, e) is
/// x[16 · group + r][32 · slice + 2p + e]; the group count is even (`x_shape`) so the kernel's
/// 2 × 2 blocks never run past it. Panics unless amx::AVAILABLE.
pub fn pack_x(x: &[f32], m: usize, k: usize) -> Vec<u16> {
    assert!(*amx::AVAILABLE && x.len() == m * k, "pack_x: CPU or lengths");
    let (groups, slices) = x_shape(m, k);
    let mut out = vec![0u16; groups * slices * TILE_VALUES];
    // SAFETY: AVAILABLE implies AVX-512 F and BF16.
    unsafe { pack_x_rows(x, m, k, slices, &mut out) };
    out
}

/// pack_x's loop, compiled for AVX-512 BF16 so the conversions inline.
///
/// # Safety
/// The CPU has AVX-512 F and BF16.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn pack_x_rows(x: &[f32], m: usize, k: usize, slices: usize, out: &mut [u16]) {
    for i in 0..m {
        let (g, r) = (i / TILE_ROWS, i % TILE_ROWS);
        for s in 0..slices {
            // SAFETY: the features (this function's contract).
            let v = unsafe { slice_bf16(&x[i * k..(i + 1) * k], s) };
            let tile = &mut out[(g * slices + s) * TILE_VALUES..][..TILE_VALUES];
            for p in 0..TILE_K / 2 {
                tile[p * 2 * TILE_ROWS + 2 * r] = v[2 * p];
                tile[p * 2 * TILE_ROWS + 2 * r + 1] = v[2 * p + 1];
            }
        }
    }
}

/// Values 32s..32s + 32 of `row` in bf16, zeros past its end.
///
/// # Safety
/// The CPU has AVX-512 F and BF16.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn slice_bf16(row: &[f32], s: usize) -> [u16; TILE_K] {
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
    unsafe { amx::bf16x32(lo.try_into().expect("16"), hi.try_into().expect("16")) }
}

thread_local! {
    /// The task's weight tiles: [2 groups][slices][16 rows][32].
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
        let mut c = [0.0f32; 4 * TILE_ROWS * TILE_ROWS];
        let group = |g: usize| &w[g * slices * TILE_VALUES..];
        for h0 in (0..groups).step_by(2) {
            let x_at = |h: usize| xp[(h0 + h) * slices * TILE_VALUES..].as_ptr();
            // SAFETY: AVAILABLE; each operand pointer starts `slices` whole tiles (the lengths
            // asserted above, pack_w's size, and groups even); c holds 4 tiles.
            unsafe {
                amx::product_2x2([group(0).as_ptr(), group(1).as_ptr()], [x_at(0), x_at(1)], slices, c.as_mut_ptr())
            };
            // SAFETY: the caller's contract.
            unsafe { write(&c, h0, (m, n), cols.clone(), out) };
        }
    });
}

/// The task's rows as two groups of weight tiles (zeros past the rows and past k).
///
/// # Safety
/// The CPU has AVX-512 F and BF16.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn pack_w(w_rows: &[&[f32]], slices: usize, w: &mut Vec<u16>) {
    w.clear();
    w.resize(2 * slices * TILE_VALUES, 0);
    for (j, row) in w_rows.iter().enumerate() {
        let (g, r) = (j / TILE_ROWS, j % TILE_ROWS);
        for s in 0..slices {
            let at = (g * slices + s) * TILE_VALUES + r * TILE_K;
            // SAFETY: the features (this function's contract).
            w[at..at + TILE_K].copy_from_slice(&unsafe { slice_bf16(row, s) });
        }
    }
}

/// The 2 × 2 block's products (c[g][h][weight row][activation row]) into dst, per activation row.
///
/// # Safety
/// As `tile`.
unsafe fn write(c: &[f32], h0: usize, (m, n): (usize, usize), cols: std::ops::Range<usize>, out: &Columns) {
    for h in 0..2 {
        for r in 0..TILE_ROWS {
            let i = (h0 + h) * TILE_ROWS + r;
            if i >= m {
                return;
            }
            for g in 0..2 {
                let j0 = cols.start + g * TILE_ROWS;
                if j0 >= cols.end {
                    break;
                }
                let tile = &c[(2 * g + h) * TILE_ROWS * TILE_ROWS..][..TILE_ROWS * TILE_ROWS];
                let run: [f32; TILE_ROWS] = std::array::from_fn(|j| tile[j * TILE_ROWS + r]);
                let len = TILE_ROWS.min(cols.end - j0);
                // SAFETY: columns j0..j0 + len belong to this task (the caller's contract).
                unsafe { out.write_run(i * n + j0, &run[..len]) };
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
