//! The argument rules of every op, in one place: every backend calls the op's checker first, so
//! the same bad argument gives the same `Error` (variant and message) on cpu, wgpu and cuda, and
//! nothing reaches a kernel that could skip or misread it. Index checks (token ids, rows, slots,
//! sequences, block-table entries) read the host's copy of a u32 tensor (`HostIndices`), so they
//! never wait for the device. What a backend cannot do with valid arguments (a head size its
//! kernel lacks) stays with the backend, as `Error::Unsupported`.

use crate::backend::{AttnBatch, AttnShape, Backend, DType, KvLayer, MAX_TOP_K, Rope, Tensor, Weight};
use crate::error::{Error, Result};
use crate::quant::Format;

/// What a buffer knows on the host of its u32 values: all of them (cpu), the copy of what
/// `write_u32` put there (GPU backends, see `HostMirror`), or nothing once the device wrote them
/// (then the kernels' own guards are all there is).
pub trait HostIndices {
    fn host_u32(&self) -> Option<&[u32]>;
}

fn invalid(detail: String) -> Error {
    Error::InvalidArgument(detail)
}

/// `t` is `[rows, cols]`.
pub fn shape<B: Backend>(op: &'static str, t: &Tensor<B>, rows: usize, cols: usize) -> Result<()> {
    if t.rows != rows || t.cols != cols {
        return Err(Error::Shape { op, expected: vec![rows, cols], got: vec![t.rows, t.cols] });
    }
    Ok(())
}

/// `t` holds `dtype`; `name` is the argument's name in the trait.
pub fn dtype<B: Backend>(op: &'static str, name: &str, t: &Tensor<B>, dtype: DType) -> Result<()> {
    if t.dtype != dtype {
        return Err(invalid(format!("{op}: {name} must be {dtype:?}, got {:?}", t.dtype)));
    }
    Ok(())
}

/// How a backend without q8_0 kernels refuses a q8_0 tensor (only a KV cache asks for one).
pub fn no_q8_cache(backend: &'static str) -> Error {
    let detail = "q8_0 tensors (the q8_0 KV cache is wgpu's; use `--kv-type f16` or `f32`)".to_string();
    Error::Unsupported { op: "alloc", backend, detail }
}

/// How a backend without f16 kernels refuses an f16 tensor (only a KV cache asks for one).
pub fn no_f16(backend: &'static str) -> Error {
    let detail = "f16 tensors (the f16 KV cache is the GPU backends'; use `--kv-type f32`)".to_string();
    Error::Unsupported { op: "alloc", backend, detail }
}

/// Every f32 argument, by name.
fn f32s<B: Backend>(op: &'static str, args: &[(&str, &Tensor<B>)]) -> Result<()> {
    args.iter().try_for_each(|(name, t)| dtype(op, name, t, DType::F32))
}

/// Every host-known value of the u32 tensor `t` is below `limit`.
pub fn below<B: Backend>(op: &'static str, what: &str, t: &Tensor<B>, limit: usize) -> Result<()> {
    match t.buf.host_u32().and_then(|v| v.iter().find(|&&v| v as usize >= limit)) {
        Some(v) => Err(invalid(format!("{op}: {what} {v} out of range (< {limit})"))),
        None => Ok(()),
    }
}

/// A u32 index vector `[n, 1]` whose values are below `limit`.
fn indices<B: Backend>(op: &'static str, what: &str, t: &Tensor<B>, n: usize, limit: usize) -> Result<()> {
    dtype(op, what, t, DType::U32)?;
    shape(op, t, n, 1)?;
    below(op, what, t, limit)
}

// ---- memory ---------------------------------------------------------------------------------

/// write_f32 / write_u32 / read_f32 / read_u32 of `len` values.
pub fn transfer<B: Backend>(op: &'static str, t: &Tensor<B>, want: DType, len: usize) -> Result<()> {
    dtype(op, "the tensor", t, want)?;
    if len > t.len() {
        return Err(invalid(format!("{op}: {len} values do not fit a tensor of {}", t.len())));
    }
    Ok(())
}

