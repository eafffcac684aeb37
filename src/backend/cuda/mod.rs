//! The CUDA backend: kernels in `cuda/*.cu`, compiled at run time with NVRTC for the device, on
//! one stream. This file is a column of one-line forwards to the family files.

mod attention;
mod context;
mod driver;
mod elementwise;
mod embed;
mod graph;
pub mod kernels;
mod matmul;
mod memory;
mod norm;
mod offload;
mod planes;
mod profile;
mod repack;
mod rope;
mod sampling;

pub use context::{Cuda, Fusions};
pub use memory::{CudaBuffer, CudaWeight};
pub use offload::CudaHostWeight;

use crate::backend::{
    AttnBatch, AttnShape, Backend, DType, HostBytes, KvLayer, Rope, StepMode, Tensor, Weight, unfused,
};
use crate::error::Result;
use crate::quant::Format;

impl Cuda {
    /// Every op passes here: with ULTRA_CUDA_PROFILE=1 it is timed.
    fn op<T>(&self, label: impl FnOnce() -> (String, u64), run: impl FnOnce() -> Result<T>) -> Result<T> {
        profile::timed(self.profiler.as_ref(), &self.stream, label, run)
    }

    /// Tells the step being recorded of a matmul: its rows of x and its weights' bytes (graph.rs: `Pdl`).
    fn note_matmul(&self, rows: usize, weight_bytes: u64) {
        context::lock(&self.graphs).note_matmul(rows, weight_bytes);
    }
}

