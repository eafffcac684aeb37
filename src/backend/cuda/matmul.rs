//! Matrix products on CUDA: `cuda/matmul.cu` joined after the weight's format decoder.
//! m ≤ 8 (decode, small batches): a GEMV with warp-per-row(s); for quantized weights the
//! activations are first quantized to int8 blocks (`cuda/quantize_q8_1.cu`) and the dot products
//! use dp4a, as llama.cpp's MMVQ. m > 8 (prefill, batches, speculative verification): quantized
//! weights go through f16 tensor cores (`cuda/matmul_mma.cu`: x and each weight rounded to f16, the
//! block scales folded into the weights as they are decoded, f32 accumulation over all of k; split
//! over k, `matmul_mma_split`, for m ≤ 256
//! when the tiles would not fill the GPU, with a 32-row tile, `matmul_mma_split32`, up to m = 64;
//! unsplit 32-row tiles, `matmul_mma32`, for up to 32 rows of a matrix as wide as a vocabulary);
//! float weights through a shared-memory tiled
//! GEMM in f32 (`matmul_tile`). An int8 tensor-core variant (x quantized as for the GEMV) beat SIMT
//! too, but its prefill error (NMSE 3e-3 on the reference model) failed the e2e tests
//! (benches/notes/cuda.md, v2a).

use std::sync::MutexGuard;

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig, PushKernelArg};

use super::context::{Cuda, grid_1d};
use super::driver::driver;
use super::kernels::{Module, entry};
use super::planes::{Planes, Q8_BLOCK, quantize_x};
use crate::backend::{Tensor, Weight, check};
use crate::error::Result;
use crate::quant::Format;

/// Largest m served by the GEMV kernels.
pub(super) const VEC_MAX_M: usize = 8;
const VEC_THREADS: u32 = 128;
/// Two weight rows per lane group (`matmul_vec_mM_r2`) when one row each would need more than this
/// many blocks per SM, by rows of x (1, 2–4, 8): a resident wave is about 8–9 blocks of VEC_THREADS
/// at m = 1 (ncu on the H200: register-bound, 9 at 56 registers a thread); with more rows of x the x
/// loads a pair shares outweigh the blocks it gives up sooner, and at m = 8 always
/// (benches/notes/cuda.md, v18).
const VEC_PAIR_BLOCKS_PER_SM: [u32; 3] = [8, 6, 0];
/// Output tile of matmul_mma: MMA_BM activation rows × MMA_BN weight rows (cuda/matmul_mma.cu), computed
/// by MMA_THREADS threads (every tile size).
const MMA_BM: u32 = 64;
const MMA_BN: u32 = 128;
const MMA_THREADS: u32 = 128;
/// Split-K of matmul_mma for m ≤ MMA_SPLIT_MAX_M (batched decode): the split count that finishes the
/// tiles in the fewest waves of resident blocks per unit of work (`mma_splits`), at most MMA_MAX_SPLITS,
/// each split at least MMA_MIN_SPLIT_BLOCKS 32-value blocks of k. Prefill (m 512) kept its grid and
/// kernel (benches/notes/cuda.md, v11).
const MMA_SPLIT_MAX_M: u32 = 256;
const MMA_MIN_SPLIT_BLOCKS: u32 = 8;
/// Blocks of matmul_mma_split / _split32 resident per SM: 128 threads at ≤ 168 registers (ptxas: 168
/// and 133 on sm_90) fit 3 in 64 Ki registers.
const MMA_RESIDENT_PER_SM: u32 = 3;
/// Each split adds an m × n f32 partial to write and read back: 8 and 16 as the cap were slower than 4
/// at B = 32 and 64 on llama-8b, though they fill the waves better (benches/notes/cuda.md, v25).
const MMA_MAX_SPLITS: u32 = 4;
/// m ≤ MMA32_BM takes the 32-row tile (matmul_mma_split32, or matmul_mma32 unsplit), so a batch of 32
/// fills its tile instead of half of one; 33–64 rows run the 64-row tile (the 32-row one twice over was
/// slower at B = 64 once splits were chosen by waves: v25).
const MMA32_BM: u32 = 32;