/// upload_weight of `len` bytes as a `[rows, cols]` weight of `format`; returns its row bytes.
pub fn upload_weight(format: Format, rows: usize, cols: usize, len: usize) -> Result<usize> {
    let row_bytes = format.row_bytes(cols)?;
    let expected = rows.checked_mul(row_bytes);
    if expected != Some(len) {
        let need = expected.map_or("more than usize::MAX".to_string(), |n| n.to_string());
        return Err(invalid(format!(
            "upload_weight: {} [{rows}, {cols}] needs {need} bytes, got {len}",
            format.name()
        )));
    }
    Ok(row_bytes)
}

// ---- ops ------------------------------------------------------------------------------------

pub fn matmul<B: Backend>(x: &Tensor<B>, w: &Weight<B>, dst: &Tensor<B>) -> Result<()> {
    f32s("matmul", &[("x", x), ("dst", dst)])?;
    shape("matmul", x, x.rows, w.cols)?;
    shape("matmul", dst, x.rows, w.rows)
}

pub fn embed<B: Backend>(table: &Weight<B>, ids: &Tensor<B>, dst: &Tensor<B>) -> Result<()> {
    dtype("embed", "dst", dst, DType::F32)?;
    indices("embed", "token id", ids, ids.rows, table.rows)?;
    shape("embed", dst, ids.rows, table.cols)
}

pub fn rms_norm<B: Backend>(x: &Tensor<B>, gain: &Tensor<B>, dst: &Tensor<B>) -> Result<()> {
    f32s("rms_norm", &[("x", x), ("gain", gain), ("dst", dst)])?;
    shape("rms_norm", gain, 1, x.cols)?;
    shape("rms_norm", dst, x.rows, x.cols)
}

pub fn add_rms_norm<B: Backend>(x: &Tensor<B>, y: &Tensor<B>, gain: &Tensor<B>, dst: &Tensor<B>) -> Result<()> {
    f32s("add_rms_norm", &[("x", x), ("y", y), ("gain", gain), ("dst", dst)])?;
    shape("add_rms_norm", y, x.rows, x.cols)?;
    shape("add_rms_norm", gain, 1, x.cols)?;
    shape("add_rms_norm", dst, x.rows, x.cols)
}

/// `add_rms_norm`'s shapes and dtypes with a residual y, else `rms_norm`'s (`norm_matmuls`'s norm).
pub fn norm<B: Backend>(x: &Tensor<B>, y: Option<&Tensor<B>>, gain: &Tensor<B>, dst: &Tensor<B>) -> Result<()> {
    match y {
        Some(y) => add_rms_norm(x, y, gain, dst),
        None => rms_norm(x, gain, dst),
    }
}

/// rope and rms_norm_rope (`op`): rows of whole heads, an even `n_rot` within the head, and
/// frequency factors (if any) f32 `[1, n_rot / 2]`.
pub fn rope<B: Backend>(
    op: &'static str,
    x: &Tensor<B>,
    pos: &Tensor<B>,
    rope: &Rope,
    factors: Option<&Tensor<B>>,
) -> Result<()> {
    dtype(op, "x", x, DType::F32)?;
    dtype(op, "pos", pos, DType::U32)?;
    shape(op, pos, x.rows, 1)?;
    let Rope { head_dim, n_rot, .. } = *rope;
    if head_dim == 0 || n_rot > head_dim || !n_rot.is_multiple_of(2) || !x.cols.is_multiple_of(head_dim) {
        return Err(invalid(format!(
            "{op}: head_dim {head_dim} with n_rot {n_rot} (even, ≤ head_dim) does not fit rows of {}",
            x.cols
        )));
    }
    if let Some(f) = factors {
        dtype(op, "factors", f, DType::F32)?;
        shape(op, f, 1, n_rot / 2)?;
    }
    Ok(())
}

pub fn rms_norm_rope<B: Backend>(
    x: &Tensor<B>,
    gain: &Tensor<B>,
    pos: &Tensor<B>,
    r: &Rope,
    factors: Option<&Tensor<B>>,
) -> Result<()> {
    rope("rms_norm_rope", x, pos, r, factors)?;
    dtype("rms_norm_rope", "gain", gain, DType::F32)?;
    shape("rms_norm_rope", gain, 1, r.head_dim)
}

