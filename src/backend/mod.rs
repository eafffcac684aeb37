//! The contract between the model and a compute device. Model, cache, batching and speculation
//! code see only this trait; read it first.
//!
//! Tensors are contiguous row-major matrices `[rows, cols]` of f32 or u32. Every op writes into a
//! caller-provided `dst`, so the model allocates its activations once per batch shape. GPU
//! backends queue work and wait only in `sync` and `read_*`.
//!
//! Batch invariance: a row's result never depends on how many rows share the call, how a prompt
//! was chunked, or where its KV slots live. Every reduction (matmul dot products, norms,
//! attention) sums in a fixed order per row, so batched, chunked and speculative runs are
//! bit-identical to one-token-at-a-time runs on backends that keep this promise.

pub mod check;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod host_mirror;
pub mod kv_q8;
pub mod profile;
pub mod unfused;
#[cfg(feature = "wgpu")]
pub mod wgpu;

use std::sync::Arc;

use crate::error::Result;
use crate::quant::Format;

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    U32,
    /// IEEE half, for a KV cache only (`CacheLayout::kv_dtype`; cuda and wgpu have kernels for it):
    /// `write_f32` rounds to nearest even, `read_f32` widens exactly.
    F16,
    /// q8_0 blocks of 32 values (an f16 scale and 32 int8), for a KV cache only (wgpu alone has
    /// kernels for it): rows are laid out as `kv_q8` says, `write_f32` quantizes whole rows and
    /// `read_f32` widens exactly.
    Q8_0,
}

impl DType {
    /// Bytes of a row of `cols` elements (`None` on overflow); a Q8_0 row is whole u32 words.
    pub fn row_bytes(self, cols: usize) -> Option<usize> {
        match self {
            DType::F32 | DType::U32 => cols.checked_mul(4),
            DType::F16 => cols.checked_mul(2),
            DType::Q8_0 => kv_q8::row_words(cols).checked_mul(4),
        }
    }
}

/// A device-resident matrix `[rows, cols]`.
pub struct Tensor<B: Backend> {
    pub buf: B::Buffer,
    pub rows: usize,
    pub cols: usize,
    pub dtype: DType,
}

impl<B: Backend> Tensor<B> {
    pub fn len(&self) -> usize {
        self.rows * self.cols
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn shape(&self) -> [usize; 2] {
        [self.rows, self.cols]
    }
}

/// Host bytes shared with their owner (a memory map or a vector), so a backend that computes on
/// the host can use weights in place while a GPU backend uploads them.
#[derive(Clone)]
pub struct HostBytes {
    owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
    start: usize,
    end: usize,
}

impl HostBytes {
    /// The bytes `owner[range]`; the caller checked the range (the GGUF reader does).
    pub fn new(owner: Arc<dyn AsRef<[u8]> + Send + Sync>, start: usize, end: usize) -> HostBytes {
        assert!(start <= end && end <= (*owner).as_ref().len(), "HostBytes range outside its owner");
        HostBytes { owner, start, end }
    }
    pub fn from_vec(bytes: Vec<u8>) -> HostBytes {
        let end = bytes.len();
        HostBytes { owner: Arc::new(bytes), start: 0, end }
    }
    pub fn bytes(&self) -> &[u8] {
        &(*self.owner).as_ref()[self.start..self.end]
    }
}

/// A weight matrix `[rows, cols]` in one storage format, in the backend's preferred layout.
/// For matmul, `rows` is n (outputs) and `cols` is k (the reduced dimension).
pub struct Weight<B: Backend> {
    pub storage: B::WeightStorage,
    pub format: Format,
    pub rows: usize,
    pub cols: usize,
}

/// What a host weight is: the bytes it moves to the device per copy, and its (format, rows, cols).
pub trait HostWeightInfo {
    fn bytes(&self) -> usize;
    fn layout(&self) -> (Format, usize, usize);
}

impl HostWeightInfo for () {
    fn bytes(&self) -> usize {
        0
    }
    fn layout(&self) -> (Format, usize, usize) {
        (Format::F32, 0, 0)
    }
}

/// Rotary embedding settings (RoPE, arXiv:2104.09864).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rope {
    pub head_dim: usize,
    /// Rotated dimensions per head (the first `n_rot`); the rest pass through.
    pub n_rot: usize,
    /// Base of the inverse frequencies: freq_i = theta^(-2i / n_rot).
    pub theta: f32,
    /// Linear position scaling (positions are multiplied by this; 1.0 = none).
    pub freq_scale: f32,
    pub style: RopeStyle,
}

