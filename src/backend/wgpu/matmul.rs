//! Matmul: fused dequantize + matrix products, four kernels.
//!
//! - m ≥ TILED_MIN_M where `Options::coopmat` allows it (by default Vulkan GPUs) on an adapter
//!   with f16 × f16 → f32 cooperative matrices (wgpu's experimental feature: Vulkan's
//!   VK_KHR_cooperative_matrix, e.g. NVIDIA's tensor cores or Mesa ≥ 26's lavapipe; Metal's
//!   simdgroup matrices), quantized weights: `matmul_coop.wgsl`. Per 64 values of k a
//!   4s × 4s tile (s = the matrix side, 16 or 8) decodes its weight rows and x rows into f16 slabs,
//!   and each of 4 subgroups multiplies 2 × 2 matrices of side s from them, summing in f32
//!   (on the H100 1.2–1.5× the tiled kernel's prefill: benches/notes/wgpu.md, v13). For weights
//!   of 2048 × 2048 values and more (`Options::coop_dequant`) the call instead decodes the
//!   weight to f16 once (`dequant_f16.wgsl`, in row ranges of at most COOP16_W_BYTES) and x once
//!   (`to_f16.wgsl`), and `matmul_coop16.wgsl` multiplies them straight from storage, 2 × 4
//!   matrices per subgroup, two slices of k per step, with no slab and no barrier: the same
//!   operands and products, so matmul_coop's bits (tests/wgpu.rs).
//! - m ≥ TILED_MIN_M (prefill, large decode batches, long verifies): `matmul_tiled.wgsl`, a
//!   shared-memory SGEMM. Each workgroup owns a 64 × BN output tile (BN = 64, or 128 when that
//!   still gives LARGE_MIN_GROUPS workgroups and fits the adapter's workgroup memory), and per K
//!   step of 64 (two quant blocks) decodes a BN × 64 weight slab and loads a 64 × 64 x slab into
//!   workgroup memory, from which 256 threads accumulate 4 × 4 (4 × 8) register tiles held in
//!   named vec4 variables. Each decoded weight serves 64 rows of x instead of the GEMV's 8. With
//!   SHADER_F16 (unless `ULTRA_WGPU_DISABLE=f16`) quantized weights use f16 slabs and per-block
//!   f16 products (`tile32_f16.wgsl`); float weights always run f32 (`tile32_f32.wgsl`).
//! - smaller m: GEMV kernels. Quantized weights run `matmul_vec.wgsl` (whole blocks per lane, four
//!   weight rows per subgroup team); float weights `matmul.wgsl` (8-value groups per lane). Decode
//!   (m = 1) runs one row of x per workgroup, staged in workgroup memory so that lanes load it
//!   coalesced (unless `ULTRA_WGPU_STAGE_X=0`; v14), larger batches MB_BATCH rows per workgroup.
//!   On CPU adapters (SwiftShader, lavapipe) quantized GEMVs take teams of one lane and no barrier
//!   (benches/notes/wgpu.md, v10). The same GEMV body (`gemv.wgsl`) also runs q/k/v or gate/up as
//!   one dispatch (`matmul_vec_parts`, for `matmuls`) and, opt-in (`Options::silu_fusion`: slower
//!   on the H100, v14), the down projection with silu · up computed as x is loaded
//!   (`matmul_vec_silu`, for `silu_mul_matmul`), bit for bit the separate dispatches
//!   (benches/notes/wgpu.md, v12). Every lane sums in the same order in both, so their results
//!   do not depend on m. The GEMVs compute in f32 (f16 products, an earlier version, bought no
//!   decode speed on the H200 and parted the greedy text from the CPU's on 3 of the 9 reference
//!   prompts: benches/notes/wgpu.md, v7), except that on GPU adapters weights of at least
//!   2048 × 2048 values in a format with integer values (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K,
//!   INT4) run on int8 activations (`Options::int8_gemv`, llama.cpp's MMVQ and our cuda GEMV): one
//!   `quantize_q8` dispatch turns x into 32-value int8 blocks, and the GEMV's block products are
//!   `dot4I8Packed` integer sums (`gemv_xq8.wgsl`; llama-1b decode 1.14×, llama-8b 1.22× on the H100,
//!   benches/notes/wgpu.md v15); the down projection's x comes from `silu_mul_q8`, which writes
//!   silu · up and its blocks in one dispatch. x is quantized row by row, so these results do not
//!   depend on m either. An int8 GEMV of fewer than SPLIT_BELOW_ROWS rows runs one team of all the
//!   workgroup's subgroups (`Variant::split`), so that a small matrix still fills the GPU.
//!
//! Batch invariance: the tiled kernel sums each output in its own order (one chain over k), which
//! is the same for every m ≥ TILED_MIN_M but not the GEMV's (k split across lanes, then a tree), so
//! by default a row's result can change in the last bits when its batch crosses TILED_MIN_M and
//! wgpu is not batch-invariant. `Options::batch_invariant` (`ULTRA_WGPU_BATCH_INVARIANT=1`) keeps
//! the GEMV kernels for every m: bit-identical rows whatever the batch (the trait's promise), at
//! the GEMV's prefill speed. The f16 choice depends on the device only, never on m.
//!
//! A weight uploaded in parts (`GpuWeight::parts`: larger than one binding) runs one dispatch per
//! part, each writing its columns row0 .. row0 + rows of dst (params: the column offset and dst's
//! row stride); every output is summed as in the one-part path, so the bits do not change.