/// Profile row of one call: path, format, shape; bytes = the weight, read once.
pub fn label(x: &Tensor<Cuda>, w: &Weight<Cuda>) -> (String, u64) {
    let path = if x.rows <= VEC_MAX_M {
        "vec"
    } else if w.format.is_quantized() {
        "mma"
    } else {
        "tile"
    };
    (format!("matmul_{path} {} m{} n{} k{}", w.format.name(), x.rows, w.rows, w.cols), weight_bytes(w))
}

/// Bytes of `w`'s blocks: what a matmul must read of it.
pub fn weight_bytes(w: &Weight<Cuda>) -> u64 {
    (w.format.row_bytes(w.cols).unwrap_or(0) * w.rows) as u64
}

/// Profile row of a fused op ending in a matmul (`silu_mul_matmul`).
pub fn label_fused(first: &str, x: &Tensor<Cuda>, w: &Weight<Cuda>) -> (String, u64) {
    let (name, bytes) = label(x, w);
    (format!("{first} + {name}"), bytes)
}

/// Profile row of a [`matmuls`] call: the first weight's row, with every weight's bytes.
pub fn label_many(x: &Tensor<Cuda>, parts: &[Part]) -> (String, u64) {
    let Some((w, _)) = parts.first() else { return ("matmuls (none)".into(), 0) };
    let (name, _) = label(x, w);
    let bytes = parts.iter().map(|(w, _)| weight_bytes(w)).sum();
    (format!("{name} ×{}", parts.len()), bytes)
}

/// Profile row of a [`norm_matmuls`] call: the norm, then [`label_many`]'s row.
pub fn label_norm_many(x: &Tensor<Cuda>, parts: &[Part]) -> (String, u64) {
    let (name, bytes) = label_many(x, parts);
    (format!("rms_norm + {name}"), bytes)
}

/// One matmul of a [`matmuls`] call: its weight and its output.
pub type Part<'a, 'b> = (&'a Weight<Cuda>, &'b mut Tensor<Cuda>);

pub fn matmul(cuda: &Cuda, x: &Tensor<Cuda>, w: &Weight<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    if !check(x, w, dst)? {
        return Ok(());
    }
    if x.rows <= VEC_MAX_M {
        matmuls(cuda, x, &mut [(w, dst)])
    } else if w.format.is_quantized() {
        matmul_mma(cuda, x, w, dst)
    } else {
        matmul_tile(cuda, x, w, dst)
    }
}

/// Several matmuls of one x. For m ≤ 8 (decode) x is quantized once for all of them and each run
/// of up to three consecutive weights of one format is one GEMV launch (q, k, v; gate, up); larger
/// m: one tensor-core launch for all of them where [`matmul_mma_parts`] takes them, else one matmul
/// each.
pub fn matmuls(cuda: &Cuda, x: &Tensor<Cuda>, parts: &mut [Part]) -> Result<()> {
    if x.rows > VEC_MAX_M {
        if matmul_mma_parts(cuda, x, parts)? {
            return Ok(());
        }
        return parts.iter_mut().try_for_each(|(w, dst)| matmul(cuda, x, w, dst));
    }
    for (w, dst) in parts.iter() {
        check(x, w, dst)?;
    }
    let planes = if any_quantized(parts) { Some(quantize_x(cuda, x)?) } else { None };
    gemv_runs(cuda, x, parts, planes)
}

