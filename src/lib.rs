//! Ultra LLM Engine: real quantized models on the CPU, any GPU through wgpu, and NVIDIA GPUs
//! through CUDA. Read `backend/mod.rs` (the contract) and `model/llama.rs` (the forward pass) first.

pub mod backend;
pub mod error;
pub mod fetch;
pub mod gguf;
pub mod quant;
pub mod tokenizer;

pub use backend::Backend;
pub use error::{Error, Result};
pub use quant::Format;