use std::sync::Arc;

use super::context::GpuBuffer;
use super::kernels::{Kernel, TILED_SIDES, VEC_UNROLLS, VEC_WG, Variant, gemv_sums_x, int8_gemv, vec_wg};
use super::memory::WeightPart;
use super::{Wgpu, norm};
use crate::backend::{AttnBatch, AttnShape, KvLayer, Tensor, Weight, check};
use crate::error::{Error, Result};
use crate::quant::Format;

/// Rows of x per workgroup for 1 < m < TILED_MIN_M.
const MB_BATCH: u32 = 8;
/// Threads per output row when reducing through workgroup memory.
const SHARED_TPR: u32 = 32;
/// Smallest m for the tiled kernel: below it a 64-row tile is partly padding, and the GEMV already
/// reuses each weight for up to MB_BATCH rows (32-sequence decode batches ran slower tiled at
/// m = 32 than on the GEMV: benches/notes/wgpu.md, v5b).
const TILED_MIN_M: usize = 64;
/// Workgroups the 64 × 128 tile must still fill (about one per SM of a large GPU); with fewer,
/// 64 × 64 tiles keep more of the device busy (SmolLM2's 576-wide matrices at m = 512: 72 tiles of 64, 40 of 128).
const LARGE_MIN_GROUPS: usize = 128;
/// Threads of a matmul_tiled workgroup (16 × 16).
const TILED_THREADS: u32 = 256;
/// Rows (of x and dst) of a matmul_tiled tile, and k per step (matmul_tiled.wgsl `BM`, `KS`).
const TILED_BM: usize = 64;
const TILED_KS: u32 = 64;
/// Weight rows (all parts of a `matmuls` call together) below which an int8 GEMV with subgroups
/// runs one team per workgroup (`Variant::split` subgroups, four rows) instead of one per subgroup
/// (16 rows): a 4096-row matrix then gives 1,024 workgroups instead of 256, enough lanes in
/// flight to keep an H100 busy (benches/notes/wgpu.md v16).
const SPLIT_BELOW_ROWS: usize = 16384;
/// Bytes of one 32-value block of int8 x (`quantize_q8.wgsl`): 32 quants, d and s.
const Q8_BLOCK_BYTES: usize = 40;
/// matmul_coop's slab row stride in halves (`KP`).
const COOP_KP: u32 = 72;