/// [x += y, then] xn = rms_norm(x), then `matmuls` of xn. For decode (m ≤ 8) with a quantized weight
/// among the parts, the norm's launch also writes xn's int8 planes (`norm::norm_q8`) and the GEMVs
/// read them: no quantize launch between them.
#[allow(clippy::too_many_arguments)] // the norm's four tensors and eps, and the matmuls
pub fn norm_matmuls(
    cuda: &Cuda,
    x: &mut Tensor<Cuda>,
    y: Option<&Tensor<Cuda>>,
    gain: &Tensor<Cuda>,
    eps: f32,
    xn: &mut Tensor<Cuda>,
    parts: &mut [Part],
) -> Result<()> {
    let fused = x.rows <= VEC_MAX_M
        && x.cols.is_multiple_of(Q8_BLOCK)
        && x.cols <= super::norm::NORM_Q8_MAX_COLS
        && any_quantized(parts);
    if !fused {
        match y {
            Some(y) => super::norm::add_rms_norm(cuda, x, y, gain, eps, xn)?,
            None => super::norm::rms_norm(cuda, x, gain, eps, xn)?,
        }
        return matmuls(cuda, xn, parts);
    }
    // The default's order of checks: the norm's, then each matmul's.
    check::norm(x, y, gain, xn)?;
    for (w, dst) in parts.iter() {
        check(xn, w, dst)?;
    }
    let planes = super::norm::norm_q8(cuda, x, y, gain, eps, xn)?;
    gemv_runs(cuda, xn, parts, Some(planes))
}

fn any_quantized(parts: &[Part]) -> bool {
    parts.iter().any(|(w, _)| w.format.is_quantized())
}

/// m ≤ 8: one GEMV launch per run of up to three consecutive weights of one format; quantized ones
/// read `planes` (x's int8 planes, written by the caller's launch), float ones x itself.
fn gemv_runs(cuda: &Cuda, x: &Tensor<Cuda>, parts: &mut [Part], mut planes: Option<Planes>) -> Result<()> {
    let mut rest = parts;
    while !rest.is_empty() {
        let format = rest[0].0.format;
        let run = rest.iter().take(3).take_while(|(w, _)| w.format == format).count();
        let (launch, tail) = rest.split_at_mut(run);
        match &mut planes {
            Some(planes) if format.is_quantized() => gemv(cuda, x, launch, planes.pointers(cuda))?,
            _ => gemv_float(cuda, x, launch)?,
        }
        rest = tail;
    }
    Ok(())
}

/// hidden = silu(gate) · up, then dst = hidden · wᵀ. For decode (m ≤ 8) with a quantized weight,
/// `silu_mul_q8` writes hidden and its int8 planes in one launch and the GEMV reads those planes
/// (no quantize launch between them); otherwise silu_mul, then matmul.
pub fn silu_mul_matmul(
    cuda: &Cuda,
    gate: &Tensor<Cuda>,
    up: &Tensor<Cuda>,
    w: &Weight<Cuda>,
    hidden: &mut Tensor<Cuda>,
    dst: &mut Tensor<Cuda>,
) -> Result<()> {
    let planes_fit = hidden.cols.is_multiple_of(Q8_BLOCK) && w.format.is_quantized();
    if gate.rows > VEC_MAX_M || !planes_fit {
        super::elementwise::silu_mul(cuda, gate, up, hidden)?;
        return matmul(cuda, hidden, w, dst);
    }
    check::silu_mul(gate, up, hidden)?;
    if !check(hidden, w, dst)? {
        return Ok(());
    }
    let mut planes = Planes::hold(cuda, hidden.len())?;
    super::elementwise::silu_mul_q8(cuda, gate, up, hidden, &mut planes)?;
    gemv_planes(cuda, hidden, w, dst, &mut planes)
}

/// dst = x · wᵀ by the GEMV (m ≤ 8, w quantized, shapes checked) on x's int8 planes, which the
/// caller's launch wrote.
pub(super) fn gemv_planes(
    cuda: &Cuda,
    x: &Tensor<Cuda>,
    w: &Weight<Cuda>,
    dst: &mut Tensor<Cuda>,
    planes: &mut Planes,
) -> Result<()> {
    let pointers = planes.pointers(cuda);
    gemv(cuda, x, &mut [(w, dst)], pointers)
}

/// Shapes and dtypes of one matmul; false when there is nothing to compute.
fn check(x: &Tensor<Cuda>, w: &Weight<Cuda>, dst: &Tensor<Cuda>) -> Result<bool> {
    check::matmul(x, w, dst)?;
    Ok(x.rows > 0 && w.rows > 0)
}