/// Which pairs of a head are rotated together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// ggml "normal" (llama): adjacent pairs (x[2i], x[2i+1]).
    Normal,
    /// ggml "neox" (qwen2, gpt-neox): halves (x[i], x[i + n_rot/2]).
    Neox,
}

/// One layer's KV cache: slot `s` holds the key and value of one token, all KV heads.
/// A sequence's position `p` lives at slot `block_table[seq][p / block_size] * block_size + p % block_size`.
pub struct KvLayer<B: Backend> {
    pub k: Tensor<B>, // [n_slots, n_kv_heads · head_dim]
    pub v: Tensor<B>, // [n_slots, n_kv_heads · head_dim]
}

/// How the tokens of one forward call map onto sequences and KV slots (all on the device).
pub struct AttnBatch<B: Backend> {
    pub seq: Tensor<B>,         // u32 [n_tokens, 1]: row of `block_table` for each token
    pub pos: Tensor<B>,         // u32 [n_tokens, 1]: absolute position of each token
    pub slot: Tensor<B>,        // u32 [n_tokens, 1]: KV slot each token writes
    pub block_table: Tensor<B>, // u32 [n_seqs, max_blocks_per_seq]
    pub block_size: usize,
    /// Every token is the only one of its sequence (a decode step of many sequences). A hint fixed
    /// with the batch shape: a backend may pick a per-token attention kernel; results are correct
    /// either way.
    pub decode: bool,
}

/// Attention geometry: n_heads query heads share n_kv_heads KV heads (GQA), head_dim each.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttnShape {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Multiplies q·k before the softmax (usually 1/sqrt(head_dim)).
    pub scale: f32,
    /// Sliding-window (local) attention: a token at position p sees keys p − window < j ≤ p
    /// (`window` keys, itself included; llama.cpp's LLAMA_SWA_TYPE_STANDARD, HF's
    /// `sliding_window`). `None` attends to every earlier position.
    pub window: Option<usize>,
}

impl AttnShape {
    /// The first key position a token at `pos` sees.
    pub fn first_key(&self, pos: usize) -> usize {
        self.window.map_or(0, |w| (pos + 1).saturating_sub(w))
    }
}

/// What `begin_step` asks of the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepMode {
    /// Call the step's ops as usual (the backend may be recording them).
    Run,
    /// The backend replayed a recording of this step's ops: skip them (still call `end_step`).
    Replayed,
}