pub fn matmul(be: &Wgpu, x: &Tensor<Wgpu>, w: &Weight<Wgpu>, dst: &mut Tensor<Wgpu>) -> Result<()> {
    check::matmul(x, w, dst)?;
    // Int8 x is quantized once for all the weight's parts.
    let xq = if takes_int8_gemv(be, w.format, x.rows, x.cols, w.rows) { Some(quantize_x(be, x)?) } else { None };
    matmul_parts(be, x, xq.as_deref(), w, dst)
}

/// Every part of w against x, or against x's int8 blocks `xq` where the GEMV takes them.
fn matmul_parts(
    be: &Wgpu,
    x: &Tensor<Wgpu>,
    xq: Option<&GpuBuffer>,
    w: &Weight<Wgpu>,
    dst: &Tensor<Wgpu>,
) -> Result<()> {
    for part in &w.storage.parts {
        matmul_part(be, x, xq, w, part, dst)?;
    }
    Ok(())
}

/// Whether a matmul of m rows of x (k wide) by a weight of `format` and n rows (all parts of a
/// `matmuls` call together) runs the int8 GEMV: a quantized GEMV (no cooperative-matrix or tiled
/// path for this m) of a format with `ints`, on a context that allows it for k · n values.
pub(super) fn takes_int8_gemv(be: &Wgpu, format: Format, m: usize, k: usize, n: usize) -> bool {
    be.ctx.int8_min_values.is_some_and(|min| k * n >= min)
        && int8_gemv(format)
        && coop(be, format, m).is_none()
        && tiled(be, format, m, n).is_none()
}

/// The context's int8-x buffer for m rows of k values (`q8_blocks.wgsl`'s layout), for whichever
/// kernel writes the blocks (quantize_q8, silu_mul_q8, the norms and attention_combine with `q8`).
pub(super) fn int8_x(be: &Wgpu, m: usize, k: usize) -> Result<Arc<GpuBuffer>> {
    be.ctx.int8_x((m * (k / 32) * Q8_BLOCK_BYTES) as u64)
}

/// x's rows as int8 blocks (one `quantize_q8` dispatch), for the GEMVs recorded right after it.
fn quantize_x(be: &Wgpu, x: &Tensor<Wgpu>) -> Result<Arc<GpuBuffer>> {
    int8_blocks(be, Kernel::QuantizeQ8, &[&x.buf], x.rows, x.cols)
}

/// m rows of k values as int8 blocks (`q8_blocks.wgsl`) in the context's int8-x buffer, written by
/// `kernel` from `inputs` (quantize_q8: x; silu_mul_q8: gate, up, and hidden, which it also writes).
fn int8_blocks(be: &Wgpu, kernel: Kernel, inputs: &[&GpuBuffer], m: usize, k: usize) -> Result<Arc<GpuBuffer>> {
    let blocks = k / 32;
    let xq = int8_x(be, m, k)?;
    let bufs: Vec<&GpuBuffer> = inputs.iter().copied().chain([&*xq]).collect();
    be.ctx.dispatch(Variant::plain(kernel), &bufs, &[blocks as u32, m as u32], be.ctx.grid_1d(m * blocks * 8))?;
    Ok(xq)
}

