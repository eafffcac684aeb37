//! The wgpu backend: WGSL compute kernels (`shaders/`) on any adapter wgpu finds (Vulkan, Metal,
//! DX12). Ops record dispatches into one pending command list; `sync` and `read_*` submit it.
//! This file is the column of forwards; the work is in the family files.

mod attention;
mod context;
mod elementwise;
mod embed;
pub mod kernels;
mod matmul;
mod memory;
mod norm;
mod offload;
mod profile;
mod repack;
mod rope;
mod sampling;
#[cfg(target_arch = "wasm32")]
mod web;

pub use context::{GpuBuffer, Options};
pub use memory::{GpuWeight, WeightPart};
pub use offload::WgpuHostWeight;

use crate::backend::{AttnBatch, AttnShape, Backend, DType, HostBytes, KvLayer, Rope, StepMode, Tensor, Weight};
use crate::error::Result;
use crate::quant::Format;

pub struct Wgpu {
    ctx: context::Context,
}

impl Wgpu {
    /// The best adapter wgpu finds, with `ULTRA_WGPU_DISABLE` applied; `DeviceUnavailable` if none.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new() -> Result<Wgpu> {
        Wgpu::with_options(Options::from_env())
    }

    #[cfg(not(target_arch = "wasm32"))]
    pub fn with_options(options: Options) -> Result<Wgpu> {
        Ok(Wgpu { ctx: context::Context::new(options)? })
    }

    /// `with_options`, awaiting the adapter and device (how a page gets them: `navigator.gpu`).
    pub async fn with_options_async(options: Options) -> Result<Wgpu> {
        Ok(Wgpu { ctx: context::Context::new_async(options).await? })
    }

    /// The adapter's name as wgpu has it (in a browser its description, often empty).
    pub fn adapter_name(&self) -> String {
        self.ctx.info.name.clone()
    }

    /// The cooperative matrices quantized matmuls of m ≥ 64 run on (`Options::coopmat` on an
    /// adapter that has f16 × f16 → f32 ones): (matrix side, subgroup size), or None.
    pub fn cooperative_matrices(&self) -> Option<(u32, u32)> {
        self.ctx.coop
    }

    /// Host↔device transfers so far (each write_* or read_* call counts one).
    pub fn transfer_count(&self) -> u64 {
        memory::transfer_count(self)
    }

    /// Whether the adapter is a CPU implementation (lavapipe, WARP, SwiftShader).
    pub fn is_software(&self) -> bool {
        self.ctx.info.device_type == wgpu::DeviceType::Cpu
    }

    /// Whether a row's results are bit-identical whatever the batch (`Options::batch_invariant`;
    /// by default prefill-sized matmuls run the tiled kernel, whose order differs from the GEMV's).
    pub fn is_batch_invariant(&self) -> bool {
        self.ctx.batch_invariant
    }

    /// Whether SHADER_F16 is in use (the tiled prefill GEMM's f16 products: tests widen their
    /// tolerances for it).
    pub fn uses_f16(&self) -> bool {
        self.ctx.f16
    }

    /// Whether some quantized GEMVs run on int8 activations (`Options::int8_gemv`: by default on GPU
    /// adapters, for large weights).
    pub fn uses_int8_activations(&self) -> bool {
        self.ctx.int8_min_values.is_some()
    }

    /// Whether a matmul of m rows of x (k wide) by an n-row weight of `format` runs on int8
    /// activations (`Options::int8_gemv`, a format with integer values, a GEMV-sized m): tests
    /// widen their tolerances for it.
    pub fn uses_int8_gemv(&self, format: crate::quant::Format, m: usize, k: usize, n: usize) -> bool {
        matmul::takes_int8_gemv(self, format, m, k, n)
    }

    /// Adapter, API, features and limits, for `ultra info`.
    pub fn describe(&self) -> String {
        let (i, l) = (&self.ctx.info, &self.ctx.limits);
        let subgroups = match self.ctx.subgroup_size {
            Some(s) => format!("yes (size {s})"),
            None => format!("no (adapter sizes {}..={})", i.subgroup_min_size, i.subgroup_max_size),
        };
        [
            format!("adapter: {} ({:?}, {:?})", i.name, i.backend, i.device_type),
            format!("driver: {} {}", i.driver, i.driver_info),
            format!("subgroups: {subgroups}"),
            format!(
                "shader f16: {}",
                if self.ctx.f16 {
                    "yes (quantized matmul_tiled: f16 products per block, f32 accumulation)"
                } else {
                    "no"
                }
            ),
            format!(
                "batch-invariant: {}",
                if self.ctx.batch_invariant {
                    "yes (ULTRA_WGPU_BATCH_INVARIANT=1: GEMV matmuls for every m)"
                } else {
                    "no (m ≥ 64 runs the tiled matmul; ULTRA_WGPU_BATCH_INVARIANT=1 to keep it)"
                }
            ),
            format!("max buffer: {} MiB", l.max_buffer_size >> 20),
            format!("max storage binding: {} MiB", l.max_storage_buffer_binding_size >> 20),
            format!("weight parts: up to {} MiB (larger weights split by rows)", self.ctx.weight_part_bytes >> 20),
            format!(
                "max workgroup size: {} (invocations {})",
                l.max_compute_workgroup_size_x, l.max_compute_invocations_per_workgroup
            ),
            format!("workgroup memory: {} KiB", l.max_compute_workgroup_storage_size >> 10),
        ]
        .join("\n")
    }
}

