//! Batched decode's matmul (9 ≤ m ≤ 64) for Q4_0 and Q8_0 weights: int8 tensor cores
//! (`cuda/matmul_mmq.cu`, `mma.sync m16n8k32`) on x quantized as the GEMV's two int8 planes. The
//! weights stream from global memory into registers with no shared memory and no barrier per
//! k-block: the f16 tile GEMM (`matmul_mma_split32`) spent most of a small batch's time in its
//! per-block barrier and pipeline fill (benches/notes/cuda.md, v12, v14).

use cudarc::driver::{DevicePtr, LaunchConfig, PushKernelArg};

use super::context::{Cuda, grid_1d};
use super::driver::driver;
use super::kernels::{Module, entry, has_mmq};
use super::matmul::{Part, mma_splits};
use super::planes::Q8_BLOCK;
use crate::backend::{Tensor, Weight};
use crate::error::Result;

/// Rows of x this kernel serves (above, the 64-row f16 tile; at or below 8, the GEMV).
const MMQ_MIN_M: usize = 9;
const MMQ_MAX_M: usize = 64;
/// Weight rows per block (4 warps × 32 rows).
const MMQ_BN: u32 = 128;
/// Split k until the grid has about this many blocks per SM, each split at least MMQ_MIN_SPLIT_BLOCKS
/// 32-value blocks of k (benches/notes/cuda.md, v14).
const MMQ_BLOCKS_PER_SM: u32 = 4;

/// Whether an m × k product with `w` takes this kernel.
pub(super) fn serves(x: &Tensor<Cuda>, w: &Weight<Cuda>) -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *OFF.get_or_init(|| std::env::var("ULTRA_MMQ_OFF").is_ok_and(|v| v == "1")) {
        return false;
    }
    (MMQ_MIN_M..=MMQ_MAX_M).contains(&x.rows) && has_mmq(w.format) && x.cols.is_multiple_of(Q8_BLOCK)
}

/// The kernel for m rows: (entry point, tiles of 8 rows it computes).
fn tiles(m: usize) -> (&'static str, u32) {
    match m.div_ceil(8) {
        0..=2 => (entry::MATMUL_MMQ_T2, 2),
        3 | 4 => (entry::MATMUL_MMQ_T4, 4),
        5 | 6 => (entry::MATMUL_MMQ_T6, 6),
        _ => (entry::MATMUL_MMQ_T8, 8),
    }
}

/// Temporary tuning knob (blocks per SM, least k-blocks per split), read once; removed before commit.
fn tune() -> (u32, u32) {
    static T: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    *T.get_or_init(|| {
        let v: Vec<u32> =
            std::env::var("ULTRA_MMQ_TUNE").unwrap_or_default().split(',').filter_map(|s| s.parse().ok()).collect();
        (v.first().copied().unwrap_or(MMQ_BLOCKS_PER_SM), v.get(1).copied().unwrap_or(8))
    })
}

/// dst = x · wᵀ for each (w, dst) of `parts`, all `serves` shapes of one x (the caller checked shapes
/// and dtypes): x is quantized once (q, k, v; gate, up), then one launch per weight.
pub(super) fn matmuls_mmq(cuda: &Cuda, x: &Tensor<Cuda>, parts: &mut [Part]) -> Result<()> {
    let Some((first, _)) = parts.first() else { return Ok(()) };
    let (name, mt) = tiles(x.rows);
    // Scratch: xf [k/32][mt][32] uint4 = mt · 8 · k · 2 bytes, then xd [k/32][mt · 4] float4.
    let rows_p = mt as usize * 8;
    let xd_at = rows_p * x.cols * 2;
    let mut guard = cuda.scratch(&cuda.q8_scratch, xd_at + rows_p * x.cols / Q8_BLOCK * 8)?;
    let scratch = guard.as_mut().expect("scratch allocated");
    let (mut xf, mut xd) = scratch.split_at_mut(xd_at);
    let (m, k, total) = (x.rows as u32, x.cols as u32, (rows_p * x.cols) as u64);
    let prep = cuda.function(Module::Matmul(first.format), entry::MATMUL_MMQ_PREP)?;
    let mut l = cuda.stream.launch_builder(&prep);
    l.arg(&x.buf.dev).arg(&mut xf).arg(&mut xd).arg(&m).arg(&k).arg(&mt).arg(&total);
    // SAFETY: arguments match matmul_mmq_prep in cuda/matmul_mmq.cu; x holds m · k floats (rows past m
    // are not read), xf rows_p · k · 2 bytes and xd rows_p · k / 32 · 8 bytes as laid out above.
    unsafe { l.launch(grid_1d(total, 256)?) }.map_err(driver)?;
    let xf = xf.device_ptr(&cuda.stream).0;
    let xd = xd.device_ptr(&cuda.stream).0;
    for (w, dst) in parts.iter_mut() {
        launch(cuda, x, w, dst, name, (xf, xd))?;
    }
    Ok(())
}

/// One weight's launch of matmul_mmq_tMT (`name`) on the prepared (xf, xd).
fn launch(
    cuda: &Cuda,
    x: &Tensor<Cuda>,
    w: &Weight<Cuda>,
    dst: &mut Tensor<Cuda>,
    name: &'static str,
    (xf, xd): (u64, u64),
) -> Result<()> {
    let (m, n, k) = (x.rows as u32, w.rows as u32, w.cols as u32);
    let (per_sm, min_split) = tune();
    let tiles_n = n.div_ceil(MMQ_BN);
    if tiles_n == 0 {
        return Ok(());
    }
    let nb = k / Q8_BLOCK as u32;
    let splits = if min_split == 8 {
        mma_splits(cuda.sm_count * per_sm, tiles_n, nb)
    } else {
        let wanted = (cuda.sm_count * per_sm).div_ceil(tiles_n);
        let s = wanted.min(nb / min_split.max(1)).max(1);
        nb.div_ceil(nb.div_ceil(s).max(1)).max(1)
    };
    let cfg = LaunchConfig { grid_dim: (tiles_n, splits, 1), block_dim: (MMQ_BN, 1, 1), shared_mem_bytes: 0 };
    let mut partial = cuda.scratch(&cuda.mma_scratch, splits as usize * x.rows * w.rows * 4)?;
    let partial = partial.as_mut().expect("scratch allocated");
    // Tile counters: zeroed when allocated, left zero by every launch (each tile's last split resets its own).
    let mut counters = cuda.scratch(&cuda.mma_counters, tiles_n as usize * 4)?;
    let done = counters.as_mut().expect("scratch allocated");
    let [qs, _, dm] = w.storage.qs_qh_dm();
    let f = cuda.function(Module::Matmul(w.format), name)?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(qs).arg(dm).arg(&xf).arg(&xd).arg(&mut dst.buf.dev).arg(&mut *partial).arg(&mut *done);
    l.arg(&m).arg(&n).arg(&k);
    // SAFETY: arguments match matmul_mmq_tMT in cuda/matmul_mmq.cu; qs holds n · k / 32 blocks of
    // QS_BYTES and dm their f16 scales (padded by 16 bytes for the paired-word reads, repack.rs), xf and
    // xd the tiles of x that matmuls_mmq wrote (its scratch held until this launch is queued), dst m · n
    // floats, partial splits · m · n floats, done tiles_n u32; no split is left without k-blocks
    // (mma_splits).
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}