/// dst[:, row0 .. row0 + rows] for one part of w (dst's rows are w.rows wide); each output's sum
/// is the one-part path's. `xq`: x's int8 blocks, given exactly where the GEMV takes them.
fn matmul_part(
    be: &Wgpu,
    x: &Tensor<Wgpu>,
    xq: Option<&GpuBuffer>,
    w: &Weight<Wgpu>,
    part: &WeightPart,
    dst: &Tensor<Wgpu>,
) -> Result<()> {
    let (m, n, format) = (x.rows, part.rows, w.format);
    let params = [&part.info[..], &[m as u32, n as u32, part.row0 as u32, w.rows as u32]].concat();
    let bufs = [&part.buf, xq.unwrap_or(&x.buf), &dst.buf];
    if let Some(v) = coop(be, format, m) {
        if be.ctx.coop16_min_values.is_some_and(|min| x.cols * w.rows >= min) && coop16_fits(be, m, x.cols) {
            return coop16(be, x, w, part, dst, v);
        }
        let side = 4 * v.coop as usize;
        let groups = [n.div_ceil(side) as u32, m.div_ceil(side) as u32, 1];
        return be.ctx.dispatch(v, &bufs, &params, groups);
    }
    if let Some(v) = tiled(be, format, m, n) {
        let groups = [n.div_ceil(v.mb as usize) as u32, m.div_ceil(TILED_BM) as u32, 1];
        return be.ctx.dispatch(v, &bufs, &params, groups);
    }
    if format.is_quantized() {
        let (v, rows_per_group) = gemv(be, format, m, w.rows, xq.is_some())?;
        let groups = [n.div_ceil(rows_per_group) as u32, m.div_ceil(v.mb as usize) as u32, 1];
        return be.ctx.dispatch(v, &bufs, &params, groups);
    }
    let (subgroups, tpr) = lanes(be, format);
    let mb = if m == 1 { 1 } else { MB_BATCH };
    let v =
        Variant { kernel: Kernel::Matmul, format: Some(format), subgroups, tpr, mb, ..Variant::plain(Kernel::Matmul) };
    let rows_per_group = 256 / tpr as usize;
    let groups = [n.div_ceil(rows_per_group) as u32, m.div_ceil(mb as usize) as u32, 1];
    be.ctx.dispatch(v, &bufs, &params, groups)
}

/// How a GEMV reduces: (with subgroup operations, threads per output row).
fn lanes(be: &Wgpu, format: Format) -> (bool, u32) {
    match be.ctx.subgroup_size {
        // CPU adapters run a workgroup's lanes as SIMD on one thread, where every barrier of a
        // shared-memory reduction costs a switch of all its lanes: teams of one lane need none.
        _ if be.ctx.cpu_adapter && format.is_quantized() => (false, 1),
        Some(size) => (true, size),
        None => (false, SHARED_TPR),
    }
}

/// The matmul_vec variant for a quantized weight of n rows (all parts together) and m rows of x,
/// and the weight rows each of its workgroups covers: whole blocks per lane, four weight rows per
/// team. `q8`: x is int8 blocks (`takes_int8_gemv`). f32 products even with SHADER_F16: no slower
/// (decode reads each weight once, so bandwidth, not arithmetic, bounds it) and as exact as the
/// CPU's (see the module doc).
fn gemv(be: &Wgpu, format: Format, m: usize, n: usize, q8: bool) -> Result<(Variant, usize)> {
    // One subgroup per team, or with no subgroups a shared-memory team (one lane on CPU adapters).
    let (subgroups, team) = lanes(be, format);
    let mb = if m == 1 { 1 } else { MB_BATCH };
    let unroll = if team == 1 { 1 } else { vec_unroll(be, mb)? };
    let kernel = Kernel::MatmulVec;
    // Few rows: teams of the whole workgroup's subgroups, so that the GPU holds four times the lanes.
    let split = if q8 && subgroups && n < SPLIT_BELOW_ROWS && VEC_WG.is_multiple_of(team) { VEC_WG / team } else { 1 };
    let tpr = team * split;
    let stage_x = be.ctx.stage_x && tpr > 1 && mb == 1 && !q8;
    let v = Variant {
        kernel,
        format: Some(format),
        subgroups,
        tpr,
        mb,
        unroll,
        stage_x,
        q8,
        split,
        ..Variant::plain(kernel)
    };
    Ok((v, (vec_wg(tpr) / tpr * 4) as usize))
}