pub trait Backend: Send + Sync + Sized + 'static {
    /// Device memory holding one tensor's elements (and what the host knows of its indices).
    type Buffer: Send + Sync + check::HostIndices;
    /// One weight's (possibly repacked) blocks.
    type WeightStorage: Send + Sync;
    /// A weight kept in host memory in the device's layout, for streaming (`offload`).
    type HostWeight: Send + Sync + HostWeightInfo;
    /// Makes later compute wait for one `stream_weights` copy.
    type Fence: Send + Sync;

    fn name(&self) -> &'static str;

    // ---- memory ---------------------------------------------------------------------------
    /// A zero-filled tensor.
    fn alloc(&self, dtype: DType, rows: usize, cols: usize) -> Result<Tensor<Self>>;
    /// dst[..data.len()] = data (f32 tensor; an f16 one where the backend has them, rounded).
    fn write_f32(&self, dst: &mut Tensor<Self>, data: &[f32]) -> Result<()>;
    /// dst[..data.len()] = data (u32 tensor).
    fn write_u32(&self, dst: &mut Tensor<Self>, data: &[u32]) -> Result<()>;
    /// out = src[..out.len()] (f32 tensor, or f16 widened); waits for queued work.
    fn read_f32(&self, src: &Tensor<Self>, out: &mut [f32]) -> Result<()>;
    /// out = src[..out.len()] (u32 tensor); waits for queued work.
    fn read_u32(&self, src: &Tensor<Self>, out: &mut [u32]) -> Result<()>;
    /// `read_f32` for hosts where a thread may not block on the device (WebGPU in a page: the
    /// data arrives in a later turn of the event loop). By default `read_f32`, so on native
    /// backends the future is ready when first polled (see `ready`).
    fn read_f32_async(&self, src: &Tensor<Self>, out: &mut [f32]) -> impl Future<Output = Result<()>> {
        std::future::ready(self.read_f32(src, out))
    }
    /// `read_u32` as `read_f32_async` is `read_f32`.
    fn read_u32_async(&self, src: &Tensor<Self>, out: &mut [u32]) -> impl Future<Output = Result<()>> {
        std::future::ready(self.read_u32(src, out))
    }
    /// Stores a `[rows, cols]` weight given as GGUF bytes, in this backend's preferred layout.
    fn upload_weight(&self, format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<Weight<Self>>;
    /// Waits until all queued work is done.
    fn sync(&self) -> Result<()>;

    // ---- offload: weights streamed from host memory (model/offload.rs) --------------------
    /// A `[rows, cols]` weight kept in host memory (page-locked where the driver allows),
    /// already laid out as `upload_weight` lays it out on the device.
    fn host_weight(&self, format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<Self::HostWeight>;
    /// A device weight shaped like `like` (a ring slot); its values are undefined until a copy lands.
    fn weight_slot(&self, like: &Self::HostWeight) -> Result<Weight<Self>>;
    /// Queues slot_i = host_i for each pair on the copy queue, after the compute queued so far
    /// (so the slot's last reader is done); compute waits for it only after `wait_fence`.
    /// The slots are written through `&`: the queues' ordering, not Rust's borrows, guards them.
    fn stream_weights(&self, parts: &[(&Self::HostWeight, &Weight<Self>)]) -> Result<Self::Fence>;
    /// Compute queued after this call waits for the fence's copies.
    fn wait_fence(&self, fence: Self::Fence) -> Result<()>;

    // ---- steps ----------------------------------------------------------------------------
    /// Starts one forward pass. Equal `key`s promise identical op calls: the same buffers, the
    /// same shapes and launch sizes, only the *contents* of inputs written (and index-checked by
    /// the caller) before this call differ. A backend may record the first such pass and replay
    /// it (CUDA graphs), returning `Replayed`; CPU and wgpu always answer `Run`. Steps on one
    /// backend must not overlap: while one is recorded, any other launch would be recorded too.
    fn begin_step(&self, key: u64) -> Result<StepMode>;
    /// Ends the pass `begin_step` started; `ok` is false when an op failed (nothing is recorded).
    fn end_step(&self, ok: bool) -> Result<()>;

    // ---- matmul ---------------------------------------------------------------------------
    /// dst[m, n] = Σ_k x[m, k] · w[n, k]          x: [m, k]; w: [n, k] any format; dst: [m, n]
    fn matmul(&self, x: &Tensor<Self>, w: &Weight<Self>, dst: &mut Tensor<Self>) -> Result<()>;
    /// dst_i = x · w_iᵀ for each (w_i, dst_i): matmuls sharing x (q, k, v; gate, up), which a
    /// backend may run as one launch (cuda does for decode). By default, one `matmul` each.
    fn matmuls(&self, x: &Tensor<Self>, parts: &mut [(&Weight<Self>, &mut Tensor<Self>)]) -> Result<()> {
        parts.iter_mut().try_for_each(|(w, dst)| self.matmul(x, w, dst))
    }

    // ---- embed ----------------------------------------------------------------------------
    /// dst[t, :] = scale · table[ids[t], :]        ids: u32 [n_tokens, 1]; table: [vocab, d]
    /// (scale is 1 but for models that scale their embeddings, Gemma's sqrt(d_model))
    fn embed(&self, table: &Weight<Self>, ids: &Tensor<Self>, scale: f32, dst: &mut Tensor<Self>) -> Result<()>;

    // ---- norm -----------------------------------------------------------------------------
    /// dst[r, :] = x[r, :] · gain / sqrt(mean(x[r, :]²) + eps)    x, dst: [rows, d]; gain: [1, d]
    fn rms_norm(&self, x: &Tensor<Self>, gain: &Tensor<Self>, eps: f32, dst: &mut Tensor<Self>) -> Result<()>;
    /// x += y, then dst = rms_norm(x): a residual add and the next sublayer's norm, which a backend
    /// may run as one pass (cuda does). By default `add_assign` then `rms_norm`.
    fn add_rms_norm(
        &self,
        x: &mut Tensor<Self>,
        y: &Tensor<Self>,
        gain: &Tensor<Self>,
        eps: f32,
        dst: &mut Tensor<Self>,
    ) -> Result<()> {
        self.add_assign(x, y)?;
        self.rms_norm(x, gain, eps, dst)
    }
    /// x += y (when `y` is given), xn = rms_norm(x), then dst_i = xn · w_iᵀ for each part: a
    /// sublayer's entry (attention's q, k, v; the feed-forward's gate, up) as one op, so a backend
    /// may hand its matmuls what the norm made of xn (wgpu's int8 decode GEMVs take int8 blocks of xn
    /// that the norm's dispatch writes, saving the quantize dispatch). xn is written either way. By
    /// default `add_rms_norm` (or `rms_norm`) then `matmuls`.
    fn norm_matmuls(
        &self,
        x: &mut Tensor<Self>,
        y: Option<&Tensor<Self>>,
        gain: &Tensor<Self>,
        eps: f32,
        xn: &mut Tensor<Self>,
        parts: &mut [(&Weight<Self>, &mut Tensor<Self>)],
    ) -> Result<()> {
        unfused::norm_matmuls(self, x, y, gain, eps, xn, parts)
    }

    // ---- rope -----------------------------------------------------------------------------
    /// Rotates every head of x[t, :] = [n_heads · head_dim] in place by position pos[t]. With
    /// `factors` [1, n_rot / 2], pair i's frequency is divided by factors[i] (Llama 3's
    /// `rope_freqs`: ggml's freq_factors).
    fn rope(&self, x: &mut Tensor<Self>, pos: &Tensor<Self>, rope: &Rope, factors: Option<&Tensor<Self>>)
    -> Result<()>;
    /// `rope` of q and of k, then `kv_write` of the rotated k and of v at the batch's slots: the
    /// attention block's step between the projections and attention, which a backend may run as
    /// one pass (wgpu does, for an f32 cache). By default the three ops.
    #[allow(clippy::too_many_arguments)] // the three tensors and the cache, plus the batch and the rotation
    fn rope_kv_write(
        &self,
        q: &mut Tensor<Self>,
        k: &mut Tensor<Self>,
        v: &Tensor<Self>,
        batch: &AttnBatch<Self>,
        rope: &Rope,
        factors: Option<&Tensor<Self>>,
        cache: &mut KvLayer<Self>,
    ) -> Result<()> {
        unfused::rope_kv_write(self, q, k, v, batch, rope, factors, cache)
    }
    /// Per-head RMSNorm with gain [1, head_dim], then RoPE, in place (models with q/k norms).
    fn rms_norm_rope(
        &self,
        x: &mut Tensor<Self>,
        gain: &Tensor<Self>,
        eps: f32,
        pos: &Tensor<Self>,
        rope: &Rope,
        factors: Option<&Tensor<Self>>,
    ) -> Result<()>;

    // ---- elementwise ----------------------------------------------------------------------
    /// dst = silu(gate) · up                         (SwiGLU; all [rows, d_ff])
    fn silu_mul(&self, gate: &Tensor<Self>, up: &Tensor<Self>, dst: &mut Tensor<Self>) -> Result<()>;
    /// hidden = silu(gate) · up, then dst = hidden · wᵀ: the feed-forward block's tail as one op, so
    /// a backend may hand the GEMV what it made of `hidden` (cuda's decode path quantizes it to
    /// int8 planes while computing it). By default `silu_mul` then `matmul`.
    ///       gate, up, hidden: [rows, d_ff]; w: [n, d_ff]; dst: [rows, n]
    fn silu_mul_matmul(
        &self,
        gate: &Tensor<Self>,
        up: &Tensor<Self>,
        w: &Weight<Self>,
        hidden: &mut Tensor<Self>,
        dst: &mut Tensor<Self>,
    ) -> Result<()> {
        self.silu_mul(gate, up, hidden)?;
        self.matmul(hidden, w, dst)
    }
    /// dst = gelu(gate) · up, gelu(g) = g/2 · (1 + tanh(sqrt(2/π) · (g + 0.044715 g³)))
    ///                                               (GeGLU with the tanh GELU, Gemma; all [rows, d_ff])
    fn gelu_mul(&self, gate: &Tensor<Self>, up: &Tensor<Self>, dst: &mut Tensor<Self>) -> Result<()>;
    /// x += y                                        (residual; same shape)
    fn add_assign(&self, x: &mut Tensor<Self>, y: &Tensor<Self>) -> Result<()>;
    /// x[r, :] += bias[0, :]                         (projection biases)
    fn add_bias(&self, x: &mut Tensor<Self>, bias: &Tensor<Self>) -> Result<()>;
    /// dst[i, :] = x[rows[i], :]                      rows: u32 [n, 1] (pick the rows that need logits)
    fn gather_rows(&self, x: &Tensor<Self>, rows: &Tensor<Self>, dst: &mut Tensor<Self>) -> Result<()>;

    // ---- attention ------------------------------------------------------------------------
    /// cache.k[slot[t], :] = k[t, :], cache.v[slot[t], :] = v[t, :]
    fn kv_write(
        &self,
        k: &Tensor<Self>,
        v: &Tensor<Self>,
        slot: &Tensor<Self>,
        cache: &mut KvLayer<Self>,
    ) -> Result<()>;
    /// Causal attention with online softmax: for token t of sequence s at position p and head h,
    /// dst[t, h] = Σ_{j0 ≤ j ≤ p} softmax_j(scale · q[t, h] · K_s[j, h/g]) · V_s[j, h/g], reading
    /// K_s, V_s through the block table; j0 = `shape.first_key(p)` (0 without a window, and
    /// blocks wholly before j0 are never read).    q, dst: [n_tokens, n_heads · head_dim]
    fn attention(
        &self,
        q: &Tensor<Self>,
        cache: &KvLayer<Self>,
        batch: &AttnBatch<Self>,
        shape: &AttnShape,
        dst: &mut Tensor<Self>,
    ) -> Result<()>;
    /// `attention` into att, then dst = att · wᵀ (the output projection) as one op, so a backend may
    /// hand the matmul what attention made of att (wgpu's split-K combine writes att's int8 blocks for
    /// an int8 GEMV). att is written either way. By default `attention` then `matmul`.
    ///       att: [n_tokens, n_heads · head_dim]; w: [n, n_heads · head_dim]; dst: [n_tokens, n]
    #[allow(clippy::too_many_arguments)] // attention's and the matmul's
    fn attention_matmul(
        &self,
        q: &Tensor<Self>,
        cache: &KvLayer<Self>,
        batch: &AttnBatch<Self>,
        shape: &AttnShape,
        att: &mut Tensor<Self>,
        w: &Weight<Self>,
        dst: &mut Tensor<Self>,
    ) -> Result<()> {
        unfused::attention_matmul(self, q, cache, batch, shape, att, w, dst)
    }
    /// Copies KV slots [src, src + n) to [dst, dst + n) (copy-on-write of a shared page).
    fn copy_slots(&self, cache: &mut KvLayer<Self>, src: usize, dst: usize, n: usize) -> Result<()>;

    // ---- sampling -------------------------------------------------------------------------
    /// dst[r] = argmax_j x[r, j], lowest index on ties.     x: [rows, vocab]; dst: u32 [rows, 1]
    fn argmax(&self, x: &Tensor<Self>, dst: &mut Tensor<Self>) -> Result<()>;
    /// ids[r] = the k largest x[r, :] (descending, lowest index on ties); vals[r, i] = x[r, ids[r, i]]
    /// for i < k, vals[r, k] = ln Σ_j exp(x[r, j]). NaN counts as −∞ and +∞ as f32::MAX, as in the
    /// sampler.      x: [rows, vocab]; ids: u32 [rows, k]; vals: [rows, k + 1]; 1 ≤ k ≤ min(vocab, MAX_TOP_K)
    fn top_k(&self, x: &Tensor<Self>, ids: &mut Tensor<Self>, vals: &mut Tensor<Self>) -> Result<()>;
}

/// A logit as the sampler and `top_k` rank it: NaN → −∞ and +∞ → `f32::MAX`, so the softmax never
/// sees ∞ − ∞. Adding 0.0 turns −0.0 into +0.0, which `total_cmp` would otherwise rank below +0.0
/// and break lowest-id tie-breaking.
pub fn sanitize(logit: f32) -> f32 {
    if logit.is_nan() { f32::NEG_INFINITY } else { logit.min(f32::MAX) + 0.0 }
}

/// Runs a future of the read path (`*_async`) to its end without an executor: on a backend whose
/// reads are synchronous (every native one) it is ready when first polled, so the blocking API is
/// the async one polled once. A read that would wait (WebGPU in a page) is an error here.
pub fn ready<T>(future: impl Future<Output = Result<T>>) -> Result<T> {
    use std::task::{Context, Poll, Waker};
    match std::pin::pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(result) => result,
        Poll::Pending => Err(crate::error::Error::Device {
            backend: "host",
            detail: "a blocking call waited on an asynchronous read (in a browser, use the *_async API)".into(),
        }),
    }
}

/// The largest k `top_k` accepts: the GPU kernels sort the survivors in one workgroup.
pub const MAX_TOP_K: usize = 256;