impl Backend for Cuda {
    type Buffer = CudaBuffer;
    type WeightStorage = CudaWeight;
    type HostWeight = CudaHostWeight;
    type Fence = cudarc::driver::CudaEvent;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn alloc(&self, dtype: DType, rows: usize, cols: usize) -> Result<Tensor<Self>> {
        memory::alloc(self, dtype, rows, cols)
    }
    fn write_f32(&self, dst: &mut Tensor<Self>, data: &[f32]) -> Result<()> {
        memory::write(self, dst, "write_f32", data)
    }
    fn write_u32(&self, dst: &mut Tensor<Self>, data: &[u32]) -> Result<()> {
        memory::write_u32(self, dst, data)
    }
    fn read_f32(&self, src: &Tensor<Self>, out: &mut [f32]) -> Result<()> {
        memory::read(self, src, "read_f32", out)
    }
    fn read_u32(&self, src: &Tensor<Self>, out: &mut [u32]) -> Result<()> {
        memory::read(self, src, "read_u32", out)
    }
    fn upload_weight(&self, format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<Weight<Self>> {
        memory::upload_weight(self, format, rows, cols, bytes)
    }
    fn sync(&self) -> Result<()> {
        memory::sync(self)
    }
    fn host_weight(&self, format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<CudaHostWeight> {
        offload::host_weight(self, format, rows, cols, bytes)
    }
    fn weight_slot(&self, like: &CudaHostWeight) -> Result<Weight<Self>> {
        offload::weight_slot(self, like)
    }
    fn stream_weights(&self, parts: &[(&CudaHostWeight, &Weight<Self>)]) -> Result<Self::Fence> {
        offload::stream_weights(self, parts)
    }
    fn wait_fence(&self, fence: Self::Fence) -> Result<()> {
        offload::wait_fence(self, fence)
    }
    fn begin_step(&self, key: u64) -> Result<StepMode> {
        if !self.graphs_enabled || self.pageable.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(StepMode::Run);
        }
        let generation = self.scratch_generation.load(std::sync::atomic::Ordering::Relaxed);
        context::lock(&self.graphs).begin_step(&self.stream, key, generation)
    }
    fn end_step(&self, ok: bool) -> Result<()> {
        context::lock(&self.graphs).end_step(&self.stream, ok)
    }

    fn matmul(&self, x: &Tensor<Self>, w: &Weight<Self>, dst: &mut Tensor<Self>) -> Result<()> {
        self.note_matmul(x.rows, matmul::weight_bytes(w));
        self.op(|| matmul::label(x, w), || matmul::matmul(self, x, w, dst))
    }
    fn matmuls(&self, x: &Tensor<Self>, parts: &mut [(&Weight<Self>, &mut Tensor<Self>)]) -> Result<()> {
        self.note_matmul(x.rows, parts.iter().map(|(w, _)| matmul::weight_bytes(w)).sum());
        let label = self.profiler.as_ref().map(|_| matmul::label_many(x, parts)).unwrap_or_default();
        self.op(|| label, || matmul::matmuls(self, x, parts))
    }
    fn embed(&self, table: &Weight<Self>, ids: &Tensor<Self>, scale: f32, dst: &mut Tensor<Self>) -> Result<()> {
        self.op(|| ("embed".into(), 0), || embed::embed(self, table, ids, scale, dst))
    }
    fn rms_norm(&self, x: &Tensor<Self>, gain: &Tensor<Self>, eps: f32, dst: &mut Tensor<Self>) -> Result<()> {
        self.op(|| ("rms_norm".into(), 0), || norm::rms_norm(self, x, gain, eps, dst))
    }
    fn add_rms_norm(
        &self,
        x: &mut Tensor<Self>,
        y: &Tensor<Self>,
        gain: &Tensor<Self>,
        eps: f32,
        dst: &mut Tensor<Self>,
    ) -> Result<()> {
        self.op(|| ("add_rms_norm".into(), 0), || norm::add_rms_norm(self, x, y, gain, eps, dst))
    }
    fn norm_matmuls(
        &self,
        x: &mut Tensor<Self>,
        y: Option<&Tensor<Self>>,
        gain: &Tensor<Self>,
        eps: f32,
        xn: &mut Tensor<Self>,
        parts: &mut [(&Weight<Self>, &mut Tensor<Self>)],
    ) -> Result<()> {
        if !self.fusions.norm {
            return unfused::norm_matmuls(self, x, y, gain, eps, xn, parts);
        }
        self.note_matmul(xn.rows, parts.iter().map(|(w, _)| matmul::weight_bytes(w)).sum());
        let label = self.profiler.as_ref().map(|_| matmul::label_norm_many(xn, parts)).unwrap_or_default();
        self.op(|| label, || matmul::norm_matmuls(self, x, y, gain, eps, xn, parts))
    }
    fn rope(
        &self,
        x: &mut Tensor<Self>,
        pos: &Tensor<Self>,
        rope: &Rope,
        factors: Option<&Tensor<Self>>,
    ) -> Result<()> {
        self.op(|| ("rope".into(), 0), || rope::rope(self, x, pos, rope, factors))
    }
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
        if !self.fusions.rope {
            return unfused::rope_kv_write(self, q, k, v, batch, rope, factors, cache);
        }
        self.op(|| ("rope_kv_write".into(), 0), || rope::rope_kv_write(self, q, k, v, batch, rope, factors, cache))
    }
    fn rms_norm_rope(
        &self,
        x: &mut Tensor<Self>,
        gain: &Tensor<Self>,
        eps: f32,
        pos: &Tensor<Self>,
        rope: &Rope,
        factors: Option<&Tensor<Self>>,
    ) -> Result<()> {
        self.op(|| ("rms_norm_rope".into(), 0), || rope::rms_norm_rope(self, x, gain, eps, pos, rope, factors))
    }
    fn silu_mul(&self, gate: &Tensor<Self>, up: &Tensor<Self>, dst: &mut Tensor<Self>) -> Result<()> {
        self.op(|| ("silu_mul".into(), 0), || elementwise::silu_mul(self, gate, up, dst))
    }
    fn gelu_mul(&self, gate: &Tensor<Self>, up: &Tensor<Self>, dst: &mut Tensor<Self>) -> Result<()> {
        self.op(|| ("gelu_mul".into(), 0), || elementwise::gelu_mul(self, gate, up, dst))
    }
    fn silu_mul_matmul(
        &self,
        gate: &Tensor<Self>,
        up: &Tensor<Self>,
        w: &Weight<Self>,
        hidden: &mut Tensor<Self>,
        dst: &mut Tensor<Self>,
    ) -> Result<()> {
        self.note_matmul(hidden.rows, matmul::weight_bytes(w));
        let label = self.profiler.as_ref().map(|_| matmul::label_fused("silu_mul", hidden, w)).unwrap_or_default();
        self.op(|| label, || matmul::silu_mul_matmul(self, gate, up, w, hidden, dst))
    }
    fn add_assign(&self, x: &mut Tensor<Self>, y: &Tensor<Self>) -> Result<()> {
        self.op(|| ("add_assign".into(), 0), || elementwise::add_assign(self, x, y))
    }
    fn add_bias(&self, x: &mut Tensor<Self>, bias: &Tensor<Self>) -> Result<()> {
        self.op(|| ("add_bias".into(), 0), || elementwise::add_bias(self, x, bias))
    }
    fn gather_rows(&self, x: &Tensor<Self>, rows: &Tensor<Self>, dst: &mut Tensor<Self>) -> Result<()> {
        self.op(|| ("gather_rows".into(), 0), || elementwise::gather_rows(self, x, rows, dst))
    }
    fn kv_write(
        &self,
        k: &Tensor<Self>,
        v: &Tensor<Self>,
        slot: &Tensor<Self>,
        cache: &mut KvLayer<Self>,
    ) -> Result<()> {
        self.op(|| ("kv_write".into(), 0), || attention::kv_write(self, k, v, slot, cache))
    }
    fn attention(
        &self,
        q: &Tensor<Self>,
        cache: &KvLayer<Self>,
        batch: &AttnBatch<Self>,
        shape: &AttnShape,
        dst: &mut Tensor<Self>,
    ) -> Result<()> {
        self.op(|| attention::label(q), || attention::attention(self, q, cache, batch, shape, dst))
    }
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
        if !self.fusions.attn {
            return unfused::attention_matmul(self, q, cache, batch, shape, att, w, dst);
        }
        self.note_matmul(att.rows, matmul::weight_bytes(w));
        let label = self.profiler.as_ref().map(|_| matmul::label_fused("attention", att, w)).unwrap_or_default();
        self.op(|| label, || attention::attention_matmul(self, q, cache, batch, shape, att, w, dst))
    }
    fn copy_slots(&self, cache: &mut KvLayer<Self>, src: usize, dst: usize, n: usize) -> Result<()> {
        self.op(|| ("copy_slots".into(), 0), || attention::copy_slots(self, cache, src, dst, n))
    }
    fn argmax(&self, x: &Tensor<Self>, dst: &mut Tensor<Self>) -> Result<()> {
        self.op(|| ("argmax".into(), 0), || sampling::argmax(self, x, dst))
    }
    fn top_k(&self, x: &Tensor<Self>, ids: &mut Tensor<Self>, vals: &mut Tensor<Self>) -> Result<()> {
        self.op(|| ("top_k".into(), 0), || sampling::top_k(self, x, ids, vals))
    }
}