/// q, k, v (or gate, up) as one `matmul_vec_parts` dispatch: 2 or 3 whole (one-part) weights of one
/// quantized format whose m takes the GEMV. The small k and v projections then share the GPU with
/// q instead of each filling it alone, and a layer has two dispatches fewer. Each output's sum is
/// the separate GEMV's, bit for bit. Otherwise one `matmul` each.
pub fn matmuls(be: &Wgpu, x: &Tensor<Wgpu>, parts: &mut [Part]) -> Result<()> {
    for (w, dst) in parts.iter() {
        check::matmul(x, w, dst)?;
    }
    let Some(format) = shared_format(be, x.rows, parts) else {
        return parts.iter_mut().try_for_each(|(w, dst)| matmul(be, x, w, dst));
    };
    let xq = if takes_int8_gemv(be, format, x.rows, x.cols, rows(parts)) { Some(quantize_x(be, x)?) } else { None };
    gemv_parts(be, x, xq.as_deref(), format, parts)
}

/// [x += y, then] xn = rms_norm(x), then `matmuls` of xn. Where the matmuls are one
/// `matmul_vec_parts` dispatch on int8 x, the norm's dispatch also writes xn's int8 blocks
/// (`norm::norm_q8`: the blocks quantize_q8 would make of that xn) and the GEMV reads them: one
/// dispatch fewer. Otherwise the norm, then `matmuls`. The same bits either way (the op table's
/// `norm_matmuls_equals_its_parts`).
pub fn norm_matmuls(
    be: &Wgpu,
    x: &mut Tensor<Wgpu>,
    y: Option<&Tensor<Wgpu>>,
    gain: &Tensor<Wgpu>,
    eps: f32,
    xn: &mut Tensor<Wgpu>,
    parts: &mut [Part],
) -> Result<()> {
    // The default's order of checks: the norm's, then each matmul's.
    check::norm(x, y, gain, xn)?;
    for (w, dst) in parts.iter() {
        check::matmul(xn, w, dst)?;
    }
    let (m, k) = (xn.rows, xn.cols);
    let int8 = shared_format(be, m, parts).filter(|&f| takes_int8_gemv(be, f, m, k, rows(parts)));
    match int8 {
        Some(format) if k.is_multiple_of(32) => {
            let xq = norm::norm_q8(be, x, y, gain, eps, xn)?;
            gemv_parts(be, xn, Some(&xq), format, parts)
        }
        _ => {
            match y {
                Some(y) => norm::add_rms_norm(be, x, y, gain, eps, xn)?,
                None => norm::rms_norm(be, x, gain, eps, xn)?,
            }
            matmuls(be, xn, parts)
        }
    }
}

/// attention into att, then dst = att · wᵀ (the output projection). Where w's GEMV takes int8 x,
/// heads are whole 32-value blocks and the batch runs split-K attention, its combine also writes
/// att's int8 blocks (`attention::attention_q8`: the blocks quantize_q8 would make of that att) and
/// the GEMV reads them: one dispatch fewer. Otherwise attention, then `matmul`. The same bits
/// either way (the op table's `attention_matmul_equals_its_parts`).
#[allow(clippy::too_many_arguments)] // attention's five tensors and shape, and the matmul's weight and output
pub fn attention_matmul(
    be: &Wgpu,
    q: &Tensor<Wgpu>,
    cache: &KvLayer<Wgpu>,
    batch: &AttnBatch<Wgpu>,
    shape: &AttnShape,
    att: &mut Tensor<Wgpu>,
    w: &Weight<Wgpu>,
    dst: &mut Tensor<Wgpu>,
) -> Result<()> {
    // The default's order of checks: attention's, then the matmul's.
    check::attention(q, cache, batch, shape, att)?;
    check::matmul(att, w, dst)?;
    let (m, k) = (att.rows, att.cols);
    if !(takes_int8_gemv(be, w.format, m, k, w.rows) && shape.head_dim.is_multiple_of(32)) {
        super::attention::attention(be, q, cache, batch, shape, att)?;
        return matmul(be, att, w, dst);
    }
    let xq = int8_x(be, m, k)?;
    let xq = if super::attention::attention_q8(be, q, cache, batch, shape, att, Some(&xq))? {
        xq
    } else {
        quantize_x(be, att)? // the batch ran tiled: the blocks the combine would have written
    };
    matmul_parts(be, att, Some(&xq), w, dst)
}