/// The GEMV entry for m rows of x: (entry point, rows of x per launch row); `pair`: two weight
/// rows per lane group.
fn gemv_entry(m: usize, pair: bool) -> (&'static str, usize) {
    use entry::*;
    match (m, pair) {
        (1, false) => (MATMUL_VEC_M1_R1, 1),
        (1, true) => (MATMUL_VEC_M1_R2, 1),
        (2, false) => (MATMUL_VEC_M2_R1, 2),
        (2, true) => (MATMUL_VEC_M2_R2, 2),
        (3 | 4, false) => (MATMUL_VEC_M4_R1, 4),
        (3 | 4, true) => (MATMUL_VEC_M4_R2, 4),
        (_, false) => (MATMUL_VEC_M8_R1, 8),
        (_, true) => (MATMUL_VEC_M8_R2, 8),
    }
}

/// Float weights: the GEMV reads x directly (passed, unused, as the scales pointer too).
fn gemv_float(cuda: &Cuda, x: &Tensor<Cuda>, parts: &mut [Part]) -> Result<()> {
    let xf = x.buf.dev.device_ptr(&cuda.stream).0;
    gemv(cuda, x, parts, (xf, xf))
}

/// m ≤ 8: one GEMV launch for 1–3 weights of one format and width that share x (`parts`);
/// `(xq, xds)` are the device addresses of x's int8 planes and scales (quantized formats) or of x
/// itself (float formats).
fn gemv(cuda: &Cuda, x: &Tensor<Cuda>, parts: &mut [Part], (xq, xds): (u64, u64)) -> Result<()> {
    let (m, k) = (x.rows, x.cols);
    let format = parts[0].0.format;
    // Lanes per output row: the largest power of two ≤ the lane work items (32-value blocks, a
    // k-quant's super-block being 8 of them, or values), ≤ 32.
    let items = k / format.block_len().min(Q8_BLOCK);
    let group = (1u32 << (usize::BITS - 1 - items.max(1).leading_zeros())).min(32);
    let n: [u32; 3] = std::array::from_fn(|i| parts.get(i).map_or(0, |(w, _)| w.rows as u32));
    let blocks_of = |rows_per_block: u32| -> u32 { n.iter().map(|n| n.div_ceil(rows_per_block)).sum() };
    let single_rows = (VEC_THREADS / 32) * (32 / group);
    let per_sm = VEC_PAIR_BLOCKS_PER_SM[if m == 1 {
        0
    } else if m <= 4 {
        1
    } else {
        2
    }];
    let pair = blocks_of(single_rows) > cuda.sm_count * per_sm;
    let (entry, per_launch) = gemv_entry(m, pair);
    let blocks = blocks_of(single_rows * if pair { 2 } else { 1 });
    if m == 0 || blocks == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig {
        grid_dim: (blocks, m.div_ceil(per_launch) as u32, 1),
        block_dim: (VEC_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let (m32, k32) = (m as u32, k as u32);
    let f = cuda.function(Module::Matmul(format), entry)?;
    let mut l = cuda.stream.launch_builder(&f);
    let first = parts[0].0;
    let mut rest = parts.iter_mut();
    for n_i in &n {
        match rest.next() {
            Some((w, dst)) => {
                let [qs, qh, dm] = w.storage.qs_qh_dm();
                l.arg(qs).arg(qh).arg(dm).arg(&mut dst.buf.dev)
            }
            // An unused part: n = 0, so no block reads these pointers.
            None => {
                let [qs, qh, dm] = first.storage.qs_qh_dm();
                l.arg(qs).arg(qh).arg(dm).arg(qs)
            }
        };
        l.arg(n_i);
    }
    l.arg(&xq).arg(&xds).arg(&m32).arg(&k32).arg(&group);
    // SAFETY: arguments match matmul_vec_mM_rR in cuda/matmul.cu; each used part's weight arrays hold
    // n_i · k values or k / 32 blocks per row (k-quants: and k / 256 scale records; each array
    // aligned for its widest load, repack.rs) and its dst m · n_i floats
    // (checked by `check`); xq, xds point at x (m · k floats) or at planes of x held by the caller
    // until the launch is queued.
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}

/// Queues matmul_mma_prep of x into q8_scratch: xh f16 [m][k], each 16-value group in the fragment
/// order cuda/matmul_mma.cu's Layout gives.
fn mma_prep<'a>(cuda: &'a Cuda, x: &Tensor<Cuda>, format: Format) -> Result<ScratchGuard<'a>> {
    let total = x.len() as u64;
    let mut guard = cuda.scratch(&cuda.q8_scratch, x.len() * 2)?;
    let xh = guard.as_mut().expect("scratch allocated");
    let prep = cuda.function(Module::Matmul(format), entry::MATMUL_MMA_PREP)?;
    let mut l = cuda.stream.launch_builder(&prep);
    l.arg(&x.buf.dev).arg(xh).arg(&total);
    // SAFETY: arguments match matmul_mma_prep in cuda/matmul_mma.cu; x holds total floats, xh total
    // halves (k is a multiple of 32 for quantized formats, so every 16-value group is whole).
    unsafe { l.launch(grid_1d(total, 256)?) }.map_err(driver)?;
    Ok(guard)
}

