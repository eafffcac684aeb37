//! Ultra LLM Engine: real quantized models on the CPU, any GPU through wgpu, and NVIDIA GPUs
//! through CUDA; in the browser (wasm32, `web/`), WebGPU or the CPU. Read `backend/mod.rs` (the contract) and `model/llama.rs` (the forward pass) first.

pub mod backend;
#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
pub mod clock;
pub mod error;
#[cfg(not(target_arch = "wasm32"))]
pub mod fetch;
pub mod generate;
pub mod gguf;
pub mod gptq;
pub mod hf;
pub mod kv_cache;
pub mod model;
pub mod quant;
#[cfg(not(target_arch = "wasm32"))]
pub mod server;
pub mod tokenizer;

pub use backend::Backend;
pub use backend::cpu::Cpu;
#[cfg(feature = "cuda")]
pub use backend::cuda::Cuda;
#[cfg(feature = "wgpu")]
pub use backend::wgpu::Wgpu;
pub use error::{Error, Result};
pub use quant::Format;