/// One matmul of a `matmuls` call: its weight and its output.
type Part<'a, 'b> = (&'a Weight<Wgpu>, &'b mut Tensor<Wgpu>);

/// The format of a `matmuls` call that runs as one `matmul_vec_parts` dispatch, or None.
fn shared_format(be: &Wgpu, m: usize, parts: &[Part]) -> Option<Format> {
    let format = parts.first().map(|(w, _)| w.format);
    format.filter(|&f| {
        (2..=3).contains(&parts.len())
            && f.is_quantized()
            && coop(be, f, m).is_none()
            && parts
                .iter()
                .all(|(w, _)| w.format == f && w.storage.parts.len() == 1 && tiled(be, f, m, w.rows).is_none())
    })
}

/// Weight rows of all the parts together.
fn rows(parts: &[Part]) -> usize {
    parts.iter().map(|(w, _)| w.rows).sum()
}

/// The `matmul_vec_parts` dispatch of parts that `shared_format` took, on x or its int8 blocks `xq`.
fn gemv_parts(be: &Wgpu, x: &Tensor<Wgpu>, xq: Option<&GpuBuffer>, format: Format, parts: &mut [Part]) -> Result<()> {
    let m = x.rows;
    let (one, rows_per_group) = gemv(be, format, m, rows(parts), xq.is_some())?;
    let v = Variant { kernel: Kernel::MatmulVecParts, parts: parts.len() as u32, ..one };
    let whole: Vec<&WeightPart> = parts.iter().map(|(w, _)| &w.storage.parts[0]).collect();
    let groups: Vec<u32> = whole.iter().map(|p| p.rows.div_ceil(rows_per_group) as u32).collect();
    let mut params = Vec::with_capacity(32);
    for i in 0..3 {
        params.extend_from_slice(whole.get(i).map_or(&[0; 8], |p| &p.info));
    }
    let rows = |i: usize| whole.get(i).map_or(0, |p| p.rows as u32);
    params.extend([rows(0), rows(1), rows(2), m as u32, groups[0], groups[0] + groups[1], 0, 0]);
    // Two parts: the third weight binding repeats the second (read-only), the third output is a
    // buffer nothing reads.
    let w_buf = |i: usize| &whole[i.min(whole.len() - 1)].buf;
    let d_buf = |i: usize| parts.get(i).map_or(&be.ctx.unused, |(_, d)| &d.buf);
    let bufs = [w_buf(0), w_buf(1), w_buf(2), xq.unwrap_or(&x.buf), d_buf(0), d_buf(1), d_buf(2)];
    let grid = [groups.iter().sum(), m.div_ceil(v.mb as usize) as u32, 1];
    be.ctx.dispatch(v, &bufs, &params, grid)
}

