//! The CPU backend: every op in plain Rust with rayon across cores. This file is only the
//! trait's forwarding table; each family lives in its own file (same stems as the GPU backends),
//! and simd.rs holds the inner loops that fix every reduction's order.

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod amx;
mod attention;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod buffer;
mod columns;
mod dequant;
mod elementwise;
mod embed;
#[cfg(target_arch = "x86_64")]
mod intn;
mod isa;
#[cfg(target_arch = "x86_64")]
mod kquant;
mod matmul;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod matmul_bf16;
#[cfg(target_arch = "aarch64")]
mod neon;
mod norm;
mod q8;
mod rope;
mod sampling;
pub mod simd;
#[cfg(target_arch = "x86_64")]
mod wide;

use crate::backend::{AttnBatch, AttnShape, Backend, DType, HostBytes, KvLayer, Rope, StepMode, Tensor, Weight};
use crate::error::Result;
use crate::quant::Format;

pub use buffer::{CpuBuffer, CpuWeight};

/// How the quantized matmuls take their activations (README: CPU activations).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Activations {
    /// x stays f32 against the dequantized weights: exact up to f32 rounding (the reference).
    F32,
    /// x quantized per block of 32 to two int8 planes, met by integer dot products (q8/mod.rs):
    /// ~2× faster decode, logits within NMSE 1e-5 of the f32 path (tests/model/tolerances.rs).
    Int8,
    /// `Int8` below `AMX_MIN_M` (64) rows; from there (prefill), x and the dequantized weights rounded to
    /// bf16 and multiplied on AMX tiles with f32 accumulators (matmul_bf16.rs): bf16's 8-bit
    /// significand gives llama.cpp-like logits (NMSE ~1e-3 against f32, perplexity within 0.1%)
    /// for ~1.5× prefill. Opt-in. Where the CPU or OS lacks AMX (or `ULTRA_CPU_DISABLE=amx`) it
    /// is `Int8`.
    Amx,
}

impl Activations {
    /// `ULTRA_CPU_ACTIVATIONS` (`amx`, `int8` or `f32`) if set, else int8 where this CPU has its
    /// kernels (AVX-512 VNNI, or AVX2) and f32 elsewhere (the portable int8 code is exact but
    /// slow). amx is opt-in: batches of 64+ sequences would take its looser tiles, so a loaded
    /// server's greedy text would part from a lone request's (README: CPU activations).
    pub fn from_env() -> Result<Activations> {
        match std::env::var("ULTRA_CPU_ACTIVATIONS").ok().as_deref().map(str::trim) {
            None | Some("") => Ok(Activations::for_this_cpu()),
            Some(v) => v.parse(),
        }
    }

    /// int8 where this CPU has its kernels, else f32.
    fn for_this_cpu() -> Activations {
        if q8::fast() { Activations::Int8 } else { Activations::F32 }
    }
}

impl std::str::FromStr for Activations {
    type Err = crate::error::Error;
    fn from_str(s: &str) -> Result<Activations> {
        match s.to_ascii_lowercase().as_str() {
            "int8" => Ok(Activations::Int8),
            "f32" => Ok(Activations::F32),
            "amx" => Ok(Activations::Amx),
            _ => Err(crate::error::Error::InvalidArgument(format!("CPU activations {s:?}: expected amx, int8 or f32"))),
        }
    }
}

/// Whether `Activations::Amx` runs the AMX tiles in this process (the CPU has AMX-TILE and
/// AMX-BF16, Linux granted tile state, `ULTRA_CPU_DISABLE` does not list `amx`), or falls back
/// to `Int8`.
pub fn amx_runs() -> bool {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        *amx::AVAILABLE
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        false
    }
}

/// The CPU backend. Its only state is the activation mode; scratch lives in thread-locals of
/// the rayon pool.
#[derive(Clone, Copy, Debug)]
pub struct Cpu {
    activations: Activations,
}

impl Default for Cpu {
    fn default() -> Cpu {
        Cpu::new()
    }
}

impl Cpu {
    /// The default mode ([`Activations::from_env`]; an unparsable `ULTRA_CPU_ACTIVATIONS`
    /// falls back to it with a warning: use [`Cpu::with_activations`] to get the error).
    pub fn new() -> Cpu {
        let activations = Activations::from_env().unwrap_or_else(|e| {
            eprintln!("warning: {e}; using the default");
            Activations::for_this_cpu()
        });
        Cpu { activations }
    }

    /// The f32 reference path, whatever the environment says.
    pub fn exact() -> Cpu {
        Cpu { activations: Activations::F32 }
    }

    pub fn with_activations(activations: Activations) -> Cpu {
        Cpu { activations }
    }

    /// The AMX mode, or an error where it would run as `Int8` ([`amx_runs`]): for the suites
    /// that test the tile path and must not test the int8 path twice.
    pub fn amx() -> Result<Cpu> {
        match amx_runs() {
            true => Ok(Cpu { activations: Activations::Amx }),
            false => Err(crate::error::Error::Unsupported {
                op: "AMX activations",
                backend: "cpu",
                detail: "this CPU, OS or ULTRA_CPU_DISABLE leaves AMX-TILE/AMX-BF16 off".into(),
            }),
        }
    }

    pub fn activations(&self) -> Activations {
        self.activations
    }
}

fn no_offload() -> crate::error::Error {
    let detail = "streamed layers (--gpu-layers, --gpu-memory): its weights already live in host memory".into();
    crate::error::Error::Unsupported { op: "offload", backend: "cpu", detail }
}