pub fn silu_mul<B: Backend>(gate: &Tensor<B>, up: &Tensor<B>, dst: &Tensor<B>) -> Result<()> {
    f32s("silu_mul", &[("gate", gate), ("up", up), ("dst", dst)])?;
    shape("silu_mul", up, gate.rows, gate.cols)?;
    shape("silu_mul", dst, gate.rows, gate.cols)
}

pub fn silu_mul_matmul<B: Backend>(
    gate: &Tensor<B>,
    up: &Tensor<B>,
    w: &Weight<B>,
    hidden: &Tensor<B>,
    dst: &Tensor<B>,
) -> Result<()> {
    silu_mul(gate, up, hidden)?;
    matmul(hidden, w, dst)
}

pub fn gelu_mul<B: Backend>(gate: &Tensor<B>, up: &Tensor<B>, dst: &Tensor<B>) -> Result<()> {
    f32s("gelu_mul", &[("gate", gate), ("up", up), ("dst", dst)])?;
    shape("gelu_mul", up, gate.rows, gate.cols)?;
    shape("gelu_mul", dst, gate.rows, gate.cols)
}

pub fn add_assign<B: Backend>(x: &Tensor<B>, y: &Tensor<B>) -> Result<()> {
    f32s("add_assign", &[("x", x), ("y", y)])?;
    shape("add_assign", y, x.rows, x.cols)
}

pub fn add_bias<B: Backend>(x: &Tensor<B>, bias: &Tensor<B>) -> Result<()> {
    f32s("add_bias", &[("x", x), ("bias", bias)])?;
    shape("add_bias", bias, 1, x.cols)
}

pub fn gather_rows<B: Backend>(x: &Tensor<B>, rows: &Tensor<B>, dst: &Tensor<B>) -> Result<()> {
    f32s("gather_rows", &[("x", x), ("dst", dst)])?;
    indices("gather_rows", "row", rows, rows.rows, x.rows)?;
    shape("gather_rows", dst, rows.rows, x.cols)
}

/// The cache's k and v are `[n_slots, kv_dim]` f32 alike.
fn cache<B: Backend>(op: &'static str, cache: &KvLayer<B>, kv_dim: usize) -> Result<()> {
    // f32, f16 or q8_0 (only a backend with kernels for it can have allocated one), K and V alike.
    if cache.k.dtype == DType::U32 {
        dtype(op, "cache.k", &cache.k, DType::F32)?;
    }
    dtype(op, "cache.v", &cache.v, cache.k.dtype)?;
    shape(op, &cache.k, cache.k.rows, kv_dim)?;
    shape(op, &cache.v, cache.k.rows, kv_dim)
}

pub fn kv_write<B: Backend>(k: &Tensor<B>, v: &Tensor<B>, slot: &Tensor<B>, kv: &KvLayer<B>) -> Result<()> {
    f32s("kv_write", &[("k", k), ("v", v)])?;
    cache("kv_write", kv, kv.k.cols)?;
    shape("kv_write", k, k.rows, kv.k.cols)?;
    shape("kv_write", v, k.rows, kv.k.cols)?;
    indices("kv_write", "slot", slot, k.rows, kv.k.rows)
}

pub fn copy_slots<B: Backend>(kv: &KvLayer<B>, src: usize, dst: usize, n: usize) -> Result<()> {
    let n_slots = kv.k.rows;
    cache("copy_slots", kv, kv.k.cols)?;
    let fits = |start: usize| start.checked_add(n).is_some_and(|end| end <= n_slots);
    if !fits(src) || !fits(dst) {
        return Err(invalid(format!("copy_slots: {n} slots from {src} to {dst} do not fit a cache of {n_slots}")));
    }
    Ok(())
}