/// hidden = silu(gate) · up, then dst = hidden · wᵀ. Where w's GEMV takes int8 x, one
/// `silu_mul_q8` dispatch writes hidden and its int8 blocks (the blocks quantize_q8 would make of
/// that hidden), then the GEMV. Else, with `Options::silu_fusion`, one `matmul_vec_silu` dispatch
/// (the GEMV computing its x where it loads it, and writing hidden too) where w is one quantized
/// part and m takes the GEMV, only for formats whose GEMV uses x as a factor alone: SPIR-V lets a
/// driver contract a product into a following add (Mesa did, on the Σx of Q4_1's minimum), which a
/// product feeding `fma` as a factor cannot be. Otherwise `silu_mul` then `matmul`. Both fused
/// paths give the separate ops' bits (the op table's `silu_mul_matmul_equals_its_parts`).
pub fn silu_mul_matmul(
    be: &Wgpu,
    gate: &Tensor<Wgpu>,
    up: &Tensor<Wgpu>,
    w: &Weight<Wgpu>,
    hidden: &mut Tensor<Wgpu>,
    dst: &mut Tensor<Wgpu>,
) -> Result<()> {
    check::silu_mul(gate, up, hidden)?;
    check::matmul(hidden, w, dst)?;
    let (m, format) = (gate.rows, w.format);
    if takes_int8_gemv(be, format, m, gate.cols, w.rows) {
        let xq = int8_blocks(be, Kernel::SiluMulQ8, &[&gate.buf, &up.buf, &hidden.buf], m, gate.cols)?;
        return matmul_parts(be, hidden, Some(&xq), w, dst);
    }
    let one_gemv = be.ctx.silu_fusion
        && format.is_quantized()
        && !gemv_sums_x(format)
        && w.storage.parts.len() == 1
        && coop(be, format, m).is_none()
        && tiled(be, format, m, w.rows).is_none();
    if !one_gemv {
        super::elementwise::silu_mul(be, gate, up, hidden)?;
        return matmul(be, hidden, w, dst);
    }
    let part = &w.storage.parts[0];
    let (one, rows_per_group) = gemv(be, format, m, w.rows, false)?;
    let v = Variant { kernel: Kernel::MatmulVecSilu, ..one };
    let params = [&part.info[..], &[m as u32, part.rows as u32, 0, w.rows as u32]].concat();
    let bufs = [&part.buf, &gate.buf, &up.buf, &hidden.buf, &dst.buf];
    let groups = [part.rows.div_ceil(rows_per_group) as u32, m.div_ceil(v.mb as usize) as u32, 1];
    be.ctx.dispatch(v, &bufs, &params, groups)
}

/// Blocks per lane matmul_vec loads before computing on them, for MB = `mb` rows of x.
fn vec_unroll(be: &Wgpu, mb: u32) -> Result<u32> {
    match be.ctx.vec_unroll {
        Some(u) if VEC_UNROLLS.contains(&u) => Ok(u),
        Some(u) => {
            Err(Error::Unsupported { op: "matmul", backend: "wgpu", detail: format!("GEMV unroll {u} (1, 2 or 4)") })
        }
        None => Ok(if mb == 1 { 2 } else { 1 }),
    }
}

/// The matmul_coop variant for this call where the context has cooperative matrices
/// (`Options::coopmat`), the weight is quantized (whole 32-value blocks of k) and m is the tiled
/// kernel's range; None otherwise.
fn coop(be: &Wgpu, format: Format, m: usize) -> Option<Variant> {
    let (side, sg) = be.ctx.coop?;
    let limits = &be.ctx.limits;
    // Two f16 slabs of 4·side rows × COOP_KP halves, and one side² f32 tile per subgroup (matmul_coop.wgsl).
    let shared = 2 * 4 * side * COOP_KP * 2 + 4 * side * side * 4;
    let threads = 4 * sg;
    if m < TILED_MIN_M
        || be.ctx.batch_invariant
        || !format.is_quantized()
        || threads > limits.max_compute_workgroup_size_x
        || threads > limits.max_compute_invocations_per_workgroup
        || shared > limits.max_compute_workgroup_storage_size
    {
        return None;
    }
    let v = Variant {
        kernel: Kernel::MatmulCoop,
        format: Some(format),
        f16: true,
        coop: side,
        tpr: sg,
        ..Variant::plain(Kernel::MatmulCoop)
    };
    Some(v)
}

/// x rows and weight rows of a matmul_coop16 tile (`BM`, `BN`: 2·TM and 2·TN matrices of `side`).
fn coop16_tile(side: u32) -> (usize, usize) {
    (4 * side as usize, 8 * side as usize)
}

/// Bytes of f16 weight rows matmul_coop16 takes per dispatch at most (and never more than a weight
/// part may take, `Context::weight_part_bytes`): larger weights run in row ranges, so that the
/// decoded copy stays a fraction of the whole weight's footprint.
const COOP16_W_BYTES: u64 = 1 << 27;