#[rustfmt::skip]
impl Backend for Cpu {
    type Buffer = CpuBuffer;
    type WeightStorage = CpuWeight;
    type HostWeight = ();
    type Fence = ();

    fn name(&self) -> &'static str { "cpu" }

    fn alloc(&self, dtype: DType, rows: usize, cols: usize) -> Result<Tensor<Cpu>> { buffer::alloc(dtype, rows, cols) }
    fn write_f32(&self, dst: &mut Tensor<Cpu>, data: &[f32]) -> Result<()> { buffer::write_f32(dst, data) }
    fn write_u32(&self, dst: &mut Tensor<Cpu>, data: &[u32]) -> Result<()> { buffer::write_u32(dst, data) }
    fn read_f32(&self, src: &Tensor<Cpu>, out: &mut [f32]) -> Result<()> { buffer::read_f32(src, out) }
    fn read_u32(&self, src: &Tensor<Cpu>, out: &mut [u32]) -> Result<()> { buffer::read_u32(src, out) }
    fn upload_weight(&self, format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<Weight<Cpu>> {
        buffer::upload_weight(format, rows, cols, bytes)
    }
    fn sync(&self) -> Result<()> { Ok(()) }
    // The CPU computes on host memory: there is nothing to stream.
    fn host_weight(&self, _: Format, _: usize, _: usize, _: HostBytes) -> Result<()> { Err(no_offload()) }
    fn weight_slot(&self, _: &()) -> Result<Weight<Cpu>> { Err(no_offload()) }
    fn stream_weights(&self, _: &[(&(), &Weight<Cpu>)]) -> Result<()> { Err(no_offload()) }
    fn wait_fence(&self, _: ()) -> Result<()> { Ok(()) }
    fn begin_step(&self, _key: u64) -> Result<StepMode> { Ok(StepMode::Run) }
    fn end_step(&self, _ok: bool) -> Result<()> { Ok(()) }

    fn matmul(&self, x: &Tensor<Cpu>, w: &Weight<Cpu>, dst: &mut Tensor<Cpu>) -> Result<()> { matmul::matmul(x, w, dst, self.activations) }
    fn matmuls(&self, x: &Tensor<Cpu>, parts: &mut [(&Weight<Cpu>, &mut Tensor<Cpu>)]) -> Result<()> {
        matmul::matmuls(x, parts, self.activations)
    }

    fn embed(&self, table: &Weight<Cpu>, ids: &Tensor<Cpu>, scale: f32, dst: &mut Tensor<Cpu>) -> Result<()> {
        embed::embed(table, ids, scale, dst)
    }

    fn rms_norm(&self, x: &Tensor<Cpu>, gain: &Tensor<Cpu>, eps: f32, dst: &mut Tensor<Cpu>) -> Result<()> {
        norm::rms_norm(x, gain, eps, dst)
    }

    fn rope(&self, x: &mut Tensor<Cpu>, pos: &Tensor<Cpu>, rope: &Rope, factors: Option<&Tensor<Cpu>>) -> Result<()> {
        rope::rope(x, pos, rope, factors)
    }
    fn rms_norm_rope(&self, x: &mut Tensor<Cpu>, gain: &Tensor<Cpu>, eps: f32, pos: &Tensor<Cpu>, rope: &Rope, factors: Option<&Tensor<Cpu>>) -> Result<()> {
        rope::rms_norm_rope(x, gain, eps, pos, rope, factors)
    }

    fn silu_mul(&self, gate: &Tensor<Cpu>, up: &Tensor<Cpu>, dst: &mut Tensor<Cpu>) -> Result<()> {
        elementwise::silu_mul(gate, up, dst)
    }
    fn gelu_mul(&self, gate: &Tensor<Cpu>, up: &Tensor<Cpu>, dst: &mut Tensor<Cpu>) -> Result<()> {
        elementwise::gelu_mul(gate, up, dst)
    }
    fn add_assign(&self, x: &mut Tensor<Cpu>, y: &Tensor<Cpu>) -> Result<()> { elementwise::add_assign(x, y) }
    fn add_bias(&self, x: &mut Tensor<Cpu>, bias: &Tensor<Cpu>) -> Result<()> { elementwise::add_bias(x, bias) }
    fn gather_rows(&self, x: &Tensor<Cpu>, rows: &Tensor<Cpu>, dst: &mut Tensor<Cpu>) -> Result<()> {
        elementwise::gather_rows(x, rows, dst)
    }

    fn kv_write(&self, k: &Tensor<Cpu>, v: &Tensor<Cpu>, slot: &Tensor<Cpu>, cache: &mut KvLayer<Cpu>) -> Result<()> {
        attention::kv_write(k, v, slot, cache)
    }
    fn attention(&self, q: &Tensor<Cpu>, cache: &KvLayer<Cpu>, batch: &AttnBatch<Cpu>, shape: &AttnShape, dst: &mut Tensor<Cpu>) -> Result<()> {
        attention::attention(q, cache, batch, shape, dst)
    }
    fn copy_slots(&self, cache: &mut KvLayer<Cpu>, src: usize, dst: usize, n: usize) -> Result<()> {
        attention::copy_slots(cache, src, dst, n)
    }

    fn argmax(&self, x: &Tensor<Cpu>, dst: &mut Tensor<Cpu>) -> Result<()> { sampling::argmax(x, dst) }
    fn top_k(&self, x: &Tensor<Cpu>, ids: &mut Tensor<Cpu>, vals: &mut Tensor<Cpu>) -> Result<()> {
        sampling::top_k(x, ids, vals)
    }
}