impl Backend for Wgpu {
    type Buffer = GpuBuffer;
    type WeightStorage = GpuWeight;
    type HostWeight = WgpuHostWeight;
    type Fence = ();

    fn name(&self) -> &'static str {
        "wgpu"
    }
    fn alloc(&self, dtype: DType, rows: usize, cols: usize) -> Result<Tensor<Self>> {
        memory::alloc(self, dtype, rows, cols)
    }
    fn write_f32(&self, dst: &mut Tensor<Self>, data: &[f32]) -> Result<()> {
        memory::write_f32(self, dst, data)
    }
    fn write_u32(&self, dst: &mut Tensor<Self>, data: &[u32]) -> Result<()> {
        memory::write_u32(self, dst, data)
    }
    fn read_f32(&self, src: &Tensor<Self>, out: &mut [f32]) -> Result<()> {
        memory::read_f32(self, src, out)
    }
    fn read_u32(&self, src: &Tensor<Self>, out: &mut [u32]) -> Result<()> {
        memory::read_u32(self, src, out)
    }
    #[cfg(target_arch = "wasm32")]
    async fn read_f32_async(&self, src: &Tensor<Self>, out: &mut [f32]) -> Result<()> {
        memory::read_f32_async(self, src, out).await
    }
    #[cfg(target_arch = "wasm32")]
    async fn read_u32_async(&self, src: &Tensor<Self>, out: &mut [u32]) -> Result<()> {
        memory::read_u32_async(self, src, out).await
    }
    fn upload_weight(&self, format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<Weight<Self>> {
        memory::upload_weight(self, format, rows, cols, bytes)
    }
    fn sync(&self) -> Result<()> {
        memory::sync(self)
    }
    fn host_weight(&self, format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<WgpuHostWeight> {
        offload::host_weight(self, format, rows, cols, bytes)
    }
    fn weight_slot(&self, like: &WgpuHostWeight) -> Result<Weight<Self>> {
        offload::weight_slot(self, like)
    }
    fn stream_weights(&self, parts: &[(&WgpuHostWeight, &Weight<Self>)]) -> Result<()> {
        offload::stream_weights(self, parts)
    }
    fn wait_fence(&self, _fence: ()) -> Result<()> {
        Ok(()) // one queue: the copies precede every dispatch recorded after them
    }
    fn begin_step(&self, _key: u64) -> Result<StepMode> {
        Ok(StepMode::Run)
    }
    fn end_step(&self, _ok: bool) -> Result<()> {
        Ok(())
    }
    fn matmul(&self, x: &Tensor<Self>, w: &Weight<Self>, dst: &mut Tensor<Self>) -> Result<()> {
        matmul::matmul(self, x, w, dst)
    }
    fn matmuls(&self, x: &Tensor<Self>, parts: &mut [(&Weight<Self>, &mut Tensor<Self>)]) -> Result<()> {
        matmul::matmuls(self, x, parts)
    }
    fn embed(&self, table: &Weight<Self>, ids: &Tensor<Self>, scale: f32, dst: &mut Tensor<Self>) -> Result<()> {
        embed::embed(self, table, ids, scale, dst)
    }
    fn rms_norm(&self, x: &Tensor<Self>, gain: &Tensor<Self>, eps: f32, dst: &mut Tensor<Self>) -> Result<()> {
        norm::rms_norm(self, x, gain, eps, dst)
    }
    fn add_rms_norm(
        &self,
        x: &mut Tensor<Self>,
        y: &Tensor<Self>,
        gain: &Tensor<Self>,
        eps: f32,
        dst: &mut Tensor<Self>,
    ) -> Result<()> {
        norm::add_rms_norm(self, x, y, gain, eps, dst)
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
        matmul::norm_matmuls(self, x, y, gain, eps, xn, parts)
    }
    fn rope(
        &self,
        x: &mut Tensor<Self>,
        pos: &Tensor<Self>,
        rope: &Rope,
        factors: Option<&Tensor<Self>>,
    ) -> Result<()> {
        rope::rope(self, x, pos, rope, factors)
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
        rope::rope_kv_write(self, q, k, v, batch, rope, factors, cache)
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
        rope::rms_norm_rope(self, x, gain, eps, pos, rope, factors)
    }
    fn silu_mul(&self, gate: &Tensor<Self>, up: &Tensor<Self>, dst: &mut Tensor<Self>) -> Result<()> {
        elementwise::silu_mul(self, gate, up, dst)
    }
    fn silu_mul_matmul(
        &self,
        gate: &Tensor<Self>,
        up: &Tensor<Self>,
        w: &Weight<Self>,
        hidden: &mut Tensor<Self>,
        dst: &mut Tensor<Self>,
    ) -> Result<()> {
        matmul::silu_mul_matmul(self, gate, up, w, hidden, dst)
    }
    fn gelu_mul(&self, gate: &Tensor<Self>, up: &Tensor<Self>, dst: &mut Tensor<Self>) -> Result<()> {
        elementwise::gelu_mul(self, gate, up, dst)
    }
    fn add_assign(&self, x: &mut Tensor<Self>, y: &Tensor<Self>) -> Result<()> {
        elementwise::add_assign(self, x, y)
    }
    fn add_bias(&self, x: &mut Tensor<Self>, bias: &Tensor<Self>) -> Result<()> {
        elementwise::add_bias(self, x, bias)
    }
    fn gather_rows(&self, x: &Tensor<Self>, rows: &Tensor<Self>, dst: &mut Tensor<Self>) -> Result<()> {
        elementwise::gather_rows(self, x, rows, dst)
    }
    fn kv_write(
        &self,
        k: &Tensor<Self>,
        v: &Tensor<Self>,
        slot: &Tensor<Self>,
        cache: &mut KvLayer<Self>,
    ) -> Result<()> {
        attention::kv_write(self, k, v, slot, cache)
    }
    fn attention(
        &self,
        q: &Tensor<Self>,
        cache: &KvLayer<Self>,
        batch: &AttnBatch<Self>,
        shape: &AttnShape,
        dst: &mut Tensor<Self>,
    ) -> Result<()> {
        attention::attention(self, q, cache, batch, shape, dst)
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
        matmul::attention_matmul(self, q, cache, batch, shape, att, w, dst)
    }
    fn copy_slots(&self, cache: &mut KvLayer<Self>, src: usize, dst: usize, n: usize) -> Result<()> {
        attention::copy_slots(self, cache, src, dst, n)
    }
    fn argmax(&self, x: &Tensor<Self>, dst: &mut Tensor<Self>) -> Result<()> {
        sampling::argmax(self, x, dst)
    }
    fn top_k(&self, x: &Tensor<Self>, ids: &mut Tensor<Self>, vals: &mut Tensor<Self>) -> Result<()> {
        sampling::top_k(self, x, ids, vals)
    }
}