type ScratchGuard<'a> = MutexGuard<'a, Option<CudaSlice<u8>>>;

/// m > 8 with quantized weights: f16 tensor cores (`cuda/matmul_mma.cu`) on x rounded to f16.
fn matmul_mma(cuda: &Cuda, x: &Tensor<Cuda>, w: &Weight<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    let (m, n, k) = (x.rows as u32, w.rows as u32, w.cols as u32);
    let module = Module::Matmul(w.format);
    let mut guard = mma_prep(cuda, x, w.format)?;
    let xh = guard.as_mut().expect("scratch allocated");
    let (name, (tiles_n, tiles_m, splits)) = mma_plan(cuda.sm_count, m, n, k);
    let (grid_dim, block_dim) = ((tiles_n, tiles_m, splits), (MMA_THREADS, 1, 1));
    let cfg = LaunchConfig { grid_dim, block_dim, shared_mem_bytes: 0 };
    let [qs, qh, dm] = w.storage.qs_qh_dm();
    if splits == 1 {
        let f = cuda.function(module, name)?;
        let mut l = cuda.stream.launch_builder(&f);
        l.arg(qs).arg(qh).arg(dm).arg(&*xh).arg(&mut dst.buf.dev);
        l.arg(&m).arg(&n).arg(&k);
        // SAFETY: arguments match matmul_mma in cuda/matmul_mma.cu; the weight arrays hold n · k / 32
        // blocks (dm padded by 16 bytes for the paired-word reads; k-quants: n · k / 256 scale records),
        // xh m · k halves as written above, dst m · n floats.
        unsafe { l.launch(cfg) }.map_err(driver)?;
        return Ok(());
    }
    let mut partial = cuda.scratch(&cuda.mma_scratch, splits as usize * x.rows * w.rows * 4)?;
    let partial = partial.as_mut().expect("scratch allocated");
    // Tile counters: zeroed when allocated, left zero by every launch (each tile's last split resets its own).
    let mut counters = cuda.scratch(&cuda.mma_counters, (tiles_n * tiles_m) as usize * 4)?;
    let done = counters.as_mut().expect("scratch allocated");
    let f = cuda.function(module, name)?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(qs).arg(qh).arg(dm).arg(&*xh).arg(&mut dst.buf.dev).arg(&mut *partial).arg(&mut *done);
    l.arg(&m).arg(&n).arg(&k);
    // SAFETY: as matmul_mma above (matmul_mma_split32: the same arguments), and partial
    // holds splits · m · n floats, done tiles_n · tiles_m u32; mma_splits leaves no split without k-blocks.
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}

/// The weights of one `matmul_mma_parts` launch, laid out as cuda/matmul_mma.cu's `MmaParts`: device
/// addresses of each part's quants, high bits, scales and output, its rows and its splits of k.
#[repr(C)]
struct MmaParts {
    qs: [u64; 3],
    qh: [u64; 3],
    dm: [u64; 3],
    dst: [u64; 3],
    n: [u32; 3],
    splits: [u32; 3],
}

// SAFETY: plain data in C layout (12 u64 then 6 u32, no padding), as the kernel's by-value struct.
unsafe impl DeviceRepr for MmaParts {}