pub fn attention<B: Backend>(
    q: &Tensor<B>,
    kv: &KvLayer<B>,
    batch: &AttnBatch<B>,
    shape_: &AttnShape,
    dst: &Tensor<B>,
) -> Result<()> {
    let op = "attention";
    let AttnShape { n_heads, n_kv_heads, head_dim, .. } = *shape_;
    if n_heads == 0 || n_kv_heads == 0 || head_dim == 0 || !n_heads.is_multiple_of(n_kv_heads) {
        return Err(invalid(format!(
            "{op}: n_heads {n_heads} must be a nonzero multiple of n_kv_heads {n_kv_heads}, head_dim {head_dim} nonzero"
        )));
    }
    if batch.block_size == 0 {
        return Err(invalid(format!("{op}: block_size must be nonzero")));
    }
    if shape_.window == Some(0) || shape_.window.is_some_and(|w| u32::try_from(w).is_err()) {
        return Err(invalid(format!("{op}: window {:?} must be 1..=u32::MAX keys (None: no window)", shape_.window)));
    }
    let n_tokens = q.rows;
    f32s(op, &[("q", q), ("dst", dst)])?;
    shape(op, q, n_tokens, n_heads * head_dim)?;
    shape(op, dst, n_tokens, n_heads * head_dim)?;
    cache(op, kv, n_kv_heads * head_dim)?;
    for (name, t) in [("seq", &batch.seq), ("pos", &batch.pos), ("block_table", &batch.block_table)] {
        dtype(op, name, t, DType::U32)?;
    }
    shape(op, &batch.seq, n_tokens, 1)?;
    shape(op, &batch.pos, n_tokens, 1)?;
    attention_indices(batch, shape_, kv.k.rows)
}

/// Rejects a sequence without a block-table row, a position past its row, or a block the token
/// reads (those its window covers) outside a cache of `n_slots` slots (on the host copies; device-written tensors pass).
fn attention_indices<B: Backend>(batch: &AttnBatch<B>, shape: &AttnShape, n_slots: usize) -> Result<()> {
    let (Some(seq), Some(pos), Some(table)) =
        (batch.seq.buf.host_u32(), batch.pos.buf.host_u32(), batch.block_table.buf.host_u32())
    else {
        return Ok(());
    };
    let (bs, max_blocks, table_rows) = (batch.block_size, batch.block_table.cols, batch.block_table.rows);
    let n_blocks = n_slots / bs;
    let bad = |what: String| Err(invalid(format!("attention: {what}")));
    for (t, (&s, &p)) in seq.iter().zip(pos).enumerate() {
        let (s, p) = (s as usize, p as usize);
        if s >= table_rows {
            return bad(format!("token {t}: sequence {s} has no block-table row"));
        }
        if p >= max_blocks * bs {
            return bad(format!("token {t}: position {p} beyond {max_blocks} blocks of {bs}"));
        }
        // Blocks before the window are never read (a cache may have freed them).
        let row = &table[s * max_blocks + shape.first_key(p) / bs..s * max_blocks + p / bs + 1];
        if let Some(b) = row.iter().find(|&&b| b as usize >= n_blocks) {
            return bad(format!("token {t}: block {b} outside the cache's {n_blocks}"));
        }
    }
    Ok(())
}

pub fn argmax<B: Backend>(x: &Tensor<B>, dst: &Tensor<B>) -> Result<()> {
    dtype("argmax", "x", x, DType::F32)?;
    dtype("argmax", "dst", dst, DType::U32)?;
    shape("argmax", dst, x.rows, 1)?;
    if x.cols == 0 || u32::try_from(x.cols).is_err() {
        return Err(invalid(format!("argmax: rows of {} values have no u32 argmax", x.cols)));
    }
    Ok(())
}

/// The k of a `top_k` call, once its shapes, dtypes and range are checked.
pub fn top_k<B: Backend>(x: &Tensor<B>, ids: &Tensor<B>, vals: &Tensor<B>) -> Result<usize> {
    let (k, vocab) = (ids.cols, x.cols);
    dtype("top_k", "x", x, DType::F32)?;
    dtype("top_k", "ids", ids, DType::U32)?;
    dtype("top_k", "vals", vals, DType::F32)?;
    shape("top_k", ids, x.rows, k)?;
    shape("top_k", vals, x.rows, k + 1)?;
    if u32::try_from(vocab).is_err() {
        return Err(invalid(format!("top_k: rows of {vocab} values have no u32 indices")));
    }
    if k == 0 || k > vocab.min(MAX_TOP_K) {
        return Err(invalid(format!("top_k: k = {k} outside 1..=min(vocab = {vocab}, MAX_TOP_K = {MAX_TOP_K})")));
    }
    Ok(k)
}