/// Whether x's f16 copy (m rows padded to the tile, k wide) fits one binding.
fn coop16_fits(be: &Wgpu, m: usize, k: usize) -> bool {
    let (bm, _) = coop16_tile(be.ctx.coop.map_or(16, |c| c.0));
    (m.next_multiple_of(bm) * k * 2) as u64 <= be.ctx.limits.max_storage_buffer_binding_size
}

/// One part of w against x on cooperative matrices from f16 operands: x to f16 (`to_f16`), then per
/// range of at most COOP16_W_BYTES of weight rows, the rows to f16 (`dequant_f16`) and the GEMM
/// (`matmul_coop16`). `v`: matmul_coop's variant for this call (the adapter's side and subgroup size).
fn coop16(
    be: &Wgpu,
    x: &Tensor<Wgpu>,
    w: &Weight<Wgpu>,
    part: &WeightPart,
    dst: &Tensor<Wgpu>,
    v: Variant,
) -> Result<()> {
    let (m, k, n) = (x.rows, x.cols, part.rows);
    let (bm, bn) = coop16_tile(v.coop);
    let m_pad = m.next_multiple_of(bm);
    let xh = be.ctx.f16_x((m_pad * k * 2) as u64)?;
    let to = Variant { f16: true, ..Variant::plain(Kernel::ToF16) };
    be.ctx.dispatch(to, &[&x.buf, &xh], &[k as u32, m as u32, m_pad as u32, 0], be.ctx.grid_1d(m_pad * k / 4))?;
    let cap = COOP16_W_BYTES.min(be.ctx.weight_part_bytes) as usize;
    let chunk = (cap / (2 * k) / bn * bn).max(bn);
    let decode = Variant { format: Some(w.format), f16: true, ..Variant::plain(Kernel::DequantF16) };
    let gemm = Variant { kernel: Kernel::MatmulCoop16, format: None, ..v };
    for r0 in (0..n).step_by(chunk) {
        let rows = chunk.min(n - r0);
        let rows_pad = rows.next_multiple_of(bn);
        let wh = be.ctx.f16_w((rows_pad * k * 2) as u64)?;
        let params = [&part.info[..], &[r0 as u32, rows as u32, rows_pad as u32, 0]].concat();
        be.ctx.dispatch(decode, &[&part.buf, &wh], &params, be.ctx.grid_1d(rows_pad * k / 8))?;
        let params = [k, m, rows, part.row0 + r0, w.rows].map(|v| v as u32);
        let groups = [(rows_pad / bn) as u32, (m_pad / bm) as u32, 1];
        be.ctx.dispatch(gemm, &[&xh, &wh, &dst.buf], &params, groups)?;
    }
    Ok(())
}

/// The matmul_tiled variant for this call, or None for the GEMV path (small m, batch-invariant
/// mode, or an adapter whose limits fit no tile).
fn tiled(be: &Wgpu, format: Format, m: usize, n: usize) -> Option<Variant> {
    let limits = &be.ctx.limits;
    if m < TILED_MIN_M
        || be.ctx.batch_invariant
        || limits.max_compute_workgroup_size_x < TILED_THREADS
        || limits.max_compute_invocations_per_workgroup < TILED_THREADS
    {
        return None;
    }
    let f16 = be.ctx.f16 && format.is_quantized();
    // Both slabs: (BM + BN) × KS values of 4 (f32) or 2 (f16) bytes: 32 / 48 KiB in f32, 16 / 24 KiB in f16.
    let fits = |bn: u32| {
        (TILED_BM as u32 + bn) * TILED_KS * if f16 { 2 } else { 4 } <= limits.max_compute_workgroup_storage_size
    };
    let busy = |bn: usize| m.div_ceil(TILED_BM) * n.div_ceil(bn) >= LARGE_MIN_GROUPS;
    let [small, large] = TILED_SIDES;
    let mb = match (fits(large) && busy(large as usize), fits(small)) {
        (true, _) => large,
        (false, true) => small,
        (false, false) => return None,
    };
    Some(Variant { kernel: Kernel::MatmulTiled, format: Some(format), mb, f16, ..Variant::plain(Kernel::MatmulTiled) })
}