/// m > 8, 2 or 3 weights of one quantized format whose own launches would all use the same tile, split
/// or not (q, k, v; gate, up): one prep and one `matmul_mma_parts` launch, each part's blocks those of
/// its own launch (the same bits as one matmul each, with the launches and the under-filled waves of
/// the small ones saved). False, with nothing queued, when they do not qualify.
fn matmul_mma_parts(cuda: &Cuda, x: &Tensor<Cuda>, parts: &mut [Part]) -> Result<bool> {
    let Some(format) = parts.first().map(|(w, _)| w.format) else { return Ok(false) };
    if !(2..=3).contains(&parts.len()) || !format.is_quantized() {
        return Ok(false);
    }
    for (w, dst) in parts.iter() {
        if w.format != format || !check(x, w, dst)? {
            return Ok(false);
        }
    }
    let (m, k) = (x.rows as u32, x.cols as u32);
    let plans: Vec<_> = parts.iter().map(|(w, _)| mma_plan(cuda.sm_count, m, w.rows as u32, k)).collect();
    // One kernel for all parts (its name fixes the tile and whether k is split).
    let first = plans[0].0;
    if plans.iter().any(|(name, _)| *name != first) {
        return Ok(false);
    }
    let name = match first {
        entry::MATMUL_MMA => entry::MATMUL_MMA_PARTS_WHOLE,
        entry::MATMUL_MMA_SPLIT32 => entry::MATMUL_MMA_PARTS32,
        entry::MATMUL_MMA32 => return Ok(false),
        _ => entry::MATMUL_MMA_PARTS,
    };
    // Partials only for split parts (matmul_mma_parts_whole reads none; the scratch is never empty).
    let (blocks, tiles, floats) =
        plans.iter().zip(parts.iter()).fold((0u32, 0u32, 0usize), |(b, t, f), (p, (w, _))| {
            let (tiles_n, tiles_m, splits) = p.1;
            let split_floats = if splits > 1 { splits as usize * x.rows * w.rows } else { 0 };
            (b + tiles_n * tiles_m * splits, t + tiles_n * tiles_m, f + split_floats)
        });
    let mut guard = mma_prep(cuda, x, format)?;
    let xh = guard.as_mut().expect("scratch allocated");
    let mut partial = cuda.scratch(&cuda.mma_scratch, floats.max(1) * 4)?;
    let partial = partial.as_mut().expect("scratch allocated");
    // Tile counters: zeroed when allocated, left zero by every launch (each tile's last split resets its own).
    let mut counters = cuda.scratch(&cuda.mma_counters, tiles as usize * 4)?;
    let done = counters.as_mut().expect("scratch allocated");
    let addr = |s: &CudaSlice<u8>| s.device_ptr(&cuda.stream).0;
    let mut ps = MmaParts { qs: [0; 3], qh: [0; 3], dm: [0; 3], dst: [0; 3], n: [0; 3], splits: [1; 3] };
    for i in 0..3 {
        // An unused third part: no rows, so no block reads its (the first part's) pointers.
        let (w, splits) = match (parts.get(i), plans.get(i)) {
            (Some((w, _)), Some(plan)) => (*w, Some(plan.1.2)),
            _ => (parts[0].0, None),
        };
        let [qs, qh, dm] = w.storage.qs_qh_dm();
        (ps.qs[i], ps.qh[i], ps.dm[i]) = (addr(qs), addr(qh), addr(dm));
        if let Some(splits) = splits {
            ps.n[i] = w.rows as u32;
            ps.splits[i] = splits;
        }
    }
    for (i, (_, dst)) in parts.iter_mut().enumerate() {
        ps.dst[i] = dst.buf.dev.device_ptr_mut(&cuda.stream).0;
    }
    let first_dst = ps.dst[0];
    ps.dst[parts.len()..].fill(first_dst);
    let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (MMA_THREADS, 1, 1), shared_mem_bytes: 0 };
    let f = cuda.function(Module::Matmul(format), name)?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&ps).arg(&*xh).arg(&mut *partial).arg(&mut *done).arg(&m).arg(&k);
    // SAFETY: arguments match matmul_mma_parts(32, _whole) in cuda/matmul_mma.cu; each used part's weight arrays
    // and dst as matmul_mma's (checked by `check`, the parts' plans as their own launches'); partial holds
    // Σ splits · m · n floats (matmul_mma_parts_whole: none read) and done Σ tiles u32 in part order;
    // blocks is the sum of the parts' grids.
    // The buffers behind the addresses in ps (weights, dsts) outlive the queued launch (held by the caller).
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(true)
}

/// matmul_mma's launch for an m × n × k product: (entry, (tiles along n, along m, splits of k)); the
/// entry fixes the tile rows. Up to MMA32_BM rows take the 32-row tile, split or not (a vocabulary
/// matrix fills the GPU unsplit), m ≤ MMA_SPLIT_MAX_M otherwise the 64-row one split, larger m (prefill)
/// the unsplit kernel. The shape and the device only.
fn mma_plan(sm_count: u32, m: u32, n: u32, k: u32) -> (&'static str, (u32, u32, u32)) {
    let nb = k / Q8_BLOCK as u32;
    let slots = sm_count * MMA_RESIDENT_PER_SM;
    let grid = |bm: u32| {
        let (tiles_n, tiles_m) = (n.div_ceil(MMA_BN), m.div_ceil(bm));
        let split = m <= MMA_SPLIT_MAX_M;
        (tiles_n, tiles_m, if split { mma_splits(slots, tiles_n * tiles_m, nb) } else { 1 })
    };
    if m <= MMA32_BM {
        let g = grid(MMA32_BM);
        return (if g.2 > 1 { entry::MATMUL_MMA_SPLIT32 } else { entry::MATMUL_MMA32 }, g);
    }
    let g = grid(MMA_BM);
    (if g.2 > 1 { entry::MATMUL_MMA_SPLIT } else { entry::MATMUL_MMA }, g)
}

/// Splits of k for matmul_mma's `tiles` output tiles over `nb` 32-value blocks with `slots` blocks
/// resident on the GPU: of the counts up to MMA_MAX_SPLITS (and nb / MMA_MIN_SPLIT_BLOCKS), the one
/// whose grid takes the fewest waves per unit of work, ceil(tiles · s / slots) / s (ties: fewer
/// splits). A split is latency-bound, so a last wave a quarter full costs about a full one: 224 tiles on
/// 396 slots take 2 waves at 1 or 2 splits and at 3, which do a third of the work each. None is empty
/// (the kernel gives split z blocks [z · per, (z + 1) · per) with per = ceil(nb / splits)). Depends on
/// the shape and the device only, as a graph replay needs.
pub(super) fn mma_splits(slots: u32, tiles: u32, nb: u32) -> u32 {
    let (tiles, slots) = (tiles.max(1) as u64, slots.max(1) as u64);
    let waves = |s: u64| (tiles * s).div_ceil(slots);
    let most = (nb / MMA_MIN_SPLIT_BLOCKS).clamp(1, MMA_MAX_SPLITS);
    let mut best = 1u64;
    for s in 2..=most as u64 {
        let s = (nb as u64).div_ceil((nb as u64).div_ceil(s)); // no empty split
        // waves(s) / s < waves(best) / best, in integers
        if waves(s) * best < waves(best) * s {
            best = s;
        }
    }
    best as u32
}

/// m > 8 with float weights: the f32 SIMT tile (also the readable reference of the tiled GEMM).
fn matmul_tile(cuda: &Cuda, x: &Tensor<Cuda>, w: &Weight<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    let (m, n, k) = (x.rows as u32, w.rows as u32, w.cols as u32);
    let f = cuda.function(Module::Matmul(w.format), entry::MATMUL_TILE)?;
    let cfg =
        LaunchConfig { grid_dim: (n.div_ceil(64), m.div_ceil(64), 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    let [qs, qh, dm] = w.storage.qs_qh_dm();
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(qs).arg(qh).arg(dm).arg(&x.buf.dev).arg(&mut dst.buf.dev).arg(&m).arg(&n).arg(&k);
    // SAFETY: arguments match matmul_tile in cuda/matmul.cu; weight n · k values, x m · k floats, dst m · n.
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}
